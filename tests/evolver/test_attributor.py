"""The attributor's three questions on hand-built groups: reach (blind vs agree by the time index, read from the real
memory store), stage (the saturation window, the task diagnosis, generic content), hacking (length gaming, keyword
stuffing, compliance claims, isolation, the LLM check) and the wording check."""

import dataclasses
import json
import math

import numpy as np
import pytest

from evolver_testlib import FakeClient, draw, kw, llm, make_task, regrade_with_rules, words_under
from harnessrl_jax.words import Label
from harnessrl_jax.evolver import (AttributorConfig, Evolver, Group,
                                   LLMHackingCheck, attribute, wording_check)
from harnessrl_jax.harness import HarnessState
from harnessrl_jax.evolver.attributor import _rate
from harnessrl_jax.rubric.reward import discriminative_mass, satisfied

COLD = [kw("cold/c0", "Recommends rest.", 3, r"\brest"), kw("cold/c1", "Recommends drinking fluids.", 3, "(fluid|water)"),
        kw("cold/c2", "Mentions honey.", 2, "honey"), words_under("cold/c3", 60)]
REF = "Get plenty of rest, drink fluids, and try honey in warm tea."
PLAIN = ["Rest at home and drink water; soup helps too.", "Rest a lot and drink fluids often.",
         "Get rest and keep drinking water through the day.", "Plenty of rest and fluids will help.",
         "Rest, water and patience: the cold passes in a week.", "You should rest and drink water.",
         "Rest well, and drink enough fluid every hour.", "Drink water and rest as much as you can."]


def setup(criteria=COLD, responses=PLAIN, reference=REF, tid="cold"):
    task = make_task(tid, criteria, reference)
    h = HarnessState.from_tasks([task])
    crits = h.rubric_of(tid)
    return task, crits, regrade_with_rules(task, responses, [c.to_criterion() for c in crits])


def labels(att):
    return att.labels()


# ------------------------------------------------------------------------------------------------------- reach

def test_unmet_now_and_never_met_in_the_time_index_is_blind(memory):
    task, crits, S = setup()
    for step in (0, 1):  # two earlier draws, honey unmet in both
        memory.append_step(step, [draw(step, "cold", crits, PLAIN, S)])
    history = memory.history("cold", before_step=2)
    att = attribute(task, crits, S, PLAIN, history=history)
    a = att.get("cold/c2")
    assert a.label == Label.BLIND and a.question == "reach"
    assert a.evidence.pass_rate == 0.0 and a.evidence.history_pass_rates == (0.0, 0.0)
    assert a.evidence.draw_ids == tuple(r.draw_id for r in history)  # both records, newest first
    assert a.evidence.ids() == tuple(f"draw:{r.draw_id}" for r in history)


def test_unmet_now_but_met_before_is_agree_single_step_noise(memory):
    task, crits, S = setup()
    earlier = list(PLAIN)
    earlier[3] = "Rest, fluids and a spoon of honey."
    memory.append_step(4, [draw(4, "cold", crits, earlier, regrade_with_rules(task, earlier, crits))])
    memory.append_step(5, [draw(5, "cold", crits, PLAIN, S)])
    history = memory.history("cold", before_step=6)
    a = attribute(task, crits, S, PLAIN, history=history).get("cold/c2")
    assert a.label == Label.AGREE and a.question == "reach" and "noise" in a.reason
    assert a.evidence.draw_ids == (history[1].draw_id,)  # the draw at step 4 that met it
    assert a.evidence.history_pass_rates == (0.0, 1 / 8)


def test_met_only_under_an_earlier_wording_is_still_blind(memory):
    task, crits, S = setup()
    old = [kw("cold/c2", "Mentions honey or lemon.", 2, "(honey|lemon)") if c.id == "cold/c2" else c for c in crits]
    lemon = [r + " Lemon helps." for r in PLAIN]
    memory.append_step(0, [draw(0, "cold", old, lemon, regrade_with_rules(task, lemon, old))])
    assert memory.store.ever_met("cold", "cold/c2")  # met under the old wording...
    a = attribute(task, crits, S, PLAIN, history=memory.history("cold", before_step=1),
                  config=AttributorConfig(blind_window=1)).get("cold/c2")
    assert a.label == Label.BLIND  # ...but the property asked now was never reached


