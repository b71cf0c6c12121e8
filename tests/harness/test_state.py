"""Harness state: the seed harness, anchors, sampling distribution and draws, the guidance cap schedule, pytree and
JSON forms. Expected numbers are worked by hand from the paper's constants (HarnessRL, sec. 3 and 4.1)."""

import copy
import json

import jax
import numpy as np
import pytest

from harnessrl_jax.harness import state as hs
from harnessrl_jax.harness.state import (GAMMAS, GuidanceState, HarnessState, RubricCriterion, SamplingState,
                                         anchor_share, guidance_cap, sample_tasks, seed_anchor_ids)
from harnessrl_jax.rubric.schema import Criterion, Task


def make_task(tid, points, tags=None):
    tags = tags or [()] * len(points)
    crits = tuple(Criterion(f"{tid}/c{k}", f"criterion {k} of {tid}", float(p), tuple(t))
                  for k, (p, t) in enumerate(zip(points, tags)))
    return Task(tid, "science", ({"role": "user", "content": f"question {tid}"},), crits)


# ------------------------------------------------------------------------------------------------------- anchors

@pytest.mark.parametrize("points, anchors", [
    ([5, 3, -2], {"c0"}),              # two positive -> the top one
    ([3, 5, 1, 4], {"c1", "c3"}),      # four positive -> the top two
    ([4, 4, 4], {"c0"}),               # ties keep seed order; half of three rounds down
    ([4], set()),                      # one positive criterion stays free for rubric updates
    ([-1, 2, -3, 2, 7], {"c4"}),       # pitfalls are never default anchors
])
def test_default_anchors_are_the_top_weighted_half_of_positive_criteria(points, anchors):
    task = make_task("t", points)
    assert seed_anchor_ids(task) == {f"t/{a}" for a in anchors}


def test_tagged_anchors_win_over_the_default():
    task = make_task("t", [5, 3, 1], tags=[(), (), ("anchor:true",)])
    assert seed_anchor_ids(task) == {"t/c2"}


def test_from_tasks_marks_anchors_and_records_their_seed_share():
    tasks = [make_task("a", [6, 2, 4, -2]), make_task("b", [3]), make_task("c", [1, 1])]
    state = HarnessState.from_tasks(tasks, anchors={"c": ["c/c0", "c/c1"]})
    assert [c.anchor for c in state.rubric_of("a")] == [True, False, False, False]
    assert [c.anchor for c in state.rubric_of("b")] == [False]
    assert [c.anchor for c in state.rubric_of("c")] == [True, True]
    # a: A = 6, B = 2 + 4 (the pitfall is not positive weight) -> 0.5; b: no anchor -> 0; c: all anchors -> 1.
    np.testing.assert_array_equal(state.rubric.seed_anchor_share, [0.5, 0.0, 1.0])
    assert all(c.origin == "seed" and c.version == 1 and c.parent_ids == () for c in state.rubric_of("a"))


def test_anchor_share_is_over_positive_points_only():
    crits = [RubricCriterion("x", "x", 3.0, anchor=True), RubricCriterion("y", "y", 1.0),
             RubricCriterion("z", "z", -5.0, anchor=True)]
    assert anchor_share(crits) == 0.75


def test_from_tasks_rejects_unknown_anchor_ids_and_duplicate_tasks():
    with pytest.raises(ValueError, match="not among its criteria"):
        HarnessState.from_tasks([make_task("a", [1, 2])], anchors={"a": ["a/c9"]})
    with pytest.raises(ValueError, match="duplicate task ids"):
        HarnessState.from_tasks([make_task("a", [1]), make_task("a", [2])])


def test_seed_harness_mounts_nothing_and_samples_uniformly():
    state = HarnessState.from_tasks([make_task(t, [2, 1]) for t in "abcd"])
    assert not state.guidance.mounted().any() and state.guidance.mounted().shape == (4, 3)
    assert int(state.guidance.cap) == 3
    np.testing.assert_array_equal(state.sampling.level, [0, 0, 0, 0])
    np.testing.assert_allclose(state.sampling.probs(), 0.25)
    np.testing.assert_allclose(state.sampling.importance_weights(), 1.0)


def test_to_tasks_and_accessors_give_the_current_rubric():
    tasks = [make_task("a", [6, 2]), make_task("b", [1])]
    state = HarnessState.from_tasks(tasks)
    assert state.to_tasks(tasks) == tasks  # the seed harness scores with the seed rubric
    assert state.criteria("a") == tasks[0].criteria
    np.testing.assert_array_equal(state.points("a"), [6.0, 2.0])
    with pytest.raises(ValueError, match="harness's tasks"):
        state.to_tasks(tasks[::-1])


# ------------------------------------------------------------------------------------------------------ sampling

def test_level_weights_are_one_then_the_paper_gammas():
    s = SamplingState.create(4, levels=np.array([0, 1, 2, 3]))
    assert GAMMAS == (0.61, 0.38, 0.17)
    np.testing.assert_array_equal(s.weights(), [1.0, 0.61, 0.38, 0.17])
    total = 1.0 + 0.61 + 0.38 + 0.17  # 2.16
    np.testing.assert_allclose(s.probs(), [1 / total, 0.61 / total, 0.38 / total, 0.17 / total], rtol=1e-15)
    np.testing.assert_allclose(s.importance_weights(), [total / 4, total / 2.44, total / 1.52, total / 0.68],
                               rtol=1e-14)


@pytest.mark.parametrize("gammas", [(0.61, 0.38), (0.38, 0.61, 0.17), (1.0, 0.5, 0.1), (0.5, 0.2, 0.0)])
def test_bad_gammas_are_rejected(gammas):
    with pytest.raises(ValueError, match="gamma"):
        SamplingState.create(3, gammas)


