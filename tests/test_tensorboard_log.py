"""config.tensorboard's writer, read back with TensorBoard's own event reader: every number of metrics.jsonl under its
key at its step, once, also after a resume repeated steps; a missing library is one error naming the extra."""

import glob
import json
import math
import os
import sys
from collections import defaultdict

import numpy as np
import pytest

from harnessrl_jax import checks, tensorboard_log
from harnessrl_jax.errors import UserError
from harnessrl_jax.tensorboard_log import TensorBoardLog


def events(workdir) -> dict[tuple[str, int], list[float]]:
    """{(tag, step): every value written there} over every event file, as TensorBoard's loader reads them (no
    purging of older values: a step written twice shows twice)."""
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader

    out = defaultdict(list)
    for path in sorted(glob.glob(os.path.join(workdir, "tensorboard", "events.out.tfevents.*"))):
        for event in LegacyEventFileLoader(path).Load():  # the events as written, simple_value and all
            for value in event.summary.value:
                out[(value.tag, event.step)].append(value.simple_value)
    return dict(out)


def expected(records) -> dict[tuple[str, int], list[float]]:
    """The numbers of the records as float32 (TensorBoard's scalar), by (key, step); the reference is json's types."""
    return {(k, r["step"]): [float(np.float32(v))] for r in records for k, v in r.items()
            if k != "step" and type(v) in (int, float, bool)}


def same(a, b) -> bool:
    return a.keys() == b.keys() and all(
        len(a[k]) == len(b[k]) and all(x == y or (math.isnan(x) and math.isnan(y)) for x, y in zip(a[k], b[k]))
        for k in a)


def append(workdir, records):
    with open(os.path.join(workdir, "metrics.jsonl"), "a") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)


def record(step, scale=1.0):
    return {"step": step, "reward/mean": 12.5 * step * scale, "judge/cells": 3 * step,
            "critic/gate_open": step % 2 == 0, "coca/frac_learnable": float("nan"), "time/step": 0.1 + step,
            "per_domain/Health Bench (hard)": 1.0 + step, "big/count": 2**30 + step, "note": "text", "ids": [1, 2],
            "missing": None}


def test_every_number_of_metrics_jsonl_is_read_back_under_its_key_at_its_step(tmp_path):
    """Catches a key dropped or renamed (tensorboardX's add_scalar rewrites ' ', '(' and ')'), a step off by one, a
    NaN or a boolean left out, text or a list written as a number."""
    workdir = str(tmp_path)
    written = [record(s) for s in (1, 2, 3)]
    append(workdir, written)  # a run's metrics.jsonl before the writer opens: replayed
    log = TensorBoardLog(workdir)
    for s in (4, 5):
        append(workdir, [record(s)])
        log.write(record(s))
        written.append(record(s))
    log.close()
    got = events(workdir)
    assert same(got, expected(written)), sorted(set(got) ^ set(expected(written)))
    assert ("note", 1) not in got and ("ids", 1) not in got and ("missing", 1) not in got
    assert math.isnan(got[("coca/frac_learnable", 5)][0]) and got[("critic/gate_open", 4)] == [1.0]


def test_a_resumed_run_shows_each_step_once_with_the_values_it_kept(tmp_path):
    """Steps 1-5 written, the run resumed from checkpoint 3 (metrics.jsonl cut back to it, as launch/train.py's
    JsonlLog does) and steps 4-6 run again with other values: catches the first run's 4 and 5 left beside the new
    ones, or the kept steps lost."""
    workdir = str(tmp_path)
    log = TensorBoardLog(workdir)
    for s in range(1, 6):
        append(workdir, [record(s)])
        log.write(record(s))
    log.close()
    for path in glob.glob(os.path.join(workdir, "tensorboard", "events.out.tfevents.*")):  # an earlier process's
        os.rename(path, path.replace("tfevents.", "tfevents.0"))  # file: another name (the writer's truncates it)
    kept = [record(s) for s in (1, 2, 3)]
    with open(os.path.join(workdir, "metrics.jsonl"), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in kept)
    log = TensorBoardLog(workdir)
    again = [record(s, scale=-1.0) for s in (4, 5, 6)]
    for r in again:
        append(workdir, [r])
        log.write(r)
    log.close()
    assert same(events(workdir), expected(kept + again))


def test_a_missing_tensorboardx_is_one_error_naming_the_extra(tmp_path, monkeypatch, tiny_config):
    monkeypatch.setitem(sys.modules, "tensorboardX", None)  # import tensorboardX raises ImportError
    with pytest.raises(UserError, match=r"pip install 'harnessrl_jax\[tensorboard\]'"):
        TensorBoardLog(str(tmp_path))
    monkeypatch.setattr(tensorboard_log, "available", lambda: False)
    config = tiny_config("method=grpo")
    assert tensorboard_log.MISSING not in checks.needs(config)  # off by default: nothing asked of the machine
    config.tensorboard = True
    assert tensorboard_log.MISSING in checks.needs(config)  # before any model loads
