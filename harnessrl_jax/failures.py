"""Failures that change what a reward or a harness update means: counted, retried after a pause, and a run that
cannot go on stopped cleanly instead of training on a different rubric (docs/design.md says what each does).

    judge = GuardedJudge(judge, OutagePolicy(...config.judge's...))              # build.build_judge
    client = GuardedClient(client, OutagePolicy(...config.evolver_model's...))   # build.build_evolver_client
    metrics.update(judge_step_metrics(stats_before, judge.stats))               # per step (stepper.Stepper)
    check_workdir(workdir, min_free_mb)                                          # before any model loads

A judge cell is *failed* without a verdict (after the client's retries) and *unparsed* without a readable one; only
failed cells are asked again (the same responses and criteria: no sampling, no RNG). Secrets never pass through
here: servers are named by URL and model, never by the key that reaches them.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import os
import shutil
import threading
import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from harnessrl_jax.errors import UserError
from harnessrl_jax.rubric.judges.base import ERROR, OK, TIMEOUT, UNPARSED, Judge, ScoreMatrix, check_batch
from harnessrl_jax.rubric.schema import Criterion, Task

log = logging.getLogger(__name__)

OUTAGE_KINDS = (ERROR, TIMEOUT)  # a server that gave no answer; UNPARSED is an answer without a verdict


@dataclasses.dataclass(frozen=True)
class OutagePolicy:
    """How long a run waits for a server that fails: the failed share a batch may have, the pause before a failed
    batch (or call) is asked again and how many times; `setting` is the prefix of the flags errors name
    ('--config.judge.' for config.judge's outage_retries and outage_pause_s, '--' for a script's own flags)."""

    max_failed_fraction: float = 0.02
    pause_s: float = 30.0
    retries: int = 3
    setting: str = "--config.judge."

    def __post_init__(self):
        if not 0.0 <= self.max_failed_fraction < 1.0:
            raise ValueError(f"max_failed_fraction must be in [0, 1), got {self.max_failed_fraction}")
        if self.pause_s < 0 or self.retries < 0:
            raise ValueError(f"need outage_pause_s >= 0 and outage_retries >= 0, got {self.pause_s}, {self.retries}")


def server_of(client: Any) -> str:
    """A server as errors name it: its URL and model (never credentials)."""
    url = getattr(client, "base_url", None)
    if url is None and hasattr(client, "_client"):
        url = getattr(getattr(client, "_client"), "base_url", None)
    model = getattr(client, "model", None)
    where = str(url) if url else getattr(client, "api", type(client).__name__)
    return f"{where} ({model})" if model else where


def _one_line(text: str, n: int = 160) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= n else line[:n] + "..."


class Outage(UserError):
    """A server that stayed down through every retry: what failed, where, and the setting that governs waiting."""

    def __init__(self, part: str, server: str, counts: Mapping[str, int], total: int, example: str,
                 policy: OutagePolicy, unit: str = "cells"):
        self.part, self.server, self.counts, self.total = part, server, dict(counts), total
        self.example, self.policy, self.unit = example, policy, unit
        super().__init__(self.describe())

    def describe(self) -> str:
        kinds = ", ".join(f"{k} {n}" for k, n in self.counts.items() if n)
        failed = sum(self.counts.values())
        p = self.policy
        return (f"the {self.part} at {self.server} keeps failing: {failed} of {self.total} {self.unit} got no "
                f"answer ({kinds}; e.g. {_one_line(self.example)}) after {p.retries} "
                f"{'retry' if p.retries == 1 else 'retries'}{f' {p.pause_s:g} s apart' if p.retries > 1 else ''} "
                f"({p.setting}outage_retries, {p.setting}outage_pause_s)")


class JudgeOutage(Outage):
    """The rubric judge stayed down (more than max_failed_fraction of a batch's cells failed)."""


class ModelOutage(Outage):
    """The evolver model or the oracle stayed down (a call, or more than the allowed share of a step's calls,
    failed through every retry)."""


# ------------------------------------------------------------------------------------------------------ the judge


@dataclasses.dataclass
class _Counts:
    # Named apart from the wrapped judge's call counters ('error', 'timeout' count calls there).
    cells: int = 0  # cells asked of an LLM judge, as finally scored
    unparsed_cells: int = 0
    error_cells: int = 0
    timeout_cells: int = 0
    rule_error_cells: int = 0  # rule checkers that could not run (not an outage: deterministic, logged by the judge)
    outage_retries: int = 0  # batches asked again after a pause
    outage_pause_s: float = 0.0


class GuardedJudge(Judge):
    """`judge` under an OutagePolicy: every batch's LLM-judged cells counted by status; a batch whose failed share
    exceeds the policy's is re-scored (its failed cells only) after the pause, and raises `JudgeOutage` when the
    judge stays down. Rule checkers' cells are counted apart and never retried."""

    def __init__(self, judge: Judge, policy: OutagePolicy, *, sleep: Callable[[float], None] = time.sleep):
        self.judge, self.policy, self.sleep = judge, policy, sleep
        self.name = judge.name
        self._counts = _Counts()
        self._lock = threading.Lock()
        routes = getattr(judge, "routes", {judge.name: judge})
        # Judges that call a model (they have `complete`), by the name their ScoreMatrix rows carry.
        self.remote = {j.name: j for j in routes.values() if hasattr(j, "complete")}
        self.local = {j.name for j in routes.values()} - set(self.remote)

    def __repr__(self):
        return f"GuardedJudge({self.judge!r})"

    @property
    def routes(self):
        return getattr(self.judge, "routes", {})

    @property
    def stats(self) -> dict[str, float]:
        """The wrapped judge's counters (calls, tokens) and this guard's: `cells`, `unparsed_cells`, `error_cells`,
        `timeout_cells`, `rule_error_cells`, `outage_retries`, `outage_pause_s`, all since construction."""
        with self._lock:
            own = dataclasses.asdict(self._counts)
        return {**(getattr(self.judge, "stats", None) or {}), **own}

    def _failed(self, mats: Sequence[ScoreMatrix]) -> list[list[tuple[int, int]]]:
        """Per matrix, the (row, response) cells of LLM judges without an answer."""
        out = []
        for m in mats:
            rows = [k for k, name in enumerate(m.judges) if name in self.remote]
            cells = np.isin(m.status[rows], OUTAGE_KINDS) if rows else np.zeros((0, m.shape[1]), bool)
            out.append([(rows[a], int(b)) for a, b in zip(*np.nonzero(cells))])
        return out

    def score_batch(self, tasks: Sequence[Task], responses: Sequence[Sequence[str]],
                    criteria: Sequence[Sequence[Criterion]] | None = None) -> list[ScoreMatrix]:
        criteria = check_batch(tasks, responses, criteria)
        mats = self.judge.score_batch(tasks, responses, criteria)
        attempt = 0
        while True:
            failed = self._failed(mats)
            n_failed = sum(map(len, failed))
            cells = sum(int(np.isin(m.judges, list(self.remote)).sum()) * m.shape[1] for m in mats)
            if n_failed <= self.policy.max_failed_fraction * cells:
                break
            if attempt == self.policy.retries:
                raise self._outage(mats, failed, cells)
            attempt += 1
            log.warning("judge: %d of %d cells failed (%s); asking again in %g s (retry %d of %d)", n_failed, cells,
                        _kinds(mats, failed), self.policy.pause_s, attempt, self.policy.retries)
            with self._lock:
                self._counts.outage_retries += 1
                self._counts.outage_pause_s += self.policy.pause_s
            self.sleep(self.policy.pause_s)
            mats = self._rescore(tasks, responses, criteria, mats, failed)
        self._count(mats)
        unparsed = sum(int((m.status[np.isin(m.judges, list(self.remote))] == UNPARSED).sum()) for m in mats)
        if unparsed > self.policy.max_failed_fraction * cells:  # answered, so not retried: said, not hidden
            log.warning("judge: %d of %d cells unparsed (answers with no readable verdict); left out of the reward",
                        unparsed, cells)
        return mats

    def _rescore(self, tasks, responses, criteria, mats, failed) -> list[ScoreMatrix]:
        """The failed cells asked again (per response, its failed criteria), merged into copies of `mats`."""
        jobs = []  # (matrix, response, rows)
        for i, cells in enumerate(failed):
            by_response: dict[int, list[int]] = {}
            for k, j in cells:
                by_response.setdefault(j, []).append(k)
            jobs += [(i, j, sorted(ks)) for j, ks in sorted(by_response.items())]
        again = self.judge.score_batch([tasks[i] for i, _, _ in jobs], [[responses[i][j]] for i, j, _ in jobs],
                                       [[criteria[i][k] for k in ks] for i, _, ks in jobs])
        out = [dataclasses.replace(m, verdicts=m.verdicts.copy(), status=m.status.copy(),
                                   explanations=m.explanations.copy(), latency_s=m.latency_s.copy(),
                                   cache_hit=m.cache_hit.copy()) for m in mats]
        for (i, j, ks), m in zip(jobs, again):
            for row, k in enumerate(ks):
                v = m.verdicts[row, 0]
                out[i].set(k, j, None if np.isnan(v) else bool(v), str(m.status[row, 0]),
                           str(m.explanations[row, 0]), float(m.latency_s[row, 0]), bool(m.cache_hit[row, 0]))
        return out

    def _count(self, mats: Sequence[ScoreMatrix]) -> None:
        c = _Counts()
        for m in mats:
            remote = np.isin(m.judges, list(self.remote))
            status = m.status[remote]
            c.cells += int(status.size)
            c.unparsed_cells += int((status == UNPARSED).sum())
            c.error_cells += int((status == ERROR).sum())
            c.timeout_cells += int((status == TIMEOUT).sum())
            rule = np.isin(m.judges, [n for n in self.local if n != "unjudged"])
            c.rule_error_cells += int((m.status[rule] != OK).sum())
        with self._lock:
            for f in ("cells", "unparsed_cells", "error_cells", "timeout_cells", "rule_error_cells"):
                setattr(self._counts, f, getattr(self._counts, f) + getattr(c, f))

    def _outage(self, mats, failed, cells) -> JudgeOutage:
        names = sorted({mats[i].judges[k] for i, cs in enumerate(failed) for k, _ in cs})
        server = "; ".join(server_of(self.remote[n]) for n in names)
        counts = {kind: sum(int(mats[i].status[k, j] == kind) for i, cs in enumerate(failed) for k, j in cs)
                  for kind in OUTAGE_KINDS}
        i, (k, j) = next((i, cs[0]) for i, cs in enumerate(failed) if cs)
        example = str(mats[i].explanations[k, j]) or str(mats[i].status[k, j])
        return JudgeOutage("judge", server, counts, cells, example, self.policy)

    def close(self) -> None:
        self.judge.close()


def _kinds(mats, failed) -> str:
    kinds: dict[str, int] = {}
    for i, cs in enumerate(failed):
        for k, j in cs:
            s = str(mats[i].status[k, j])
            kinds[s] = kinds.get(s, 0) + 1
    return ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))


