"""The just-in-time critic with fake regrade / resample hooks: the sign convention of each delta, the bands, the
variation and saturation-record conditions, measuring the state `apply` produces, and pooled hook calls.

The cellulose case (close reading, sec. 4.3) is the running example: its spurious seed criterion (point-of-care
use) is replaced at step 30 by three new criteria, and over training the recorded group's reward falls from 100.0
to 32.8 while the oracle's score rises from 58.1 to 61.0. A valid rubric repair LOWERS the recorded group's reward:
delta_c > 0.
"""

import math

import numpy as np
import pytest

from evolver_testlib import build_context, llm, make_task, repeat_as_history
from harnessrl_jax.words import Verdict
from harnessrl_jax.evolver import Bands, Candidate, ColdStart, Critic, CriticHooks
from harnessrl_jax.harness import (AddField, CreateCriterion, DeleteCriterion, DownweightTask, DropField,
                                   HarnessState, MergeCriteria, RewriteCriterion, apply)
from harnessrl_jax.harness.state import GAMMAS

CELLULOSE = [llm("cellulose/c0", "States that cellulose is a linear polymer of beta-1,4-linked glucose units", 6),
             llm("cellulose/c1", "Mentions point-of-care testing as a use of cellulose filter paper", 2),
             llm("cellulose/c2", "Explains how the paper's porosity controls how fast liquid wicks through it", 4),
             llm("cellulose/c3", "Claims that cellulose dissolves in water", -2)]
NEW = ["Notes that each glucose unit carries three hydroxyl groups",
       "Names the chemical reaction used to modify the fibre surface",
       "Explains that hydrogen bonds between chains give the paper its wet strength"]
RESPONSES = [f"Cellulose answer {j}." for j in range(8)]
ALL_MET = [[1] * 8, [1] * 8, [1] * 8, [0] * 8]  # every response meets c0-c2 and avoids the pitfall: reward 100


def cellulose(S=ALL_MET, **kw):
    return build_context(CELLULOSE, RESPONSES, None, tid="cellulose", S=S, **kw)


def rubric(ctx, *actions):
    return Candidate("cellulose", "rubric", tuple(actions), "spurious", ("cellulose/c1",))


class Regrade:
    """Fake judge: verdict rows by criterion text; records what it was asked."""

    def __init__(self, rows):
        self.rows, self.calls = rows, []

    def __call__(self, task, responses, criteria):
        self.calls.append((task.id, tuple(responses), tuple(c.text for c in criteria)))
        return np.array([self.rows[c.text] for c in criteria], float)


def reference_rewards(points, S):
    """r_j = 100 sum_k p_k S_kj / sum_k max(p_k, 0), written out again."""
    points, S = np.asarray(points, float), np.asarray(S, float)
    return 100 * (points @ S) / points.clip(min=0).sum()


# ------------------------------------------------------------------------------------------------------ delta_c

def test_cellulose_step_30_fix_lowers_the_recorded_groups_reward_and_is_accepted():
    ctx = cellulose()
    assert ctx.rbar == 100.0
    cand = rubric(ctx, DeleteCriterion("cellulose", "cellulose/c1"),
                  *(CreateCriterion("cellulose", t, 2.0) for t in NEW))
    rows = {NEW[0]: [1, 1, 1, 1, 0, 0, 0, 0], NEW[1]: [1, 1, 0, 0, 0, 0, 0, 0], NEW[2]: [1, 1, 1, 1, 1, 1, 0, 0]}
    regrade = Regrade(rows)
    m = Critic().measure(ctx, cand, CriticHooks(regrade=regrade))
    # Only the three new criteria are regraded; c0, c2, c3 keep their recorded verdicts.
    assert regrade.calls == [("cellulose", tuple(RESPONSES), tuple(NEW))]
    # On the state apply() produces. The anchor c0 (6 points) keeps its share 1/2 of the positive points, so after
    # each action the non-anchors are rescaled to sum to 6: delete c1 -> c2 6; create h0 -> (6, 2) x 3/4 =
    # (4.5, 1.5); create h1 -> (4.5, 1.5, 2) x 3/4; create h2 -> (3.375, 1.125, 1.5, 2) x 3/4.
    points = [6, 3.375 * 0.75, -2, 1.125 * 0.75, 1.5 * 0.75, 2 * 0.75]
    new = apply(ctx.state, cand.actions)
    np.testing.assert_allclose(new.points("cellulose"), points)
    S_new = np.array([[1] * 8, [1] * 8, [0] * 8, rows[NEW[0]], rows[NEW[1]], rows[NEW[2]]])
    expected = 100.0 - reference_rewards(points, S_new).mean()
    assert m.verdict == Verdict.ACCEPTED and m.delta_c == pytest.approx(expected) == pytest.approx(13.671875)
    # The raw proposed points (no anchor-share rescaling) would have given another number.
    naive = 100.0 - reference_rewards([6, 4, -2, 2, 2, 2], S_new).mean()
    assert naive == pytest.approx(18.75) and m.delta_c != pytest.approx(naive)
    assert m.conditions == {"sign": True, "band": True, "varies": True}
    assert m.rbar_t == 100.0 and m.rbar_candidate == pytest.approx(100 - 13.671875)


