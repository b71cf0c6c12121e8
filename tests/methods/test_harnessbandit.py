"""HarnessBandit's scheduler (select, learnability, observe) against a hand-computed sequence and a re-derivation."""

import math

import numpy as np
import pytest

from harnessrl_jax.methods import harnessbandit as hb

CFG = hb.BanditConfig(arms=("a", "b", "c"), heldout_arm="h", warmup=3)


def test_selection_probs_follows_the_contract_on_a_hand_example():
    # arm 2 unvisited: valued at the max visited Q (0.8), its bonus c / sqrt(1)
    p = hb.selection_probs([0.2, 0.8, 0.0], [1, 2, 0], bonus=0.5, temperature=0.5, floor=0.1)
    score = np.array([0.2 + 0.5 / math.sqrt(2), 0.8 + 0.5 / math.sqrt(3), 0.8 + 0.5])
    soft = np.exp(score / 0.5) / np.exp(score / 0.5).sum()
    np.testing.assert_allclose(p, 0.9 * soft + 0.1 / 3, rtol=1e-12)
    # nothing visited: every Qhat is 0, so only the (equal) bonuses count: uniform
    np.testing.assert_allclose(hb.selection_probs([0.3, -1.0], [0, 0], bonus=0.5, temperature=0.5, floor=0.1),
                               [0.5, 0.5])


def test_an_unvisited_arm_is_valued_at_the_current_max():
    p = hb.selection_probs([0.5, 0.0, 0.0], [1, 0, 0], bonus=0.0, temperature=0.5, floor=0.0)
    np.testing.assert_allclose(p, [1 / 3] * 3)  # Qhat = [0.5, 0.5, 0.5]
    p = hb.selection_probs([0.5, 0.9, 0.0], [4, 4, 0], bonus=0.0, temperature=1.0, floor=0.0)
    assert p[2] == pytest.approx(p[1]) and p[2] > p[0]


def test_floor_bounds_every_probability():
    rng = np.random.default_rng(0)
    for _ in range(200):
        H = rng.integers(2, 9)
        q, n = rng.normal(0, 5, H), rng.integers(0, 50, H) * (rng.random(H) < 0.7)
        p = hb.selection_probs(q, n, bonus=0.5, temperature=0.05, floor=0.1)
        assert p.sum() == pytest.approx(1.0) and (p >= 0.1 / H - 1e-15).all()


def test_warmup_is_round_robin_whatever_the_rng():
    state = hb.BanditState.create(3, 2)
    cfg = hb.BanditConfig(arms=("a", "b", "c"), heldout_arm="h", warmup=7)
    arms = []
    for t in range(9):
        arm, p, _, warm = hb.select(state, np.random.default_rng(t), cfg)
        arms.append((arm, warm))
        state, _ = hb.observe(state, arm, 0.1 * t, np.ones(2), cfg)
    assert [a for a, w in arms[:7]] == [0, 1, 2, 0, 1, 2, 0] and all(w for _, w in arms[:7])
    assert not arms[7][1] and not arms[8][1]


def test_observe_follows_a_hand_computed_sequence():
    state = hb.BanditState.create(3, 2)
    # step 0, arm 0: no peer EMA (T undefined); one observation is a degenerate window -> 0.5
    state, r = hb.observe(state, 0, 0.4, [1, 0], CFG)
    assert math.isnan(r["transferability_raw"]) and r["learnability_norm"] == 0.5 and r["value"] == 0.5
    assert state.q[0] == 0.5 and list(state.n) == [1, 0, 0]
    # step 1, arm 1: cos to E0 = 0; l is the window's min -> 0; T's window is one value -> 0.5
    state, r = hb.observe(state, 1, 0.2, [0, 1], CFG)
    assert r["transferability_raw"] == pytest.approx(0.0) and r["learnability_norm"] == 0.0
    assert r["transferability_norm"] == 0.5 and r["value"] == pytest.approx(0.25) and state.q[1] == 0.25
    # step 2, arm 2: cos to E0 and E1 both 1/sqrt2; both signals at their window max -> v = 1
    state, r = hb.observe(state, 2, 0.6, [1, 1], CFG)
    assert r["transferability_raw"] == pytest.approx(1 / math.sqrt(2)) and r["value"] == pytest.approx(1.0)
    # step 3, arm 0 again: T against E1 and E2 only (never its own EMA), before E0 moves
    state, r = hb.observe(state, 0, 0.4, [1, -1], CFG)
    np.testing.assert_allclose(r["cosines"], [np.nan, -1 / math.sqrt(2), 0.0], atol=1e-7)
    t3 = -1 / (2 * math.sqrt(2))
    assert r["transferability_raw"] == pytest.approx(t3)
    assert r["learnability_norm"] == pytest.approx(0.5)  # (0.4 - 0.2) / (0.6 - 0.2)
    assert r["transferability_norm"] == pytest.approx(0.0)  # T3 is the defined window's min
    assert r["value"] == pytest.approx(0.25)
    assert state.q[0] == pytest.approx(0.7 * 0.5 + 0.3 * 0.25)  # (1 - eta) Q + eta v
    np.testing.assert_allclose(state.emas[0], [1.0, -0.1], rtol=1e-6)  # beta E + (1 - beta) s
    assert list(state.n) == [2, 1, 1] and state.t == 4


def test_window_is_pooled_and_bounded():
    cfg = hb.BanditConfig(arms=("a", "b"), heldout_arm="h", window=2)
    state = hb.BanditState.create(2, 2)
    for arm, l in ((0, 5.0), (1, 1.0), (0, 2.0)):
        state, r = hb.observe(state, arm, l, [1, 0], cfg)
    assert [w[0] for w in state.window] == [1.0, 2.0]  # 5.0 fell out
    assert r["learnability_norm"] == 1.0  # 2.0 is the max of the last two, not of all three


