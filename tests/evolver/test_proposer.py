"""The proposer: one typed candidate per label and interface, valid under harness.ops, built from the evidence;
graded variants after the critic's feedback; the LLM proposer's output validated into actions or rejected."""

import dataclasses
import json
import math

import numpy as np
import pytest

from evolver_testlib import (BagOfWords, FakeClient, build_context, draw, kw, llm, make_task, regrade_with_rules,
                             repeat_as_history, words_under)
from harnessrl_jax.words import Label
from harnessrl_jax.evolver import (AttributorConfig, Evolver, Group, LLMProposer, LogEntry, Measurement, Rejection,
                                   RuleProposer)
from harnessrl_jax.evolver.rule_proposer import GUIDANCE_SETS, ProposerConfig
from harnessrl_jax.evolver.tightening import REPEAT_PATTERN, tightened_thresholds
from harnessrl_jax.harness import AddField, DownweightTask, HarnessState, apply, ops
from harnessrl_jax.memory import Donor, Example
from harnessrl_jax.rubric import rules
from harnessrl_jax.rubric.reward import rubric_reward
from harnessrl_jax.rubric.schema import Criterion

COLD = [kw("cold/c0", "Recommends rest.", 3, r"\brest"), kw("cold/c1", "Recommends drinking fluids.", 3, "(fluid|water)"),
        kw("cold/c2", "Mentions honey.", 2, "honey"), words_under("cold/c3", 60)]
REF = "Get plenty of rest, drink fluids, and try honey in warm tea with lemon."
PLAIN = ["Rest at home and drink water; soup helps too.", "Rest a lot and drink fluids often, with lemon.",
         "Get rest and keep drinking water through the day.", "Plenty of rest and fluids will help you.",
         "Rest, water and patience: the cold passes in a week.", "You should rest and drink water, maybe tea.",
         "Rest well, and drink enough fluid every hour.", "Drink water and rest as much as you can."]


# The proposer is tested on the labels, not on the windows: blind from one group (a window of 1), saturated only
# once a window of 2 draws is filled (an empty time index by default).
ONE_GROUP_BLIND = AttributorConfig(blind_window=1)


def context(criteria=COLD, responses=PLAIN, reference=None, **kw):
    """A context as the loop builds it: the task without its dataset reference (build.training_tasks drops it)."""
    return build_context(criteria, responses, reference, **{"tid": "cold", "history": (), "config": ONE_GROUP_BLIND,
                                                            **kw})


def honey_met_before(ctx, draw_id=5):
    """A time-index record in which a response met honey under an earlier wording of cold/c2 (so the criterion, as
    worded now, is still blind) and one under the current wording in which nobody did."""
    old = [kw("cold/c2", "Mentions honey or lemon.", 2, "(honey|lemon)") if c.id == "cold/c2" else c
           for c in ctx.criteria]
    met = ["Honey in warm tea and plenty of rest will help."] + list(PLAIN[1:])
    rec = draw(ctx.step - 2, ctx.task_id, old, met, regrade_with_rules(ctx.task, met, old))
    return (dataclasses.replace(rec, draw_id=draw_id),)


def saturating_history(ctx):
    return repeat_as_history(ctx, Label.SATURATED)


def applies(ctx, cand):
    for a in cand.actions:
        assert a.interface == cand.interface and a.task_id == ctx.task_id
    return apply(ctx.state, cand.actions)  # raises InvalidAction if ops reject it


# ---------------------------------------------------------------------------------------------------- guidance

def test_blind_mounts_a_quoted_criterion_and_examples_from_the_tasks_history():
    base = context()
    ctx = context(history=honey_met_before(base))
    assert ctx.attribution.get("cold/c2").label == Label.BLIND
    cand = RuleProposer().propose(ctx, "guidance")
    assert cand.label == Label.BLIND and cand.criterion_ids == ("cold/c2",) and cand.reference_source == "own"
    assert [(a.op, a.field, a.criterion_id) for a in cand.actions] == [
        ("add_field", "criterion", "cold/c2"), ("add_field", "reference", "cold/c2")]
    fields = dict(applies(ctx, cand).fields("cold"))
    # <criterion> quotes the earlier satisfying behaviour (the sentence with the keyword), not the criterion.
    assert fields["criterion"].text == 'An earlier answer that got this right said: "Honey in warm tea and plenty ' \
                                       'of rest will help."'
    # <reference>: that answer, and one of this group that does not meet it. Never the dataset reference.
    ref = fields["reference"].text
    assert "An answer that meets it:\nHoney in warm tea" in ref and f"An answer that does not:\n{PLAIN[0]}" in ref
    assert REF not in ref and REF not in fields["criterion"].text
    assert "draw:5" in cand.evidence_ids and cand.used_evidence == ("draw:5",)  # the quoted record, nothing else
    assert logged(cand).with_evidence