def test_a_rubric_change_that_raises_the_recorded_reward_has_the_wrong_sign():
    S = [[1] * 8, [1, 0] * 4, [1] * 8, [0] * 8]  # point-of-care met by half
    ctx = cellulose(S)
    cand = rubric(ctx, RewriteCriterion("cellulose", "cellulose/c1", "Mentions any use of filter paper"))
    m = Critic().measure(ctx, cand, CriticHooks(regrade=Regrade({"Mentions any use of filter paper": [1] * 8})))
    assert m.verdict == Verdict.REJECTED and m.delta_c < 0 and "wrong sign" in m.reason and m.direction == "too_weak"


def test_a_repair_too_large_for_one_step_is_refused_as_too_strong():
    """The paper's group went from 100.0 to 32.8 over many accepted steps, each inside the band; one candidate that
    removes 35 points at once is more like a different question than a repair."""
    ctx = cellulose()
    strict = "Explains porosity quantitatively, with a pore-size figure"
    cand = rubric(ctx, RewriteCriterion("cellulose", "cellulose/c2", strict),
                  CreateCriterion("cellulose", NEW[0], 2.0), CreateCriterion("cellulose", NEW[1], 2.0))
    only_first = [1, 0, 0, 0, 0, 0, 0, 0]
    m = Critic().measure(ctx, cand, CriticHooks(regrade=Regrade({strict: only_first, NEW[0]: only_first,
                                                                 NEW[1]: only_first})))
    # Non-anchors after each create, rescaled to sum to 6: (2, 4, 2) x 3/4, then (1.5, 3, 1.5, 2) x 3/4. Response 0
    # meets everything (100); the others keep c0 6 and c1 1.125 of 12.
    points = [6, 1.125, 2.25, -2, 1.125, 1.5]
    np.testing.assert_allclose(apply(ctx.state, cand.actions).points("cellulose"), points)
    S_new = np.array([[1] * 8, [1] * 8, only_first, [0] * 8, only_first, only_first])
    assert m.delta_c == pytest.approx(100 - reference_rewards(points, S_new).mean())
    assert m.delta_c == pytest.approx(100 - (100 + 7 * 100 * 7.125 / 12) / 8)
    assert m.verdict == Verdict.REJECTED and m.direction == "too_strong" and "too strong" in m.reason


def test_a_change_within_null_fluctuation_is_rejected_as_too_weak():
    ctx = cellulose()
    cand = rubric(ctx, CreateCriterion("cellulose", NEW[0], 0.2))
    m = Critic().measure(ctx, cand, CriticHooks(regrade=Regrade({NEW[0]: [1, 1, 1, 1, 0, 0, 0, 0]})))
    assert 0 < m.delta_c < 3.1 and m.verdict == Verdict.REJECTED and m.direction == "too_weak" and "null" in m.reason


def test_every_created_criterion_must_still_vary_within_the_group():
    ctx = cellulose()
    cand = rubric(ctx, CreateCriterion("cellulose", NEW[1], 2.0))
    m = Critic().measure(ctx, cand, CriticHooks(regrade=Regrade({NEW[1]: [0] * 8})))
    # Nobody names the reaction: the group loses its share after rescaling ((2, 4, 2) x 3/4: h0 holds 1.5 of 12),
    # inside the band...
    assert m.delta_c == pytest.approx(100 * 1.5 / 12) and m.conditions["band"]
    # ...but a criterion the whole group fails adds nothing to the advantages: (iii) rejects it.
    assert m.verdict == Verdict.REJECTED and m.non_varying == ("cellulose/h0",) and not m.conditions["varies"]