def judge_step_metrics(before: Mapping[str, float], after: Mapping[str, float], prefix: str = "judge") -> dict:
    """A step's judge counts from GuardedJudge.stats taken before and after it: `judge/cells` (LLM-judged cells,
    the reward's and the critic's), `judge/failed` (no answer) and its kinds `judge/failed/error`,
    `judge/failed/timeout`, `judge/unparsed`, `judge/failed_fraction`, `judge/rule_errors`, `judge/outage_retries`
    and `judge/outage_pause_s`."""
    d = {k: float(after.get(k, 0)) - float(before.get(k, 0))
         for k in ("cells", "unparsed_cells", "error_cells", "timeout_cells", "rule_error_cells", "outage_retries",
                   "outage_pause_s")}
    failed = d["error_cells"] + d["timeout_cells"]
    return {f"{prefix}/cells": d["cells"], f"{prefix}/failed": failed, f"{prefix}/failed/error": d["error_cells"],
            f"{prefix}/failed/timeout": d["timeout_cells"], f"{prefix}/unparsed": d["unparsed_cells"],
            f"{prefix}/failed_fraction": failed / d["cells"] if d["cells"] else 0.0,
            f"{prefix}/rule_errors": d["rule_error_cells"], f"{prefix}/outage_retries": d["outage_retries"],
            f"{prefix}/outage_pause_s": d["outage_pause_s"]}