def test_blind_with_no_example_of_its_own_borrows_a_donor_from_the_semantic_index(memory):
    donor_task = make_task("flu", [kw("flu/c0", "Mentions honey.", 2, "honey"), COLD[0]])
    met = ["Honey in warm water soothes a sore throat, and rest helps."] + PLAIN[1:]
    task = make_task("cold", COLD)
    h = HarnessState.from_tasks([task, donor_task])
    S = regrade_with_rules(task, PLAIN, h.criteria("cold"))
    memory.append_step(2, [draw(2, "cold", COLD, PLAIN, S)])  # honey unmet once before: the window of 2 fills
    memory.append_step(3, [draw(3, "flu", donor_task.criteria, met, regrade_with_rules(donor_task, met,
                                                                                         donor_task.criteria))])
    (ctx,) = Evolver().attribute(4, [Group(task, PLAIN, S)], h, memory)
    assert ctx.attribution.get("cold/c2").label == Label.BLIND
    donor = ctx.donors["cold/c2"][0]
    assert (donor.task_id, donor.criterion_id, donor.cosine) == ("flu", "flu/c0", pytest.approx(1.0))
    cand = RuleProposer().propose(ctx, "guidance")
    ref = dict(applies(ctx, cand).fields("cold"))["reference"].text
    assert met[0] in ref and REF not in ref and cand.reference_source == "donor"
    assert f"donor:{donor.row}" in cand.evidence_ids
    # Used: the donor's row only; the step-2 draw that filled the persistence window justified the label.
    window = [e for e in cand.evidence_ids if e.startswith("draw:")]
    assert window and cand.used_evidence == (f"donor:{donor.row}",)
    assert logged(cand).with_evidence and logged(cand).to_dict()["used_evidence"] == [f"donor:{donor.row}"]


def logged(cand, verdict="accepted"):
    """The harness.jsonl entry of a measured candidate."""
    return LogEntry(10, cand.task_id, 0, cand.interface, 0, cand.label, verdict, "", cand)


def test_candidates_that_only_rest_on_their_persistence_window_are_without_evidence():
    # Blind honey, unmet at the earlier draw 7 too: the label cites that draw, but no field quotes any record.
    ctx = context(history=repeat_as_history(context()))
    blind = RuleProposer().propose(ctx, "guidance")
    assert blind.label == Label.BLIND and [a.field for a in blind.actions] == ["criterion", "critique"]
    assert blind.evidence_ids == ("draw:7",) and blind.used_evidence == ()
    entry = logged(blind).to_dict()
    assert entry["evidence_ids"] == ["draw:7"] and entry["used_evidence"] == [] and entry["with_evidence"] is False
    # Saturated: the down-weight cites its window and the previous record's diagnosis; the threshold tightening is
    # computed on this group. Neither is built from a retrieved record.
    down = RuleProposer().propose(ctx, "sampling")
    assert down.actions == (DownweightTask("cold"),) and "draw:7" in down.evidence_ids
    assert down.used_evidence == () and not logged(down).with_evidence
    tighten = [v.make(1.0) for v in RuleProposer().variants(ctx, "rubric") if v.family == "tighten:threshold"]
    assert tighten and all(c.evidence_ids == ("draw:7",) and c.used_evidence == () for c in tighten)


def test_without_any_satisfying_example_the_criterion_and_critique_are_mounted():
    ctx = context()
    cand = RuleProposer().propose(ctx, "guidance")
    assert [a.field for a in cand.actions] == ["criterion", "critique"] and cand.reference_source is None
    fields = dict(applies(ctx, cand).fields("cold"))
    assert fields["criterion"].text == "Mention honey. (for example with the word: honey)"
    assert fields["critique"].text == "None of the 8 answers in the last attempt met this: Mentions honey."


def test_guidance_respects_the_cap():
    task = make_task("cold", COLD, REF)
    state = HarnessState.from_tasks([task], initial_cap=1)
    ctx = context(state=state)
    variants = RuleProposer().variants(ctx, "guidance")
    assert {len(v.make(1.0).actions) for v in variants} == {1}
    assert len(applies(ctx, RuleProposer().propose(ctx, "guidance")).fields("cold")) == 1