def test_merging_criteria_the_group_all_met_only_deduplicates_and_is_exempt_from_variation():
    crits = [llm("t/c0", "Names glucose.", 6), llm("t/c1", "Uses formal register.", 2),
             llm("t/c2", "Uses a formal register throughout.", 2), llm("t/c4", "Gives an example.", 2)]
    S = [[1, 1, 1, 1, 0, 0, 0, 0], [1] * 8, [1] * 8, [1, 0] * 4]
    state = HarnessState.from_tasks([make_task("t", crits)], anchors={"t": ["t/c0"]})
    ctx = build_context(crits, RESPONSES, None, tid="t", S=S, state=state)
    cand = Candidate("t", "rubric", (MergeCriteria("t", ("t/c1", "t/c2"), "Uses a formal register.", 2.0),),
                     "saturated")
    m = Critic().measure(ctx, cand, CriticHooks(regrade=Regrade({"Uses a formal register.": [1] * 8})))
    # Before: 100, 83.3, 50, 33.3 (twice each); after (merged 2 and c4 2 rescaled to 3 each): 100, 75, 50, 25.
    assert ctx.rbar == pytest.approx(200 / 3) and m.delta_c == pytest.approx(200 / 3 - 62.5)
    assert m.verdict == Verdict.ACCEPTED and m.non_varying == ()


# ------------------------------------------------------------------------------------------------------ delta_g

class Resample:
    def __init__(self, responses):
        self.responses, self.calls = responses, []

    def __call__(self, task, fields):
        self.calls.append((task.id, tuple(fields)))
        return list(self.responses)


def _guided(rows_by_response):
    """A regrade that scores each response by its text: response -> verdict column [K]."""
    def regrade(task, responses, criteria):
        return np.array([rows_by_response[r] for r in responses], float).T[: len(criteria)]
    return regrade


def blind_context():
    S = [[1] * 8, [1, 0] * 4, [0] * 8, [0] * 8]  # c2 (porosity) blind
    return build_context(CELLULOSE, RESPONSES, None, tid="cellulose", S=S)


@pytest.mark.parametrize("met, verdict, direction", [
    (2, Verdict.ACCEPTED, None),  # c1 now met by all (+8.3) and c2 by 2 of 8 (+8.3): delta_g = 16.7
    (8, Verdict.REJECTED, "too_strong"),
    (0, Verdict.REJECTED, "too_weak"),
])
def test_guidance_is_measured_on_a_resampled_group_graded_under_the_current_rubric(met, verdict, direction):
    ctx = blind_context()
    assert ctx.rbar == pytest.approx(100 * (6 + 1) / 12)
    cand = Candidate("cellulose", "guidance", (AddField("cellulose", "criterion", "Explain porosity.",
                                                         "cellulose/c2"),), "blind", ("cellulose/c2",))
    ys = [f"guided {j}" for j in range(8)]
    # Guided responses meet c0 and c1 and, for the first `met` of them, c2.
    cols = {y: [1, 1, int(j < met), 0] for j, y in enumerate(ys)}
    resample = Resample(ys)
    m = Critic().measure(ctx, cand, CriticHooks(regrade=_guided(cols), resample=resample))
    assert resample.calls == [("cellulose", (("criterion", "Explain porosity."),))]
    expected = reference_rewards([6, 2, 4, -2], np.array([cols[y] for y in ys]).T).mean() - ctx.rbar
    assert m.delta_g == pytest.approx(expected)
    assert m.verdict == verdict and m.direction == direction


def test_resample_sees_the_candidates_whole_guidance_already_mounted_fields_included():
    task_state = apply(blind_context().state, AddField("cellulose", "critique", "Nobody explained porosity.",
                                                       "cellulose/c2"))
    ctx = build_context(CELLULOSE, RESPONSES, None, tid="cellulose", S=blind_context().S, state=task_state)
    cand = Candidate("cellulose", "guidance", (AddField("cellulose", "reference", "Pores of 10 um...",
                                                         "cellulose/c2"),), "blind")
    resample = Resample(RESPONSES)
    Critic().measure(ctx, cand, CriticHooks(regrade=lambda t, r, c: np.asarray(ctx.S), resample=resample))
    assert resample.calls[0][1] == (("reference", "Pores of 10 um..."), ("critique", "Nobody explained porosity."))


