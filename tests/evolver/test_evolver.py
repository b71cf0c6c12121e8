"""The evolver end to end with the real memory store, the rule judge as the regrade hook and a fake policy as the
resample hook: labels -> candidates -> measured verdicts over up to B = 3 rounds -> H_{t+1}, a log line for every
candidate, and DrawRecord fields the memory accepts."""

import dataclasses
import json

import numpy as np
import pytest

from evolver_testlib import draw, kw, make_task, regrade_with_rules, words_under
from harnessrl_jax.words import Verdict
from harnessrl_jax.evolver import (Bands, Candidate, Critic, CriticHooks,
                                   Evolver, EvolverConfig, EvolverResult, Group, LogEntry, task_slice)
from harnessrl_jax.harness import AddField, HarnessState, apply
from harnessrl_jax.memory import DrawRecord

COLD = [kw("cold/c0", "Recommends rest.", 3, r"\brest"), kw("cold/c1", "Recommends drinking fluids.", 3, "(fluid|water)"),
        kw("cold/c2", "Mentions honey.", 2, "honey"), words_under("cold/c3", 60)]
FLU = [kw("flu/c0", "Mentions fever.", 2, "fever"), kw("flu/c1", "Advises seeing a doctor.", 2, "doctor")]
PLAIN = ["Rest at home and drink water; soup helps too.", "Rest a lot and drink fluids often, with lemon.",
         "Get rest and keep drinking water through the day.", "Plenty of rest and fluids will help you.",
         "Rest, water and patience: the cold passes in a week, so rest.", "You should rest and drink water.",
         "Rest well, and drink enough fluid every hour of the day.", "Drink water and rest as much as you can."]
FLU_RESP = [f"A fever that lasts, case {j}, means you should see a doctor." if j % 2 else f"Rest, case {j}."
            for j in range(8)]
TASKS = [make_task("cold", COLD), make_task("flu", FLU)]  # as training sees them: no dataset reference


def guided_policy(task, fields):
    """The frozen policy under guidance: with a <criterion> field on the cold task, half the group says honey."""
    names = dict(fields)
    if task.id == "cold" and "criterion" in names:
        return [r + (" Honey helps." if j % 2 else "") for j, r in enumerate(PLAIN)]
    return list(PLAIN if task.id == "cold" else FLU_RESP)


HOOKS = CriticHooks(regrade=regrade_with_rules, resample=guided_policy)


def groups(state, cold=PLAIN, flu=FLU_RESP):
    return [Group(t, r, regrade_with_rules(t, r, state.criteria(t.id))) for t, r in zip(TASKS, (cold, flu))]


def record_step(memory, step, state, gs, result):
    """What the loop writes after the evolver: one DrawRecord per group, with the evolver's fields."""
    recs = []
    for i, g in enumerate(gs):
        crits = state.rubric_of(g.task.id)
        rec = draw(step, g.task.id, crits, g.responses, g.S)
        recs.append(dataclasses.replace(rec, harness=task_slice(state, g.task.id), **result.draw_fields(i)))
    memory.append_step(step, recs)


def entries(result, task_id=None, interface=None):
    return [e for e in result.log if (task_id is None or e.task_id == task_id)
            and (interface is None or e.interface == interface)]


