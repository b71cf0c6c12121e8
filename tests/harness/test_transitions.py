"""Harness transitions as a specification.

- The paper's cellulose filter-paper case (HarnessRL close reading, sec. 4.3), step by step, with points worked by
  hand: step 30 a spurious seed criterion (point-of-care use) is deleted and three criteria are created ("three
  hydroxyl groups per unit", "names the chemical reaction", ...); step 55 the blind "names the chemical reaction"
  gets <criterion> + <reference>; step 130 both are dropped, the saturated task is down-weighted and redundant
  criteria merged; two rounds of tightening; step 440 the task is saturated again and goes down to gamma2.
- Every invariant under hypothesis over random action sequences (valid and invalid): anchors' text, anchors'
  share of positive points, a positive criterion per task, the guidance cap, p and u, no mutation of the input.
- Invalid actions, each rejected with its reason; the JSON form of every action; swapping one interface.
"""

import copy
import dataclasses
import json
import math

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings

from harnessrl_jax.harness import ops, transitions
from harnessrl_jax.harness.ops import (AddField, CreateCriterion, DeleteCriterion, DownweightTask, DropField,
                                       InvalidAction, MergeCriteria, Noop, RestoreTask, ReweightCriterion,
                                       RewriteCriterion, SplitCriterion, action_from_dict)
from harnessrl_jax.harness.state import FIELDS, HarnessState, anchor_share, guidance_cap
from harnessrl_jax.harness.transitions import Transitions, advance_schedule, apply
from harnessrl_jax.rubric.reward import rubric_reward
from harnessrl_jax.rubric.schema import Criterion, Task

TOTAL_STEPS = 500  # the paper's run


def make_task(tid, points, texts=None, prompt=None):
    texts = texts or [f"criterion {k} of {tid}" for k in range(len(points))]
    crits = tuple(Criterion(f"{tid}/c{k}", text, float(p)) for k, (text, p) in enumerate(zip(texts, points)))
    return Task(tid, "science", ({"role": "user", "content": prompt or f"question {tid}"},), crits)


def by_id(state, task_id):
    return {c.id: c for c in state.rubric_of(task_id)}


# ---------------------------------------------------------------------------------------------- the cellulose case

CELLULOSE = "cellulose"
SEED_TEXTS = [
    "States that cellulose is a linear polymer of beta-1,4-linked glucose units",   # c0  6 points, the anchor
    "Mentions point-of-care testing as a use of cellulose filter paper",             # c1  2, spurious at step 30
    "Explains how the paper's porosity controls how fast liquid wicks through it",   # c2  4
    "Claims that cellulose dissolves in water",                                      # c3 -2, a pitfall
]
HYDROXYL = "Notes that each glucose unit carries three hydroxyl groups"
REACTION = "Names the chemical reaction used to modify the fibre surface"
H_BONDS = "Links hydrogen bonding between chains to the paper's wet strength"


@pytest.fixture
def seed():
    tasks = [make_task(CELLULOSE, [6, 2, 4, -2], SEED_TEXTS, "Why does cellulose make a good filter paper?")]
    tasks += [make_task(t, [1, 1]) for t in ("other1", "other2", "other3")]
    return HarnessState.from_tasks(tasks)