def test_dropping_guidance_is_accepted_when_the_policy_keeps_the_reward_without_it():
    state = apply(blind_context().state, AddField("cellulose", "criterion", "Explain porosity.", "cellulose/c2"))
    S = [[1] * 8, [1] * 8, [1] * 8, [0] * 8]
    ctx = build_context(CELLULOSE, RESPONSES, None, tid="cellulose", S=S, state=state)
    cand = Candidate("cellulose", "guidance", (DropField("cellulose", "criterion"),), "agree")
    ys = [f"bare {j}" for j in range(8)]
    keeps = {y: [1, 1, int(j != 0), 0] for j, y in enumerate(ys)}  # one response of 8 loses porosity: -4.2
    m = Critic().measure(ctx, cand, CriticHooks(regrade=_guided(keeps), resample=Resample(ys)))
    assert m.delta_g == pytest.approx(-100 * 4 / 12 / 8) and m.verdict == Verdict.ACCEPTED
    loses = {y: [1, 1, 0, 0] for y in ys}
    m = Critic().measure(ctx, cand, CriticHooks(regrade=_guided(loses), resample=Resample(ys)))
    assert m.verdict == Verdict.REJECTED and m.direction == "too_strong" and "still needs it" in m.reason


# ------------------------------------------------------------------------------------------------------ delta_w

def test_delta_w_is_the_freed_weight_times_the_mean_reward_and_needs_a_recorded_saturation():
    ctx = cellulose()
    cand = Candidate("cellulose", "sampling", (DownweightTask("cellulose"),), "saturated")
    no_record = Critic().measure(ctx, cand)  # no hooks: a sampling update never queries the policy
    assert no_record.delta_w == pytest.approx((1 - GAMMAS[0]) * 100.0)
    assert no_record.verdict == Verdict.REJECTED and "previous record" in no_record.reason
    ctx = cellulose(history=repeat_as_history(cellulose(), "saturated"))
    m = Critic().measure(ctx, cand)
    assert m.verdict == Verdict.ACCEPTED and m.delta_w == pytest.approx(39.0) and m.conditions["saturation_record"]
    # One level further down: w = gamma1 -> gamma2.
    lower = apply(ctx.state, DownweightTask("cellulose"))
    ctx2 = build_context(CELLULOSE, RESPONSES, None, tid="cellulose", S=ALL_MET, state=lower, history=ctx.history)
    assert Critic().measure(ctx2, cand).delta_w == pytest.approx((GAMMAS[0] - GAMMAS[1]) * 100.0)
    # The gate can be relaxed to this step's own diagnosis.
    assert Critic(sampling_gate="off").measure(cellulose(), cand).verdict == Verdict.ACCEPTED


def test_delta_w_of_a_group_with_no_reward_is_not_positive():
    ctx = cellulose([[0] * 8, [0] * 8, [0] * 8, [0] * 8], history=repeat_as_history(cellulose(), "saturated"))
    m = Critic().measure(ctx, Candidate("cellulose", "sampling", (DownweightTask("cellulose"),), "saturated"))
    assert m.delta_w == 0.0 and m.verdict == Verdict.REJECTED and m.direction == "too_weak"


# ---------------------------------------------------------------------------------------------- bands, switches

def test_bands_from_a_cold_start_override_the_papers(tmp_path):
    ctx = cellulose()
    cand = rubric(ctx, DeleteCriterion("cellulose", "cellulose/c1"),
                  *(CreateCriterion("cellulose", t, 2.0) for t in NEW))
    rows = {NEW[0]: [1, 1, 1, 1, 0, 0, 0, 0], NEW[1]: [1, 1, 0, 0, 0, 0, 0, 0], NEW[2]: [1, 1, 1, 1, 1, 1, 0, 0]}
    path = tmp_path / "cold_start.json"
    ColdStart(bands={"guidance": (1.0, 2.0), "rubric": (1.0, 12.0)}).save(path)
    bands = ColdStart.load(str(path)).to_bands()
    assert bands == Bands((1.0, 2.0), (1.0, 12.0))
    m = Critic(bands).measure(ctx, cand, CriticHooks(regrade=Regrade(rows)))
    assert m.delta_c == pytest.approx(13.671875) and m.verdict == Verdict.REJECTED and m.band == (1.0, 12.0)
    with pytest.raises(ValueError, match="low <= high"):
        Bands(rubric=(5.0, 1.0))


def test_invalid_candidates_are_rejected_unmeasured():
    ctx = cellulose()
    no_hooks = CriticHooks()  # any policy or judge query would raise
    for cand, why in [
        (Candidate("cellulose", "rubric", (), "spurious", invalid="actions[0]: unknown action op 'x'"), "unknown"),
        (rubric(ctx, RewriteCriterion("cellulose", "cellulose/c0", "new text")), "anchor"),
        (Candidate("cellulose", "rubric", (AddField("cellulose", "criterion", "x"),), "blind"), "not rubric"),
    ]:
        m = Critic().measure(ctx, cand, no_hooks)
        assert m.verdict == Verdict.REJECTED and why in m.reason and not m.measured


