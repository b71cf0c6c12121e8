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
                                          "oracle": rng.normal(40, 10, 16).tolist()} for step in (0, 1, 2)}
                    for s in range(seeds)} for arm in ("grpo", "harnessrl")}
    # the final step is 2, the validation split prefers step 1 and the OOD benchmarks step 2
    picks = {arm: {str(s): {"final": 2, "best": 1, "paper": 2, "equal_compute": 1} for s in range(seeds)}
             for arm in scores}
    hours = {arm: {str(s): {"0": 0.0, "1": 1.0 + s, "2": 2.0 + s} for s in range(seeds)} for arm in scores}
    compare = {"per_step": scores, "tasks": {"domains": domains}, "reference": "harnessrl", "picks": picks,
               "hours": hours, "equal_compute_hours": 1.5}
    compare["stats"] = arm_tables.arm_stats(compare, reference="harnessrl", n_boot=200, n_perm=300)
    return compare


def test_the_steps_each_pick_reads():
    validation = {"0": 90.0, "1": 40.0, "2": 55.0, "3": 55.0, "4": 50.0}  # step 0 never counts; ties: earliest
    ood = {"0": 99.0, "2": 10.0, "4": 30.0}
    hours = {"0": 0.0, "1": 1.0, "2": 2.0, "3": 3.5, "4": 4.0}
    assert arm_tables.choose_steps(validation, ood, hours, 3.5) == {"final": 4, "best": 2, "paper": 4,
                                                                   "equal_compute": 3}
    assert arm_tables.choose_steps(validation, {}, hours, 0.5) == {"final": 4, "best": 2, "paper": None,
                                                                  "equal_compute": 0}
    assert arm_tables.choose_steps({"0": 50.0}, {}, {"0": 0.0}, None)["best"] == 0  # nothing but the seed policy
    metrics = [{"step": 2, "time/step": 1800.0}, {"step": 1, "time/step": 3600.0}, {"step": 3}]
    assert arm_tables.cumulative_hours(metrics) == {0: 0.0, 1: 1.0, 2: 1.5, 3: 1.5}


def test_each_pick_reads_its_step_and_the_papers_pick_has_no_interval():
    compare = _compare(np.random.default_rng(4))
    for pick, step in (("final", "2"), ("best", "1"), ("equal_compute", "1"), ("paper", "2")):
        grid = arm_tables.score_grid(compare, "grpo", pick)
        assert np.array_equal(grid[:, 0], compare["per_step"]["grpo"]["0"][step]["seed_rubric"])
    paper = compare["stats"]["paper/seed_rubric"]["grpo"]
    assert "ci95_runs" not in paper and "p_cells" not in paper
    assert paper["diff"] == pytest.approx(paper["macro"] - compare["stats"]["paper/seed_rubric"]["harnessrl"]["macro"])
    rows = arm_tables.main_rows(compare, pick="paper")
    assert list(rows[0]) == ["arm", "med", "sci", "macro", "seed SD", "vs HarnessRL (no interval)"]
    times = {r["arm"]: r for r in arm_tables.time_rows(compare)}
    assert times["GRPO"]["steps to best"] == "1 [1, 1] (by seed {0: 1, 1: 1, 2: 1})"
    assert times["GRPO"]["hours to best"] == "2.000 [1.000, 3.000]"
    best = compare["stats"]["best/seed_rubric"]["grpo"]["macro"]
    assert times["GRPO"]["best-step macro"] == f"{best:.1f}" and "equal-compute step (1.50 h)" in times["GRPO"]


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
