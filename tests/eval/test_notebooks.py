"""The notebooks of experiments/notebooks (OOD table, process statistics, case study, cost table), executed on one
tiny HarnessRL run that was trained, evaluated on the OOD fixtures (launch/eval.py --ood) and judged by the oracle
(launch/oracle.py); their numbers are recomputed here from the run's raw files."""

import contextlib
import io
import json
import os

import numpy as np
import pytest

from harnessrl_jax.eval import tables
from harnessrl_jax.eval.ood import extract_choice
from harnessrl_jax.rubric import rules

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.slow


def run_notebook(name, monkeypatch, **env):
    nb = json.load(open(os.path.join(REPO, "experiments", "notebooks", name)))
    for k, v in env.items():
        monkeypatch.setenv(k, str(v))
    printed, scope = io.StringIO(), {}
    with contextlib.redirect_stdout(printed):
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                exec("".join(cell["source"]), scope)
    return printed.getvalue(), scope


def _lines(path):
    return [json.loads(line) for line in open(path) if line.strip()]


def test_ood_table_notebook(analysed_runs, monkeypatch):
    text, scope = run_notebook("ood_table.ipynb", monkeypatch, HARNESSRL_RUNS=analysed_runs)
    ev = json.load(open(os.path.join(analysed_runs, "harnessrl-s0", "eval.json")))["ood"]
    assert set(ev) == {"medqa", "gpqa", "rolebench", "ifbench", "aggregate"}
    # the scores launch/eval.py wrote, recomputed from the responses it kept
    fix = os.path.join(REPO, "tests", "eval", "fixtures", "ood")
    med = _lines(os.path.join(fix, "medqa", "phrases_no_exclude_test.jsonl"))
    acc = [np.mean([extract_choice(r, 4, [row["options"][k] for k in "ABCD"]) == row["answer_idx"]
                    for r in item["responses"]]) for row, item in zip(med, ev["medqa"]["per_item"])]
    assert ev["medqa"]["score"] == pytest.approx(100 * np.mean(acc))
    if_rows = {str(r["key"]): r for r in _lines(os.path.join(fix, "ifbench", "IFBench_test.jsonl"))}
    loose = []
    for item in ev["ifbench"]["per_item"]:
        row = if_rows[item["id"].split("/", 1)[1]]
        loose.append(np.mean([all(rules.follow_instructions(row["instruction_id_list"], row["kwargs"], r,
                                                            prompt=row["prompt"], loose=True))
                              for r in item["responses"]]))
    assert ev["ifbench"]["score"] == ev["ifbench"]["prompt_loose"] == pytest.approx(100 * np.mean(loose))
    assert ev["aggregate"] == pytest.approx(np.mean([ev[b]["score"] for b in ("medqa", "gpqa", "rolebench",
                                                                              "ifbench")]))
    rows = {r["benchmark"]: r for r in tables.ood_rows(scope["runs"])}
    assert rows["medqa"]["harnessrl"]["mean"] == pytest.approx(ev["medqa"]["score"])
    assert rows["  ifbench prompt_strict"]["harnessrl"]["mean"] == pytest.approx(ev["ifbench"]["prompt_strict"])
    assert f"| OOD aggregate (macro) | {tables._cell(rows['OOD aggregate (macro)']['harnessrl'])} |" in text