def test_levels_out_of_range_are_rejected():
    with pytest.raises(ValueError, match="0..3"):
        SamplingState.create(2, levels=np.array([0, 4]))


def test_sample_tasks_draws_from_p_with_u_equal_to_one_over_n_p():
    s = SamplingState.create(4, levels=np.array([0, 1, 2, 3]))
    idx, u = sample_tasks(s, jax.random.key(0), 200_000)
    idx, u = np.asarray(idx), np.asarray(u)
    assert idx.dtype == np.int32 and idx.shape == (200_000,)
    p = s.probs()
    np.testing.assert_allclose(u, 1.0 / (4 * p[idx]), rtol=1e-6)
    freq = np.bincount(idx, minlength=4) / idx.size
    np.testing.assert_allclose(freq, p, atol=4 * np.sqrt(p * (1 - p) / idx.size).max())
    # The importance correction makes each task's expected share of the objective 1/N again.
    np.testing.assert_allclose(np.bincount(idx, weights=u, minlength=4) / idx.size, 0.25, atol=0.01)


def test_sample_tasks_is_deterministic_in_the_key_and_takes_a_whole_harness_part():
    s = HarnessState.from_tasks([make_task(t, [1]) for t in "abc"]).sampling
    a = sample_tasks(s, jax.random.key(3), 16)
    b = sample_tasks(s, jax.random.key(3), 16)
    np.testing.assert_array_equal(a[0], b[0])


# ------------------------------------------------------------------------------------------------------ guidance

def test_guidance_cap_falls_by_one_each_quarter():
    # 500 steps (the paper's run): quarters start at 125, 250, 375.
    expected = {0: 3, 75: 3, 124: 3, 125: 2, 249: 2, 250: 1, 350: 1, 374: 1, 375: 0, 499: 0, 500: 0, 600: 0}
    assert {s: guidance_cap(s, 500) for s in expected} == expected
    assert [guidance_cap(s, 8, initial_cap=2) for s in range(9)] == [2, 2, 1, 1, 0, 0, 0, 0, 0]
    with pytest.raises(ValueError):
        guidance_cap(0, 0)


def test_initial_cap_is_at_most_one_field_of_each_kind():
    with pytest.raises(ValueError, match="initial_cap"):
        GuidanceState.create(2, initial_cap=4)


# ------------------------------------------------------------------------------------------- pytree and JSON form

def test_state_is_a_pytree_with_numeric_leaves_and_text_as_metadata():
    state = HarnessState.from_tasks([make_task("a", [6, 2]), make_task("b", [1])])
    leaves, treedef = jax.tree_util.tree_flatten(state)
    assert all(isinstance(x, np.ndarray) for x in leaves)
    assert not any(x.dtype.kind in "OUS" for x in leaves)
    back = jax.tree_util.tree_unflatten(treedef, leaves)
    assert back.to_dict() == state.to_dict()
    doubled = jax.tree_util.tree_map(lambda x: x * 2, state.sampling)
    np.testing.assert_array_equal(doubled.level_weights, 2 * state.sampling.level_weights)


def test_leaves_are_read_only_and_dataclasses_frozen():
    state = HarnessState.from_tasks([make_task("a", [6, 2])])
    with pytest.raises(ValueError):
        state.sampling.level[0] = 2
    with pytest.raises(ValueError):
        state.rubric.next_id[0] = 5
    with pytest.raises(AttributeError):
        state.guidance.cap = 1
    with pytest.raises(AttributeError):
        state.rubric_of("a")[0].text = "changed"
    # A caller's array is copied, not aliased.
    levels = np.array([1])
    s = SamplingState.create(1, levels=levels)
    levels[0] = 3
    assert int(s.level[0]) == 1


def test_json_round_trip_is_exact_and_deep_copies_agree():
    from harnessrl_jax.harness import ops, transitions
    tasks = [make_task("a", [6, 2, 4, -2]), make_task("b", [3, 1])]
    state = HarnessState.from_tasks(tasks, levels=np.array([2, 0]), gammas=(0.7, 0.4, 0.1))
    state = transitions.apply(state, [
        ops.CreateCriterion("a", "new one", 3.0, ("axis:accuracy",)),   # rescales to non-terminating floats
        ops.AddField("b", "critique", "last group skipped units", criterion_id="b/c1"),
        ops.AddField("b", "criterion", "give units"),
        ops.SplitCriterion("a", "a/c1", ("part one", "part two"), (1.0, 2.0)),
    ])
    d = state.to_dict()
    text = json.dumps(d)
    back = HarnessState.from_dict(json.loads(text))
    assert back.to_dict() == d
    assert back.task_ids == state.task_ids
    assert back.rubric.criteria == state.rubric.criteria  # points equal bit for bit
    assert back.guidance.fields == state.guidance.fields
    np.testing.assert_array_equal(back.sampling.level_weights, [1.0, 0.7, 0.4, 0.1])
    assert copy.deepcopy(state).to_dict() == d


def test_from_dict_rejects_other_formats_and_ragged_rows():
    d = HarnessState.from_tasks([make_task("a", [1])]).to_dict()
    with pytest.raises(ValueError, match="format"):
        HarnessState.from_dict({**d, "format": 99})
    with pytest.raises(ValueError, match="rows for 1 tasks"):
        HarnessState.from_dict({**d, "rubric": {**d["rubric"], "criteria": []}})
    with pytest.raises(ValueError, match="unknown guidance fields"):
        HarnessState.from_dict({**d, "guidance": {**d["guidance"], "fields": [{"hint": {"text": "x"}}]}})


def test_module_constants_match_the_paper():
    assert hs.FIELDS == ("criterion", "reference", "critique")
    assert hs.INITIAL_CAP == 3 and hs.NUM_LEVELS == 4
