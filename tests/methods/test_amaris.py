"""AMARIS's and AMARIS++'s update decisions against a re-derivation of the rule on hand-made groups and memories:
the analysis, the static and dynamic retrieval, the reviser's actions (the rule fallback's curriculum, and the
evolver model's typed actions through the judge protocol)."""

import dataclasses
import json

import numpy as np
import pytest

from harnessrl_jax.evolver import Attributor, CriticHooks, EvolverResult, Group
from harnessrl_jax.evolver.tightening import rule_tags
from harnessrl_jax.harness import HarnessState, ops
from harnessrl_jax.harness.transitions import DEFAULT_TRANSITIONS
from harnessrl_jax.methods.amaris import AMARISConfig, AMARISRule, recurring, rule_analysis
from harnessrl_jax.methods.updates import RuleInput, apply_rule
from harnessrl_jax.rubric import rules
from harnessrl_jax.rubric.judges.llm import Completion
from harnessrl_jax.rubric.schema import Criterion, Task
from harnessrl_jax.words import INTERFACES, Verdict


def task(tid="t"):
    lf = lambda n: rule_tags("keywords:letter_frequency", {"letter": "a", "let_frequency": n,  # noqa: E731
                                                           "let_relation": "at least"})
    return Task(tid, "toy", ({"role": "user", "content": "say a"},),
                (Criterion(f"{tid}/a1", "The letter a appears at least 1 times.", 2.0, lf(1)),
                 Criterion(f"{tid}/a9", "The letter a appears at least 9 times.", 1.0, lf(9)),
                 Criterion(f"{tid}/split", "Says yes.", 1.0, rule_tags("keywords:existence", {"keywords": ["yes"]})),
                 Criterion(f"{tid}/pit", "Says no.", -1.0, rule_tags("keywords:existence", {"keywords": ["no"]}))))


RESPONSES = ["a yes", "aa", "aaa yes", "a b", "aaaa", "a yes c", "aa d", "a"]


def scores(t, responses=RESPONSES):
    return np.array([[float(rules.check(c.rule_id, c.rule_kwargs, y)) for y in responses] for c in t.criteria])


def test_the_analysis_names_what_every_rollout_met_and_what_none_did():
    t = task()
    H = HarnessState.from_tasks([t])
    S = scores(t)
    a = rule_analysis(H.rubric_of("t"), S, 100 * (np.array([2, 1, 1, -1]) @ S) / 4)
    # a1 is met by all; the pitfall is avoided by all (polarity-aware); a9 by none; 'yes' splits
    assert a["saturated"] == ["t/a1", "t/pit"] and a["unreached"] == ["t/a9"]
    assert "Says yes. (0.38)" in a["summary"] and len(a["notes"]) == 8
    assert recurring(["x", "y"], [["x", "y"], ["y"]]) == ["y"] and recurring(["x"], []) == []


@dataclasses.dataclass
class Draw:
    step: int
    task_id: str
    dynamics: dict
    draw_id: int = 0


class Memory:
    """The time index the rules read: draws with their dynamics (newest first) and no updates."""

    def __init__(self, draws):
        self.draws = draws

    def history(self, task_id, before_step=None, limit=None):
        out = [d for d in sorted(self.draws, key=lambda d: -d.step) if d.task_id == task_id and d.step < before_step]
        return out[:limit]

    def updates(self, task_id, before_step=None):
        return []


def inputs(t, H, step, memory, S=None):
    S = scores(t) if S is None else S
    att = Attributor()(t, H.rubric_of(t.id), S, tuple(RESPONSES))
    return RuleInput(step, [Group(t, tuple(RESPONSES), S)], H, [att], memory, CriticHooks())


def past(step, saturated, unreached, tid="t"):
    return Draw(step, tid, {"amaris_summary": f"summary {step}", "amaris_saturated": saturated,
                            "amaris_unreached": unreached}, step + 100)


@pytest.mark.parametrize("plus", [False, True])
def test_early_in_training_recurring_failures_are_fixed(plus):
    t = task()
    H = HarnessState.from_tasks([t], anchors={"t": []})
    memory = Memory([past(1, ["t/a1"], ["t/a9"]), past(2, [], ["t/a9", "t/split"])])
    rule = AMARISRule(AMARISConfig(), plus=plus, total_steps=10)
    out = rule.propose(inputs(t, H, 3, memory))
    acts = [a for rc in out.candidates for a in rc.candidate.actions]
    # a9 was unreached now and in the task's last k_s = 3 draws (both recorded): its points halve
    expected = [ops.ReweightCriterion("t", "t/a9", 0.5)]
    if plus:  # AMARIS++ also mounts a <criterion> field for it
        expected.append(ops.AddField("t", "criterion", "Make sure your answer meets this: The letter a appears at "
                                                       "least 9 times.", "t/a9"))
    assert sorted(acts, key=repr) == sorted(expected, key=repr)
    assert out.dynamics[0]["amaris_unreached"] == ["t/a9"] and out.dynamics[0]["amaris_summary"]
    # the candidates cite the memory records they were revised from
    assert all(rc.candidate.evidence_ids == ("draw:102", "draw:101") for rc in out.candidates)


