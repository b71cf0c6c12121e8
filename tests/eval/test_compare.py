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


ARMS = ["grpo", "harnessrl", "harnessrl_no_critic", "harnessrl_sec_sampling"]


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
    """launch/compare.py over four arms (a baseline, HarnessRL, an ablation row, an interface replacement) x 2
    seeds on the tiny config, evaluated every step and judged by the pairwise oracle (the Anthropic stand-in); its
    tables re-derived from the per-task scores, the evaluations and the oracle's files it saves; every notebook
    executed on the directory."""
    from anthropic_standin import StandIn

    out = tmp_path / "compare"
    cmd = [sys.executable, os.path.join(REPO, "launch", "compare.py"),
           "--base_config=experiments/tiny_cpu.py:tasks=harness", "--base_config.total_steps=2",
           "--base_config.checkpoint.every=1", "--base_config.report=False", "--seeds=0,1", f"--out={out}",
           "--bootstrap=300", "--permutations=500", "--eval_split=train", "--eval_every=1", "--eval_samples=4",
           "--keep_checkpoints=False", "--oracle=anthropic", "--oracle_model=standin", "--oracle_steps=last:1",
           *[f"--arm={a}" for a in ARMS]]
    server = StandIn()
    try:
        env = {**os.environ, "ANTHROPIC_API_KEY": "test-key-standin"}
        proc = subprocess.run(cmd + [f"--oracle_base_url={server.url}"], cwd=REPO, capture_output=True, text=True,
                              timeout=900, env=env)
        assert proc.returncode == 0, proc.stderr[-4000:]
        calls = len(server.requests)
        # started again, it finds every run's saved record: nothing is trained, evaluated or judged again, and the
        # tables are the same
        again = subprocess.run(cmd + [f"--oracle_base_url={server.url}"], cwd=REPO, capture_output=True, text=True,
                               timeout=900, env=env)
    finally:
        server.close()
    compare = json.loads((out / "compare.json").read_text())
    assert again.returncode == 0 and again.stderr.count("scores saved by an earlier comparison") == 8
    assert len(server.requests) == calls > 0 and json.loads((out / "compare.json").read_text()) == compare
    assert not any((out / f"{a}-s0" / "checkpoints").exists() for a in ARMS)  # deleted once evaluated
    assert list(compare["arms"]) == ARMS and compare["reference"] == "harnessrl"
    assert compare["arms"]["harnessrl_sec_sampling"] == {
        "method": "harnessrl", "overrides": {"method": "harnessrl", "harness.sampling_rule": "sec"}, "unlocked": [],
        "rule_fallback": True}

    # The same budget, sampling, tasks, judge and evaluation: every run of a seed has its config.seed and the
    # base's locked values, and starts from the same policy, evaluated with the same sampling seed.
    for s in ("0", "1"):
        configs = [json.loads((out / f"{a}-s{s}" / "config.json").read_text()) for a in ARMS]
        assert {(c["seed"], c["total_steps"], c["tasks_per_step"], c["num_generations"], c["eval"]["every"],
                 c["eval"]["num_samples"], c["top_p"], json.dumps(c["judge"], sort_keys=True)) for c in configs} == \
            {(int(s), 2, 2, 8, 1, 4, 1.0, json.dumps(configs[0]["judge"], sort_keys=True))}
        assert all(compare["per_step"][a][s]["0"] == compare["per_step"]["grpo"][s]["0"] for a in ARMS)
    assert compare["locked"]["eval.every"] == 1 and compare["locked"]["num_generations"] == 8

    # Every evaluated step of a run (the seed policy and both updates) has validation and test scores on disjoint
    # tasks; the best step is the validation split's (never step 0), the hours to it the run's own time/step
    # summed; the equal-compute step the latest within the budget (the reference arm's mean hours to best).
    domains = np.asarray(compare["tasks"]["domains"])
    test_ids = set(compare["tasks"]["ids"])
    budget = np.mean([compare["hours_to_best"]["harnessrl"][s] for s in ("0", "1")])
    assert compare["equal_compute_hours"] == pytest.approx(budget)
    for arm in ARMS:
        for seed in ("0", "1"):
            run = out / f"{arm}-s{seed}"
            evals = [json.loads(x) for x in open(run / "evals.jsonl")]
            assert sorted({(e["step"], e["split"]) for e in evals}) == [(k, sp) for k in (0, 1, 2)
                                                                        for sp in ("test", "validation")]
            val = {e["step"]: e for e in evals if e["split"] == "validation"}
            assert not set(val[0]["task_ids"]) & test_ids and val[0]["num_samples"] == 4
            best = max((1, 2), key=lambda k: (val[k]["macro"]["seed_rubric"], -k))
            picks = compare["picks"][arm][seed]
            assert picks["best"] == compare["steps_to_best"][arm][seed] == best and picks["final"] == 2
            metrics = [json.loads(x) for x in open(run / "metrics.jsonl")]
            hours = sum(m["time/step"] for m in metrics if m["step"] <= best) / 3600
            assert compare["hours_to_best"][arm][seed] == pytest.approx(hours)
            cumulative = {k: sum(m["time/step"] for m in metrics if m["step"] <= k) / 3600 for k in (0, 1, 2)}
            assert picks["equal_compute"] == max(k for k in (0, 1, 2) if cumulative[k] <= budget + 1e-12)
            assert picks["paper"] is None  # no OOD benchmark in this comparison
            test = {e["step"]: e for e in evals if e["split"] == "test"}
            assert compare["per_step"][arm][seed]["2"]["seed_rubric"] == pytest.approx(test[2]["seed_rubric"])

    # The statistics at the final step: the macro aggregate (mean of domain means), the seed SD (ddof = 1) and,
    # against HarnessRL, the run-level t interval and p over the two seeds' macro margins (scipy's one-sample t
    # test), beside the paper's grid bootstrap interval and permutation p, re-derived from the per-task scores.
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

    # the notebooks on this directory print the same numbers
    text, scope = run_notebook("paper_tables.ipynb", monkeypatch, out)
    assert f"{ {a: 2 for a in sorted(ARMS)} } runs" in text
    for pick in arm_tables.PICKS:
        for metric in arm_tables.METRICS:
            rows = tables.markdown(arm_tables.main_rows(compare, pick=pick, metric=metric))
            assert f"{arm_tables.PICK_LABELS[pick]}, {metric}\n{rows}" in text
    assert "the paper's pick" not in text and tables.markdown(arm_tables.time_rows(compare)) in text
    assert arm_tables.seeds_note(compare) in text and "2 seeds per arm" in text
    stats = {r["statistic"]: r for r in scope["tables"].method_table(scope["runs"])}
    assert stats["heldout"]["harnessrl"]["n"] == 2 and stats["acceptance_rate"]["grpo"] is None
    assert stats["oracle_agreement"]["oracle"] == tables.PAIRWISE
    for name, arms in (("main_table.ipynb", arm_tables.MAIN_ARMS), ("ablation_table.ipynb", arm_tables.ABLATION_ARMS),
                       ("replacement_table.ipynb", arm_tables.REPLACEMENT_ARMS)):
        text, _ = run_notebook(name, monkeypatch, out)
        rows = arm_tables.main_rows(compare, arms)
        assert tables.markdown(rows) in text and len(rows) == len([a for a in arms if a in ARMS])
        assert "| p (runs) | [95% CI] (cells, paper) | p (cells, paper) |" in text
        assert tables.markdown(arm_tables.time_rows(compare, arms)) in text
    text, _ = run_notebook("main_table.ipynb", monkeypatch, out)
    assert "| GRPO | " in text and "| HarnessRL (rule fallback) | " in text and "(reference)" in text
    assert "no OOD evaluation in these runs" in text
    text, _ = run_notebook("ablation_table.ipynb", monkeypatch, out)
    assert "| - critic (rule fallback) | " in text and "| GRPO |" not in text
    text, _ = run_notebook("replacement_table.ipynb", monkeypatch, out)
    assert "| sampling <- SEC (rule fallback) | " in text

    # Fig. 3 and agreement: the criterion classes and pair classes of the pairwise oracle's oracle.jsonl (not the
    # rule stand-in the runs also logged), and the classes' Spearman rho with the final held-out score across the
    # eight runs
    text, _ = run_notebook("failure_shares.ipynb", monkeypatch, out)
    shares, held = {}, []
    for arm in ARMS:
        for s in ("0", "1"):
            lines = [json.loads(x) for x in open(out / f"{arm}-s{s}" / "oracle" / "oracle.jsonl")]
            assert [x["step"] for x in lines] == [1]  # the last recorded step, --oracle_steps=last:1
            counts = {c: sum(x["criteria"][c] for x in lines) for c in arm_tables.CLASSES}
            n = sum(counts.values())
            for c in arm_tables.CLASSES:
                shares.setdefault(c, []).append(counts[c] / n)
            held.append(per_seed_macro(grid[arm])[int(s)])
            # one seed policy per seed: a task's anchors are the same responses in every arm (an arm that drew
            # another task adds that task's)
            anchors = json.loads((out / f"{arm}-s{s}" / "oracle" / "anchors.json").read_text())
            first = json.loads((out / f"grpo-s{s}" / "oracle" / "anchors.json").read_text())
            assert all(anchors[t] == first[t] for t in anchors.keys() & first.keys()) and first
            pairs = {k: sum(x["counts"].get(k, 0) for x in lines) for k in ("agree", "pairs")}
            assert tables.run_stats(str(out / f"{arm}-s{s}"))["oracle_agreement"] == \
                pytest.approx(pairs["agree"] / pairs["pairs"])
    rows = arm_tables.failure_rows(tables.runs_in(str(out)))
    assert tables.markdown(rows) in text and {r["oracle"] for r in rows} == {tables.PAIRWISE}
    harnessrl = next(r for r in rows if r["arm"] == "HarnessRL")
    assert harnessrl["agree"] == f"{100 * np.mean(shares['agree'][2:4]):.1f}"
    rho = {r["class"]: r for r in arm_tables.failure_spearman(tables.runs_in(str(out)), compare)}
    for c in arm_tables.CLASSES:
        x = np.asarray(shares[c])
        expected = stats_spearman(x, held) if np.ptp(x) and np.ptp(held) else None
        got = rho[c]["rho(share, held-out)"]
        assert rho[c]["runs"] == 8 and (got == "n/a" if expected is None else float(got) == round(expected, 2))
    assert "| class | rho(share, held-out) |" in text


