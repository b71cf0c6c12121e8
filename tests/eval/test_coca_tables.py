"""CoCA's tables notebook executed on a tiny CoCA run made by launch/train.py (code cells in order, as a kernel
would), its transition table re-derived from the run's coca.jsonl."""

import contextlib
import io
import json
import os
import shutil

import pytest

from harnessrl_jax.eval import coca_tables

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_coca_notebook_on_a_tiny_run(tmp_path, monkeypatch, train_script):
    run = tmp_path / "coca"
    train_script(run, "--config=experiments/coca.py:tiny", "--config.total_steps=4", "--config.report=False",
                 "--config.checkpoint.every=4")
    shutil.rmtree(run / "checkpoints", ignore_errors=True)
    lines = [json.loads(x) for x in (run / "coca.jsonl").read_text().splitlines()]
    assert len(lines) == 4 * 4 and all(set(x["states"]) == {"letter-q/at-least-1", "letter-q/at-least-3"}
                                       for x in lines)
    # one task drawn 4 times a step: every (task, criterion) after the first line is a revisit
    joint = {}
    last = {}
    for x in lines:
        for cid, s in x["states"].items():
            if cid in last and s != "unjudged" and last[cid] != "unjudged":
                joint[(last[cid], s)] = joint.get((last[cid], s), 0) + 1
            last[cid] = s
    nb = json.loads(open(os.path.join(REPO, "experiments", "notebooks", "coca_tables.ipynb")).read())
    monkeypatch.setenv("HARNESSRL_RUNS", str(run))
    monkeypatch.setenv("COCA_WINDOW", "2")
    printed, scope = io.StringIO(), {}
    with contextlib.redirect_stdout(printed):
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                exec("".join(cell["source"]), scope)
    out = printed.getvalue()
    assert "{'coca': 1} CoCA runs" in out and "| arm | state | first | last | change |" in out
    assert "| arm | from | too_hard | learnable |" in out and "opsd_activation" in out and "teacher_share" in out
    _, joint_rows = scope["conditional"], scope["joint"]
    got = {(r["from"], b): r[b] for r in joint_rows for b in coca_tables.STATES if r[b]}
    assert got == joint
    assert sum(got.values()) == 2 * (len(lines) - 1)
