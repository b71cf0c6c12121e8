"""launch/compare.py end to end on the tiny config (2 seeds x five arms), its tables re-derived from the per-task
scores it saves, the per-run eval.json it writes, and the notebooks of experiments/notebooks that read a compare
directory executed on its output (code cells run in order, as a kernel would)."""

import contextlib
import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats as scipy_stats

from harnessrl_jax.eval import arm_tables, tables
from harnessrl_jax.eval.stats import paired_bootstrap_grid, paired_permutation

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


ARMS = ["grpo", "evorubric", "harnessrl", "harnessrl_no_critic", "harnessrl_sec_sampling"]


def run_notebook(name, monkeypatch, runs):
    nb = json.loads(open(os.path.join(REPO, "experiments", "notebooks", name)).read())
    monkeypatch.setenv("HARNESSRL_RUNS", str(runs))
    printed, scope = io.StringIO(), {}
    with contextlib.redirect_stdout(printed):
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                exec("".join(cell["source"]), scope)
    return printed.getvalue(), scope


@pytest.mark.slow
def test_compare_tables_notebooks_and_eval_files(tmp_path, monkeypatch):
    """launch/compare.py over five arms (a baseline, HarnessRL, an ablation row, an interface replacement) x 2
    seeds on the tiny config; its tables re-derived from the per-task scores it saves; every notebook executed on
    the directory."""
    out = tmp_path / "compare"
    cmd = [sys.executable, os.path.join(REPO, "launch", "compare.py"),
           "--base_config=experiments/tiny_cpu.py:tasks=harness", "--base_config.total_steps=2",
           "--base_config.checkpoint.every=1", "--base_config.report=False", "--seeds=0,1", f"--out={out}",
           "--bootstrap=300", "--permutations=500", "--eval_split=train", "--keep_checkpoints=False",
           *[f"--arm={a}" for a in ARMS]]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    compare = json.loads((out / "compare.json").read_text())
    assert not any((out / f"{a}-s0" / "checkpoints").exists() for a in ARMS)  # deleted once evaluated
    # started again, it finds every run's saved scores: nothing is trained or evaluated, the tables are the same
    again = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0 and again.stderr.count("scores saved by an earlier comparison") == 10
    assert "train.py" not in again.stderr and json.loads((out / "compare.json").read_text()) == compare
    assert list(compare["arms"]) == ARMS and compare["reference"] == "harnessrl"
    assert compare["arms"]["harnessrl_sec_sampling"] == {"method": "harnessrl",
                                                         "overrides": {"method": "harnessrl",
                                                                       "harness.sampling_rule": "sec"}}

    # The same budget and sampling seeds: every run of a seed has its config.seed and the base's budget, and
    # starts from the same policy, evaluated with the same sampling seed.
    for s in ("0", "1"):
        configs = [json.loads((out / f"{a}-s{s}" / "config.json").read_text()) for a in ARMS]
        assert {(c["seed"], c["total_steps"], c["tasks_per_step"], c["num_generations"]) for c in configs} == \
            {(int(s), 2, 2, 8)}
        assert all(compare["per_step"][a][s]["0"] == compare["per_step"]["grpo"][s]["0"] for a in ARMS)
    assert json.loads((out / "harnessrl_sec_sampling-s0" / "config.json").read_text())["harness"][
        "sampling_rule"] == "sec"

    # The legacy rows from the saved per-task scores: final = the last checkpoint, best = the highest mean seed
    # rubric, diff = the last arm minus the first, paired by seed and task.
    for arm in ARMS:
        per_seed = compare["per_step"][arm]
        assert sorted(per_seed) == ["0", "1"]
        for seed, steps in per_seed.items():
            assert sorted(map(int, steps)) == [0, 1, 2]  # the seed policy and both kept checkpoints
            best = max(steps, key=lambda s: np.nanmean(steps[s]["seed_rubric"]))
            assert compare["steps_to_best"][arm][int(seed)] == int(best)
        final = np.nanmean([np.nanmean(per_seed[s]["2"]["seed_rubric"]) for s in per_seed])
        assert compare["final/seed_rubric"][arm] == pytest.approx(final)
    diff = np.concatenate([np.subtract(compare["per_step"][ARMS[-1]][s]["2"]["oracle"],
                                       compare["per_step"]["grpo"][s]["2"]["oracle"]) for s in ("0", "1")])
    row = compare["final/oracle"]
    assert row["diff"] == pytest.approx(np.nanmean(diff)) and row["ci_low"] <= row["diff"] <= row["ci_high"]

    # The statistics: the macro aggregate (mean of domain means), the seed SD (ddof = 1) and, against HarnessRL,
    # the run-level t interval and p over the two seeds' macro margins (scipy's one-sample t test), beside the
    # paper's grid bootstrap interval and permutation p, re-derived from the per-task scores.
    domains = np.asarray(compare["tasks"]["domains"])
    grid = {a: np.stack([compare["per_step"][a][s]["2"]["seed_rubric"] for s in ("0", "1")], axis=1) for a in ARMS}

    def per_seed_macro(g):
        return np.array([np.mean([np.nanmean(g[domains == d, k]) for d in np.unique(domains)]) for k in range(2)])

    for arm in ARMS:
        st = compare["stats"]["final/seed_rubric"][arm]
        g = grid[arm]
        macro = np.mean([np.nanmean(g[domains == d]) for d in np.unique(domains)])
        assert st["macro"] == pytest.approx(macro) and st["seeds"] == 2
        assert st["seed_sd"] == pytest.approx(np.std(per_seed_macro(g), ddof=1))
        if arm != "harnessrl":
            assert st["diff"] == pytest.approx(macro - compare["stats"]["final/seed_rubric"]["harnessrl"]["macro"])
            margins = per_seed_macro(g) - per_seed_macro(grid["harnessrl"])
            if np.ptp(margins) > 1e-9:
                ref = scipy_stats.ttest_1samp(margins, 0.0)
                ci = ref.confidence_interval(0.95)
                assert st["ci95_runs"] == [pytest.approx(ci.low), pytest.approx(ci.high)]
                assert st["p_runs"] == pytest.approx(ref.pvalue)
            else:  # the same margin in both runs (an arm two steps leave unchanged): run_level_test's documented values
                same = abs(margins[0]) < 1e-12
                assert (st["ci95_runs"], st["p_runs"]) == (([0.0, 0.0], 1.0) if same else ([None, None], None))
            _, lo, hi = paired_bootstrap_grid(grid["harnessrl"], g, domains, 300)
            assert st["ci95_cells"] == [pytest.approx(lo), pytest.approx(hi)]
            assert st["p_cells"] == pytest.approx(paired_permutation(grid["harnessrl"], g, 500)[1])

    # each run's final evaluation is its eval.json, as launch/eval.py writes it
    ev = json.loads((out / "harnessrl-s1" / "eval.json").read_text())
    assert ev["step"] == 2 and ev["seed_rubric"]["mean"] == pytest.approx(
        np.nanmean(compare["per_step"]["harnessrl"]["1"]["2"]["seed_rubric"]))

    # the notebooks on this directory print the same numbers
    text, scope = run_notebook("paper_tables.ipynb", monkeypatch, out)
    assert f"{ {a: 2 for a in sorted(ARMS)} } runs" in text
    for key in ("final/seed_rubric", "final/oracle", "best/seed_rubric", "best/oracle"):
        pick, metric = key.split("/")
        assert f"{key}\n{tables.markdown(arm_tables.main_rows(compare, pick=pick, metric=metric))}" in text
    assert arm_tables.seeds_note(compare) in text and "2 seeds per arm" in text
    stats = {r["statistic"]: r for r in scope["tables"].method_table(scope["runs"])}
    assert stats["heldout"]["harnessrl"]["n"] == 2 and stats["acceptance_rate"]["grpo"] is None
    for name, arms in (("main_table.ipynb", arm_tables.MAIN_ARMS), ("ablation_table.ipynb", arm_tables.ABLATION_ARMS),
                       ("replacement_table.ipynb", arm_tables.REPLACEMENT_ARMS)):
        text, _ = run_notebook(name, monkeypatch, out)
        rows = arm_tables.main_rows(compare, arms)
        assert tables.markdown(rows) in text and len(rows) == len([a for a in arms if a in ARMS])
        assert "| p (runs) | [95% CI] (cells, paper) | p (cells, paper) |" in text
    text, _ = run_notebook("main_table.ipynb", monkeypatch, out)
    assert "| GRPO | " in text and "| EvoRubric | " in text and "(reference)" in text
    assert "no OOD evaluation in these runs" in text
    text, _ = run_notebook("ablation_table.ipynb", monkeypatch, out)
    assert "| - critic | " in text and "| GRPO |" not in text
    text, _ = run_notebook("replacement_table.ipynb", monkeypatch, out)
    assert "| sampling <- SEC | " in text

    # Fig. 3: the oracle-referenced classes over the last steps, from the runs' metrics, and their Spearman rho
    # with the final held-out score across the ten runs
    text, _ = run_notebook("failure_shares.ipynb", monkeypatch, out)
    shares, held = {}, []
    for arm in ARMS:
        for s in ("0", "1"):
            metrics = [json.loads(x) for x in open(out / f"{arm}-s{s}" / "metrics.jsonl")]
            counts = {c: sum(m[f"taxonomy/count/{c}"] for m in metrics) for c in arm_tables.CLASSES}
            n = sum(counts.values())
            for c in arm_tables.CLASSES:
                shares.setdefault(c, []).append(counts[c] / n)
            held.append(np.nanmean(grid[arm][:, int(s)]))
    assert tables.markdown(arm_tables.failure_rows(tables.runs_in(str(out)))) in text
    rho = {r["class"]: r for r in arm_tables.failure_spearman(tables.runs_in(str(out)), compare)}
    for c in arm_tables.CLASSES:
        x = np.asarray(shares[c])
        expected = stats_spearman(x, held) if np.ptp(x) and np.ptp(held) else None
        got = rho[c]["rho(share, held-out)"]
        assert rho[c]["runs"] == 10 and (got == "n/a" if expected is None else float(got) == round(expected, 2))
    assert "| class | rho(share, held-out) |" in text


