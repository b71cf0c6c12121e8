"""Evaluation under a harness arm (eval.harness_arms): pass@J and pass^J by hand, and the tiny policy under the
'plain' arm scoring exactly what the bare-prompt evaluation scores with the same seed."""

import numpy as np
import pytest

from harnessrl_jax.eval.evaluate import evaluate
from harnessrl_jax.eval.harness_arms import evaluate_arm, pass_rates


def test_pass_at_j_and_pass_hat_j_by_hand():
    r = np.array([[90.0, 10.0, 85.0], [80.0, 80.0, np.nan], [0.0, 50.0, 79.9], [np.nan] * 3])
    at, every = pass_rates(r, 80.0)
    np.testing.assert_array_equal(at[:3], [1.0, 1.0, 0.0])  # reward >= 80 passes
    np.testing.assert_array_equal(every[:3], [0.0, 1.0, 0.0])  # the NaN cell does not count against task 2
    assert np.isnan(at[3]) and np.isnan(every[3])


def test_plain_arm_is_the_bare_evaluation_and_arms_change_the_prompt(tiny_setup):
    from harnessrl_jax import build

    run = tiny_setup
    build.initial_state(run)  # the engine samples a live policy (earlier tests' states were donated)
    tasks = run.tasks
    bare = evaluate(run, tasks, num_samples=4, seed=5)
    plain = evaluate_arm(run, tasks, "plain", num_samples=4, seed=5, threshold=50.0)
    assert plain["mean"] == pytest.approx(float(np.nanmean(bare.seed_rubric)))
    assert plain["pass_all_j"] <= plain["pass_at_j"] and plain["over_budget"] == 0
    everyone = evaluate_arm(run, tasks, "persona_roleplay", num_samples=4, seed=5, threshold=0.0)
    assert everyone["pass_all_j"] == 1.0 and everyone["over_budget"] == 0  # every reward is >= 0
    assert evaluate_arm(run, tasks, "persona_roleplay", num_samples=4, seed=5, threshold=101.0)["pass_at_j"] == 0.0
