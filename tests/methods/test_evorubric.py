"""EvoRubric's prune-regenerate-verify decisions against a NumPy re-derivation of its published rule on hand-made
groups, and its updates entering the run as the evolver's do (gated by the critic or not, logged, in the memory)."""

import json

import numpy as np
import pytest
from scipy import stats

from harnessrl_jax.evolver import Attributor, CriticHooks, Critic, EvolverResult, Group
from harnessrl_jax.evolver.tightening import rule_tags
from harnessrl_jax.harness import HarnessState
from harnessrl_jax.harness.transitions import DEFAULT_TRANSITIONS
from harnessrl_jax.methods.evorubric import (EvoRubricConfig, EvoRubricRule, consensus, new_points, prunable,
                                             rule_meta_check, spearman, Draft)
from harnessrl_jax.methods.updates import RuleInput, apply_rule
from harnessrl_jax.rubric import rules
from harnessrl_jax.rubric.schema import Criterion, Task
from harnessrl_jax.words import Label, Verdict


def rank(x):
    """Average ranks (1-based), with NumPy only."""
    x = np.asarray(x, float)
    order = np.argsort(x, kind="stable")
    r = np.empty(len(x))
    r[order] = np.arange(1, len(x) + 1)
    for v in np.unique(x):
        r[x == v] = r[x == v].mean()
    return r


def test_spearman_is_the_correlation_of_average_ranks():
    rng = np.random.default_rng(0)
    for _ in range(5):
        a, b = rng.integers(0, 5, 12).astype(float), rng.normal(size=12)
        assert spearman(a, b) == pytest.approx(np.corrcoef(rank(a), rank(b))[0, 1])
        assert spearman(a, b) == pytest.approx(stats.spearmanr(a, b).statistic)
    assert np.isnan(spearman([1, 1, 1], [1, 2, 3]))


def test_consensus_keeps_a_set_whose_rewards_agree_with_the_mean_of_its_peers():
    sets = [np.array([10, 20, 30, 40.0]), np.array([12, 18, 35, 41.0]), np.array([40, 30, 20, 10.0]), None]
    out = consensus(sets, 0.5)
    for n in range(3):
        peers = np.mean([sets[m] for m in range(3) if m != n], axis=0)
        rho = np.corrcoef(rank(sets[n]), rank(peers))[0, 1] if np.ptp(peers) else np.nan
        assert out[n][1] == pytest.approx(rho, nan_ok=True) and out[n][0] == bool(rho >= 0.5)
    assert out[3] == (False, pytest.approx(np.nan, nan_ok=True))
    assert [k for k, _ in consensus([np.array([1.0, 2, 3]), None], 0.5)] == [False, False]  # no peer


def crit(cid, text, points, anchor=False):
    return Criterion(cid, text, points)


def test_prune_deletes_non_anchors_flat_in_the_last_P_draws():
    task = Task("t", "toy", ({"role": "user", "content": "q"},),
                (crit("t/a", "A holds.", 2), crit("t/b", "B holds.", 1), crit("t/c", "C holds.", 1),
                 crit("t/d", "D holds.", 1), crit("t/p", "No insult.", -1)))
    H = HarnessState.from_tasks([task], anchors={"t": ["t/a"]})
    S = np.array([[1, 1, 1, 1],        # a: flat but an anchor
                  [1, 1, 1, 1],        # b: flat now and before -> saturated
                  [0, 0, 0, 0],        # c: flat now and before -> blind
                  [0, 0, 0, 0],        # d: flat now, split before
                  [0, 0, 0, 0]], float)  # pitfall never triggered: every rollout achieves it -> saturated
    before = {"t/b": np.array([1, 1, 1, 1.0]), "t/c": np.array([0, 0, np.nan, 0]), "t/d": np.array([1, 0, 0, 0.0]),
              "t/p": np.array([0, 0, 0, 0.0]), "t/a": np.ones(4)}
    got = prunable(H.rubric_of("t"), S, [before], 2)
    assert got == [("t/b", Label.SATURATED), ("t/c", Label.BLIND), ("t/p", Label.SATURATED)]
    assert prunable(H.rubric_of("t"), S, [], 2) == []  # not enough history yet
    assert [c for c, _ in prunable(H.rubric_of("t"), S, None, 2)] == ["t/b", "t/c", "t/d", "t/p"]  # no memory


class Regrader:
    """The judge: rule checkers on the responses (what the loop's critic hooks do with the rule judge)."""

    def __init__(self):
        self.calls = []

    def __call__(self, items):
        self.calls.append(len(items))
        return [np.array([[float(rules.check(c.rule_id, c.rule_kwargs, y)) for y in ys] for c in cs])
                for _, ys, cs in items]