def test_an_arm_may_change_a_locked_key_only_when_the_comparison_names_it():
    from harnessrl_jax import settings
    from harnessrl_jax.eval import comparison as compare

    with pytest.raises(ValueError, match=r"'top_p' is shared by every arm.*--unlock"):
        compare.parse_arm("hot=method=grpo,top_p=0.9")
    with pytest.raises(ValueError, match=r"'judge.model' is shared by every arm"):
        compare.parse_arm("other_judge=method=grpo,judge.model=x")
    name, overrides = compare.parse_arm("budget8=method=grpo,num_generations=4", unlocked=["num_generations"])
    assert (name, overrides) == ("budget8", {"method": "grpo", "num_generations": "4"})
    base = settings.load(os.path.join(REPO, "experiments", "tiny_cpu.py") + ":tasks=harness")
    arms = {"grpo": {"method": "grpo"}, "budget8": overrides}
    configs = {a: compare.apply_overrides(base, ov) for a, ov in arms.items()}
    compare.check_locked(base, configs, arms, ["num_generations"])  # the arm that exists to change it
    with pytest.raises(ValueError, match=r"arm 'budget8' has num_generations=4, the base config 8"):
        compare.check_locked(base, configs, arms, [])
    # a locked key moved by anything but the arm's own overrides (a method default) is refused, named
    configs["grpo"].optim.lr = 1.0
    with pytest.raises(ValueError, match=r"arm 'grpo' has optim.lr=1.0"):
        compare.check_locked(base, configs, arms, ["num_generations", "optim.lr"])