def test_a_field_whose_criterion_is_no_longer_blind_is_dropped():
    task = make_task("cold", COLD, REF)
    state = apply(HarnessState.from_tasks([task]), [AddField("cold", "criterion", "Say honey.", "cold/c2"),
                                                    AddField("cold", "reference", REF, "cold/c2")])
    honey = [r + " Honey helps." for r in PLAIN[:5]] + PLAIN[5:]  # 5/8 meet it under guidance
    ctx = context(state=state, responses=honey)
    assert ctx.attribution.get("cold/c2").label == Label.AGREE
    cand = RuleProposer().propose(ctx, "guidance")
    assert [(a.op, a.field) for a in cand.actions] == [("drop_field", "reference"), ("drop_field", "criterion")]
    assert applies(ctx, cand).fields("cold") == ()
    # Too strong a loss: the next variant drops less, the field that gives away least first.
    m = Measurement("rejected", "drop lost reward", "guidance", delta=-20.0, band=(10.2, 28.0), direction="too_strong")
    nxt = RuleProposer().propose(ctx, "guidance", [Rejection(cand, m)])
    assert [(a.op, a.field) for a in nxt.actions] == [("drop_field", "criterion")]


# ---------------------------------------------------------------------------------------------------- sampling

def test_a_saturated_task_is_downweighted_one_level():
    ctx = context()
    ctx = context(history=saturating_history(ctx))
    assert ctx.attribution.task_label == Label.SATURATED
    cand = RuleProposer().propose(ctx, "sampling")
    assert cand.actions == (DownweightTask("cold"),) and "draw:7" in cand.evidence_ids
    assert applies(ctx, cand).sampling.level[0] == 1
    bottom = HarnessState.from_tasks([make_task("cold", COLD, REF)], levels=np.array([3]))
    assert RuleProposer().propose(context(state=bottom, history=ctx.history), "sampling") is None
    assert RuleProposer().propose(context(), "sampling") is None  # not diagnosed saturated (window not filled)


# ------------------------------------------------------------------------------------------------------ rubric

LENGTHY = [" ".join(f"w{i}" for i in range(n)) for n in (10, 14, 18, 22, 26, 30, 34, 38)]


def test_saturated_threshold_rule_is_tightened_so_part_of_the_group_fails():
    crits = [words_under("t/c0", 60), llm("t/c1", "Is accurate.", 2)]  # t/c1 is the anchor
    ctx = context(crits, LENGTHY, None, tid="t", S=[[1] * 8, [1, 0] * 4])
    ctx = context(crits, LENGTHY, None, tid="t", S=[[1] * 8, [1, 0] * 4], history=saturating_history(ctx))
    assert ctx.attribution.get("t/c0").label == Label.SATURATED
    found = tightened_thresholds(ctx.criteria[0], LENGTHY)
    # Independent check of each threshold: the share of responses with at least t words.
    n = np.array([len(r.split()) for r in LENGTHY])
    for kwargs, fail, old, new in found:
        assert old == 60 and new < 60 and fail == pytest.approx(np.mean(n >= new))
    assert [f for _, f, _, _ in found] == sorted(f for _, f, _, _ in found) and len(found) == 3
    cand = RuleProposer().propose(ctx, "rubric")
    (act,) = cand.actions
    assert isinstance(act, ops.RewriteCriterion) and cand.family == "tighten:threshold"
    c = applies(ctx, cand).rubric_of("t")[0]
    t = json.loads(c.to_criterion().tag("rule_kwargs"))["num_words"]
    assert c.text == f"The response is under {t} words." and c.version == 2
    fail = np.mean([not rules.check("length_constraints:number_words", c.to_criterion().rule_kwargs, r)
                    for r in LENGTHY])
    assert fail == 0.5  # the default aims at half of the group


def test_saturated_keyword_criterion_gets_a_required_keyword_from_a_donors_satisfying_example():
    ctx = context()
    donor = Donor(0, "flu", "flu/c0", "Recommends rest.", 1.0,
                  satisfying=(Example(1, 2, 0, "Rest, and warm tea with lemon."),))
    ctx = context(history=saturating_history(ctx), donors={"cold/c0": (donor,)})
    variants = {v.name: v for v in RuleProposer().variants(ctx, "rubric")}
    lemon = variants["tighten cold/c0 with lemon"].make(1.0)
    (act,) = lemon.actions
    # cold/c0 is an anchor (top-weighted half of the seed): its text is frozen, so the tightening is a new criterion.
    assert ctx.criteria[0].anchor and isinstance(act, ops.CreateCriterion)
    assert act.text == 'Recommends rest, and uses the word "lemon".'
    assert json.loads(dict(t.split(":", 1) for t in act.tags)["rule_kwargs"])["keywords"] == [r"\brest", r"\blemon"]
    new = applies(ctx, lemon)
    created = new.rubric_of("cold")[-1]
    s = regrade_with_rules(ctx.task, PLAIN, [created])[0]
    assert s.tolist() == [0, 1, 0, 0, 0, 0, 0, 0]  # only the one response that has both
    assert lemon.used_evidence == ("donor:0",) and logged(lemon).with_evidence  # the donor the word came from
    # Without a donor there is no satisfying example to take a keyword from (the dataset reference is not one).
    plain = context(history=saturating_history(context()))
    assert not [v for v in RuleProposer().variants(plain, "rubric") if v.family == "tighten:keyword"]