def step_input(task, H, responses, S, regrader, step=0):
    att = Attributor()(task, H.rubric_of(task.id), S, tuple(responses))
    return RuleInput(step, [Group(task, tuple(responses), S)], H, [att], None, CriticHooks(regrade_batch=regrader))


def honey_task():
    kw = lambda w: rule_tags("keywords:existence", {"keywords": [w]})  # noqa: E731
    return Task("h", "toy", ({"role": "user", "content": "write about bees"},),
                (Criterion("h/bees", "Mentions bees.", 3.0, kw("bees")),
                 Criterion("h/hive", "Mentions a hive.", 1.0, kw("hive")),
                 Criterion("h/zzz", "Mentions zzz.", 1.0, kw("zzzz"))))


RESPONSES = ["bees make honey in a hive with nectar flowers", "bees make honey with nectar", "bees buzz loudly",
             "bees make honey from nectar in summer flowers", "a hive", "honey is sweet nectar", "bees",
             "bees honey nectar flowers summer hive"]


def test_one_step_prunes_regenerates_verifies_and_archives():
    task = honey_task()
    H = HarnessState.from_tasks([task], anchors={"h": []})
    S = np.array([[float(rules.check(c.rule_id, c.rule_kwargs, y)) for y in RESPONSES] for c in task.criteria])
    regrader = Regrader()
    cfg = EvoRubricConfig()
    rule = EvoRubricRule(cfg)
    proposal = rule.propose(step_input(task, H, RESPONSES, S, regrader))
    prune, create = proposal.candidates
    # prune: only 'zzz' is flat (no response says it); without a memory this group alone decides
    assert [a.criterion_id for a in prune.candidate.actions] == ["h/zzz"] and prune.candidate.label == Label.BLIND
    # regenerate + verify, re-derived: every created criterion is a checkable rule criterion that splits the group
    assert len(regrader.calls) == 1  # every surviving draft of the step judged in one batch
    points = new_points(task)
    assert points == np.median([3.0, 1.0, 1.0])
    kept = [c for c in task.criteria if c.id != "h/zzz"]
    for a in create.candidate.actions:
        c = Criterion("new", a.text, a.points, a.tags)
        row = np.array([float(rules.check(c.rule_id, c.rule_kwargs, y)) for y in RESPONSES])
        assert 0 < row.sum() < len(row) and a.points == points and a.origin == "evorubric"
        assert rule_meta_check(Draft(a.text, a.points, a.tags), [k.text for k in kept]) is None
    assert len(create.candidate.actions) <= int(cfg.pool_factor * 3) - 2  # K_max = 2 x seed size
    m = proposal.metrics
    assert m["evorubric/created"] == len(create.candidate.actions) and m["evorubric/pruned"] == 1
    assert m["evorubric/sets_kept"] >= 2  # a kept set agrees with a peer


def test_a_kept_set_is_one_whose_rewards_rank_the_group_as_its_peers_do(monkeypatch):
    """The consensus decision of propose(), re-derived from the rewards under (rubric + set r)."""
    task = honey_task()
    H = HarnessState.from_tasks([task], anchors={"h": []})
    S = np.array([[float(rules.check(c.rule_id, c.rule_kwargs, y)) for y in RESPONSES] for c in task.criteria])
    # set 2 holds pitfalls on what the best responses say: its rewards rank the group against its peers
    words = {0: ["honey"], 1: ["nectar"], 2: ["bees", "honey", "nectar"], 3: ["flowers"]}
    from harnessrl_jax.methods import evorubric as evo

    def fake_drafts(task, responses, rewards, points, *, size, seed, min_word_len):
        r = seed[2]
        sign = -1 if r == 2 else 1
        return [Draft(f"The response uses the word '{w}'.", sign * points,
                      rule_tags("keywords:existence", {"keywords": [w]})) for w in words[r]]

    monkeypatch.setattr(evo, "rule_drafts", fake_drafts)
    proposal = EvoRubricRule(EvoRubricConfig()).propose(step_input(task, H, RESPONSES, S, Regrader()))
    created = {a.text for rc in proposal.candidates for a in rc.candidate.actions if a.op == "create_criterion"}
    # re-derive: rewards of the group under (bees, hive) + each set, rho against the others' mean
    base_pts, base_S = np.array([3.0, 1.0]), S[:2]
    pts = np.median([3.0, 1.0, 1.0])
    rewards = []
    for r in range(4):
        sign = -1 if r == 2 else 1
        rows = [np.array([float(w in y.split()) for y in RESPONSES]) for w in words[r]]
        rows = [x for x in rows if 0 < x.sum() < len(x)]
        p = np.concatenate([base_pts, [sign * pts] * len(rows)])
        rewards.append(100 * (p @ np.vstack([base_S] + rows)) / np.maximum(p, 0).sum() if rows else None)
    keep = []
    for r in range(4):
        peers = [rewards[m] for m in range(4) if m != r and rewards[m] is not None]
        rho = np.corrcoef(rank(rewards[r]), rank(np.mean(peers, axis=0)))[0, 1]
        keep.append(rho >= 0.5)
    expected = [f"The response uses the word '{w}'." for r in range(4) if keep[r] for w in words[r]]
    expected = set(list(dict.fromkeys(expected))[: int(2 * 3) - 2])  # the pool cap: K_max = 2 x seed size
    assert created == expected and created, (created, expected, keep)  # at least one set kept
    assert not all(keep)  # and the consensus rejected one