def progress_text(metrics: Mapping[str, float]) -> str:
    """The progress line's account of a step's failures: judge cells without an answer (by kind) or unreadable,
    rule checkers that could not run, outage retries, and the evolver model's failed calls ('' when nothing was
    judged by a model and nothing failed)."""
    parts = []
    cells = metrics.get("judge/cells", 0.0)
    if cells:
        failed = metrics.get("judge/failed", 0.0)
        kinds = ", ".join(f"{k} {metrics.get(f'judge/failed/{k}', 0.0):.0f}" for k in OUTAGE_KINDS
                          if metrics.get(f"judge/failed/{k}", 0.0))
        parts.append(f"judge failed {failed:.0f}/{cells:.0f}" + (f" ({kinds})" if kinds else "")
                     + f", unparsed {metrics.get('judge/unparsed', 0.0):.0f}")
    if metrics.get("judge/rule_errors", 0.0):
        parts.append(f"rule errors {metrics['judge/rule_errors']:.0f}")
    if metrics.get("judge/outage_retries", 0.0):
        parts.append(f"judge retried {metrics['judge/outage_retries']:.0f}x after "
                     f"{metrics.get('judge/outage_pause_s', 0.0):g}s of pauses")
    if metrics.get("evolver_model/calls", 0.0) or metrics.get("evolver_model/failed_calls", 0.0):
        parts.append(f"evolver model failed {metrics.get('evolver_model/failed_calls', 0.0):.0f}/"
                     f"{metrics.get('evolver_model/calls', 0.0):.0f} calls")
    return (" | " + "; ".join(parts)) if parts else ""