@pytest.mark.parametrize("plus", [False, True])
def test_later_recurring_saturation_raises_the_standard(plus):
    t = task()
    H = HarnessState.from_tasks([t], anchors={"t": []})
    memory = Memory([past(6, ["t/a1", "t/pit", "t/split"], []), past(7, ["t/a1", "t/pit"], [])])
    rule = AMARISRule(AMARISConfig(), plus=plus, total_steps=10)
    out = rule.propose(inputs(t, H, 8, memory))
    acts = {a.criterion_id if hasattr(a, "criterion_id") else a.op: a for rc in out.candidates
            for a in rc.candidate.actions}
    # a1 (met by all, again): its threshold rises to the weakest one some rollout fails, scanned with the checker
    counts = [y.count("a") for y in RESPONSES]
    new = next(n for n in range(2, 20) if any(c < n for c in counts))
    a1 = acts["t/a1"]
    assert isinstance(a1, ops.RewriteCriterion) and json.loads(
        next(x for x in a1.tags if x.startswith("rule_kwargs:"))[12:])["let_frequency"] == new
    assert str(new) in a1.text
    # the pitfall nobody triggers cannot be tightened: its weight is halved
    assert acts["t/pit"] == ops.ReweightCriterion("t", "t/pit", -0.5)
    assert ("downweight_task" in acts) is False  # 'yes' still splits: the task is not saturated as a whole


def test_amaris_pp_downweights_a_task_saturated_in_every_criterion():
    t = task()
    S = scores(t)
    S[1:3] = np.array([[1.0] * 8, [1.0] * 8])  # every positive criterion met by every rollout
    H = HarnessState.from_tasks([t], anchors={"t": []})
    ids = ["t/a1", "t/a9", "t/split", "t/pit"]
    memory = Memory([past(6, ids, []), past(7, ids, [])])
    out = AMARISRule(AMARISConfig(), plus=True, total_steps=10).propose(inputs(t, H, 8, memory, S))
    assert ops.DownweightTask("t") in [a for rc in out.candidates for a in rc.candidate.actions]
    out = AMARISRule(AMARISConfig(), plus=False, total_steps=10).propose(inputs(t, H, 8, memory, S))
    assert all(a.interface == "rubric" for rc in out.candidates for a in rc.candidate.actions)


def test_dynamic_retrieval_finds_similar_summaries_of_other_tasks_amaris_pp_has_none():
    a, b = task("a"), task("b")

    class Store:
        def __init__(self, draws):
            self._d = draws

        def draws(self):
            return iter(self._d)

    class Mem(Memory):
        store = None

    m = Mem([])
    m.store = Store([Draw(0, "b", {"amaris_summary": "letter a met by every rollout"}),
                     Draw(0, "c", {"amaris_summary": "poems about the sea"}),
                     Draw(0, "a", {"amaris_summary": "letter a"})])
    rule = AMARISRule(AMARISConfig(dynamic_k=1, embedder="lexical"), total_steps=10)
    rule.start(m)
    seen = []

    def revise(inp, n, analysis, past, updates, similar):  # what the reviser is handed
        seen.append(similar)
        return [], "", None

    rule.revise = revise
    H = HarnessState.from_tasks([a, b])
    rule.propose(inputs(a, H, 1, m))
    (cos, key, text), = seen[0]
    assert key == ("b", 0) and text == "letter a met by every rollout" and cos > 0  # other tasks only, top k_d
    plus = AMARISRule(AMARISConfig(), plus=True, total_steps=10)
    plus.start(m)
    assert plus.index is None and not plus.dynamic  # same-task static retrieval only: no cross-task memory


class Client:
    """The evolver model through the judge protocol: canned answers by the prompt's first words."""

    def __init__(self, revise):
        self.revise, self.prompts = revise, []

    def complete(self, messages, schema, key=None):
        text = messages[0]["content"]
        self.prompts.append(text)
        if text.startswith("You analyse"):
            out = {"rollouts": [{"index": 0, "notes": "met a"}], "summary": "the group always says a"}
        else:
            out = self.revise
        return Completion(json.dumps(out), "ok", "stop", 0.0, False, 1)


def test_the_reviser_model_writes_typed_actions_applied_unmeasured_and_invalid_ones_are_rejected():
    t = task()
    H = HarnessState.from_tasks([t], anchors={"t": []})
    good = {"rationale": "raise the bar", "actions": [{"op": "reweight_criterion", "criterion_id": "t/a1",
                                                        "points": 1.0},
                                                       {"op": "downweight_task"}]}
    client = Client(good)
    rule = AMARISRule(AMARISConfig(), plus=True, client=client, total_steps=10)
    inp = inputs(t, H, 1, None)
    out = rule.propose(inp)
    assert [rc.candidate.interface for rc in out.candidates] == ["sampling", "rubric"]
    assert out.dynamics[0]["amaris_summary"] == "the group always says a"
    assert "the group always says a" in client.prompts[-1] and "downweight_task" in client.prompts[-1]
    result = apply_rule(out, inp, EvolverResult(1, H, (), (), tuple(inp.attributions)),
                        transitions=DEFAULT_TRANSITIONS, gated=False, source="amaris_pp")
    assert [e.verdict for e in result.log] == [Verdict.ACCEPTED] * 2
    assert result.state.sampling.level[0] == 1 and result.state.rubric_of("t")[0].points == 1.0
    # AMARIS may not touch sampling: the same answer is invalid for it, logged as rejected with the reason
    rule = AMARISRule(AMARISConfig(), plus=False, client=Client(good), total_steps=10)
    out = rule.propose(inp)
    (rc,) = out.candidates
    assert rc.candidate.invalid and "allowed" in rc.candidate.invalid
    result = apply_rule(out, inp, EvolverResult(1, H, (), (), tuple(inp.attributions)),
                        transitions=DEFAULT_TRANSITIONS, gated=False)
    assert result.log[0].verdict == Verdict.REJECTED and result.state is H
    assert set(AMARISRule(plus=True).interfaces) == set(INTERFACES)