def test_without_the_critic_every_valid_candidate_is_accepted_unmeasured():
    ctx = cellulose()
    critic = Critic(enabled=False)
    for cand in (rubric(ctx, CreateCriterion("cellulose", NEW[1], 2.0)),
                 Candidate("cellulose", "sampling", (DownweightTask("cellulose"),), "saturated"),
                 Candidate("cellulose", "guidance", (AddField("cellulose", "critique", "x"),), "blind")):
        m = critic.measure(ctx, cand, CriticHooks())
        assert m.verdict == Verdict.ACCEPTED and not m.measured
    assert critic.measure(ctx, rubric(ctx, DeleteCriterion("cellulose", "cellulose/c0"))).verdict == Verdict.REJECTED


def test_measure_many_pools_generation_and_grading_across_candidates():
    blind = blind_context()
    sat = cellulose()
    calls = {"resample": 0, "regrade": 0}

    def resample_batch(items):
        calls["resample"] += 1
        assert [t.id for t, _ in items] == ["cellulose"]
        return [[f"guided {j}" for j in range(8)]]

    def regrade_batch(items):
        calls["regrade"] += 1
        # One guidance regrade (4 current criteria on the resampled group) and one rubric regrade (1 new criterion).
        assert [(len(r), len(c)) for _, r, c in items] == [(8, 4), (8, 1)]
        return [np.array([[1] * 8, [1] * 8, [1, 0] * 4, [0] * 8]), np.array([[1, 0] * 4])]

    hooks = CriticHooks(resample_batch=resample_batch, regrade_batch=regrade_batch)
    items = [(blind, Candidate("cellulose", "guidance", (AddField("cellulose", "criterion", "x", "cellulose/c2"),),
                               "blind")),
             (sat, rubric(sat, CreateCriterion("cellulose", NEW[0], 2.0)))]
    ms = Critic().measure_many(items, hooks)
    assert calls == {"resample": 1, "regrade": 1}
    assert ms[0].delta_g == pytest.approx(100 * (8 + 0.5 * 4) / 12 - blind.rbar)
    assert ms[1].delta_c == pytest.approx(100 - (100 + 87.5) / 2) and ms[1].verdict == Verdict.ACCEPTED  # h0: 1.5 of 12
    assert all(math.isfinite(m.delta) for m in ms)


def test_measurements_serialise_for_harness_jsonl():
    import json

    ctx = cellulose()
    m = Critic().measure(ctx, rubric(ctx, CreateCriterion("cellulose", NEW[1], 2.0)),
                         CriticHooks(regrade=Regrade({NEW[1]: [0] * 8})))
    d = json.loads(json.dumps(m.to_dict()))
    assert d["verdict"] == "rejected" and d["non_varying"] == ["cellulose/h0"] and d["band"] == [3.1, 28.0]
    assert m.deltas() == {"delta_c": pytest.approx(12.5)}


# ---------------------------------------------------------------------------------- gates, edges, missing cells

def test_the_current_sampling_gate_takes_this_steps_diagnosis_and_the_paper_gate_does_not():
    cand = Candidate("cellulose", "sampling", (DownweightTask("cellulose"),), "saturated")
    ctx = cellulose(history=())  # no earlier draw: the window of 2 is not filled, the task is not saturated now
    assert ctx.attribution.task_label is None
    assert Critic(sampling_gate="current").measure(ctx, cand).verdict == Verdict.REJECTED
    ctx = cellulose(history=None)  # no memory: this group alone diagnoses the task saturated; no previous record
    assert ctx.attribution.task_label == "saturated" and ctx.previous_task_label is None
    m = Critic(sampling_gate="current").measure(ctx, cand)
    assert m.verdict == Verdict.ACCEPTED and m.conditions == {"sign": True, "saturation_record": True}
    assert Critic().measure(ctx, cand).verdict == Verdict.REJECTED  # 'previous' needs the earlier record


