"""The criterion classes every arm logs (referenced to the oracle; the paper's Fig. 3) on hand-made groups."""

import numpy as np

from harnessrl_jax.eval.agreement import CRITERION_CLASSES, criterion_counts, criterion_metrics


def test_classes_of_a_hand_made_group():
    nan = np.nan
    points = [2.0, 1.0, 1.0, 1.0, -1.0, 1.0, 1.0]
    S = np.array([[0, 0, 0, 0],          # blind: no rollout meets it
                  [1, 1, nan, 1],        # saturated: every valid cell met
                  [1, 1, 0, 0],          # split: the meeting side has the higher oracle -> agree
                  [0, 0, 1, 1],          # split: the meeting side has the lower oracle -> spurious
                  [0, 0, 0, 0],          # a pitfall no rollout commits: achieved by all -> saturated
                  [nan, nan, nan, nan],  # no verdict
                  [1, 0, 0, 0]])         # split, but the meeting rollout has no oracle score
    oracle = np.array([nan, 80.0, 20.0, 10.0])
    got = criterion_counts(points, S, oracle)
    # re-derived by hand with the definition: mean oracle of the achieving side vs the other side
    assert got == {"blind": 1, "saturated": 2, "spurious": 1, "agree": 1, "unjudged": 1, "no_oracle": 1}
    m = criterion_metrics(got)
    assert m["taxonomy/frac_saturated"] == 2 / 5 and m["taxonomy/count/no_oracle"] == 1.0
    assert sum(m[f"taxonomy/frac_{c}"] for c in CRITERION_CLASSES) == 1.0
    assert np.isnan(criterion_metrics({})["taxonomy/frac_blind"])