def test_degenerate_windows_use_the_configured_value():
    assert hb.window_normalise(3.0, [3.0, 3.0, float("nan")]) == 0.5
    assert hb.window_normalise(3.0, [3.0], degenerate=0.0) == 0.0
    assert math.isnan(hb.window_normalise(float("nan"), [1.0, 2.0]))
    assert hb.fuse(0.3, float("nan")) == 0.3 and hb.fuse(0.2, 0.6, 0.5) == pytest.approx(0.4)
    # flat learnability every step: values sit at degenerate_value (flat groups give no signal)
    cfg = hb.BanditConfig(arms=("a", "b"), heldout_arm="h", degenerate_value=0.25)
    state = hb.BanditState.create(2, 2)
    for arm in (0, 1, 0, 1):
        state, r = hb.observe(state, arm, 0.0, [1.0, 0.0], cfg)
    assert r["learnability_norm"] == 0.25 and r["transferability_norm"] == 0.25


def test_learnability_is_the_group_mean_of_token_masked_mean_abs_advantage():
    A = np.array([[1.0, -1.0, np.nan], [0.0, 0.0, 0.0], [np.nan] * 3, [2.0, -3.0, 1.0]])
    assert hb.learnability(A) == pytest.approx((1.0 + 0.0 + 2.0) / 3)  # the all-NaN group is skipped
    # per-token advantages: each trajectory's masked mean first, then equal weight per group
    tok = np.array([[[1.0, 3.0, 9.0], [-2.0, 0.0, 0.0]]])
    mask = np.array([[[1, 1, 0], [1, 0, 0]]], bool)
    assert hb.learnability(tok, mask) == pytest.approx((2.0 + 2.0) / 2)
    assert math.isnan(hb.learnability(np.full((2, 2), np.nan)))


def reference_run(draws, H, cfg):
    """The scheduler written out once more with plain lists (the update after each train step)."""
    Q, n, E, W = [0.0] * H, [0] * H, [None] * H, []

    def cos(a, b):
        return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-12))

    def norm(x, xs):
        xs = [v for v in xs if v == v]
        if x != x:
            return x
        return cfg.degenerate_value if max(xs) == min(xs) else (x - min(xs)) / (max(xs) - min(xs))

    out = []
    for arm, l, s in draws:
        peers = [cos(s, E[h]) for h in range(H) if h != arm and E[h] is not None]
        T = sum(peers) / len(peers) if peers else float("nan")
        E[arm] = s.copy() if E[arm] is None else cfg.ema_decay * E[arm] + (1 - cfg.ema_decay) * s
        W = (W + [(l, T)])[-cfg.window:]
        ln, tn = norm(l, [w[0] for w in W]), norm(T, [w[1] for w in W])
        v = ln if T != T else cfg.alpha * ln + (1 - cfg.alpha) * tn
        Q[arm] = v if n[arm] == 0 else (1 - cfg.value_step) * Q[arm] + cfg.value_step * v
        n[arm] += 1
        out.append((list(Q), list(n), v))
    return out


def test_scheduler_matches_a_plain_rederivation_over_a_random_run():
    cfg = hb.BanditConfig(arms=tuple("abcde"), heldout_arm="h", window=6, warmup=5)
    rng = np.random.default_rng(3)
    state = hb.BanditState.create(5, 16)
    draws = []
    for t in range(60):
        arm, p, _, _ = hb.select(state, rng, cfg)
        s = rng.normal(size=16).astype(np.float32) + (arm % 2)  # two families of correlated gradients
        l = float(rng.gamma(2.0, 0.5))
        draws.append((arm, l, s.astype(np.float64)))
        state, rec = hb.observe(state, arm, l, s, cfg)
        Q, n, v = reference_run(draws, 5, cfg)[-1]
        np.testing.assert_allclose(state.q, Q, rtol=1e-5, atol=1e-6)
        assert list(state.n) == n and rec["value"] == pytest.approx(v, rel=1e-5, abs=1e-6)
    assert set(a for a, _, _ in draws) == set(range(5))


def test_state_round_trips_through_json_exactly():
    import json

    state = hb.BanditState.create(3, 4)
    state, _ = hb.observe(state, 0, 0.3, np.arange(4, dtype=np.float32), CFG)
    state, _ = hb.pool_draw(state, 1, 5, 4, seed=1)
    back = hb.BanditState.from_dict(json.loads(json.dumps(state.to_dict())))
    np.testing.assert_array_equal(back.emas, state.emas)
    assert back.window[0][0] == 0.3 and math.isnan(back.window[0][1])
    assert back.to_dict() == state.to_dict()
    bad = state.to_dict()
    bad["ema_sha256"] = "0" * 64
    with pytest.raises(ValueError, match="sha256"):
        hb.BanditState.from_dict(bad)


def test_each_arm_walks_its_own_shuffled_pool():
    state = hb.BanditState.create(2, 1)
    state, a = hb.pool_draw(state, 0, 3, 5, seed=0)
    state, b = hb.pool_draw(state, 0, 3, 5, seed=0)  # crosses into the second pass
    state, c = hb.pool_draw(state, 1, 3, 5, seed=0)
    assert sorted(a + b[:2]) == list(range(5))  # one full pass before any repeat
    assert state.pool_pass == (1, 0) and state.pool_pos == (1, 3)
    assert c == list(np.random.default_rng((0, 1, 0)).permutation(5)[:3])