def test_cellulose_case_step_by_step(seed):
    c = lambda k: f"{CELLULOSE}/c{k}"  # noqa: E731
    h = lambda k: f"{CELLULOSE}/h{k}"  # noqa: E731
    # Seed: the top-weighted half of three positive criteria is c0, so A = 6 and B = 2 + 4: share 1/2.
    assert [x.anchor for x in seed.rubric_of(CELLULOSE)] == [True, False, False, False]
    assert float(seed.rubric.seed_anchor_share[0]) == 0.5
    # The recorded group meets every positive seed criterion and no pitfall: reward 100.
    recorded_S = np.array([[1] * 8, [1] * 8, [1] * 8, [0] * 8])
    assert rubric_reward(seed.points(CELLULOSE), recorded_S).tolist() == [100.0] * 8

    # Step 30, spurious: delete the point-of-care criterion; B = 4 is rescaled to 6, so c2 = 4 * 1.5 = 6.
    s30 = apply(seed, DeleteCriterion(CELLULOSE, c(1)))
    assert [(x.id, x.points) for x in s30.rubric_of(CELLULOSE)] == [(c(0), 6.0), (c(2), 6.0), (c(3), -2.0)]
    # ... and create three criteria. Each renormalisation brings the non-anchor positive points back to 6:
    # + hydroxyl 3: 6 + 3 = 9 -> x 2/3: c2 = 4, h0 = 2;
    # + reaction 2: 4 + 2 + 2 = 8 -> x 3/4: c2 = 3, h0 = 1.5, h1 = 1.5;
    # + H-bonds  2: 3 + 1.5 + 1.5 + 2 = 8 -> x 3/4: c2 = 2.25, h0 = 1.125, h1 = 1.125, h2 = 1.5.
    s30 = apply(s30, [CreateCriterion(CELLULOSE, HYDROXYL, 3.0), CreateCriterion(CELLULOSE, REACTION, 2.0),
                      CreateCriterion(CELLULOSE, H_BONDS, 2.0)])
    assert [(x.id, x.points) for x in s30.rubric_of(CELLULOSE)] == [
        (c(0), 6.0), (c(2), 2.25), (c(3), -2.0), (h(0), 1.125), (h(1), 1.125), (h(2), 1.5)]
    assert [x.text for x in s30.rubric_of(CELLULOSE)][3:] == [HYDROXYL, REACTION, H_BONDS]
    assert all(x.origin == "proposer" and not x.anchor and x.version == 1 for x in s30.rubric_of(CELLULOSE)[3:])
    assert anchor_share(s30.rubric_of(CELLULOSE)) == 0.5
    # The fix lowers the recorded group's reward (delta_c = 100 - 68.75 > 0): the group met c0 and c2 only,
    # 100 * (6 + 2.25) / 12 = 68.75.
    regraded = np.array([[1] * 8, [1] * 8, [0] * 8, [0] * 8, [0] * 8, [0] * 8])
    assert rubric_reward(s30.points(CELLULOSE), regraded).tolist() == [68.75] * 8

    # Step 55, "names the chemical reaction" is blind: mount <criterion> + <reference> (cap 3 at step 55).
    s55 = advance_schedule(s30, 55, TOTAL_STEPS)
    assert int(s55.guidance.cap) == 3
    s55 = apply(s55, [AddField(CELLULOSE, "criterion", "Name the reaction, e.g. periodate oxidation.", h(1)),
                      AddField(CELLULOSE, "reference", "A good answer: ... periodate oxidation opens the ring ...")])
    assert [n for n, _ in s55.fields(CELLULOSE)] == ["criterion", "reference"]
    assert s55.fields(CELLULOSE)[0][1].criterion_id == h(1)
    assert s55.rubric is s30.rubric and s55.sampling is s30.sampling  # guidance changes touch only g_t

    # Step 130: the criterion is met; drop both fields, down-weight the saturated task to gamma1, merge the
    # redundant hydroxyl and H-bond criteria (1.125 + 1.5 = 2.625 keeps B = 6, so no rescaling).
    s130 = advance_schedule(s55, 130, TOTAL_STEPS)
    assert int(s130.guidance.cap) == 2 and len(s130.fields(CELLULOSE)) == 2  # two mounted: within the cap
    s130 = apply(s130, [DropField(CELLULOSE, "criterion"), DropField(CELLULOSE, "reference"),
                        DownweightTask(CELLULOSE),
                        MergeCriteria(CELLULOSE, (h(0), h(2)), "Explains that the three hydroxyl groups per unit "
                                      "hydrogen-bond between chains, giving wet strength", 2.625)])
    assert s130.fields(CELLULOSE) == ()
    assert int(s130.sampling.level[0]) == 1
    merged = s130.rubric_of(CELLULOSE)[3]
    assert (merged.id, merged.points, merged.parent_ids, merged.version) == (h(3), 2.625, (h(0), h(2)), 1)
    assert [(x.id, x.points) for x in s130.rubric_of(CELLULOSE)] == [
        (c(0), 6.0), (c(2), 2.25), (c(3), -2.0), (h(3), 2.625), (h(1), 1.125)]

    # Two rounds of tightening: rewrite the reaction criterion (version 2), then raise the anchor from 6 to 9:
    # the non-anchors follow by 9 / 6 = 1.5 (c2 3.375, h3 3.9375, h1 1.6875), the pitfall stays at -2.
    s_tight = apply(s130, RewriteCriterion(CELLULOSE, h(1), "Names periodate oxidation and says which bond it "
                                                            "cleaves"))
    assert by_id(s_tight, CELLULOSE)[h(1)].version == 2
    s_tight = apply(s_tight, ReweightCriterion(CELLULOSE, c(0), 9.0))
    assert [(x.id, x.points) for x in s_tight.rubric_of(CELLULOSE)] == [
        (c(0), 9.0), (c(2), 3.375), (c(3), -2.0), (h(3), 3.9375), (h(1), 1.6875)]
    assert s_tight.rubric_of(CELLULOSE)[0].text == SEED_TEXTS[0]
    assert anchor_share(s_tight.rubric_of(CELLULOSE)) == 0.5

    # Step 440: saturated again, down to gamma2. The other three tasks are at weight 1, so
    # p = 0.38 / 3.38 and u = 1 / (4 p) = 3.38 / 1.52; the cap is 0 in the last quarter.
    s440 = advance_schedule(s_tight, 440, TOTAL_STEPS)
    s440 = apply(s440, DownweightTask(CELLULOSE))
    assert int(s440.sampling.level[0]) == 2 and int(s440.guidance.cap) == 0
    assert s440.sampling.probs()[0] == pytest.approx(0.38 / 3.38, rel=1e-15)
    assert s440.sampling.importance_weights()[0] == pytest.approx(3.38 / 1.52, rel=1e-14)
    assert not s440.guidance.mounted().any()
    # Nothing before was changed along the way.
    assert [x.points for x in seed.rubric_of(CELLULOSE)] == [6.0, 2.0, 4.0, -2.0]
    assert int(seed.sampling.level[0]) == 0 and seed.fields(CELLULOSE) == ()