def test_a_pitfall_every_rollout_commits_is_blind_and_never_hacking():
    pit = kw("t/c1", "Claims that cellulose dissolves in water.", -2, "dissolves")
    task, crits, S = setup([kw("t/c0", "Names glucose.", 4, "glucose"), pit],
                           [f"Cellulose dissolves in water; glucose unit {j}." for j in range(8)], None, "t")
    att = attribute(task, crits, S, [f"Cellulose dissolves in water; glucose unit {j}." for j in range(8)])
    assert att.get("t/c1").label == Label.BLIND and att.get("t/c1").evidence.pass_rate == 0.0


# ------------------------------------------------------------------------------------------------------- stage

def test_saturated_needs_every_rollout_over_the_whole_window(memory):
    task, crits, S = setup()
    # c0 (rest) and c3 (length) are met 8/8 now. With no earlier draw the window of 2 is not filled: agree.
    att = attribute(task, crits, S, PLAIN, history=())
    assert att.get("cold/c0").label == Label.AGREE and "window" in att.get("cold/c0").reason
    memory.append_step(0, [draw(0, "cold", crits, PLAIN, S)])
    hist = memory.history("cold", before_step=1)
    att = attribute(task, crits, S, PLAIN, history=hist)
    assert att.get("cold/c0").label == Label.SATURATED and att.get("cold/c0").evidence.draw_ids == (hist[0].draw_id,)
    # A window of 3 needs two earlier draws at 8/8.
    assert attribute(task, crits, S, PLAIN, history=hist,
                     config=AttributorConfig(saturation_window=3)).get("cold/c0").label == Label.AGREE


def test_one_miss_in_the_window_breaks_saturation(memory):
    task, crits, S = setup()
    earlier = list(PLAIN)
    earlier[0] = "Drink water, it is the best thing you can do."  # no rest
    memory.append_step(0, [draw(0, "cold", crits, earlier, regrade_with_rules(task, earlier, crits))])
    a = attribute(task, crits, S, PLAIN, history=memory.history("cold", before_step=1)).get("cold/c0")
    assert a.label == Label.AGREE and a.evidence.history_pass_rates == (7 / 8,)


def test_task_is_saturated_when_saturated_criteria_pull_its_mass_below_the_threshold(memory):
    task, crits, S = setup()
    memory.append_step(0, [draw(0, "cold", crits, PLAIN, S)])
    hist = memory.history("cold", before_step=1)
    att = attribute(task, crits, S, PLAIN, history=hist)
    # c0, c1, c3 saturated, c2 blind: nothing splits the group.
    assert [a.label for a in att.criteria] == [Label.SATURATED, Label.SATURATED, Label.BLIND, Label.SATURATED]
    assert att.mass == discriminative_mass(np.array([3, 3, 2, 1.0]), S) == 0.0
    assert att.task_label == Label.SATURATED and "3 saturated" in att.task_reason
    # More blind than saturated criteria: the task is not mastered, it is out of reach; no down-weight.
    task2, crits2, S2 = setup([COLD[0], kw("cold/c1", "Mentions lemon.", 1, "lemon"), COLD[2]])
    memory.append_step(1, [draw(1, "cold2", crits2, PLAIN, S2)])
    att2 = attribute(task2, crits2, S2, PLAIN, history=memory.history("cold2", before_step=2))
    assert [a.label for a in att2.criteria] == [Label.SATURATED, Label.BLIND, Label.BLIND] and att2.task_label is None


def test_a_task_whose_criteria_still_split_the_group_is_not_saturated(memory):
    responses = PLAIN[:4] + [r + " Honey too." for r in PLAIN[4:]]
    task, crits, S = setup(responses=responses)
    memory.append_step(0, [draw(0, "cold", crits, responses, S)])
    att = attribute(task, crits, S, responses, history=memory.history("cold", before_step=1),
                    config=AttributorConfig(task_mass_threshold=0.25))
    assert att.mass == 0.25 and att.task_label is None  # mass 1/4 is not below 0.25
    att = attribute(task, crits, S, responses, history=memory.history("cold", before_step=1))
    assert att.task_label == Label.SATURATED  # below the default 0.5