def stats_spearman(x, y):
    from scipy.stats import spearmanr

    return float(spearmanr(x, y).statistic)


def test_run_stats_from_hand_written_records():
    # Pair counts per step (loop.oracle_metrics logs them): agree, reward tie (blind / saturated), wrong direction,
    # oracle tie; a step with no classified pair adds nothing.
    counts = [dict(agree=2, reward_tie=3, reward_tie_blind=3, reward_tie_saturated=0, wrong_direction=1,
                   oracle_tie=4, separated=3), dict(agree=6, reward_tie=1, reward_tie_blind=0, reward_tie_saturated=1,
                                                   wrong_direction=1, oracle_tie=2, separated=7), {}]
    metrics = [{"step": i + 1, "reward/mean": 10.0 * (i + 1), "oracle/score_mean": 50.0,
                "time/step": 10.0, "time/evolver": 2.0, "harness/reversal_rate": r,
                "guidance/reference_fields_added": f, "guidance/reference_fields_from_donors": d,
                **{f"oracle/count/{k}": v for k, v in c.items()},
                "oracle/count/pairs": sum(c.get(k, 0) for k in ("agree", "reward_tie", "wrong_direction",
                                                                 "oracle_tie"))}
               for i, (c, r, f, d) in enumerate(zip(counts, (0.0, 0.5, 0.25), (2, 0, 2), (1, 0, 2)))]
    records = [{"verdict": "accepted", "interface": "guidance"}, {"verdict": "rejected", "interface": "rubric"},
               {"verdict": "accepted", "interface": "rubric"}, {"verdict": "noop", "interface": "sampling"}]
    s = tables.stats_from_records(metrics, records)
    assert s["k"] == 1 and s["reward_first"] == 10.0 and s["reward_last"] == 30.0
    # Over all 20 pairs, ties in the denominator (the paper's definition): 8 agree.
    assert s["oracle_pairs"] == 20 and s["oracle_agreement"] == pytest.approx(8 / 20)
    assert (s["pair_reward_tie"], s["pair_wrong_direction"], s["pair_oracle_tie"]) == \
        (pytest.approx(4 / 20), pytest.approx(2 / 20), pytest.approx(6 / 20))
    assert s["pair_reward_tie_blind"] == pytest.approx(3 / 20) and s["oracle_agreement_separated"] == 0.8
    assert s["donor_share"] == pytest.approx(3 / 4)
    assert (s["measured"], s["accepted"], s["acceptance_rate"]) == (3, 2, pytest.approx(2 / 3))
    assert (s["accepted_guidance"], s["accepted_rubric"], s["accepted_sampling"]) == (1, 1, 0)
    assert s["reversal_rate"] == 0.25 and s["evolver_share"] == pytest.approx(0.2) and s["step_seconds"] == 30
    assert tables.stats_from_records([], []) == {"steps": 0.0}
