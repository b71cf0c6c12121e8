"""The process figures (`eval.tables.process_stats`, `process_rows`) from a hand-written run directory:
metrics.jsonl, harness.jsonl and the record store, read with no launch."""

import json
import math
import os

import numpy as np
import pytest

from harnessrl_jax.eval import tables
from harnessrl_jax.memory import ActionRecord, DrawRecord, RecordStore


def _draw(step, task, actions=()):
    return DrawRecord(step, task, ("c0",), ("Says hi.",), ("hi", "ho"), np.array([[1.0, 0.0]]), np.array([100.0, 0.0]),
                      actions=tuple(actions))


def _level(before, after, verdict="accepted"):
    return ActionRecord("sampling", "downweight" if after > before else "restore", verdict, label="saturated",
                        changes={"level": [before, after]})


def _write(path, rows):
    with open(path, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)


@pytest.fixture
def run(tmp_path):
    d = tmp_path / "harnessrl-s0"
    d.mkdir()
    fields, with_fields = (0.5, 1.5, 1.0, 0.25), (0.5, 0.75, 0.5, 0.25)
    _write(d / "metrics.jsonl", [{"step": i + 1, "guidance/fields_per_task": f, "guidance/tasks_with_fields": w,
                                  "sampling/downweighted_share": 0.5, "harness/reversal_rate": 0.0}
                                 for i, (f, w) in enumerate(zip(fields, with_fields))])
    line = {"step": 0, "task_id": "a", "interface": "guidance", "candidate": {"actions": []}}
    _write(d / "harness.jsonl", [
        {**line, "verdict": "accepted", "used_evidence": ["donor:1"], "with_evidence": True},
        {**line, "verdict": "rejected", "used_evidence": ["draw:4"], "with_evidence": True},
        {**line, "verdict": "accepted", "used_evidence": [], "with_evidence": False},
        {**line, "verdict": "rejected", "used_evidence": [], "with_evidence": False},
        {**line, "verdict": "rejected", "used_evidence": [], "with_evidence": False},
        {**line, "verdict": "noop", "used_evidence": [], "with_evidence": False},
        # written before `used_evidence` existed: its with_evidence meant "cites a record", so it is left out
        {**line, "verdict": "accepted", "evidence_ids": ["draw:2"], "with_evidence": True}])
    return d


def test_without_a_record_store_the_reversal_rates_are_nan_not_zero(run):
    s = tables.process_stats(str(run), window=2)
    assert math.isnan(s["reversal_rate"]) and math.isnan(s["reversal_rate_first"]) and s["reversal_windows"] == []
    # The curve of guidance fields per task (mean over all tasks) and the share of tasks without any.
    assert [(p["step"], p["fields_per_task"]) for p in s["guidance_curve"]] == [(1, 0.5), (2, 1.5), (3, 1.0),
                                                                                (4, 0.25)]
    assert (s["guidance_peak"], s["guidance_peak_step"]) == (1.5, 2)
    assert s["guidance_curve"][2]["tasks_without_fields"] == 0.5 and s["unguided_share"] == 0.75
    assert tables.process_stats(str(run), unguided_step=2)["unguided_share"] == 0.25
    # Acceptance by the evidence a candidate uses: 1 of 2 with, 1 of 3 without; the old line is not counted.
    assert (s["acceptance_with_evidence"], s["measured_with_evidence"]) == (0.5, 2)
    assert (s["acceptance_without_evidence"], s["measured_without_evidence"]) == (pytest.approx(1 / 3), 3)


def test_reversal_rates_per_window_come_from_the_record_store(run):
    store = RecordStore(os.path.join(run, "memory", RecordStore.FILE))
    # Windows of 2 steps. Task a: down-weighted at step 0, restored at its next draw (step 3, window 2-3): the
    # reversal counts in window 0-1. Task b: down-weighted at 1, its restore rejected. Step 5: a further level (not
    # the one before the restore), itself with no later draw.
    plan = {0: {"a": [_level(0, 1)]}, 1: {"b": [_level(0, 1)]}, 2: {"b": []}, 3: {"a": [_level(1, 0)]},
            4: {"b": [], "a": []}, 5: {"a": [_level(0, 2)], "b": [_level(1, 0, "rejected")]}}
    for step, per_task in plan.items():
        store.append_step(step, [_draw(step, t, acts) for t, acts in per_task.items()])
    store.close()
    s = tables.process_stats(str(run), window=2)
    assert [(w["window"], w["accepted"], w["reversed"]) for w in s["reversal_windows"]] == [
        ("0-1", 2, 1), ("2-3", 1, 0), ("4-5", 1, 0)]
    assert (s["reversal_rate_first"], s["reversal_rate_last"]) == (0.5, 0.0)
    assert s["reversal_rate"] == pytest.approx(1 / 4) and s["reversal_windows"][2]["open"] == 1
    rows = {r["statistic"]: r["harnessrl"] for r in tables.process_rows(tables.runs_in(str(run.parent)), window=2)}
    assert rows["reversal_rate_first"]["mean"] == 0.5 and rows["reversal rate, steps 2-3"]["mean"] == 0.0
    assert rows["reversal_rate"]["mean"] == pytest.approx(0.25) and rows["guidance_peak"]["mean"] == 1.5