def test_generic_saturation_is_decided_from_the_responses_not_the_wording(memory):
    """A criterion every response meets through a sentence most of them share (a polite closing) is generic; one
    whose wording sounds generic but that no shared sentence carries is not, and neither is one met in each
    response's own words."""
    closing = kw("cold/c4", "Ends with a kind wish.", 1, "feel better")
    crits_all = COLD + [closing, llm("cold/c5", "Uses a warm, friendly tone."),
                        llm("cold/c6", "Wishes the user to feel better.")]
    responses = [r + " Take care and feel better soon." for r in PLAIN]
    task, crits, S = setup(crits_all, responses)
    S[5] = S[6] = 1.0  # the LLM-judged criteria: met by all
    memory.append_step(0, [draw(0, "cold", crits, responses, S)])
    att = attribute(task, crits, S, responses, history=memory.history("cold", before_step=1))
    c4, c5, c6, c0 = (att.get(f"cold/c{k}") for k in (4, 5, 6, 0))
    assert c4.label == Label.SATURATED and c4.generic and c4.evidence.phrase == "take care and feel better soon"
    assert c6.label == Label.SATURATED and c6.generic and c6.evidence.phrase == "take care and feel better soon"
    assert c5.label == Label.SATURATED and not c5.generic  # "friendly tone" wording, but nothing shared carries it
    assert c0.label == Label.SATURATED and not c0.generic  # "rest" sits in each response's own advice
    # Without the shared closing the same wish, said in each response's own words, is not generic.
    own = [r + f" I hope you feel better by day {j}." for j, r in enumerate(PLAIN)]
    task, crits, S = setup(crits_all, own)
    S[5] = S[6] = 1.0
    memory.append_step(1, [draw(1, "cold", crits, own, S)])
    att = attribute(task, crits, S, own, history=memory.history("cold", before_step=2))
    assert att.get("cold/c4").label == Label.SATURATED and not att.get("cold/c4").generic


# ----------------------------------------------------------------------------------------------------- hacking

def _long(j, n=60):
    return " ".join(f"w{j}x{i}" for i in range(n)) + " mechanism."


def _short(j):
    return f"It works because cellulose fibres bind together tightly, case {j}."


def _met_before(crits, positive, k=0, step=3):
    """A time-index record in which `positive` met criterion k (the others not judged)."""
    S = np.full((len(crits), 1), np.nan)
    S[k] = 1.0
    return (dataclasses.replace(draw(step, "t", crits, [positive], S), draw_id=11),)


def test_length_gaming_when_only_the_satisfying_side_is_long_and_positives_are_not():
    crits_in = [llm("t/c0", "Explains the mechanism in depth.", 3), llm("t/c1", "Is accurate.", 2)]
    responses = [_long(j) for j in range(4)] + [_short(j) for j in range(4)]
    task, crits, _ = setup(crits_in, responses, None, "t")
    S = np.array([[1, 1, 1, 1, 0, 0, 0, 0], [1, 0, 1, 0, 1, 0, 1, 0]], float)
    # An earlier response of the task met it in a dozen words: the property does not need length.
    history = _met_before(crits, "Cellulose fibres bind by hydrogen bonds into a mesh of strong sheets.")
    a = attribute(task, crits, S, responses, history=history).get("t/c0")
    assert a.label == Label.SPURIOUS and a.question == "hacking" and a.evidence.draw_ids == (11,)
    sig = a.evidence.signals["length_gaming"]
    assert sig["direction"] == "longer" and sig["auc"] == 1.0
    assert sig["satisfying_median_words"] > 1.5 * sig["positives_median_words"]
    # The same split, but the earlier satisfying response is as long as the satisfying side: length is the
    # property, not a game.
    assert attribute(task, crits, S, responses, history=_met_before(crits, _long(99))).get("t/c0").label == \
        Label.AGREE


def test_a_dataset_reference_is_never_evidence():
    """The task's dataset reference describes the corpus only: a long one changes no label and no signal."""
    crits_in = [llm("t/c0", "Explains the mechanism in depth.", 3), llm("t/c1", "Is accurate.", 2)]
    responses = [_long(j) for j in range(4)] + [_short(j) for j in range(4)]
    S = np.array([[1, 1, 1, 1, 0, 0, 0, 0], [1, 0, 1, 0, 1, 0, 1, 0]], float)
    plain = attribute(make_task("t", crits_in), crits_in, S, responses)
    with_ref = attribute(make_task("t", crits_in, _long(99)), crits_in, S, responses)
    assert with_ref.to_dict() == plain.to_dict()