def test_a_merge_of_varying_parents_must_itself_vary():
    crits = [llm("t/c0", "Names glucose.", 6), llm("t/c1", "Gives an example.", 2),
             llm("t/c2", "Gives a worked example.", 2), llm("t/c3", "Is concise.", 2)]
    S = [[1, 1, 1, 1, 0, 0, 0, 0], [1, 0] * 4, [1, 1, 0, 0] * 2, [1] * 8]
    state = HarnessState.from_tasks([make_task("t", crits)], anchors={"t": ["t/c0"]})
    ctx = build_context(crits, RESPONSES, None, tid="t", S=S, state=state)
    cand = Candidate("t", "rubric", (MergeCriteria("t", ("t/c1", "t/c2"), "Gives a worked example.", 2.0),),
                     "saturated")
    # The parents split the group; a merged criterion met by nobody does not, so it is not exempt: rejected.
    m = Critic().measure(ctx, cand, CriticHooks(regrade=Regrade({"Gives a worked example.": [0] * 8})))
    assert m.verdict == Verdict.REJECTED and m.non_varying and "do not vary" in m.reason
    # The same merge, varying: accepted on its delta_c (parents 2 + 2 -> merged 2, c3 rescaled with it).
    row = [1, 0, 0, 0, 1, 0, 0, 0]
    m = Critic().measure(ctx, cand, CriticHooks(regrade=Regrade({"Gives a worked example.": row})))
    new = apply(ctx.state, cand.actions)
    S_new = np.array([S[0], row, S[3]], float)
    expected = ctx.rbar - reference_rewards(new.points("t"), S_new).mean()
    assert m.delta_c == pytest.approx(expected) and m.non_varying == ()
    assert m.verdict == (Verdict.ACCEPTED if 3.1 <= expected <= 28.0 else Verdict.REJECTED)


def test_nan_cells_of_a_regrade_are_left_out_of_the_rewards_not_counted_as_zero():
    ctx = cellulose()
    cand = rubric(ctx, RewriteCriterion("cellulose", "cellulose/c1", "Names a specific point-of-care assay"))
    row = [1, 0, np.nan, 1, 0, np.nan, 1, 0]  # two cells the judge could not score
    m = Critic().measure(ctx, cand, CriticHooks(regrade=Regrade({"Names a specific point-of-care assay": row})))
    new = apply(ctx.state, cand.actions)
    S_new = np.array([[1] * 8, row, [1] * 8, [0] * 8], float)
    pts = new.points("cellulose")
    per = []
    for j in range(8):  # the reward skips a NaN cell: its criterion leaves numerator and denominator
        ok = ~np.isnan(S_new[:, j])
        per.append(100 * (pts[ok] @ S_new[ok, j]) / pts[ok].clip(min=0).sum())
    assert m.delta_c == pytest.approx(100.0 - np.mean(per))
    assert m.candidate_rewards[2] == pytest.approx(100.0)  # the unscored cell did not count as a miss


@pytest.mark.parametrize("delta, verdict, direction", [
    (3.1, Verdict.ACCEPTED, None), (28.0, Verdict.ACCEPTED, None),  # the band is closed at both ends
    (3.1 - 1e-9, Verdict.REJECTED, "too_weak"), (28.0 + 1e-9, Verdict.REJECTED, "too_strong"),
    (0.0, Verdict.REJECTED, "too_weak"), (-1.0, Verdict.REJECTED, "too_weak"),
])
def test_deltas_on_the_band_edges(delta, verdict, direction):
    from harnessrl_jax.evolver.critic import in_band

    ok, d = in_band(delta, (3.1, 28.0))
    assert (Verdict.ACCEPTED if ok else Verdict.REJECTED) == verdict and d == direction


def test_a_guided_prompt_over_the_budget_is_rejected_unmeasured_never_measured_on_another_prompt():
    ctx = blind_context()
    fits = Candidate("cellulose", "guidance", (AddField("cellulose", "criterion", "Explain porosity.",
                                                         "cellulose/c2"),), "blind", variant="short")
    too_long = Candidate("cellulose", "guidance", (AddField("cellulose", "reference", "x" * 10_000,
                                                             "cellulose/c2"),), "blind", variant="long")
    resample = Resample(RESPONSES)

    def problem(task, fields):
        return "guided prompt over the budget" if sum(len(t) for _, t in fields) > 1000 else None

    hooks = CriticHooks(regrade=lambda t, r, c: np.asarray(ctx.S), resample=resample, prompt_problem=problem)
    m_fit, m_long = Critic().measure_many([(ctx, fits), (ctx, too_long)], hooks)
    assert m_long.verdict == Verdict.REJECTED and "over the budget" in m_long.reason and not m_long.measured
    assert m_long.conditions == {"fits": False}
    assert m_fit.measured and resample.calls == [("cellulose", (("criterion", "Explain porosity."),))]