def test_a_generic_saturated_criterion_with_nothing_stricter_is_deleted_first():
    closing = kw("cold/c4", "Ends with a kind wish.", 1, "feel better")
    responses = [r + " Take care and feel better soon." for r in PLAIN]
    ctx = context(COLD + [closing], responses)
    ctx = context(COLD + [closing], responses, history=saturating_history(ctx))
    assert ctx.attribution.get("cold/c4").generic
    cand = RuleProposer().propose(ctx, "rubric")
    assert cand.actions == (ops.DeleteCriterion("cold", "cold/c4"),) and cand.family == "delete-generic"
    applies(ctx, cand)


def test_a_generic_saturated_criterion_is_tightened_a_second_time_before_it_is_deleted():
    closing = Criterion("cold/c4", "Wishes the user to feel better at least once.", 1,
                        ("verifier:rule", "rule:keywords:frequency",
                         "rule_kwargs:" + json.dumps({"keyword": "feel better", "frequency": 1, "relation": "at least"})))
    responses = [r + " Take care and feel better soon." + (" And feel better." if j % 2 else "")
                 for j, r in enumerate(PLAIN)]
    ctx = context(COLD + [closing], responses)
    ctx = context(COLD + [closing], responses, history=saturating_history(ctx))
    assert ctx.attribution.get("cold/c4").generic
    cand = RuleProposer().propose(ctx, "rubric")
    assert cand.family == "tighten:threshold" and cand.criterion_ids == ("cold/c4",)
    (act,) = cand.actions
    assert json.loads(act.tags[-1].removeprefix("rule_kwargs:"))["frequency"] == 2  # half the group fails it
    delete = [v for v in RuleProposer().variants(ctx, "rubric") if v.family == "delete-generic"]
    assert len(delete) == 1 and not delete[0].default  # kept for when no stricter version is left


def test_the_sign_test_is_applied_in_advance_only_when_a_critic_measures():
    """A reweight of a criterion every response meets, in a group that meets every criterion, leaves the recorded
    reward at 100: the critic's sign test would reject it, so the proposer withholds it; without a critic (the
    no-critic ablation measures nothing) it is offered."""
    crits = [kw("cold/c0", "Recommends rest.", 3, r"\brest"), kw("cold/c1", "Recommends fluids.", 3, "(fluid|water)")]
    responses = [f"Rest and drink water, day {j}." for j in range(8)]
    ctx = context(crits, responses)
    ctx = context(crits, responses, history=saturating_history(ctx))
    assert set(ctx.attribution.labels().values()) == {Label.SATURATED}
    assert RuleProposer().propose(ctx, "rubric") is None
    cand = RuleProposer(sign_filter=False).propose(ctx, "rubric")
    assert cand is not None and all(isinstance(a, ops.ReweightCriterion) for a in cand.actions)


@pytest.mark.parametrize("embed", [None, BagOfWords().encode])
def test_saturated_near_duplicates_are_merged_and_counted_once(embed):
    dup = [llm("t/c0", "Names glucose as the monomer.", 4), llm("t/c1", "Uses a formal register.", 1),
           llm("t/c2", "Uses a formal register throughout.", 1), llm("t/c3", "Is accurate.", 4)]
    S = [[1, 0] * 4, [1] * 8, [1] * 8, [1, 1, 0, 0] * 2]
    ctx = context(dup, PLAIN, None, tid="t", S=S)
    ctx = context(dup, PLAIN, None, tid="t", S=S, history=saturating_history(ctx))
    variants = {v.name: v for v in RuleProposer(embed=embed).variants(ctx, "rubric")}
    merge = variants["merge t/c1+t/c2"].make(1.0)
    (act,) = merge.actions
    assert act.criterion_ids == ("t/c1", "t/c2") and act.points == 1.0
    assert "t/c2" not in {c.id for c in applies(ctx, merge).rubric_of("t")}


