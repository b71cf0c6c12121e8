"""HarnessBandit end to end: launch/train.py trains HarnessBandit on the tiny config for two steps and stops;
launch/bandit_compare.py resumes it to the end and evaluates it (and the untrained policy) under the training
and the held-out arm; the notebook experiments/notebooks/harnessbandit.ipynb then draws and tabulates the run, and
its numbers are recomputed here from the raw files."""

import contextlib
import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from harnessrl_jax.methods.harnessbandit import selection_probs

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.slow
LABELS = ("plain", "sys_helpful", "sys_expert", "structured", "concise", "plan_first")


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    """Two steps through launch/train.py (stopped as a preempted job would), then launch/bandit_compare.py, which
    resumes the run from its checkpoint to the end and evaluates it."""
    out = str(tmp_path_factory.mktemp("bandit"))
    first = [sys.executable, os.path.join(REPO, "launch", "train.py"), f"--workdir={out}/harnessbandit-s0",
             "--config=experiments/tiny_cpu.py:method=harnessbandit", "--config.total_steps=5",
             "--config.bandit.warmup=3", "--config.report=False", "--stop_after=2"]
    res = subprocess.run(first, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]
    cmd = [sys.executable, os.path.join(REPO, "launch", "bandit_compare.py"), f"--out={out}", "--seeds=0",
           "--methods=harnessbandit", "--eval_split=train", "--num_samples=2", "--keep_checkpoints=False",
           "--base_config=experiments/tiny_cpu.py", "--base_config.total_steps=5", "--base_config.bandit.warmup=3",
           "--base_config.report=False"]
    res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]
    return out, res.stdout


def test_bandit_compare_and_notebook(compared, monkeypatch):
    out, printed = compared
    run = os.path.join(out, "harnessbandit-s0")
    metrics = [json.loads(line) for line in open(os.path.join(run, "metrics.jsonl"))]
    assert len(metrics) == 5
    arms = [int(m["bandit/arm"]) for m in metrics]
    # the resumed run (from step 2) goes on where the scheduler stood: warm-up arm 2, then the bandit
    assert arms[:3] == [0, 1, 2] and [m["bandit/warmup"] for m in metrics] == [1.0] * 3 + [0.0] * 2
    for before, after in ((metrics[1], metrics[2]), (metrics[3], metrics[4])):  # across the resume, and after it
        # the logged p of a step is selection_probs of the values and visits the step before left (after the
        # warm-up, two unvisited arms are valued at the max)
        p = selection_probs([before[f"bandit/Q_{a}"] for a in LABELS], [before[f"bandit/n_{a}"] for a in LABELS],
                            bonus=0.5, temperature=0.5, floor=0.1)
        np.testing.assert_allclose([after[f"bandit/p_{a}"] for a in LABELS], p, rtol=1e-9)
    assert [metrics[2][f"bandit/n_{a}"] for a in LABELS] == [1, 1, 1, 0, 0, 0]
    assert not os.path.exists(os.path.join(run, "checkpoints"))  # --keep_checkpoints=False

    monkeypatch.setenv("HARNESSRL_RUNS", out)
    monkeypatch.setenv("HARNESSRL_WINDOWS", "2")
    monkeypatch.chdir(REPO)
    nb = json.load(open(os.path.join(REPO, "experiments", "notebooks", "harnessbandit.ipynb")))
    text, scope = io.StringIO(), {}
    with contextlib.redirect_stdout(text):
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                exec("".join(cell["source"]), scope)
    text = text.getvalue()
    html = open(os.path.join(out, "harnessbandit.html")).read()
    assert html.count("<svg") == 5 + 2  # five line plots, two directed-cosine matrices
    # the first half's directed cosines, recomputed from metrics.jsonl: row = the arm drawn, column = the peer
    h = scope["histories"]["harnessbandit-s0"]
    (_, M), _ = scope["bandit_tables"].cosine_matrices(h, 2)
    for a in range(6):
        for b in range(6):
            vals = [m[f"bandit/cos_{LABELS[b]}"] for m in metrics[:3] if int(m["bandit/arm"]) == a]
            vals = [v for v in vals if v is not None and np.isfinite(v)]
            assert (np.isnan(M[a, b]) if not vals else M[a, b] == pytest.approx(np.mean(vals)))
    # the comparison table: HarnessBandit's row is its arms_eval.json, the base row the untrained policy's
    ev = json.load(open(os.path.join(run, "arms_eval.json")))
    rows = {r["method"]: r for r in scope["rows"]}
    assert set(rows) == {"harnessbandit", "base"}
    for arm in ("plain", "persona_roleplay"):
        for key in ("mean", "pass_at_j", "pass_all_j"):
            got = rows["harnessbandit"][f"{arm} {key}"]
            want = ev["final"][arm][key]
            assert (got is None) if want is None else got["mean"] == pytest.approx(want)
    assert "| method | seeds |" in text and "terminal state" in text
    assert "harnessbandit s0:" in printed  # bandit_compare's terminal probabilities