STUFFED = ["rest rest rest rest", "rest rest rest", PLAIN[2], PLAIN[6],
           "Drink water and hot soup, then sleep early tonight.", "Fluids and a long sleep help, and so does soup.",
           "Water, soup and sleep: the cold passes within a week.", "Sleep well and drink water often through the day."]


def test_length_is_judged_against_positives_retrieved_from_the_semantic_index(memory):
    crits_in = [llm("t/c0", "Explains the mechanism in depth.", 3), llm("t/c1", "Is accurate.", 2)]
    responses = [_long(j) for j in range(4)] + [_short(j) for j in range(4)]
    S = np.array([[1, 1, 1, 1, 0, 0, 0, 0], [1, 0, 1, 0, 1, 0, 1, 0]], float)
    task = make_task("t", crits_in, None)
    h = HarnessState.from_tasks([task, make_task("d", [llm("d/c0", "Explains the mechanism in depth.")])])
    (ctx,) = Evolver().attribute(3, [Group(task, responses, S)], h, memory)
    assert ctx.attribution.get("t/c0").label == Label.SPURIOUS  # no positive anywhere: the long side looks gamed
    # Another task's response that met the same criterion is just as long: length is part of the property.
    donor = [_long(50 + j) for j in range(8)]
    memory.append_step(3, [draw(3, "d", h.rubric_of("d"), donor, [[1, 0] * 4])])
    (ctx,) = Evolver().attribute(4, [Group(task, responses, S)], h, memory)
    a = ctx.attribution.get("t/c0")
    assert a.label == Label.AGREE and [d.task_id for d in ctx.donors["t/c0"]] == ["d"]
    # A short donor positive confirms the flag, and the evidence names the donor row it was judged against.
    short = [_short(50 + j) for j in range(8)]
    memory.append_step(5, [draw(5, "e", [llm("e/c0", "Explains the mechanism in depth.")], short, [[1] * 8])])
    memory.append_step(6, [draw(6, "d", h.rubric_of("d"), short, [[1] * 8])])
    (ctx,) = Evolver().attribute(7, [Group(task, responses, S)], h, memory)
    a = ctx.attribution.get("t/c0")
    assert a.label == Label.SPURIOUS and a.evidence.donor_rows
    assert set(a.evidence.donor_rows) <= {d.row for d in ctx.donors["t/c0"]}


def test_keyword_stuffing_degenerate_responses_meet_the_keyword():
    responses = STUFFED
    task, crits, S = setup(responses=responses)
    a = attribute(task, crits, S, responses).get("cold/c0")
    assert list(S[0]) == [1, 1, 1, 1, 0, 0, 0, 0]
    assert a.label == Label.SPURIOUS
    stuffing = a.evidence.signals["keyword_stuffing"]
    assert stuffing["responses"] == [0, 1] and stuffing["degenerate_failing"] == 0.0
    assert stuffing["kinds"] == ["very short"] and stuffing["degenerate_satisfying"] == 0.5
    assert a.evidence.phrase == "rest"  # the wording check: the keyword is what lets surface form pass


def test_a_pitfall_that_splits_the_group_is_asked_the_hacking_question_on_its_avoiding_side():
    """A pitfall is satisfied by the responses that avoid it: when only degenerate answers avoid it (they say too
    little to commit anything), the reward favours them through surface form and the pitfall is spurious."""
    pitfall = kw("cold/p0", "Recommends a specific drug.", -2, "ibuprofen")
    sound = [f"Rest, drink fluids, and take ibuprofen for the aches on day {j}." for j in range(4)]
    degenerate = ["ok", "rest", "fine", "yes"]
    task, crits, S = setup(COLD + [pitfall], sound + degenerate)
    assert list(S[-1]) == [1, 1, 1, 1, 0, 0, 0, 0]  # the sound answers commit it, the degenerate ones avoid it
    a = attribute(task, crits, S, sound + degenerate).get("cold/p0")
    assert a.label == Label.SPURIOUS and a.question == "hacking"
    assert a.evidence.satisfying == (4, 5, 6, 7) and "keyword_stuffing" in a.evidence.signals
    # a pitfall that splits the group with sound answers on both sides still agrees
    fine = sound + [f"Rest, drink fluids, and see a doctor if it lasts past day {j}." for j in range(4)]
    task, crits, S = setup(COLD + [pitfall], fine)
    assert attribute(task, crits, S, fine).get("cold/p0").label == Label.AGREE


