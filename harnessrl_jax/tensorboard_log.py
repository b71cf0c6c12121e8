"""Metrics to TensorBoard (optional: `pip install 'harnessrl_jax[tensorboard]'`, config.tensorboard): every numeric
scalar of a metrics.jsonl record under its key at its step, in <workdir>/tensorboard/, written with tensorboardX.
metrics.jsonl stays the source of truth: opening the log rebuilds the events from it, so a resumed run (whose
metrics.jsonl was cut back to its checkpoint) shows each step once, with the values it kept."""

from __future__ import annotations

import glob
import importlib.util
import os
from typing import Any, Mapping

from harnessrl_jax.errors import UserError
from harnessrl_jax.jsonl import read_objects

DIRECTORY = "tensorboard"
MISSING = ("--config.tensorboard=True writes TensorBoard events with tensorboardX, which is not installed: pip "
           "install 'harnessrl_jax[tensorboard]'")


def available() -> bool:
    """Whether the writer's library is installed (checks.needs asks before any model loads)."""
    return importlib.util.find_spec("tensorboardX") is not None


def scalars(record: Mapping[str, Any]) -> dict[str, float]:
    """The record's numbers by key (booleans as 0 / 1, NaN kept), `step` left out: text, lists and nulls have no
    curve."""
    return {k: float(v) for k, v in record.items() if k != "step" and isinstance(v, (int, float))}


class TensorBoardLog:
    """The TensorBoard view of a run's metrics.jsonl; `write` each record as it is appended there."""

    def __init__(self, workdir: str):
        try:
            from tensorboardX import FileWriter
            from tensorboardX.proto.summary_pb2 import Summary
        except ImportError:
            raise UserError(MISSING) from None
        self._summary = Summary
        self.directory = os.path.join(workdir, DIRECTORY)
        os.makedirs(self.directory, exist_ok=True)
        # Event files only append, and a resume repeats the steps after its checkpoint: start them anew from
        # metrics.jsonl rather than leave two values at a step (not every reader drops the older one).
        for path in glob.glob(os.path.join(self.directory, "events.out.tfevents.*")):
            os.remove(path)
        self._writer = FileWriter(self.directory, max_queue=100, flush_secs=30)
        metrics = os.path.join(workdir, "metrics.jsonl")
        if os.path.exists(metrics):
            for _, record in read_objects(metrics):
                self._add(record)
        self._writer.flush()

    def _add(self, record: Mapping[str, Any]) -> None:
        # one event per step holding all its scalars, each tagged with its key as written (SummaryWriter.add_scalar
        # would rewrite a key with characters outside [-/\w.] and cost one event per scalar)
        values = [self._summary.Value(tag=k, simple_value=v) for k, v in scalars(record).items()]
        self._writer.add_summary(self._summary(value=values), int(record["step"]))

    def write(self, record: Mapping[str, Any]) -> None:
        """One metrics.jsonl record, flushed (the curves follow the run)."""
        self._add(record)
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


def export(workdir: str) -> str:
    """Writes <workdir>/tensorboard/ from the run's metrics.jsonl (a run trained without the writer); returns it."""
    log = TensorBoardLog(workdir)
    log.close()
    return log.directory


__all__ = ["DIRECTORY", "MISSING", "TensorBoardLog", "available", "export", "scalars"]
