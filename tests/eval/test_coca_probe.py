"""launch/coca_probe.py on the tiny GRPO run that learns its letter task (a baseline that never ran CoCA's two
groups): its states against diagnose() of the rates it wrote, CoCA's tables reading its files unchanged, Best-of-K
against brute force over subsets of the scores it wrote, the checkpoints really restored, the CoCA notebook
printing both tables; a rerun does nothing; bad directories, arms and steps are one-line errors."""

import contextlib
import io
import itertools
import json
import os
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from harnessrl_jax.errors import UserError
from harnessrl_jax.eval import coca_probe, coca_tables
from harnessrl_jax.methods.coca import STATES, UNJUDGED, diagnose

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def lines(path):
    with open(path) as f:
        return [json.loads(x) for x in f if x.strip()]


def brute_best_of_k(row, k):
    return float(np.mean([max(c) for c in itertools.combinations(row, k)]))


@pytest.mark.slow
def test_probe_of_a_grpo_run(letters_run, tmp_path, monkeypatch):
    workdir = letters_run[0]
    out = str(tmp_path / "probe")
    proc = subprocess.run([sys.executable, os.path.join(REPO, "launch", "coca_probe.py"), f"--dir={workdir}",
                           f"--out={out}", "--split=train", "--ks=1,2,4,8"], cwd=REPO, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ETA" in proc.stderr and "responses/s" in proc.stderr
    run_out = os.path.join(out, "grpo-s0")  # a single run: its method and seed name it

    # coca.jsonl: one line per task and probed step (the seed policy and both checkpoints), each state the one
    # diagnose() gives the rates the line holds (config.coca's default rule)
    probe = lines(os.path.join(run_out, "coca.jsonl"))
    assert sorted({x["step"] for x in probe}) == [0, 15, 30] and len(probe) == 3
    for x in probe:
        ids = list(x["states"])
        assert diagnose([x["p_normal"][c] for c in ids], [x["p_guided"][c] for c in ids]) == [x["states"][c]
                                                                                               for c in ids]
        assert x["rewrites"] == [] and x["reward_normal"] == x["reward_normal_original"]
        assert len(x["reward_normal"]) == len(x["reward_guided"]) == 4  # tiny_cpu.py's coca.groups (4, 4)
    metrics = lines(os.path.join(run_out, "metrics.jsonl"))
    assert [m["step"] for m in metrics] == [0, 15, 30]
    assert all(m["probe/guided_over_budget"] == 0 for m in metrics)  # CoCA's prompt budget, not GRPO's
    # the checkpoints are restored: the policy that learned the task reaches it where the seed policy does not
    assert metrics[0]["probe/reward_normal"] < 30 < 70 < metrics[-1]["probe/reward_normal"]

    # CoCA's tables read the probe's directory unchanged: shares of the first and last checkpoint's states
    runs = coca_tables.coca_runs(out)
    assert runs == {"grpo": [run_out]}
    for x, col in ((probe[0], "first"), (probe[-1], "last")):
        counts = Counter(s for s in x["states"].values() if s != UNJUDGED)
        got = {r["state"]: r[col] for r in coca_tables.state_rows(runs, window=1)}
        assert got == pytest.approx({s: counts[s] / sum(counts.values()) for s in STATES})
    _, joint = coca_tables.transition_rows(runs)
    assert sum(r[b] for r in joint for b in STATES) == 2 * len(probe[0]["states"])  # 0 -> 15 -> 30

    # Best-of-K: 8 scores per item and step; each K's mean over every K-subset of them
    bok = json.load(open(os.path.join(run_out, "best_of_k.json")))
    assert bok["task_ids"] == ["letter-q"] and sorted(bok["steps"], key=int) == ["0", "15", "30"]
    for m in metrics:
        (row,) = bok["steps"][str(m["step"])]
        assert len(row) == 8
        for k in (1, 2, 4, 8):
            assert m[f"best_of_k/k{k}"] == pytest.approx(brute_best_of_k(row, k))
    summary = json.load(open(os.path.join(out, coca_probe.SUMMARY)))
    assert [r["macro"] for r in summary["best_of_k"]["grpo"]] == pytest.approx(
        [metrics[-1][f"best_of_k/k{k}"] for k in (1, 2, 4, 8)])  # the table is the last checkpoint's
    assert metrics[0]["best_of_k/k1"] < metrics[-1]["best_of_k/k1"]

    # a rerun with the same settings probes nothing again; other settings in the same --out are refused
    before = {f: open(os.path.join(run_out, f)).read() for f in ("coca.jsonl", "metrics.jsonl", "best_of_k.json")}
    again = coca_probe.probe_runs(coca_probe.find_runs(workdir), out, split="train", ks=(1, 2, 4, 8),
                                  log=lambda s: pytest.fail(f"probed again: {s}"))
    assert again["best_of_k"] == summary["best_of_k"]
    assert before == {f: open(os.path.join(run_out, f)).read() for f in before}
    with pytest.raises(UserError, match="holds a probe with other settings"):
        coca_probe.probe_runs(coca_probe.find_runs(workdir), out, split="train", ks=(1, 2, 4, 8), seed=1)

    # the CoCA notebook prints both tables from the probe's output
    nb = json.load(open(os.path.join(REPO, "experiments", "notebooks", "coca_tables.ipynb")))
    monkeypatch.setenv("HARNESSRL_RUNS", workdir)
    monkeypatch.setenv("COCA_PROBE", out)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        scope = {}
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                exec("".join(cell["source"]), scope)
    text = printed.getvalue()
    assert "| arm | K | best of K | seeds | seed SD |" in text and "| grpo | 8 |" in text
    assert "{'grpo': 1} probed runs" in text and "| arm | from | too_hard | learnable |" in text


def test_bad_directories_arms_and_steps_are_one_line_errors(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UserError, match="neither a run .* nor a compare directory"):
        coca_probe.find_runs(str(empty))
    run = tmp_path / "cmp" / "grpo-s0"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"method": "grpo", "seed": 0}))
    with pytest.raises(UserError, match=r"--arms=coca: coca not in .* \(its arms: grpo\)"):
        coca_probe.find_runs(str(tmp_path / "cmp"), ["coca"])
    assert coca_probe.find_runs(str(tmp_path / "cmp")) == [coca_probe.ProbedRun("grpo", 0, str(run))]
    with pytest.raises(UserError, match=r"no checkpoint under .*grpo-s0.checkpoints") as e:
        coca_probe.probed_steps(str(run), "all")
    assert "\n" not in str(e.value)  # a UserError: launch/coca_probe.py prints it as one line (cli.run)
    assert coca_probe.probed_steps(str(run), "0") == [0]  # the seed policy needs none