def test_three_steps_blind_gets_guidance_saturated_is_tightened_then_downweighted(memory):
    ev = Evolver()
    state = HarnessState.from_tasks(TASKS)

    # Step 0: no window of 2 draws is filled yet: honey is unmet but not blind, nothing is saturated, nothing moves.
    gs = groups(state)
    r0 = ev.step(0, gs, state, memory, HOOKS)
    assert r0.attributions[0].get("cold/c2").label == "agree" and "not filled" in r0.attributions[0].get(
        "cold/c2").reason
    assert r0.log == () and r0.state is state
    record_step(memory, 0, state, gs, r0)

    # Step 1: honey unmet in both draws: blind -> guidance. No example met it anywhere, so there is no <reference>:
    # the strongest set without one (<criterion> + <critique>). Rest, fluids and the word limit met 8/8 twice:
    # saturated criteria, saturated task; the down-weight waits for a saturation diagnosis in the previous record
    # (gate (iv)); the rubric is tightened now.
    gs = groups(state)
    r1 = ev.step(1, gs, state, memory, HOOKS)
    att = r1.attributions[0]
    assert att.get("cold/c2").label == "blind"
    (g,) = entries(r1, "cold", "guidance")
    assert g.verdict == Verdict.ACCEPTED and g.round == 0
    assert [a.field for a in g.candidate.actions] == ["criterion", "critique"]
    assert g.candidate.actions[0].text.startswith("Mention honey.")  # the criterion reworded, not repeated
    assert g.measurement.delta_g == pytest.approx(100 * 2 / 9 / 2)  # half the group gains honey's 2 of 9 points
    assert [att.get(c).label for c in ("cold/c0", "cold/c1", "cold/c3")] == ["saturated"] * 3
    assert att.task_label == "saturated"
    s = entries(r1, "cold", "sampling")
    assert [(e.verdict, e.round) for e in s] == [(Verdict.REJECTED, 0), (Verdict.NOOP, 1)]
    assert "previous record" in s[0].reason
    (rub,) = [e for e in entries(r1, "cold", "rubric") if e.verdict == Verdict.ACCEPTED]
    assert rub.label == "saturated" and 3.1 <= rub.measurement.delta_c <= 28.0
    assert entries(r1, "flu") == []  # flu's criteria split its group with nothing on the surface: agree
    # H_2 is H_1 with exactly the accepted actions applied.
    assert r1.state.to_dict() == apply(state, r1.accepted).to_dict()
    record_step(memory, 1, state, gs, r1)
    state = r1.state

    # Step 2: the previous record now carries the saturation diagnosis: the task is down-weighted.
    r2 = ev.step(2, groups(state), state, memory, HOOKS)
    (down,) = [e for e in entries(r2, "cold", "sampling") if e.verdict == Verdict.ACCEPTED]
    assert down.measurement.delta_w == pytest.approx((1 - 0.61) * down.measurement.rbar_t)
    assert r2.state.sampling.level[0] == 1
    # Every log line is JSON and carries the fields harness.jsonl promises.
    for line in r1.harness_records() + r2.harness_records():
        json.loads(json.dumps(line))
        assert {"step", "task_id", "interface", "round", "label", "verdict", "evidence_ids", "candidate", "deltas",
                "reason"} <= set(line)
    # The memory now holds the actions with their verdicts, and the time index served the evidence.
    acts = memory.store.actions("cold", verdict="accepted")
    assert sorted(a.op for s, _, a in acts) == sorted(["add_field", "add_field", rub.candidate.actions[0].op])
    assert any(e.startswith("draw:") for e in down.candidate.evidence_ids)


def test_rejected_candidates_return_with_their_measurement_for_b_rounds_then_noop():
    seen = []

    class Stubborn:
        """Always another guidance variant; records what the critic sent back."""

        def propose(self, ctx, interface, feedback):
            if interface != "guidance":
                return None
            seen.append([(r.candidate.variant, r.measurement.delta_g, r.measurement.direction) for r in feedback])
            n = len(feedback)
            return Candidate(ctx.task_id, "guidance", (AddField(ctx.task_id, "critique", f"try {n}"),), "blind",
                             variant=f"v{n}")

    state = HarnessState.from_tasks(TASKS)
    result = Evolver(proposer=Stubborn()).step(0, groups(state)[:1], state, None,
                                               CriticHooks(regrade=regrade_with_rules,
                                                           resample=lambda t, f: list(PLAIN)))
    log = entries(result, "cold", "guidance")
    assert [(e.round, e.verdict) for e in log] == [(0, Verdict.REJECTED), (1, Verdict.REJECTED), (2, Verdict.REJECTED), (3, Verdict.NOOP)]
    assert "B = 3" in log[-1].reason and log[-1].label == "blind"
    # Each round's proposer saw every earlier rejection with the measured delta_g (0: the same group) and the way
    # to move (too weak).
    assert seen == [[], [("v0", 0.0, "too_weak")], [("v0", 0.0, "too_weak"), ("v1", 0.0, "too_weak")]]
    assert result.accepted == () and result.state is state
    recs = result.draw_fields(0)["actions"]
    assert [(a.op, a.verdict, a.round) for a in recs] == [("add_field", "rejected", 0), ("add_field", "rejected", 1),
                                                          ("add_field", "rejected", 2), ("noop", "noop", 3)]
    assert recs[0].deltas == {"delta_g": 0.0}