def test_compliance_claims_shared_by_the_satisfying_side_are_surface_compliance():
    crits_in = [llm("t/c0", "Covers all of the user's questions.", 3), llm("t/c1", "Is accurate.", 2)]
    responses = [f"Answer {j}: rest and fluids. All requirements have been met." for j in range(4)]
    responses += [f"Answer {j}: rest, fluids, and see a doctor if it lasts." for j in range(4)]
    task, crits, _ = setup(crits_in, responses, REF, "t")
    S = np.array([[1] * 4 + [0] * 4, [1, 0] * 4], float)
    a = attribute(task, crits, S, responses).get("t/c0")
    assert a.label == Label.SPURIOUS
    assert a.evidence.signals["surface_compliance"]["phrase"] == "All requirements have been met"
    assert a.evidence.phrase == "Covers all of the user's questions"


def test_flattery_shared_by_the_satisfying_side_is_sycophantic_refusal_with_its_phrase():
    crits_in = [llm("t/c0", "Covers all of the user's questions.", 3), llm("t/c1", "Is accurate.", 2)]
    responses = [f"You are absolutely right to ask. Answer {j}: rest and fluids." for j in range(4)]
    responses += [f"Answer {j}: rest, fluids, and see a doctor if it lasts." for j in range(4)]
    task, crits, _ = setup(crits_in, responses, REF, "t")
    S = np.array([[1] * 4 + [0] * 4, [1, 0] * 4], float)
    for _ in range(2):  # the second time from the per-response cache
        a = attribute(task, crits, S, responses).get("t/c0")
        assert a.label == Label.SPURIOUS
        assert a.evidence.signals["sycophantic_refusal"]["phrase"] == "You are absolutely right"
        assert "surface_compliance" not in a.evidence.signals


def test_isolated_compliance_met_while_the_other_criteria_and_quality_proxies_fail():
    good = ["Rest, drink fluids and take honey in tea; that clears it up.",
            "Plenty of rest, water and honey with lemon will help you."] * 2
    odd = ["A cold is a storm that passes through the house of the body.",
           "Your nose is a river in spring, it will settle."] * 2
    responses = odd + good
    task, crits, S = setup([kw("t/c0", "Uses a metaphor.", 2, "(storm|river)")] + COLD[:3], responses, None, "t")
    a = attribute(task, crits, S, responses).get("t/c0")
    assert list(S[0]) == [1] * 4 + [0] * 4
    sig = a.evidence.signals["isolated"]
    assert a.label == Label.SPURIOUS and sig["other_reward_satisfying"] == 0.0 and sig["other_reward_failing"] == 100.0
    assert sig["quality_proxy_satisfying"] == sig["quality_proxy_failing"] == 1.0  # no positive: soundness only
    # An earlier satisfying response that also covers the task (rest, fluids, honey) makes the proxy tell them apart.
    history = _met_before(crits, "Rest and fluids; honey calms the storm in your throat.")
    sig = attribute(task, crits, S, responses, history=history).get("t/c0").evidence.signals["isolated"]
    assert sig["quality_proxy_satisfying"] < sig["quality_proxy_failing"]


def test_a_criterion_that_splits_the_group_with_no_surface_feature_is_agree():
    responses = PLAIN[:4] + [r + " Honey in tea soothes the throat." for r in PLAIN[4:]]
    task, crits, S = setup(responses=responses)
    a = attribute(task, crits, S, responses).get("cold/c2")
    assert a.label == Label.AGREE and a.question == "hacking" and a.evidence.signals == {}
    assert a.evidence.satisfying == (4, 5, 6, 7) and a.evidence.failing == (0, 1, 2, 3)


def test_length_rules_are_never_length_gaming():
    responses = [_long(j) for j in range(4)] + [_short(j) for j in range(4)]
    task, crits, S = setup([words_under("t/c0", 30), llm("t/c1", "Is accurate.")], responses, None, "t")
    S[1] = [1, 0] * 4
    assert attribute(task, crits, S, responses).get("t/c0").label == Label.AGREE


# ----------------------------------------------------------------------------------------------- the LLM check

def _answer(spurious, pattern="partial_coverage", phrase="Explains"):
    return json.dumps({"explanation": "the meeting side names the parts without explaining them",
                       "pattern": pattern, "phrase": phrase, "spurious": spurious})