def test_spurious_keyword_stuffing_gets_a_pitfall_that_fires_on_the_degenerate_responses_only():
    stuffed = ["rest rest rest rest", "rest rest rest", PLAIN[2], PLAIN[6],
               "Drink water and hot soup, then sleep early tonight.", "Fluids and a long sleep help, and so does soup.",
               "Water, soup and sleep: the cold passes within a week.", "Sleep well and drink water often today."]
    ctx = context(responses=stuffed)
    assert ctx.attribution.get("cold/c0").label == Label.SPURIOUS
    cand = RuleProposer().propose(ctx, "rubric")
    (act,) = cand.actions
    assert isinstance(act, ops.CreateCriterion) and act.points == -3.0 and cand.family == "pitfall:short"
    new = applies(ctx, cand)
    pit = new.rubric_of("cold")[-1]
    assert regrade_with_rules(ctx.task, stuffed, [pit])[0].tolist() == [1, 1, 0, 0, 0, 0, 0, 0]
    # The recorded group's reward falls only where the keyword was stuffed: a valid fix lowers it (delta_c > 0).
    S_new = np.vstack([ctx.S, regrade_with_rules(ctx.task, stuffed, [pit])])
    r_new = rubric_reward(new.points("cold"), S_new)
    assert np.all(r_new[2:] == ctx.rewards[2:]) and np.all(r_new[:2] < ctx.rewards[:2])


def test_a_pitfall_the_task_already_has_is_not_offered_again():
    stuffed = ["rest rest rest rest", "rest rest rest", PLAIN[2], PLAIN[6],
               "Drink water and hot soup, then sleep early tonight.", "Fluids and a long sleep help, and so does soup.",
               "Water, soup and sleep: the cold passes within a week.", "Sleep well and drink water often today."]
    ctx = context(responses=stuffed)
    first = RuleProposer().propose(ctx, "rubric")
    after = apply(ctx.state, first.actions)
    S = np.vstack([ctx.S, regrade_with_rules(ctx.task, stuffed, [after.rubric_of("cold")[-1]])])
    ctx2 = context(responses=stuffed, state=after, S=S)
    assert ctx2.attribution.get("cold/c0").label == Label.SPURIOUS  # the keyword still passes on the stuffed answers
    assert all(v.family != "pitfall:short" or v.make(1.0) is None for v in RuleProposer().variants(ctx2, "rubric"))


def test_repetition_pitfall_matches_repeated_words():
    assert rules.check("keywords:regex_match", {"pattern": REPEAT_PATTERN}, "rest, rest rest and water")
    assert not rules.check("keywords:regex_match", {"pattern": REPEAT_PATTERN}, "rest and rest and water")


def test_spurious_llm_criterion_is_rewritten_at_the_phrase_the_wording_check_found():
    crits = [llm("t/c0", "Names glucose as the monomer.", 4), llm("t/c1", "Covers all of the user's questions.", 2)]
    responses = [f"Answer {j}: rest and fluids. All requirements have been met." for j in range(4)]
    responses += [f"Answer {j}: rest, fluids, and see a doctor if it lasts." for j in range(4)]
    ctx = context(crits, responses, REF, tid="t", S=[[1, 0] * 4, [1] * 4 + [0] * 4])
    a = ctx.attribution.get("t/c1")
    assert a.label == Label.SPURIOUS and not ctx.criteria[1].anchor
    variants = {v.family: v for v in RuleProposer().variants(ctx, "rubric")}
    (rw,) = variants["rewrite"].make(1.0).actions
    assert rw.criterion_id == "t/c1" and '"Covers all of the user\'s questions"' in rw.text
    (pit,) = variants["pitfall:surface_compliance"].make(1.0).actions
    assert pit.points < 0 and regrade_with_rules(ctx.task, responses, [
        applies(ctx, variants["pitfall:surface_compliance"].make(1.0)).rubric_of("t")[-1]])[0].tolist() == \
        [1] * 4 + [0] * 4
    assert RuleProposer().propose(ctx, "rubric").family == "pitfall:surface_compliance"  # the first default


# ------------------------------------------------------------------------------------------------ the rounds

def _rejected(cand, delta, direction, band=(3.1, 28.0)):
    return Rejection(cand, Measurement("rejected", "x", cand.interface, delta=delta, band=band, direction=direction))