# ------------------------------------------------------------------------------------------------ the schedule

def test_schedule_unmounts_over_the_cap_reference_first_then_criterion_then_critique():
    state = HarnessState.from_tasks([make_task("a", [2, 1]), make_task("b", [2, 1])])
    state = apply(state, [AddField("a", f, f"{f} text") for f in FIELDS] + [AddField("b", "critique", "c")])
    names = lambda s, t: [n for n, _ in s.fields(t)]  # noqa: E731
    s = advance_schedule(state, 125, 500)  # cap 2
    assert names(s, "a") == ["criterion", "critique"] and names(s, "b") == ["critique"]
    s = advance_schedule(s, 250, 500)  # cap 1
    assert names(s, "a") == ["critique"] and names(s, "b") == ["critique"]
    s = advance_schedule(s, 375, 500)  # cap 0: nothing is mounted in the last quarter
    assert not s.guidance.mounted().any()
    assert names(state, "a") == list(FIELDS)  # the input is untouched


def test_mounting_respects_the_scheduled_cap():
    state = advance_schedule(HarnessState.from_tasks([make_task("a", [2, 1])]), 250, 500)  # cap 1
    state = apply(state, AddField("a", "critique", "short"))
    with pytest.raises(InvalidAction, match="cap is 1"):
        apply(state, AddField("a", "criterion", "more"))


# ------------------------------------------------------------------------------------------------ rubric details

def test_rewrite_bumps_the_version_and_keeps_id_points_and_lineage():
    state = HarnessState.from_tasks([make_task("a", [6, 2, 4])])
    s = apply(state, [RewriteCriterion("a", "a/c1", "tighter"), RewriteCriterion("a", "a/c1", "tighter still",
                                                                                  ("axis:accuracy",))])
    c = by_id(s, "a")["a/c1"]
    assert (c.text, c.version, c.points, c.tags, c.origin) == ("tighter still", 3, 2.0, ("axis:accuracy",), "seed")


def test_split_records_the_parent_and_takes_its_place():
    state = HarnessState.from_tasks([make_task("a", [6, 2, 4])])
    # Non-anchor positive points were 2 + 4 = 6; after the split 1 + 3 + 4 = 8 -> x 3/4.
    s = apply(state, SplitCriterion("a", "a/c1", ("first half", "second half"), (1.0, 3.0)))
    assert [(c.id, c.points, c.parent_ids) for c in s.rubric_of("a")] == [
        ("a/c0", 6.0, ()), ("a/h0", 0.75, ("a/c1",)), ("a/h1", 2.25, ("a/c1",)), ("a/c2", 3.0, ())]