# ------------------------------------------------------------------------------------- the evolver model, oracle


class GuardedClient:
    """An LLM client (`complete(messages, schema, key=None)`, e.g. an OpenAIJudge) whose failed calls are asked
    again after the policy's pause, up to its retries, then raise `ModelOutage` naming `part` and the server. Every
    other attribute is the client's."""

    def __init__(self, client, policy: OutagePolicy, part: str, *, sleep: Callable[[float], None] = time.sleep):
        self.client, self.policy, self.part, self.sleep = client, policy, part, sleep
        self._lock = threading.Lock()
        self._own = {"failed_calls": 0, "outage_retries": 0, "outage_pause_s": 0.0}

    def __getattr__(self, name):
        return getattr(self.client, name)

    def __repr__(self):
        return f"GuardedClient({self.client!r})"

    @property
    def stats(self) -> dict[str, float]:
        """The client's counters and this guard's: `failed_calls` (failed attempts the guard saw),
        `outage_retries`, `outage_pause_s`."""
        with self._lock:
            own = dict(self._own)
        return {**(getattr(self.client, "stats", None) or {}), **own}

    def complete(self, messages, schema, key: str | None = None):
        """The client's completion; a failure ('error' / 'timeout') is asked again after the pause."""
        for attempt in range(self.policy.retries + 1):
            out = self.client.complete(messages, schema, key)
            if getattr(out, "status", OK) not in OUTAGE_KINDS:
                return out
            with self._lock:
                self._own["failed_calls"] += 1
            if not getattr(out, "retryable", True):  # the request was refused, not the server down: the caller
                return out                            # records it (a rejected candidate, an unanswered check)
            if attempt == self.policy.retries:
                break
            log.warning("%s: a call failed (%s: %s); asking again in %g s (retry %d of %d)", self.part, out.status,
                        _one_line(out.detail), self.policy.pause_s, attempt + 1, self.policy.retries)
            with self._lock:
                self._own["outage_retries"] += 1
                self._own["outage_pause_s"] += self.policy.pause_s
            self.sleep(self.policy.pause_s)
        raise ModelOutage(self.part, server_of(self.client), {out.status: 1}, 1, out.detail, self.policy, "call")


# -------------------------------------------------------------------------------------------------- the workdir


def check_workdir(workdir: str, min_free_mb: float) -> list[str]:
    """What stops `workdir` from holding a run, each as '--workdir=DIR: why' (empty: fine): it cannot be created
    or written (a probe file is written and removed), or its file system has less than `min_free_mb` MB free
    (--config.checkpoint.min_free_mb)."""
    try:
        os.makedirs(workdir, exist_ok=True)
        probe = os.path.join(workdir, f".write-probe-{os.getpid()}")
        with open(probe, "wb") as f:
            f.write(b"0" * 4096)
            f.flush()
            os.fsync(f.fileno())
        os.remove(probe)
    except OSError as e:
        why = "the disk is full" if e.errno == errno.ENOSPC else (e.strerror or type(e).__name__)
        return [f"--workdir={workdir}: cannot write there ({why}{': ' + e.filename if e.filename else ''})"]
    free_mb = shutil.disk_usage(workdir).free / 2**20
    if free_mb < min_free_mb:
        return [f"--workdir={workdir}: only {free_mb:.0f} MB free, the run needs at least "
                f"--config.checkpoint.min_free_mb={min_free_mb:g} MB for checkpoints, the memory and logs"]
    return []


def stopped_message(outage: Outage, step: int, checkpoint: str, command: str) -> str:
    """The error a run stopped by an outage ends with: what failed, the checkpoint it left, how to resume."""
    return (f"{outage.describe()}. Stopped at step {step + 1}: the checkpoint of step {step} (the last complete one) "
            f"is in {checkpoint}. Once the server answers again, resume with the same command: {command}")


__all__ = ["GuardedClient", "GuardedJudge", "JudgeOutage", "ModelOutage", "OUTAGE_KINDS", "Outage", "OutagePolicy",
           "check_workdir", "judge_step_metrics", "progress_text", "server_of", "stopped_message"]