def stats_spearman(x, y):
    from scipy.stats import spearmanr

    return float(spearmanr(x, y).statistic)


def test_run_stats_from_hand_written_records(tmp_path):
    # Pair counts per step, as the loop logs the rule stand-in's (oracle/count/*): agree, reward tie (blind /
    # saturated), wrong direction, oracle tie; a step with no classified pair adds nothing.
    counts = [dict(agree=2, reward_tie=3, reward_tie_blind=3, reward_tie_saturated=0, wrong_direction=1,
                   oracle_tie=4, separated=3), dict(agree=6, reward_tie=1, reward_tie_blind=0, reward_tie_saturated=1,
                                                   wrong_direction=1, oracle_tie=2, separated=7), {}]
    for c in counts:
        c["pairs"] = sum(c.get(k, 0) for k in ("agree", "reward_tie", "wrong_direction", "oracle_tie"))
    metrics = [{"step": i + 1, "reward/mean": 10.0 * (i + 1), "oracle/score_mean": 50.0 + i,
                "time/step": 10.0, "time/evolver": 2.0, "harness/reversal_rate": r,
                "guidance/reference_fields_added": f, "guidance/reference_fields_from_donors": d,
                **{f"oracle/count/{k}": v for k, v in c.items()}, "taxonomy/count/blind": 1.0}
               for i, (c, r, f, d) in enumerate(zip(counts, (0.0, 0.5, 0.25), (2, 0, 2), (1, 0, 2)))]
    records = [{"verdict": "accepted", "interface": "guidance"}, {"verdict": "rejected", "interface": "rubric"},
               {"verdict": "accepted", "interface": "rubric"}, {"verdict": "noop", "interface": "sampling"}]
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    source, oracle = tables.oracle_record(str(run))
    assert source == tables.STANDIN and [o["pairs"] for o in oracle] == counts
    s = tables.stats_from_records(metrics, records, oracle)
    assert s["k"] == 1 and s["reward_first"] == 10.0 and s["reward_last"] == 30.0
    assert (s["oracle_first"], s["oracle_last"]) == (50.0, 52.0)
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

    # The pairwise oracle's record, once launch/oracle.py has written it, is read instead of the stand-in.
    (run / "oracle").mkdir()
    line = {"step": 0, "counts": {"pairs": 4, "agree": 1}, "criteria": {"spurious": 2, "agree": 1},
            "oracle/score_mean": 70.0}
    (run / "oracle" / "oracle.jsonl").write_text(json.dumps(line) + "\n")
    stats = tables.run_stats(str(run))
    assert stats["oracle_source"] == tables.PAIRWISE and stats["oracle_agreement"] == 0.25
    assert stats["oracle_last"] == 70.0
    assert arm_tables.failure_shares(str(run))["spurious"] == pytest.approx(2 / 3)

    # Without either (a Rubric-Mix task has no rule oracle, so the stand-in classes nothing): NaN, not zeros.
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "metrics.jsonl").write_text(json.dumps({"step": 1, "oracle/count/pairs": 0.0,
                                                     "taxonomy/count/no_oracle": 5.0}) + "\n")
    assert tables.oracle_record(str(empty)) == (None, [])
    stats, shares = tables.run_stats(str(empty)), arm_tables.failure_shares(str(empty))
    assert stats["oracle_source"] is None and np.isnan(stats["oracle_agreement"])
    assert shares["oracle"] == "none" and all(np.isnan(shares[c]) for c in arm_tables.CLASSES)