def test_reweighting_a_pitfall_or_a_task_without_anchors_is_exact():
    state = HarnessState.from_tasks([make_task("a", [6, 2, 4, -2]), make_task("b", [5])])
    s = apply(state, [ReweightCriterion("a", "a/c3", -5.0), ReweightCriterion("b", "b/c0", 7.0),
                      CreateCriterion("b", "extra", 2.0)])
    assert [c.points for c in s.rubric_of("a")] == [6.0, 2.0, 4.0, -5.0]
    assert [c.points for c in s.rubric_of("b")] == [7.0, 2.0]  # share 0: nothing to keep


def test_fresh_ids_are_never_reused_after_a_delete():
    state = HarnessState.from_tasks([make_task("a", [6, 2, 4])])
    s = apply(state, [CreateCriterion("a", "x", 1.0), DeleteCriterion("a", "a/h0"), CreateCriterion("a", "y", 1.0)])
    assert [c.id for c in s.rubric_of("a")] == ["a/c0", "a/c1", "a/c2", "a/h1"]


def test_a_sequence_is_all_or_nothing_and_noop_changes_nothing():
    state = HarnessState.from_tasks([make_task("a", [6, 2, 4])])
    with pytest.raises(InvalidAction):
        apply(state, [CreateCriterion("a", "x", 1.0), DeleteCriterion("a", "a/c0")])
    assert len(state.rubric_of("a")) == 3
    assert apply(state, Noop("rubric", "a", "no candidate passed the critic in 3 rounds")) is state


# ------------------------------------------------------------------------------------------------ invalid actions

@pytest.fixture
def small():
    tasks = [make_task("a", [6, 2, 4, -2]), make_task("solo", [5, 3]), make_task("one", [4])]
    state = HarnessState.from_tasks(tasks, anchors={"solo": ["solo/c0", "solo/c1"]})
    return apply(state, [AddField("a", "critique", "missed units"), DownweightTask("one"), DownweightTask("one"),
                         DownweightTask("one")])


INVALID = [
    (DownweightTask("nope"), "unknown task 'nope'"),
    (DownweightTask("one"), "already at the lowest level"),
    (RestoreTask("a"), "already at full weight"),
    (AddField("a", "hint", "x"), "unknown guidance field 'hint'"),
    (AddField("a", "critique", "again"), "already has a <critique> field"),
    (AddField("a", "criterion", "  "), "text must be a non-empty string"),
    (AddField("a", "criterion", "x", "a/c9"), "unknown criterion 'a/c9'"),
    (DropField("a", "reference"), "has no <reference> field mounted"),
    (CreateCriterion("a", "x", 0.0), "must be non-zero"),
    (CreateCriterion("a", "x", math.nan), "finite number"),
    (CreateCriterion("a", "x", 1.0, ("no-colon",)), "bad tags"),
    (CreateCriterion("solo", "x", 1.0), "only pitfalls"),
    (RewriteCriterion("a", "a/c0", "new"), "'a/c0' is an anchor: its text is frozen"),
    (RewriteCriterion("a", "a/c1", "criterion 1 of a"), "already has this text"),
    (RewriteCriterion("a", "a/c7", "new"), "unknown criterion"),
    (DeleteCriterion("a", "a/c0"), "is an anchor"),
    (DeleteCriterion("one", "one/c0"), "no positive criterion left"),
    (MergeCriteria("a", ("a/c1", "a/c2"), "both", -1.0), "all be requirements"),
    (MergeCriteria("a", ("a/c1", "a/c3"), "mixed", 1.0), "all be requirements"),
    (MergeCriteria("a", ("a/c1",), "one", 1.0), "at least two"),
    (MergeCriteria("a", ("a/c1", "a/c1"), "dup", 1.0), "repeat"),
    (MergeCriteria("a", ("a/c0", "a/c1"), "anchor in", 1.0), "is an anchor"),
    (SplitCriterion("a", "a/c1", ("only",), (1.0,)), "at least two parts"),
    (SplitCriterion("a", "a/c1", ("x", "y"), (1.0,)), "one points value per part"),
    (SplitCriterion("a", "a/c1", ("x", "y"), (1.0, -1.0)), "keep the sign"),
    (SplitCriterion("a", "a/c0", ("x", "y"), (1.0, 1.0)), "is an anchor"),
    (ReweightCriterion("a", "a/c1", -1.0), "flips its sign"),
    (ReweightCriterion("a", "a/c1", 2.0), "already has 2 points"),
    (Noop("everything"), "interface must be one of"),
]