def test_a_pitfall_that_was_too_strong_comes_back_rescaled_into_the_band():
    stuffed = ["rest rest rest rest", "rest rest rest", PLAIN[2], PLAIN[6],
               "Drink water and hot soup, then sleep early tonight.", "Fluids and a long sleep help, and so does soup.",
               "Water, soup and sleep: the cold passes within a week.", "Sleep well and drink water often today."]
    ctx = context(responses=stuffed)
    p = RuleProposer()
    first = p.propose(ctx, "rubric")
    second = p.propose(ctx, "rubric", [_rejected(first, 56.0, "too_strong")])
    scale = math.sqrt(3.1 * 28.0) / 56.0  # the band's log-midpoint over the measured delta: 0.166
    # The rescale is capped (ProposerConfig.max_rescale = 2): a pitfall's effect is linear in its points, so an
    # unbounded rescale would always land in the band and the band would test nothing.
    assert second.family == first.family and second.scale == pytest.approx(0.5)
    assert second.actions[0].points == pytest.approx(first.actions[0].points * 0.5)
    # Rejected again as too strong, and already at the cap: the proposer moves on instead of shrinking further.
    third = p.propose(ctx, "rubric", [_rejected(first, 56.0, "too_strong"), _rejected(second, 28.5, "too_strong")])
    assert third is None or third.family != first.family
    # With the cap lifted the rescaled pitfall lands mid-band in one step.
    free = RuleProposer(ProposerConfig(max_rescale=1e9)).propose(ctx, "rubric", [_rejected(first, 56.0, "too_strong")])
    assert free.scale == pytest.approx(scale)


def test_guidance_too_weak_steps_up_too_strong_steps_down_and_nothing_repeats():
    ctx = context(history=honey_met_before(context()))  # an earlier example: <reference> sets exist
    p = RuleProposer()
    first = p.propose(ctx, "guidance")
    strength = {s: k for k, s in enumerate(GUIDANCE_SETS)}

    def fields(c):
        return tuple(sorted(a.field for a in c.actions))
    up = p.propose(ctx, "guidance", [_rejected(first, 4.0, "too_weak", (10.2, 28.0))])
    assert strength[tuple(f for f in ("criterion", "reference", "critique") if f in fields(up))] > \
        strength[("criterion", "reference")]
    down = p.propose(ctx, "guidance", [_rejected(first, 40.0, "too_strong", (10.2, 28.0))])
    assert fields(down) == ("critique", "reference")  # the next weaker set (3.5 + 1 < 2 + 3.5)
    seen, fb = {first.variant}, [_rejected(first, -1.0, "too_weak", (10.2, 28.0))]
    while (c := p.propose(ctx, "guidance", fb)) is not None:
        assert c.variant not in seen
        seen.add(c.variant)
        fb.append(_rejected(c, -1.0, None))
    assert len(seen) == len(GUIDANCE_SETS)  # every set tried once, then nothing left: noop


def test_after_a_rejection_for_another_reason_the_proposer_turns_to_another_family():
    crits = [llm("t/c0", "Names glucose as the monomer.", 4), llm("t/c1", "Covers all of the user's questions.", 2)]
    responses = [f"Answer {j}: rest and fluids. All requirements have been met." for j in range(4)]
    responses += [f"Answer {j}: rest, fluids, and see a doctor if it lasts." for j in range(4)]
    ctx = context(crits, responses, REF, tid="t", S=[[1, 0] * 4, [1] * 4 + [0] * 4])
    p = RuleProposer()
    first = p.propose(ctx, "rubric")
    other = p.propose(ctx, "rubric", [Rejection(first, Measurement("rejected", "does not vary", "rubric"))])
    assert (first.family, other.family) == ("pitfall:surface_compliance", "rewrite")


# ------------------------------------------------------------------------------------------- the LLM proposer

def _llm(actions, rationale="fix it"):
    return json.dumps({"rationale": rationale, "actions": actions})


def test_llm_proposer_output_is_validated_into_typed_actions():
    ctx = context()
    client = FakeClient("```json\n" + _llm([{"op": "add_field", "field": "critique", "text": "Nobody said honey.",
                                              "criterion_id": "cold/c2"}]) + "\n```")
    cand = LLMProposer(client).propose(ctx, "guidance")
    assert cand.source == "llm" and cand.invalid is None and cand.label == Label.BLIND
    assert cand.actions == (AddField("cold", "critique", "Nobody said honey.", "cold/c2"),)
    assert cand.rationale == "fix it" and "cold/c2" in cand.criterion_ids
    prompt = client.prompts[0]
    assert "Mentions honey." in prompt and "add_field" in prompt
    assert REF not in prompt  # the dataset reference never reaches the evolver model
    # The schema lets a grammar-constrained server name only this interface's operations.
    assert client.schemas[0]["properties"]["actions"]["items"]["properties"]["op"]["enum"] == ["add_field",
                                                                                               "drop_field"]
    assert "{" + "evidence}" not in prompt and "(first round)" in prompt


