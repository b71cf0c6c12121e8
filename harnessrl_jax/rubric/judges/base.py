"""The judge protocol and its result, the score matrix.

    judge.score(task, responses, criteria=None) -> ScoreMatrix          # criteria default to task.criteria
    judge.score_batch(tasks, responses, criteria=None) -> [ScoreMatrix]  # many tasks at once (LLM calls pooled)

S[k, j] = 1 when criterion k holds for response j, else 0; for a pitfall (points < 0) 1 means the bad behaviour
occurred, and the reward subtracts its points (judges never flip it). A cell without a verdict is NaN, never 0,
with its status: 'unparsed' (an answer without a readable verdict), 'error' (the request or the rule failed),
'timeout' (no answer after every retry). The reward leaves NaN cells out; their counts are kept.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, Iterable, Protocol, Sequence, runtime_checkable

import numpy as np

from harnessrl_jax.rubric.reward import rubric_reward
from harnessrl_jax.rubric.schema import Criterion, Task

OK, UNPARSED, ERROR, TIMEOUT = "ok", "unparsed", "error", "timeout"
STATUSES = (OK, UNPARSED, ERROR, TIMEOUT)
FAILURES = (UNPARSED, ERROR, TIMEOUT)
_KNOWN = frozenset(STATUSES)


@dataclasses.dataclass(frozen=True, eq=False)
class ScoreMatrix:
    """Verdicts of K criteria on J responses, with per-cell explanation, status, latency and cache hit.

    verdicts [K, J] float (1, 0, NaN where status != 'ok'); status [K, J] str; explanations [K, J] str;
    latency_s [K, J] float (a call covering several cells, as in per-rubric judging, gives each its full
    latency); cache_hit [K, J] bool; judges [K]: the name of the judge that scored each criterion.
    """

    criterion_ids: tuple[str, ...]
    verdicts: np.ndarray
    status: np.ndarray
    explanations: np.ndarray
    latency_s: np.ndarray
    cache_hit: np.ndarray
    judges: tuple[str, ...]

    def __post_init__(self):
        k, j = self.verdicts.shape
        if len(self.criterion_ids) != k or len(self.judges) != k:
            raise ValueError(f"expected {k} criterion ids and judge names, got {len(self.criterion_ids)} "
                             f"and {len(self.judges)}")
        for name in ("status", "explanations", "latency_s", "cache_hit"):
            if getattr(self, name).shape != (k, j):
                raise ValueError(f"{name} has shape {getattr(self, name).shape}, expected {(k, j)}")
        # Python sets and comparisons, not np.isin: a judge builds one matrix per task, 512 a step.
        if not set(self.status.flat) <= _KNOWN:
            bad = next(s for s in self.status.flat if s not in _KNOWN)
            raise ValueError(f"unknown status {bad!r}; expected one of {STATUSES}")
        ok = self.status == OK
        # The one invariant the reward relies on: a verdict is a number exactly where it was obtained.
        if np.isnan(self.verdicts[ok]).any() or not np.isnan(self.verdicts[~ok]).all():
            raise ValueError("verdicts must be 0/1 exactly where status is 'ok' and NaN elsewhere")
        got = self.verdicts[ok]
        if not ((got == 0.0) | (got == 1.0)).all():
            raise ValueError("verdicts must be 0 or 1 where status is 'ok'")

    @classmethod
    def empty(cls, criterion_ids: Sequence[str], n_responses: int, judge: str | Sequence[str]) -> "ScoreMatrix":
        """A K x J matrix of 'error' cells (NaN) for a judge to fill in with `set`."""
        k, j = len(criterion_ids), n_responses
        judges = (judge,) * k if isinstance(judge, str) else tuple(judge)
        return cls(tuple(criterion_ids), np.full((k, j), np.nan), np.full((k, j), ERROR, dtype=object),
                   np.full((k, j), "", dtype=object), np.zeros((k, j)), np.zeros((k, j), bool), judges)

    def set(self, k: int, j: int, verdict: bool | None, status: str, explanation: str = "", latency_s: float = 0.0,
            cache_hit: bool = False) -> None:
        """Fill cell (k, j); verdict None (or any status but 'ok') stores NaN. Used only while a judge builds it."""
        if status not in STATUSES:
            raise ValueError(f"unknown status {status!r}")
        if status == OK and verdict is None:
            raise ValueError("an 'ok' cell needs a verdict")
        self.verdicts[k, j] = float(verdict) if status == OK else np.nan
        self.status[k, j] = status
        self.explanations[k, j] = explanation
        self.latency_s[k, j] = latency_s
        self.cache_hit[k, j] = cache_hit

    @property
    def shape(self) -> tuple[int, int]:
        return self.verdicts.shape

    @property
    def failed(self) -> np.ndarray:
        """[K, J] bool: cells with no verdict."""
        return self.status != OK

    @property
    def n_failed(self) -> int:
        return int(self.failed.sum())

    def failure_counts(self) -> dict[str, int]:
        """Cells per failure status, e.g. {'unparsed': 2, 'error': 0, 'timeout': 1}."""
        return {s: int((self.status == s).sum()) for s in FAILURES}

    def summary(self) -> dict[str, Any]:
        """Counts for logging: cells, failures by status, cache hits, mean latency of the cells actually called."""
        called = ~self.cache_hit
        return {"cells": int(self.verdicts.size), "failed": self.n_failed, **self.failure_counts(),
                "cache_hits": int(self.cache_hit.sum()),
                "mean_latency_s": float(self.latency_s[called].mean()) if called.any() else 0.0}

    def rewards(self, points: Sequence[float]) -> np.ndarray:
        """Per-response rubric reward [J] (NaN cells left out, see `reward.rubric_reward`)."""
        return rubric_reward(np.asarray(points, float), self.verdicts)

    def rows(self, indices: Sequence[int]) -> "ScoreMatrix":
        """The sub-matrix of the given criterion rows, in that order."""
        idx = list(indices)
        return ScoreMatrix(tuple(self.criterion_ids[i] for i in idx), self.verdicts[idx], self.status[idx],
                           self.explanations[idx], self.latency_s[idx], self.cache_hit[idx],
                           tuple(self.judges[i] for i in idx))

    @classmethod
    def merge(cls, parts: Iterable[tuple[Sequence[int], "ScoreMatrix"]], n_criteria: int,
              n_responses: int) -> "ScoreMatrix":
        """Assemble a K x J matrix from parts, each (its rows' positions in the result, its matrix)."""
        ids: list[str | None] = [None] * n_criteria
        judges: list[str] = [""] * n_criteria
        out = cls.empty([""] * n_criteria, n_responses, judges)
        for rows, m in parts:
            if m.shape != (len(rows), n_responses):
                raise ValueError(f"part of shape {m.shape} does not fit {len(rows)} rows x {n_responses}")
            for src, dst in enumerate(rows):
                if ids[dst] is not None:
                    raise ValueError(f"row {dst} given twice")
                ids[dst], judges[dst] = m.criterion_ids[src], m.judges[src]
                for name in ("verdicts", "status", "explanations", "latency_s", "cache_hit"):
                    getattr(out, name)[dst] = getattr(m, name)[src]
        missing = [i for i, c in enumerate(ids) if c is None]
        if missing:
            raise ValueError(f"rows {missing} were not given")
        return dataclasses.replace(out, criterion_ids=tuple(ids), judges=tuple(judges))

    def records(self) -> list[dict[str, Any]]:
        """One dict per cell (criterion id, response index, verdict or None, status, ...), for logs and memory."""
        k, j = self.shape
        return [{"criterion_id": self.criterion_ids[a], "response": b, "judge": self.judges[a],
                 "verdict": None if np.isnan(self.verdicts[a, b]) else int(self.verdicts[a, b]),
                 "status": str(self.status[a, b]), "explanation": str(self.explanations[a, b]),
                 "latency_s": float(self.latency_s[a, b]), "cache_hit": bool(self.cache_hit[a, b])}
                for a in range(k) for b in range(j)]


def total_failures(matrices: Iterable[ScoreMatrix]) -> dict[str, int]:
    """Failure counts summed over many matrices (a training step's tasks), plus the number of cells."""
    out = {"cells": 0, "failed": 0, **{s: 0 for s in FAILURES}}
    for m in matrices:
        out["cells"] += int(m.verdicts.size)
        for s, n in m.failure_counts().items():
            out[s] += n
            out["failed"] += n
    return out


@runtime_checkable
class JudgeProtocol(Protocol):
    """Anything that scores responses against criteria."""

    name: str

    def score(self, task: Task, responses: Sequence[str],
              criteria: Sequence[Criterion] | None = None) -> ScoreMatrix: ...

    def score_batch(self, tasks: Sequence[Task], responses: Sequence[Sequence[str]],
                    criteria: Sequence[Sequence[Criterion]] | None = None) -> list[ScoreMatrix]: ...


class Judge(abc.ABC):
    """Base class: a judge implements `score_batch`; `score` is the one-task case."""

    name: str = "judge"

    def score(self, task: Task, responses: Sequence[str],
              criteria: Sequence[Criterion] | None = None) -> ScoreMatrix:
        """K x J verdicts of `criteria` (default: the task's rubric) on `responses`."""
        return self.score_batch([task], [responses], None if criteria is None else [criteria])[0]

    @abc.abstractmethod
    def score_batch(self, tasks: Sequence[Task], responses: Sequence[Sequence[str]],
                    criteria: Sequence[Sequence[Criterion]] | None = None) -> list[ScoreMatrix]:
        """One ScoreMatrix per task; `criteria[i]` defaults to `tasks[i].criteria`."""

    def close(self) -> None:
        """Release connections and files; a judge is also a context manager."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def check_batch(tasks: Sequence[Task], responses: Sequence[Sequence[str]],
                criteria: Sequence[Sequence[Criterion]] | None) -> list[tuple[Criterion, ...]]:
    """Validates a batch's shapes and types; returns each task's criteria."""
    if len(responses) != len(tasks):
        raise ValueError(f"got {len(tasks)} tasks but {len(responses)} response lists")
    if criteria is None:
        criteria = [t.criteria for t in tasks]
    elif len(criteria) != len(tasks):
        raise ValueError(f"got {len(tasks)} tasks but {len(criteria)} criteria lists")
    for t, rs in zip(tasks, responses):
        if isinstance(rs, str):
            raise TypeError(f"task {t.id!r}: responses must be a list of strings, got one string")
        for r in rs:
            if not isinstance(r, str):
                raise TypeError(f"task {t.id!r}: a response must be a string, got {type(r).__name__}")
    return [tuple(c) for c in criteria]


class Unjudged(Judge):
    """The judge of LLM criteria when no LLM judge is configured: every cell not judged (NaN, status 'error')."""

    name = "unjudged"

    def score_batch(self, tasks, responses, criteria=None):
        criteria = check_batch(tasks, responses, criteria)
        return [ScoreMatrix.empty([c.id for c in cs], len(rs), self.name) for rs, cs in zip(responses, criteria)]
