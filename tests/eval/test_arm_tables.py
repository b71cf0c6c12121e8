"""eval.arm_tables' statistics on a hand-built compare.json (two arms, three seeds, two domains): the run-level
columns are run_level_test's, the paper's cell-level ones are labelled, an older compare.json without run-level
statistics is refused with a message, and the seeds note states what the seeds allow."""

import numpy as np
import pytest

from harnessrl_jax.eval import arm_tables
from harnessrl_jax.eval.stats import paired_bootstrap_grid, paired_permutation, run_level_test


def _compare(rng, seeds=3):
    domains = ["med"] * 12 + ["sci"] * 4
    scores = {arm: {str(s): {str(step): {"seed_rubric": rng.normal(50 + 3 * (arm == "harnessrl"), 10, 16).tolist(),
                                          "oracle": rng.normal(40, 10, 16).tolist()} for step in (0, 2)}
                    for s in range(seeds)} for arm in ("grpo", "harnessrl")}
    compare = {"per_step": scores, "tasks": {"domains": domains}, "reference": "harnessrl",
               "steps_to_best": {arm: [2] * seeds for arm in scores}}
    compare["stats"] = arm_tables.arm_stats(compare, reference="harnessrl", n_boot=200, n_perm=300)
    return compare


def test_arm_stats_report_runs_by_default_and_the_papers_cells_as_labelled_extras():
    compare = _compare(np.random.default_rng(0))
    ref, grpo = (arm_tables.score_grid(compare, arm) for arm in ("harnessrl", "grpo"))
    strata = np.asarray(compare["tasks"]["domains"])
    diff, lo, hi, p = run_level_test(ref, grpo, strata)
    st = compare["stats"]["final/seed_rubric"]["grpo"]
    assert (st["diff"], st["ci95_runs"], st["p_runs"]) == (pytest.approx(diff), [pytest.approx(lo), pytest.approx(hi)],
                                                           pytest.approx(p))
    assert st["ci95_cells"] == list(paired_bootstrap_grid(ref, grpo, strata, 200)[1:])
    assert st["p_cells"] == paired_permutation(ref, grpo, 300)[1]

    rows = {r["arm"]: r for r in arm_tables.main_rows(compare)}
    assert rows["GRPO"]["vs HarnessRL [95% CI, runs]"] == f"{diff:.1f} [{lo:.1f}, {hi:.1f}]"
    assert rows["GRPO"]["p (runs)"] == f"{p:.4f}" and rows["GRPO"]["p (cells, paper)"] == f"{st['p_cells']:.4f}"
    assert rows["HarnessRL"]["vs HarnessRL [95% CI, runs]"] == "(reference)"


def test_an_older_compare_json_is_refused_and_the_seeds_note_states_the_floor():
    compare = _compare(np.random.default_rng(1))
    row = compare["stats"]["final/seed_rubric"]["grpo"]
    for key in ("ci95_runs", "p_runs", "ci95_cells", "p_cells"):
        row.pop(key)
    row.update(ci95=[0.0, 1.0], p=0.01)  # the layout before run-level statistics
    with pytest.raises(ValueError, match="'grpo' have no run-level interval.*run launch/compare.py again"):
        arm_tables.main_rows(compare)
    note = arm_tables.seeds_note(compare)
    assert "3 seeds" in note and "+- 4.30" in note and "p = 0.25" in note and "6, 8, 11 seeds" in note
    assert "no run-level interval" in arm_tables.seeds_note(_compare(np.random.default_rng(2), seeds=1))


def test_a_row_whose_model_part_ran_its_rule_fallback_is_labelled():
    """launch/compare.py records, per arm, whether a part its paper runs with a model ran the rule fallback."""
    import os

    from harnessrl_jax import settings

    tiny = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "experiments",
                        "tiny_cpu.py")
    assert arm_tables.rule_fallback(settings.load(tiny + ":method=skillrl"))
    assert arm_tables.rule_fallback(settings.load(tiny + ":method=harnessrl"))  # its rule proposer
    assert not arm_tables.rule_fallback(settings.load(tiny + ":method=grpo"))  # no model part at all
    with_model = settings.load(tiny + ":method=evorubric")
    with_model.harness.proposer = "llm"
    assert not arm_tables.rule_fallback(with_model)
    compare = _compare(np.random.default_rng(3))
    compare["arms"] = {"grpo": {"rule_fallback": False}, "harnessrl": {"rule_fallback": True}}
    assert [r["arm"] for r in arm_tables.main_rows(compare)] == ["GRPO", "HarnessRL (rule fallback)"]