def test_updates_are_logged_and_gated_by_the_critic_only_when_asked():
    task = honey_task()
    H = HarnessState.from_tasks([task], anchors={"h": []})
    S = np.array([[float(rules.check(c.rule_id, c.rule_kwargs, y)) for y in RESPONSES] for c in task.criteria])
    inp = step_input(task, H, RESPONSES, S, Regrader())
    proposal = EvoRubricRule().propose(inp)
    empty = EvolverResult(0, H, (), (), tuple(inp.attributions))
    free = apply_rule(proposal, inp, empty, transitions=DEFAULT_TRANSITIONS, critic=Critic(), gated=False)
    assert [e.verdict for e in free.log] == [Verdict.ACCEPTED] * len(proposal.candidates)
    assert all(not e.measurement.measured and e.reason.startswith("evorubric:") for e in free.log)
    assert {c.id for c in free.state.rubric_of("h")} >= {"h/bees", "h/hive"} and "h/zzz" not in \
        {c.id for c in free.state.rubric_of("h")}
    # every action is an ActionRecord of the draw with the harness change it made (so reversals count it)
    records = free.draw_fields(0)["actions"]
    assert [r.op for r in records][0] == "delete_criterion" and all(r.changes for r in records)
    json.dumps(free.harness_records())
    gated = apply_rule(proposal, inp, empty, transitions=DEFAULT_TRANSITIONS, critic=Critic(), gated=True)
    assert all(e.measurement.measured for e in gated.log)
    for e in gated.log:  # the critic's rubric test: delta_c in the band, new criteria vary
        ok = e.measurement.delta_c is not None and 3.1 <= e.measurement.delta_c <= 28.0
        assert (e.verdict == Verdict.ACCEPTED) == (ok and not e.measurement.non_varying)


class Client:
    """The evolver model through the judge protocol: the generator's sets, then the meta-verifier's verdicts."""

    def __init__(self):
        self.prompts = []

    def complete(self, messages, schema, key=None):
        from harnessrl_jax.rubric.judges.llm import Completion

        text = messages[0]["content"]
        self.prompts.append(text)
        if "accept" in schema["properties"]:  # the meta-verifier: rejects what mentions loudness
            out = {"accept": "loud" not in text.split("# The criterion")[1], "reason": "off topic"}
        else:
            r = int(text.split("candidate set ")[1].split(" ")[0])
            out = {"criteria": [{"text": f"The answer explains point {r}."}, {"text": "It is loud.", "pitfall": True}]}
        return Completion(json.dumps(out), "ok", "stop", 0.0, False, 1)


def test_the_generator_and_meta_verifier_are_the_evolver_model():
    task = honey_task()
    H = HarnessState.from_tasks([task], anchors={"h": []})
    S = np.array([[float(rules.check(c.rule_id, c.rule_kwargs, y)) for y in RESPONSES] for c in task.criteria])
    client = Client()
    judged = []

    def judge(items):  # an LLM judge of the plain criteria: 'point r' met by the first r + 2 responses
        judged.append([c.text for _, _, cs in items for c in cs])
        return [np.array([[float(j < int(c.text.split("point ")[1][0]) + 2) if "point" in c.text else 0.0
                           for j in range(len(ys))] for c in cs]) for _, ys, cs in items]

    inp = RuleInput(0, [Group(task, tuple(RESPONSES), S)], H, [Attributor()(task, H.rubric_of("h"), S,
                                                                             tuple(RESPONSES))],
                    None, CriticHooks(regrade_batch=judge))
    out = EvoRubricRule(EvoRubricConfig(), client=client).propose(inp)
    gen = [p for p in client.prompts if p.startswith("You write evaluation criteria")]
    assert len(gen) == 4 and all("bees make honey in a hive" in p for p in gen)  # the best response is shown
    assert "Mentions bees." in gen[0] and "candidate set 1 of 4" in gen[0]
    # the pitfalls the meta-verifier rejected never reach the judge; every set's criterion did
    assert judged == [[f"The answer explains point {r}." for r in range(1, 5)]]
    assert out.metrics["evorubric/meta_rejected"] == 4 and out.candidates[-1].candidate.source == "evorubric-llm"