@pytest.mark.parametrize("actions, why", [
    ([{"op": "rewrite_criterion", "criterion_id": "cold/c0", "text": "Recommends bed rest."}], "anchor"),
    ([{"op": "teleport", "criterion_id": "cold/c0"}], "unknown action op"),
    ([{"op": "delete_criterion", "criterion_id": "cold/c9"}], "unknown criterion"),
    ([{"op": "add_field", "field": "criterion", "text": "x"}], "is a guidance action"),
    ([{"op": "reweight_criterion", "criterion_id": "cold/c2", "points": -2}], "flips its sign"),
])
def test_invalid_llm_output_comes_back_with_the_reason(actions, why):
    ctx = context()
    ctx = context(history=saturating_history(ctx))
    cand = LLMProposer(FakeClient(_llm(actions))).propose(ctx, "rubric")
    assert cand.invalid is not None and why in cand.invalid


def test_llm_proposer_noop_unreadable_output_feedback_and_sampling_fallback():
    ctx = context()
    assert ctx.attribution.task_label is None and not ctx.attribution.with_label(Label.SATURATED)
    assert LLMProposer(FakeClient(_llm([]))).propose(ctx, "guidance") is None
    bad = LLMProposer(FakeClient("I would add a field.")).propose(ctx, "guidance")
    assert "no JSON object" in bad.invalid
    assert LLMProposer(FakeClient("not asked")).propose(ctx, "rubric") is None  # nothing routed to the rubric
    client = FakeClient(_llm([{"op": "add_field", "field": "criterion", "text": "Say honey.",
                               "criterion_id": "cold/c2"}]))
    first = LLMProposer(client).propose(ctx, "guidance")
    m = Measurement("rejected", "delta_g = 3.2 < 10.2: within null fluctuation", "guidance", delta=3.2,
                    band=(10.2, 28.0), direction="too_weak")
    LLMProposer(client).propose(ctx, "guidance", [Rejection(first, m)])
    assert "within null fluctuation" in client.prompts[-1] and "Say honey." in client.prompts[-1]
    sat = context(history=saturating_history(ctx))
    down = LLMProposer(FakeClient("not asked")).propose(sat, "sampling")
    assert down.actions == (DownweightTask("cold"),) and down.source == "rule"


DONOR_ANSWER = "Honey in warm water soothes a sore throat, and rest helps you sleep at night."


def test_llm_proposer_tags_a_reference_by_the_shown_record_it_quotes():
    donor = Donor(4, "flu", "flu/c0", "Mentions honey.", 0.9, satisfying=(Example(11, 3, 0, DONOR_ANSWER),))
    ctx = context(history=honey_met_before(context()), donors={"cold/c2": (donor,)})
    assert ctx.attribution.get("cold/c2").label == Label.BLIND

    def propose(field, text):
        client = FakeClient(_llm([{"op": "add_field", "field": field, "text": text, "criterion_id": "cold/c2"}]))
        return LLMProposer(client).propose(ctx, "guidance"), client.prompts[0]

    # The model is shown the task's earlier satisfying answer (time index) and the donor's example.
    cand, prompt = propose("reference", "An answer that meets it: honey in WARM water soothes a sore throat, and "
                                        "rest helps.\nOne that does not: " + PLAIN[0])
    assert "(draw:5): Honey in warm tea and plenty of rest will help." in prompt and DONOR_ANSWER in prompt
    assert cand.reference_source == "donor" and cand.used_evidence == ("donor:4",) and logged(cand).with_evidence
    own, _ = propose("reference", "Like this earlier answer: honey in warm tea and plenty of rest will help.")
    assert own.reference_source == "own" and own.used_evidence == ("draw:5",)
    # Its own words: a mounted reference from no record; the persistence window is still its evidence_ids.
    plain, _ = propose("reference", "Mention honey, for example honey in tea, and say why it helps.")
    assert plain.reference_source is None and plain.used_evidence == () and not logged(plain).with_evidence
    assert plain.evidence_ids == ctx.attribution.get("cold/c2").evidence.ids()
    # A <criterion> quoting the donor uses it too, but is no <reference>.
    crit, _ = propose("criterion", "Say something like: honey in warm water soothes a sore throat.")
    assert crit.used_evidence == ("donor:4",) and crit.reference_source is None


# ------------------------------------------------------------------------------ field texts, split, replace, history

@pytest.mark.parametrize("text, pitfall, want", [
    ("Recommends rest.", False, "Recommend rest."),
    ("The response mentions honey or lemon.", False, "Mention honey or lemon."),
    ("The answer applies the formula correctly.", False, "Apply the formula correctly."),
    ("Addresses the user by name.", False, "Address the user by name."),
    ("The response should cite a source.", False, "Cite a source."),
    ("Is under 60 words.", False, "Be under 60 words."),
    ("Claims that cellulose dissolves in water.", True, "Do not claim that cellulose dissolves in water."),
    ("Stays on topic.", False, "Stay on topic."),
    ("Accuracy of the dosage.", False, None),  # no third-person verb to turn: no rewording
])
def test_a_criterion_is_reworded_as_an_instruction_not_repeated(text, pitfall, want):
    from harnessrl_jax.evolver.fields import second_person

    assert second_person(text, pitfall) == want