def test_process_statistics_notebook(analysed_runs, monkeypatch):
    text, scope = run_notebook("process_stats.ipynb", monkeypatch, HARNESSRL_RUNS=analysed_runs,
                               HARNESSRL_WINDOW=2)
    run = os.path.join(analysed_runs, "harnessrl-s0")
    metrics, records = _lines(os.path.join(run, "metrics.jsonl")), _lines(os.path.join(run, "harness.jsonl"))
    s = tables.process_stats(run, window=2)
    assert s["guidance_peak"] == max(m["guidance/fields_per_task"] for m in metrics)
    assert s["unguided_share"] == 1 - metrics[-1]["guidance/tasks_with_fields"] == \
        pytest.approx(metrics[-1]["guidance/tasks_without_fields"])
    measured = [r for r in records if r["verdict"] in ("accepted", "rejected")]
    assert all(r["with_evidence"] == bool(r["used_evidence"]) for r in measured)
    for flag, key in ((True, "acceptance_with_evidence"), (False, "acceptance_without_evidence")):
        sub = [r["verdict"] == "accepted" for r in measured if bool(r["used_evidence"]) == flag]
        assert s[key] == pytest.approx(np.mean(sub)) if sub else np.isnan(s[key])
    accepted_rubric = [r for r in records if r["interface"] == "rubric" and r["verdict"] == "accepted"]
    assert sum(w["updates"] for w in s["rubric_updates"]) == len(accepted_rubric) > 0
    # The store's reversals, per window of 2 steps: they add up to the run total the last step logged.
    windows = s["reversal_windows"]
    assert [w["start"] for w in windows] == list(range(0, len(metrics), 2)) and s["reversal_accepted"] > 0
    assert sum(w["accepted"] for w in windows) == s["reversal_accepted"] == metrics[-1]["harness/accepted_total"]
    assert sum(w["reversed"] for w in windows) == metrics[-1]["harness/reversals"]
    assert s["reversal_rate"] == pytest.approx(metrics[-1]["harness/reversal_rate"], nan_ok=True)
    assert "| acceptance_with_evidence |" in text and "rubric updates, steps 0-1" in text
    assert "reversal rate, steps 0-1" in text and "reversal rate, first -> last window:" in text


def test_case_study_notebook(analysed_runs, monkeypatch):
    from harnessrl_jax.eval.oracle_run import recorded_draws

    text, scope = run_notebook("case_study.ipynb", monkeypatch, HARNESSRL_RUNS=analysed_runs)
    story = scope["story"]
    run = os.path.join(analysed_runs, "harnessrl-s0")
    records = [r for r in _lines(os.path.join(run, "harness.jsonl")) if r["task_id"] == story["task_id"]]
    assert len(story["actions"]) == len(records) and any(a["verdict"] == "accepted" for a in story["actions"])
    draws = {d.step: float(np.mean(d.rewards)) for d in recorded_draws(run) if d.task_id == story["task_id"]}
    oracle = {line["step"]: line["oracle/task_scores"].get(story["task_id"])
              for line in _lines(os.path.join(run, "oracle", "oracle.jsonl"))}
    for t in story["timeline"]:
        assert t["reward"] == pytest.approx(draws[t["step"]]) and t["oracle"] == oracle.get(t["step"])
    assert f"task: {story['task_id']}" in text
    again, _ = run_notebook("case_study.ipynb", monkeypatch, HARNESSRL_RUNS=analysed_runs, HARNESSRL_TASK="say-q")
    assert "task: say-q" in again


def test_cost_table_notebook(analysed_runs, monkeypatch):
    text, scope = run_notebook("cost_table.ipynb", monkeypatch, HARNESSRL_RUNS=analysed_runs)
    run = os.path.join(analysed_runs, "harnessrl-s0")
    metrics = _lines(os.path.join(run, "metrics.jsonl"))
    rows = {r["cost"]: r["harnessrl"] for r in tables.cost_rows(scope["runs"])}
    assert rows["hours, all steps"]["mean"] == pytest.approx(sum(m["time/step"] for m in metrics) / 3600)
    assert rows["hours, train"]["mean"] == pytest.approx(sum(m["time/train"] for m in metrics) / 3600)
    summary = json.load(open(os.path.join(run, "oracle", "summary.json")))
    assert rows["oracle calls"]["mean"] == summary["cost"]["store"]["calls"] > 0
    assert rows["oracle input tokens"]["mean"] == summary["cost"]["store"]["input_tokens"] > 0
    assert "| oracle calls |" in text