@pytest.mark.parametrize("action, reason", INVALID, ids=[f"{type(a).__name__}-{k}" for k, (a, _) in
                                                         enumerate(INVALID)])
def test_invalid_actions_are_rejected_with_their_reason(small, action, reason):
    with pytest.raises(InvalidAction, match=reason.replace("(", r"\(").replace(")", r"\)")) as info:
        apply(small, action)
    assert info.value.action is action and reason in info.value.reason
    assert not action.is_valid(small)


def test_the_last_positive_non_anchor_cannot_go_while_anchors_hold_part_of_the_weight():
    state = HarnessState.from_tasks([make_task("a", [6, 2, -1])])  # c0 anchor, c1 the only free positive
    with pytest.raises(InvalidAction, match="no positive non-anchor criterion left"):
        apply(state, DeleteCriterion("a", "a/c1"))
    with pytest.raises(InvalidAction, match="would change nothing"):
        apply(state, ReweightCriterion("a", "a/c1", 5.0))
    s = apply(state, [CreateCriterion("a", "new", 1.0), DeleteCriterion("a", "a/c1")])  # replace, then delete
    assert [(c.id, c.points) for c in s.rubric_of("a")] == [("a/c0", 6.0), ("a/c2", -1.0), ("a/h0", 2.0)]


# --------------------------------------------------------------------------------------------------- swapping

def test_a_method_swaps_one_interface_and_keeps_the_others():
    calls = []

    def sec_like(state, action):
        calls.append(action)
        return state

    state = HarnessState.from_tasks([make_task("a", [6, 2, 4])])
    swapped = dataclasses.replace(transitions.DEFAULT_TRANSITIONS, sampling=sec_like)
    s = apply(state, [DownweightTask("a"), CreateCriterion("a", "x", 1.0)], transitions=swapped)
    assert calls == [DownweightTask("a")] and int(s.sampling.level[0]) == 0 and len(s.rubric_of("a")) == 4
    frozen = apply(state, [DownweightTask("a"), AddField("a", "critique", "c")], transitions.FROZEN_TRANSITIONS)
    assert frozen is state
    # Invalid actions are rejected whichever functions are plugged in.
    with pytest.raises(InvalidAction):
        apply(state, DownweightTask("zzz"), transitions.FROZEN_TRANSITIONS)


def test_a_method_swaps_the_guidance_schedule():
    def never_fade(state, step, total_steps):
        return state

    state = apply(HarnessState.from_tasks([make_task("a", [1])]), AddField("a", "critique", "c"))
    t = Transitions(schedule=never_fade)
    assert t.advance_schedule(state, 499, 500) is state
    assert transitions.DEFAULT_TRANSITIONS.advance_schedule(state, 499, 500).fields("a") == ()


# ---------------------------------------------------------------------------------------------- JSON of actions

ALL_ACTIONS = [
    DownweightTask("a"), RestoreTask("a"), AddField("a", "reference", "r", "a/c1"), DropField("a", "reference"),
    CreateCriterion("a", "t", -1.5, ("axis:safety",), "evorubric"), RewriteCriterion("a", "a/c1", "t2"),
    RewriteCriterion("a", "a/c1", "t2", ("verifier:rule", "rule:keywords:existence",
                                         'rule_kwargs:{"keywords": ["hydroxyl"]}')),
    DeleteCriterion("a", "a/c1"), ReweightCriterion("a", "a/c1", 3.0),
    MergeCriteria("a", ("a/c1", "a/c2"), "m", 2.0), MergeCriteria("a", ("a/c1", "a/c2"), "m", 2.0, ("axis:x",)),
    SplitCriterion("a", "a/c1", ("p", "q"), (1.0, 2.0)), SplitCriterion("a", "a/c1", ("p", "q"), (1.0, 2.0),
                                                                        (("axis:x",), ())),
    Noop(), Noop("rubric", "a", "rejected 3 times"),
]