def test_the_criterion_field_quotes_the_satisfying_sentence_of_an_earlier_answer():
    from harnessrl_jax.evolver.fields import Example, criterion_field

    c = kw("cold/c2", "Mentions honey.", 2, r"\bhoney")
    earlier = Example("Rest well. A spoon of honey in tea calms the throat. Drink water.", "own", "draw:3")
    assert criterion_field(c.text, c.points, c, earlier) == \
        'An earlier answer that got this right said: "A spoon of honey in tea calms the throat."'
    assert criterion_field(c.text, c.points, c, None) == "Mention honey. (for example with the word: honey)"
    assert criterion_field("Tone.", 1.0) == "Your answer should satisfy this: Tone."  # no verb: said as a target


@pytest.mark.parametrize("text, parts", [
    ("Names the reaction and gives its product.", ["Names the reaction.", "Gives its product."]),
    ("The response explains the cause; the response gives a remedy.",
     ["The response explains the cause.", "The response gives a remedy."]),
    ("Explains the cause, names the remedy and warns about aspirin.",
     ["Explains the cause.", "Names the remedy.", "Warns about aspirin."]),
    ("Recommends rest, fluids and honey.", None),  # a noun list shares one verb: not three checks
    ("Is accurate.", None),
])
def test_a_compound_criterion_splits_into_its_parts(text, parts):
    from harnessrl_jax.evolver.tightening import split_parts

    assert split_parts(text) == parts


def test_a_spurious_llm_criterion_can_be_split_or_replaced_by_a_stricter_new_one():
    crits = [llm("t/c0", "Names glucose as the monomer.", 4),
             llm("t/c1", "Explains the cause and gives a remedy.", 2), llm("t/c2", "Is accurate.", 2)]
    responses = [f"Answer {j}: rest and fluids. All requirements have been met." for j in range(4)]
    responses += [f"Answer {j}: rest, fluids, and see a doctor if it lasts." for j in range(4)]
    state = HarnessState.from_tasks([make_task("t", crits)], anchors={"t": ["t/c0"]})
    ctx = context(crits, responses, None, tid="t", S=[[1] * 8, [1] * 4 + [0] * 4, [1, 0] * 4], state=state)
    assert ctx.attribution.get("t/c1").label == Label.SPURIOUS
    variants = {v.name: v for v in RuleProposer().variants(ctx, "rubric")}
    split = variants["split t/c1"].make(1.0)
    (act,) = split.actions
    assert isinstance(act, ops.SplitCriterion) and act.texts == ("Explains the cause.", "Gives a remedy.")
    new = applies(ctx, split).rubric_of("t")
    assert [c.parent_ids for c in new if c.parent_ids] == [("t/c1",), ("t/c1",)]
    replace = variants["replace t/c1"].make(1.0)
    assert [type(a).__name__ for a in replace.actions] == ["DeleteCriterion", "CreateCriterion"]
    after = applies(ctx, replace).rubric_of("t")
    assert "t/c1" not in [c.id for c in after] and "Only substantive fulfilment counts" in after[-1].text


def test_an_update_accepted_and_later_undone_is_not_proposed_again():
    from harnessrl_jax.memory import ActionRecord, Update

    ctx = context()
    first = RuleProposer().propose(ctx, "guidance")
    undone = ActionRecord("guidance", "add_field", "accepted", changes=ctx.changes(first.actions))
    again = context(updates=(Update(3, undone, undone=True),))
    nxt = RuleProposer().propose(again, "guidance")
    assert nxt is not None and nxt.variant != first.variant  # the same fields are not mounted again
    kept = context(updates=(Update(3, undone, undone=False),))  # accepted and never undone: no objection
    assert RuleProposer().propose(kept, "guidance").variant == first.variant


def test_the_dataset_reference_is_a_positive_only_when_the_run_opts_in():
    # build.training_tasks keeps a task's reference only under config.harness.use_dataset_reference.
    cand = RuleProposer().propose(context(reference=REF), "guidance")
    assert cand.reference_source == "dataset" and "task:reference" in cand.evidence_ids
    assert cand.used_evidence == ()  # the dataset's reference is not retrieved from the memory
    assert REF in [a.text for a in cand.actions if a.field == "reference"][0]
    assert RuleProposer().propose(context(), "guidance").reference_source is None
