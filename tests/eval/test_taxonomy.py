"""The criterion classes every arm logs (referenced to the oracle; the paper's Fig. 3) on hand-made groups."""

import numpy as np
import pytest

from harnessrl_jax.eval.agreement import (CRITERION_CLASSES, criterion_counts, criterion_metrics,
                                          pairwise_from_scores)

nan = np.nan


def test_classes_of_a_hand_made_group_from_oracle_scores():
    points = [2.0, 1.0, 1.0, 1.0, -1.0, 1.0, 1.0]
    S = np.array([[0, 0, 0, 0],          # blind: no rollout meets it
                  [1, 1, nan, 1],        # saturated: every valid cell met
                  [1, 1, 0, 0],          # split: the oracle prefers the meeting side -> agree
                  [0, 0, 1, 1],          # split: the oracle prefers the other side -> spurious
                  [0, 0, 0, 0],          # a pitfall no rollout commits: achieved by all -> saturated
                  [nan, nan, nan, nan],  # no verdict
                  [1, 0, 0, 0]])         # split, but the meeting rollout has no oracle verdict
    got = criterion_counts(points, S, pairwise_from_scores([nan, 80.0, 20.0, 10.0]))
    assert got == {"blind": 1, "saturated": 2, "spurious": 1, "agree": 1, "unjudged": 1, "no_oracle": 1}
    m = criterion_metrics(got)
    assert m["taxonomy/frac_saturated"] == 2 / 5 and m["taxonomy/count/no_oracle"] == 1.0
    assert sum(m[f"taxonomy/frac_{c}"] for c in CRITERION_CLASSES) == 1.0
    assert np.isnan(criterion_metrics({})["taxonomy/frac_blind"])


def test_a_split_criterion_is_classed_by_the_oracles_verdicts_on_the_pairs_it_separates():
    # Pairwise verdicts no per-response score gives (an order-inconsistent pair is 0): the criterion met by
    # rollouts 0 and 1 separates (0,2) +1, (0,3) +1, (1,2) -1, (1,3) 0: mean +1/4 -> agree. Pairs it does not
    # separate ((0,1), (2,3)) do not count, however strongly the oracle orders them.
    o = np.zeros((4, 4))
    for i, j, v in ((0, 2, 1), (0, 3, 1), (1, 2, -1), (1, 3, 0), (0, 1, -1), (2, 3, 1)):
        o[i, j], o[j, i] = v, -v
    S = np.array([[1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 0, 1]])
    # [1,0,0,1] separates (0,1) -1, (0,2) +1, (3,1) 0, (3,2) -1: mean -1/4 -> spurious
    assert criterion_counts([1.0, 1.0, 1.0], S, o) == {"blind": 0, "saturated": 0, "agree": 1, "spurious": 2,
                                                       "unjudged": 0, "no_oracle": 0}
    # a criterion the oracle is indifferent about on every pair it separates is spurious (the reward separates what
    # the oracle does not)
    assert criterion_counts([1.0], S[:1], np.zeros((4, 4)))["spurious"] == 1


def test_a_group_the_oracle_did_not_judge_shifts_no_share():
    # a Rubric-Mix task has no oracle rubric: its blind and saturated criteria must not be counted as if the oracle
    # had judged the group (they would renormalise the shares to blind + saturated = 100%)
    S = np.array([[0, 0, 0], [1, 1, 1], [1, 0, 0]])
    got = criterion_counts([1.0, 1.0, 1.0], S, np.full((3, 3), nan))
    assert got["no_oracle"] == 3 and sum(got[c] for c in CRITERION_CLASSES) == 0
    assert all(np.isnan(criterion_metrics(got)[f"taxonomy/frac_{c}"]) for c in CRITERION_CLASSES)
    with pytest.raises(ValueError, match="oracle_pairs has shape"):
        criterion_counts([1.0], S[:1], np.zeros((4, 4)))