@pytest.mark.parametrize("action", ALL_ACTIONS, ids=lambda a: type(a).__name__)
def test_actions_round_trip_through_json(action):
    d = action.to_dict()
    back = action_from_dict(json.loads(json.dumps(d)))
    assert back == action and hash(back) == hash(action) and back.to_dict() == d
    assert d["op"] == action.op


def test_action_from_dict_names_unknown_ops_and_fields():
    with pytest.raises(ValueError, match="unknown action op 'grow'"):
        action_from_dict({"op": "grow"})
    with pytest.raises(ValueError, match=r"unknown fields \['colour'\]"):
        action_from_dict({"op": "downweight_task", "task_id": "a", "colour": "red"})


def test_every_action_names_its_interface():
    assert {a.interface for a in ops.SAMPLING_ACTIONS} == {"sampling"}
    assert {a.interface for a in ops.GUIDANCE_ACTIONS} == {"guidance"}
    assert {a.interface for a in ops.RUBRIC_ACTIONS} == {"rubric"}
    assert Noop().interface == "none"


# ------------------------------------------------------------------------------------ invariants under hypothesis

@st.composite
def seed_harness(draw):
    n = draw(st.integers(1, 4))
    tasks, anchors = [], {}
    for t in range(n):
        k = draw(st.integers(1, 6))
        points = draw(st.lists(st.sampled_from([-3.0, -1.0, 0.5, 1.0, 2.0, 3.0, 5.0, 7.5]), min_size=k, max_size=k))
        if not any(p > 0 for p in points):
            points[0] = 1.0
        task = make_task(f"t{t}", points)
        tasks.append(task)
        if draw(st.booleans()):  # an explicit, cold-start-like choice: any subset, pitfalls included
            ids = [c.id for c in task.criteria]
            anchors[task.id] = draw(st.lists(st.sampled_from(ids), unique=True, max_size=len(ids)))
    levels = np.array(draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)))
    return HarnessState.from_tasks(tasks, anchors=anchors, levels=levels,
                                   initial_cap=draw(st.sampled_from([3, 2, 1, 0])))


POINTS = st.sampled_from([-4.0, -1.0, -0.25, 0.3, 1.0, 2.5, 6.0, 1e3, 0.0, math.inf])
TEXT = st.sampled_from(["tighter wording", "names the reaction", "criterion 0 of t0", "a third text", "", "  "])
GOOD_TEXT = st.sampled_from(["tighter wording", "names the reaction", "a third text", "cites a source"])
MAGNITUDE = st.sampled_from([0.25, 1.0, 2.5, 6.0, 1e3])
KINDS = ("downweight", "restore", "add", "drop", "create", "rewrite", "delete", "reweight", "merge", "split",
         "noop", "schedule")


def draw_action(draw, state):
    """A random action. Half are well-formed (existing non-anchor ids, sign-matched points, real text), so every
    operation goes through often; the rest draw arguments blindly (unknown ids, anchors, zero or infinite points,
    blank text), so every rejection path is exercised too."""
    kind = draw(st.sampled_from(KINDS))
    if kind == "schedule":
        return kind
    tid = draw(st.sampled_from(list(state.task_ids) + ["ghost"]))
    known = state.has_task(tid)
    crits = state.rubric_of(tid) if known else ()
    ids = [c.id for c in crits]
    if known and draw(st.booleans()):  # well-formed
        free = [c for c in crits if not c.anchor]
        sign = draw(st.sampled_from([1.0, -1.0]))
        same = [c for c in free if (c.points > 0) == (sign > 0)]
        pick = draw(st.sampled_from(free)) if free else crits[0]
        cid = pick.id
        group = tuple(c.id for c in draw(st.lists(st.sampled_from(same), unique=True, min_size=2, max_size=3))) \
            if len(same) >= 2 else tuple(ids[:2])
        text, text2 = draw(GOOD_TEXT), draw(GOOD_TEXT)
        points = sign * draw(MAGNITUDE)
        own = math.copysign(draw(MAGNITUDE), pick.points)
        parts = (own, math.copysign(draw(MAGNITUDE), pick.points))
        reweight = (draw(st.sampled_from(crits)).id, own) if draw(st.booleans()) else (cid, own)
        unmounted = [f for f in FIELDS if f not in dict(state.fields(tid))]
        field = draw(st.sampled_from(unmounted or list(FIELDS)))
        mounted = [n for n, _ in state.fields(tid)] or list(FIELDS)
        drop = draw(st.sampled_from(mounted))
    else:  # arbitrary
        cid = draw(st.sampled_from(ids + [f"{tid}/missing"]))
        group = tuple(draw(st.lists(st.sampled_from(ids + ["x"]), min_size=1, max_size=3)))
        text, text2 = draw(TEXT), draw(TEXT)
        points, own = draw(POINTS), draw(POINTS)
        parts = (draw(POINTS), draw(POINTS))
        reweight = (cid, draw(POINTS))
        field = drop = draw(st.sampled_from(FIELDS + ("hint",)))
    return {
        "downweight": lambda: DownweightTask(tid), "restore": lambda: RestoreTask(tid),
        "add": lambda: AddField(tid, field, text), "drop": lambda: DropField(tid, drop),
        "create": lambda: CreateCriterion(tid, text, points), "rewrite": lambda: RewriteCriterion(tid, cid, text),
        "delete": lambda: DeleteCriterion(tid, cid), "reweight": lambda: ReweightCriterion(tid, *reweight),
        "merge": lambda: MergeCriteria(tid, group, text, points),
        "split": lambda: SplitCriterion(tid, cid, (text, text2), parts),
        "noop": lambda: Noop(draw(st.sampled_from(("rubric", "none", "bogus")))),
    }[kind]()