def test_rounds_end_early_when_the_proposer_has_nothing_left():
    state = HarnessState.from_tasks(TASKS)
    honey = [r + " Honey helps." for r in PLAIN]  # any guidance makes the whole group say honey: +22.2 points
    hooks = CriticHooks(regrade=regrade_with_rules, resample=lambda t, f: honey)
    narrow = Critic(Bands(guidance=(1.0, 5.0)))  # so every field set is too strong and the proposer steps down
    result = Evolver(critic=narrow).step(0, groups(state)[:1], state, None, hooks)
    log = entries(result, "cold", "guidance")
    # criterion + critique (the strongest set without a <reference>: no example met honey), then criterion, then
    # critique: B = 3 rounds, then noop.
    assert [e.verdict for e in log] == [Verdict.REJECTED] * 3 + [Verdict.NOOP]
    assert [e.candidate.variant.split(" for")[0] for e in log[:3]] == ["add criterion+critique", "add criterion",
                                                                       "add critique"]
    result = Evolver(critic=narrow, config=EvolverConfig(rounds=10)).step(0, groups(state)[:1], state, None, hooks)
    log = entries(result, "cold", "guidance")
    assert log[-1].verdict == Verdict.NOOP and "no further variant" in log[-1].reason and len(log) == 4
    # Too weak with nothing stronger to offer: one round, then noop (never a weaker set).
    result = Evolver(config=EvolverConfig(rounds=10)).step(
        0, groups(state)[:1], state, None, CriticHooks(regrade=regrade_with_rules, resample=lambda t, f: list(PLAIN)))
    log = entries(result, "cold", "guidance")
    assert [e.verdict for e in log] == [Verdict.REJECTED, Verdict.NOOP]


def test_a_task_drawn_twice_is_labelled_twice_and_proposed_for_once():
    state = HarnessState.from_tasks(TASKS)
    gs = groups(state)
    result = Evolver().step(0, [gs[0], gs[1], gs[0]], state, None, HOOKS)
    assert [a.task_id for a in result.attributions] == ["cold", "flu", "cold"]
    assert {e.draw for e in entries(result, "cold")} == {0}
    assert result.draw_fields(2)["actions"] == () and result.draw_fields(2)["labels"]["cold/c2"] == "blind"


def test_ablation_switches_no_critic_only_guidance_no_memory(memory):
    state = HarnessState.from_tasks(TASKS)
    no_hooks = CriticHooks()  # the no-critic evolver never queries the policy or the judge
    r = Evolver(critic=Critic(enabled=False)).step(0, groups(state), state, None, no_hooks)
    assert r.log and all(e.verdict == Verdict.ACCEPTED and e.round == 0 and not e.measurement.measured for e in r.log)
    r = Evolver(config=EvolverConfig(interfaces=("guidance",))).step(0, groups(state), state, None, HOOKS)
    assert {e.interface for e in r.log} == {"guidance"}
    # Without memory the blind label rests on this group alone and the guidance cites no retrieved evidence.
    r = Evolver().step(0, groups(state), state, None, HOOKS)
    (g,) = entries(r, "cold", "guidance")
    assert not g.with_evidence and r.summary()["candidates_with_evidence"] == 0


def _guided_then_met(memory, config):
    """Step 0 mounts guidance for blind honey (judged without memory: the group alone); at step 1 the whole group
    says honey, so the proposer drops the fields."""
    state = HarnessState.from_tasks(TASKS)
    gs = groups(state)
    r0 = Evolver(config=config).step(0, gs, state, None, HOOKS)
    record_step(memory, 0, state, gs, r0)
    state = r0.state
    honey = [r + " Honey helps." for r in PLAIN]  # under the mounted guidance the whole group now says honey
    hooks = CriticHooks(regrade=regrade_with_rules, resample=lambda t, f: honey)
    return state, Evolver(config=config).step(1, groups(state, cold=honey), state, memory, hooks), honey


