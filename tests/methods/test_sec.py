"""SEC's curriculum against a NumPy re-derivation of its published rule: the TD(0) values and the Boltzmann arm
probabilities (`update_values` / `arm_probs` as their docstrings state them, from outside), the arm reward of hand-made
groups (mean absolute un-normalised advantage), the draws and the importance weights."""

import numpy as np
import pytest

from harnessrl_jax.methods.sec import (SECConfig, SECSampler, arm_probs, arm_rewards, assign_arms, learning_gain,
                                       update_values)
from harnessrl_jax.rubric.schema import Criterion, Task


def test_update_values_contract():
    rng = np.random.default_rng(0)
    q = rng.normal(size=6)
    rewards = {0: 0.3, 3: 0.1, 5: 0.45}
    for alpha in (0.5, 0.2, 1.0):
        expected = q.copy()
        for c in range(6):
            if c in rewards:
                expected[c] = alpha * rewards[c] + (1 - alpha) * q[c]
        np.testing.assert_allclose(update_values(q, rewards, alpha=alpha), expected, rtol=1e-12)
    np.testing.assert_array_equal(update_values(q, {}), q)  # absent arms keep their value
    assert update_values(q, rewards) is not q and update_values(np.zeros(3), {1: 0.4})[1] == pytest.approx(0.2)


@pytest.mark.parametrize("temperature", [1.0, 0.4, 0.2])
def test_arm_probs_contract(temperature):
    q = np.array([0.1, 0.5, -0.2, 0.5])
    e = np.exp(q / temperature)
    np.testing.assert_allclose(arm_probs(q, temperature=temperature), e / e.sum(), rtol=1e-12)
    np.testing.assert_allclose(arm_probs([1000.0, 1000.0]), [0.5, 0.5])  # stable for large values


def test_the_arm_reward_is_the_mean_absolute_advantage_on_the_unit_scale():
    rewards = np.array([[100, 0, 100, 0], [100, 100, 100, 100], [50, np.nan, 0, 100], [np.nan] * 4])
    gains = []
    for row in rewards / 100:
        v = row[~np.isnan(row)]
        gains.append(np.mean(np.abs(v - v.mean())) if v.size else np.nan)
    np.testing.assert_allclose(learning_gain(rewards), gains)
    assert learning_gain(rewards)[0] == pytest.approx(0.5)  # Bernoulli p = 0.5: 2 p (1 - p)
    # arm 0 drew groups 0 and 1, arm 2 group 2; arm 1 only a group without a valid reward (no update)
    assert arm_rewards([0, 0, 2, 1], rewards) == pytest.approx({0: (gains[0] + gains[1]) / 2, 2: gains[2]})


def tasks(n, domains=("a", "b")):
    return [Task(id=f"t{i}", domain=domains[i % len(domains)], prompt=({"role": "user", "content": "x"},),
                 criteria=(Criterion(f"t{i}/c", "c", 1.0),)) for i in range(n)]


def test_arms_by_seed_reward_quintile_domain_and_task():
    ts = tasks(10)
    rewards = {f"t{i}": float(r) for i, r in enumerate([90, 10, 50, 30, 70, 20, 80, 40, 60, 0])}
    arms, names = assign_arms(ts, "seed_quintile", num_levels=5, rewards=rewards)
    order = np.argsort([rewards[t.id] for t in ts])  # ascending reward: two tasks per level
    assert names == [f"level{k}" for k in range(5)]
    assert [int(arms[i]) for i in order] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    arms, names = assign_arms(ts, "domain")
    assert names == ["a", "b"] and list(arms) == [0, 1] * 5
    arms, names = assign_arms(ts, "domain_x_tercile", rewards=rewards)
    assert len(names) == 6 and sorted(set(arms.tolist())) == list(range(6))
    assert list(assign_arms(ts, "task")[0]) == list(range(10))
    with pytest.raises(ValueError, match="cold start"):
        assign_arms(ts, "seed_quintile")


def test_draws_follow_the_boltzmann_probabilities_and_the_td_update():
    arms = np.array([0, 0, 0, 1, 1, 2])  # 3 arms of 3, 2 and 1 tasks
    s = SECSampler(6, config=SECConfig(alpha=0.5, temperature=0.5), arms=arms)
    s.q = np.array([1.0, 0.0, 0.5])
    p = arm_probs(s.q, temperature=0.5)
    counts = np.zeros(3)
    for seed in range(400):
        idx, u = s.draw(None, seed, 3)
        # a task is drawn twice in a step only once its arm has no undrawn task left
        for i in set(idx):
            if idx.count(i) > 1:
                assert all(j in idx for j in np.flatnonzero(arms == arms[i]))
        counts += np.bincount(arms[idx], minlength=3)
        assert np.all(u == 1.0)  # no importance weights by default
    freq = counts / counts.sum()
    assert np.abs(freq - p).max() < 0.03, (freq, p)
    # observe: the TD(0) update of the arms drawn, from their groups' un-normalised advantages
    s.observe([0, 3, 4], np.array([[100, 0], [100, 100], [0, 100]], float))
    expected = update_values([1.0, 0.0, 0.5], {0: 0.5, 1: 0.25}, alpha=0.5)
    np.testing.assert_allclose(s.q, expected)
    state = s.state_dict()
    t = SECSampler(6, config=SECConfig(), arms=arms)
    t.load_state_dict(state)
    np.testing.assert_array_equal(t.q, s.q)


def test_importance_weights_on_request_are_one_over_n_p():
    arms = np.array([0, 0, 0, 1])
    s = SECSampler(4, config=SECConfig(importance=True), arms=arms)
    s.q = np.array([0.0, 1.0])
    p = arm_probs(s.q)
    idx, u = s.draw(None, 7, 4)
    for i, w in zip(idx, u):
        c = arms[i]
        assert w == pytest.approx(1.0 / (4 * p[c] / np.sum(arms == c)), rel=1e-6)


def test_sec_is_a_registered_sampler_built_from_the_config(tiny_config):
    config = tiny_config("method=sec,tasks=harness")
    from harnessrl_jax import checks, methods
    from harnessrl_jax.methods.parts import MethodParts, PartsContext, part_class

    m = methods.describe(config)
    assert part_class(m.sampler) is SECSampler
    s = MethodParts(m, PartsContext(config, tasks(3), m)).sampler
    assert isinstance(s, SECSampler) and s.arm_names == ["t0", "t1", "t2"]  # the tiny config's arms: tasks
    config.sec.arms = "seed_quintile"
    assert any(p.startswith("--config.sec.arms='seed_quintile' needs") for p in checks.check(config))