def check_invariants(state, seed):
    for i, tid in enumerate(state.task_ids):
        crits = state.rubric_of(tid)
        seed_anchors = {c.id: c.text for c in seed.rubric_of(tid) if c.anchor}
        assert {c.id: c.text for c in crits if c.anchor} == seed_anchors  # anchors stay, text unchanged
        share = float(seed.rubric.seed_anchor_share[i])
        assert abs(anchor_share(crits) - share) <= 1e-9
        assert any(c.points > 0 for c in crits)
        assert all(c.points != 0 and math.isfinite(c.points) for c in crits)
        assert len({c.id for c in crits}) == len(crits)
        assert state.guidance.count(i) <= int(state.guidance.cap)
    p = state.sampling.probs()
    assert abs(p.sum() - 1.0) <= 1e-12 and (p > 0).all()
    np.testing.assert_allclose(state.sampling.importance_weights(), 1.0 / (state.num_tasks * p), rtol=1e-12)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=seed_harness(), data=st.data())
def test_invariants_hold_over_random_action_sequences(seed, data):
    state, step, accepted = seed, 0, 0
    for _ in range(data.draw(st.integers(1, 30))):
        action = draw_action(data.draw, state)
        before = copy.deepcopy(state)
        before_dict = state.to_dict()
        if action == "schedule":
            step = data.draw(st.integers(step, TOTAL_STEPS + 10))
            new = advance_schedule(state, step, TOTAL_STEPS)
            assert int(new.guidance.cap) == guidance_cap(step, TOTAL_STEPS, seed.guidance.initial_cap)
        else:
            try:
                new = apply(state, action)
                accepted += 1
                event(f"accepted {type(action).__name__}")
            except InvalidAction as e:
                assert e.reason and e.action is action
                new = state
        # Pure: the input is exactly as before, and its deep copy agrees.
        assert state.to_dict() == before_dict == before.to_dict()
        check_invariants(new, seed)
        if isinstance(action, RewriteCriterion) and new is not state:
            old = by_id(state, action.task_id)[action.criterion_id]
            assert by_id(new, action.task_id)[action.criterion_id].version == old.version + 1
        state = new
    # Round trip at the end of every sequence.
    assert HarnessState.from_dict(json.loads(json.dumps(state.to_dict()))).to_dict() == state.to_dict()


def test_numpy_numbers_in_actions_become_python_numbers():
    a = ReweightCriterion("a", "a/c1", np.float32(3.0))
    assert a == ReweightCriterion("a", "a/c1", 3.0) and type(a.points) is float
    s = SplitCriterion("a", "a/c1", ["p", "q"], np.array([1.0, 2.0]).tolist())
    assert s.points == (1.0, 2.0) and s.texts == ("p", "q")
    json.dumps(SplitCriterion("a", "a/c1", ("p", "q"), tuple(np.array([1, 2]))).to_dict())