def test_the_optional_reversal_filter_rejects_an_undo_unmeasured(memory):
    state, r1, _ = _guided_then_met(memory, EvolverConfig(reversal_within=2))
    drops = entries(r1, "cold", "guidance")
    assert drops[0].candidate.actions[0].op == "drop_field"
    assert drops[0].verdict == Verdict.REJECTED and "would reverse the add_field accepted at step 0" in drops[0].reason
    assert not drops[0].measurement.measured and dict(r1.state.fields("cold")) == dict(state.fields("cold"))


def test_without_the_filter_an_undo_is_measured_and_counted_as_a_reversal(memory):
    state, r1, honey = _guided_then_met(memory, EvolverConfig())
    (drop,) = entries(r1, "cold", "guidance")
    assert drop.verdict == Verdict.ACCEPTED and drop.measurement.measured and r1.state.fields("cold") == ()
    record_step(memory, 1, state, groups(state, cold=honey), r1)
    fields_added = sum(a.op == "add_field" for _, _, a in memory.store.actions("cold", verdict="accepted"))
    reversed_, accepted = memory.store.reversals()
    assert fields_added == 2 and reversed_ == fields_added  # both fields undone within two draws of the task
    # The proposers see it: the task's update history marks the two accepted add_field actions undone.
    updates = memory.updates("cold", before_step=2)
    assert sorted(u.record.op for u in updates if u.undone) == ["add_field", "add_field"]


def test_summary_counts_labels_and_verdicts():
    state = HarnessState.from_tasks(TASKS)
    r = Evolver().step(0, groups(state), state, None, HOOKS)
    s = r.summary()
    labels = [a.label for att in r.attributions for a in att.criteria]
    assert s["criteria"] == len(labels) == 6
    assert s["frac_blind"] == labels.count("blind") / 6
    assert s["accepted"] + s["rejected"] == s["candidates"] == len([e for e in r.log if e.verdict != Verdict.NOOP])
    assert s.get("accepted_guidance_add_field", 0) == sum(a.op == "add_field" for a in r.accepted)
    assert np.isnan(s["acceptance_with_evidence"]) or 0 <= s["acceptance_with_evidence"] <= 1


def test_acceptance_with_and_without_evidence_splits_by_the_evidence_a_candidate_uses():
    cited = Candidate("cold", "guidance", (AddField("cold", "critique", "Nobody said honey.", "cold/c2"),), "blind",
                      ("cold/c2",), ("draw:3",))  # the persistence window only
    used = dataclasses.replace(cited, used_evidence=("donor:9",))
    plan = [(used, Verdict.ACCEPTED), (used, Verdict.REJECTED), (cited, Verdict.ACCEPTED), (cited, Verdict.REJECTED),
            (cited, Verdict.REJECTED), (None, Verdict.NOOP)]
    log = tuple(LogEntry(0, "cold", 0, "guidance", r, "blind", v, "", c) for r, (c, v) in enumerate(plan))
    s = EvolverResult(0, HarnessState.from_tasks(TASKS), (), log, ()).summary()
    assert (s["candidates_with_evidence"], s["acceptance_with_evidence"]) == (2, 0.5)
    assert (s["candidates_without_evidence"], s["acceptance_without_evidence"]) == (3, pytest.approx(1 / 3))
    assert [e.to_dict()["used_evidence"] for e in log[1:3]] == [["donor:9"], []]


def test_draw_fields_make_records_the_memory_accepts(memory):
    state = HarnessState.from_tasks(TASKS)
    gs = groups(state)
    r = Evolver().step(0, gs, state, None, HOOKS)  # no memory: the group alone decides, so honey is blind now
    record_step(memory, 0, state, gs, r)
    back = memory.history("cold")[0]
    assert back.labels == r.attributions[0].labels() and back.task_label == r.attributions[0].task_label
    assert [(a.op, a.verdict) for a in back.actions] == [(x.op, x.verdict) for x in r.draw_fields(0)["actions"]]
    assert isinstance(back, DrawRecord) and back.actions[0].changes  # before/after of the task's harness slice