def test_llm_check_through_the_judge_protocol_finds_what_the_cpu_cannot():
    crits_in = [llm("t/c0", "Explains both the cause and the cure.", 3), llm("t/c1", "Is accurate.", 2)]
    responses = [f"Cause and cure, case {j}: a virus; rest." for j in range(8)]
    task, crits, _ = setup(crits_in, responses, REF, "t")
    S = np.array([[1] * 4 + [0] * 4, [1, 0] * 4], float)
    assert attribute(task, crits, S, responses).get("t/c0").label == Label.AGREE  # nothing on the surface
    client = FakeClient(_answer(True), _answer(False))
    att = attribute(task, crits, S, responses, llm_check=LLMHackingCheck(client))
    a = att.get("t/c0")
    assert a.label == Label.SPURIOUS and a.evidence.phrase == "Explains"
    assert a.evidence.signals["llm"]["pattern"] == "partial_coverage"
    prompt = client.prompts[0]
    assert "Explains both the cause and the cure" in prompt and "{" + "satisfying}" not in prompt
    assert REF not in prompt  # the task's dataset reference never reaches a model prompt


def test_llm_check_in_confirm_mode_is_asked_only_about_flagged_criteria_and_decides():
    responses = STUFFED
    task, crits, S = setup(responses=responses)
    client = FakeClient(_answer(False, "none", ""))
    att = attribute(task, crits, S, responses, llm_check=LLMHackingCheck(client),
                    config=AttributorConfig(llm_mode="confirm"))
    assert att.get("cold/c0").label == Label.AGREE  # the model overrules the CPU flag
    assert len(client.prompts) == 1  # c1 (fluids) splits the group too but no signal fired, so it is not asked
    assert "keyword_stuffing" in att.get("cold/c0").evidence.signals


def test_llm_phrase_must_be_quoted_from_the_criterion():
    crits_in = [llm("t/c0", "Uses specific sensory details.", 3), llm("t/c1", "Is accurate.", 2)]
    responses = [f"Story {j}: the red bright warm soft light." for j in range(8)]
    task, crits, _ = setup(crits_in, responses, None, "t")
    S = np.array([[1] * 4 + [0] * 4, [1, 0] * 4], float)
    client = FakeClient(_answer(True, "surface_compliance", "adjective density"))
    a = attribute(task, crits, S, responses, llm_check=LLMHackingCheck(client)).get("t/c0")
    assert a.label == Label.SPURIOUS and a.evidence.phrase == "Uses specific sensory details"  # the wording check's


# ------------------------------------------------------------------------------------------------ wording check

@pytest.mark.parametrize("criterion, phrase", [
    (llm("x", "Uses specific sensory details."), "Uses specific sensory details"),
    (llm("x", "Mentions point-of-care testing as a use."), "Mentions point-of-care testing as a use"),
    (kw("x", "Recommends rest.", 1, r"\brest"), "rest"),
    (kw("x", "Suggests a soothing remedy.", 1, "(honey|gargl)"), "honey"),
    (words_under("x", 60), "under 60 words"),
    (llm("x", "Is accurate."), None),
])
def test_wording_check_names_the_phrase_that_lets_surface_form_pass(criterion, phrase):
    assert wording_check(criterion) == phrase


def test_shapes_are_checked():
    task, crits, S = setup()
    with pytest.raises(ValueError, match="S is"):
        attribute(task, crits, S[:2], PLAIN)


def test_pass_rate_is_the_mean_of_the_satisfied_verdicts():
    """Against numpy's mean of reward.satisfied over the judged cells: catches a pitfall not turned over, NaN cells
    counted, or a share rounded otherwise than the mean (the labels compare it with 0 and 1)."""
    rng = np.random.default_rng(0)
    for _ in range(2000):
        row = rng.integers(0, 2, int(rng.integers(1, 17))).astype(float)
        row[rng.random(row.size) < 0.2] = np.nan
        points = float(rng.choice([-3.0, 0.0, 2.0]))
        sat = satisfied(row, points)
        want = float(sat[~np.isnan(sat)].mean()) if (~np.isnan(sat)).any() else math.nan
        assert _rate(row, points) == want or (math.isnan(want) and math.isnan(_rate(row, points))), (row, points)
