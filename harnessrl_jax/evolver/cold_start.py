"""Memory cold start: the thresholds the harness uses, measured from the seed policy (HarnessRL, sec. 4.4).

The seed policy answers every training task in several independent groups, one group per task graded again. From
those score matrices: the gamma levels (q75, q50, q25 of the tasks' discriminative mass), the acceptance bands
[eps_low, eps_high] (the 95th percentile of the null between groups for guidance and between gradings for the
rubric; the median within-group reward range) and, optionally, anchor criteria. A quantity with nothing to measure
keeps the paper's value and `cold_start.json` (`ColdStart.save` / `load`) says why; docs/design.md gives its format.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from harnessrl_jax.evolver.critic import GUIDANCE_BAND, RUBRIC_BAND, Bands
from harnessrl_jax.harness.state import GAMMAS
from harnessrl_jax.rubric.reward import discriminative_mass, rubric_reward

FORMAT_VERSION = 1
GAMMA_QUANTILES = (0.75, 0.5, 0.25)
NULL_PERCENTILE = 95.0
NARROW_BAND = 0.75  # a lower bound above this share of the upper one leaves the critic almost nothing to accept


@dataclasses.dataclass(frozen=True, eq=False)
class SeedGroups:
    """One task's seed-policy score matrices: `groups` are independent groups (each S [K, J] under the seed
    rubric with `points` [K]); `regradings` are the first group's responses graded again (same shape);
    `responses` the first group's J responses (what a method that learns from the seed groups reads: SkillRL's
    first skill bank)."""

    task_id: str
    points: np.ndarray
    groups: tuple[np.ndarray, ...]
    regradings: tuple[np.ndarray, ...] = ()
    criterion_ids: tuple[str, ...] = ()
    responses: tuple[str, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "points", np.asarray(self.points, np.float64))
        object.__setattr__(self, "groups", tuple(np.asarray(g, np.float64) for g in self.groups))
        object.__setattr__(self, "regradings", tuple(np.asarray(g, np.float64) for g in self.regradings))
        k = self.points.shape[0]
        if not self.groups:
            raise ValueError(f"task {self.task_id!r}: no seed group")
        for name, mats in (("groups", self.groups), ("regradings", self.regradings)):
            for n, s in enumerate(mats):
                if s.ndim != 2 or s.shape[0] != k:
                    raise ValueError(f"task {self.task_id!r}: {name}[{n}] has shape {s.shape}, expected [{k}, J]")
        for n, s in enumerate(self.regradings):
            if s.shape != self.groups[0].shape:
                raise ValueError(f"task {self.task_id!r}: regradings[{n}] has shape {s.shape}, the graded group "
                                 f"{self.groups[0].shape}")
        if self.responses and len(self.responses) != self.groups[0].shape[1]:
            raise ValueError(f"task {self.task_id!r}: {len(self.responses)} responses for a first group of "
                             f"{self.groups[0].shape[1]}")
        if self.criterion_ids and len(self.criterion_ids) != k:
            raise ValueError(f"task {self.task_id!r}: {len(self.criterion_ids)} criterion ids for {k} criteria")


def _mean_reward(points, S) -> float:
    r = rubric_reward(points, S)
    r = r[~np.isnan(r)]
    return float(r.mean()) if r.size else math.nan


def task_mass(seed: SeedGroups) -> float:
    """The task's discriminative mass, averaged over its independent groups (NaN groups left out)."""
    m = [discriminative_mass(seed.points, s) for s in seed.groups]
    m = [x for x in m if not math.isnan(x)]
    return float(np.mean(m)) if m else math.nan


def null_between_groups(seeds: Sequence[SeedGroups]) -> np.ndarray:
    """|rbar_a - rbar_b| over every pair of independent groups of every task."""
    out = []
    for s in seeds:
        means = [_mean_reward(s.points, g) for g in s.groups]
        out += [abs(a - b) for a, b in itertools.combinations(means, 2) if not (math.isnan(a) or math.isnan(b))]
    return np.asarray(out, np.float64)


def null_between_gradings(seeds: Sequence[SeedGroups]) -> np.ndarray:
    """|rbar_a - rbar_b| over every pair of gradings (the first and its regradings) of the same responses."""
    out = []
    for s in seeds:
        if not s.regradings:
            continue
        means = [_mean_reward(s.points, g) for g in (s.groups[0], *s.regradings)]
        out += [abs(a - b) for a, b in itertools.combinations(means, 2) if not (math.isnan(a) or math.isnan(b))]
    return np.asarray(out, np.float64)


def within_group_ranges(seeds: Sequence[SeedGroups]) -> np.ndarray:
    """max_j r_j - min_j r_j of every independent group (valid rewards only)."""
    out = []
    for s in seeds:
        for g in s.groups:
            r = rubric_reward(s.points, g)
            r = r[~np.isnan(r)]
            if r.size:
                out.append(float(r.max() - r.min()))
    return np.asarray(out, np.float64)


def choose_anchors(seed: SeedGroups, agreement: float = 0.9) -> list[str] | None:
    """The seed criteria the cold start fixes as anchors: positive ones whose verdicts agree across the regradings on
    at least `agreement` of the cells, the top-weighted half at most; None without regradings."""
    if not seed.regradings or not seed.criterion_ids:
        return None
    gradings = np.stack((seed.groups[0], *seed.regradings))  # [G, K, J]
    valid = ~np.isnan(gradings).any(axis=0)  # cells graded every time
    same = (gradings == gradings[0]).all(axis=0) & valid
    rate = np.where(valid.sum(1) > 0, same.sum(1) / np.maximum(valid.sum(1), 1), 0.0)
    positive = [k for k in range(len(seed.points)) if seed.points[k] > 0]
    reliable = [k for k in positive if rate[k] >= agreement]
    ranked = sorted(reliable, key=lambda k: (-seed.points[k], k))
    return [seed.criterion_ids[k] for k in ranked[: len(positive) // 2]]


def _stats(x: np.ndarray, pct: float) -> dict[str, Any]:
    if not x.size:
        return {"n": 0}
    return {"n": int(x.size), f"p{pct:g}": float(np.percentile(x, pct)), "mean": float(x.mean())}


@dataclasses.dataclass(frozen=True)
class ColdStart:
    """The cold start's measurements; `save` / `load` give cold_start.json (its format: docs/design.md)."""

    gammas: tuple[float, float, float] = GAMMAS
    bands: Mapping[str, tuple[float, float]] = dataclasses.field(
        default_factory=lambda: {"guidance": GUIDANCE_BAND, "rubric": RUBRIC_BAND})
    task_mass_threshold: float = 0.5
    task_mass: Mapping[str, float] = dataclasses.field(default_factory=dict)
    anchors: Mapping[str, list[str]] | None = None
    gamma_quantiles: tuple[float, ...] = GAMMA_QUANTILES
    gammas_source: str = "default"
    band_sources: Mapping[str, str] = dataclasses.field(default_factory=dict)
    null_percentile: float = NULL_PERCENTILE
    stats: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    meta: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def to_bands(self) -> Bands:
        """The critic's acceptance bands."""
        return Bands(tuple(self.bands["guidance"]), tuple(self.bands["rubric"]))

    def to_dict(self) -> dict[str, Any]:
        def num(x):
            return None if isinstance(x, float) and not math.isfinite(x) else x
        return {"format": FORMAT_VERSION, "gammas": [float(g) for g in self.gammas],
                "gamma_quantiles": list(self.gamma_quantiles), "gammas_source": self.gammas_source,
                "bands": {k: [float(v) for v in b] for k, b in self.bands.items()},
                "band_sources": dict(self.band_sources), "null_percentile": self.null_percentile,
                "task_mass_threshold": num(float(self.task_mass_threshold)),
                "task_mass": {k: num(float(v)) for k, v in self.task_mass.items()},
                "anchors": None if self.anchors is None else {k: list(v) for k, v in self.anchors.items()},
                "stats": json.loads(json.dumps(self.stats)), "meta": dict(self.meta),
                "warnings": list(self.warnings)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ColdStart:
        if d.get("format") != FORMAT_VERSION:
            raise ValueError(f"cold start format {d.get('format')!r}, this code reads {FORMAT_VERSION}")
        for key in ("gammas", "bands"):
            if key not in d:
                raise ValueError(f"cold start: field {key!r} missing")
        bands = {k: tuple(float(x) for x in d["bands"][k]) for k in ("guidance", "rubric")}
        Bands(bands["guidance"], bands["rubric"])  # validates
        gammas = tuple(float(g) for g in d["gammas"])
        if len(gammas) != 3 or not 1.0 > gammas[0] > gammas[1] > gammas[2] > 0.0:
            raise ValueError(f"cold start: gammas must be 1 > g1 > g2 > g3 > 0, got {gammas}")
        thr = d.get("task_mass_threshold")
        return cls(gammas, bands, 0.5 if thr is None else float(thr),
                   {k: (math.nan if v is None else float(v)) for k, v in d.get("task_mass", {}).items()},
                   d.get("anchors"), tuple(d.get("gamma_quantiles", GAMMA_QUANTILES)),
                   d.get("gammas_source", "default"), dict(d.get("band_sources", {})),
                   float(d.get("null_percentile", NULL_PERCENTILE)), d.get("stats", {}), d.get("meta", {}),
                   tuple(d.get("warnings", ())))

    def save(self, path: str | os.PathLike) -> None:
        """Writes cold_start.json atomically."""
        tmp = f"{os.fspath(path)}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, indent=1, sort_keys=False)
            f.write("\n")
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> ColdStart:
        """Reads cold_start.json; ValueError naming the file when it is not one."""
        try:
            with open(path, encoding="utf-8") as f:
                return cls.from_dict(json.load(f))
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{os.fspath(path)}: not a valid cold start file: {e}") from None


def groups_path(cold_start: str) -> str:
    """Where the raw measurements behind a cold start file go (launch/cold_start.py writes both)."""
    return (cold_start[:-5] if cold_start.endswith(".json") else cold_start) + ".groups.jsonl"


def save_seed_groups(path: str | os.PathLike, seeds: Sequence[SeedGroups]) -> None:
    """The raw measurements behind a cold start, one JSON object per task per line (NaN cells as null), written
    atomically; `load_seed_groups` reads them back, so thresholds can be re-derived without the policy."""
    def mat(s):
        return [[None if math.isnan(x) else x for x in row] for row in s.tolist()]

    tmp = f"{os.fspath(path)}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for s in seeds:
            f.write(json.dumps({"task_id": s.task_id, "points": s.points.tolist(),
                                "criterion_ids": list(s.criterion_ids), "groups": [mat(g) for g in s.groups],
                                "regradings": [mat(g) for g in s.regradings],
                                "responses": list(s.responses)}) + "\n")
    os.replace(tmp, path)


def load_seed_groups(path: str | os.PathLike) -> list[SeedGroups]:
    """What `save_seed_groups` wrote; ValueError naming the file and line of a bad record."""
    def mat(rows):
        return np.asarray([[math.nan if x is None else x for x in row] for row in rows], np.float64)

    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                out.append(SeedGroups(d["task_id"], d["points"], tuple(mat(g) for g in d["groups"]),
                                      tuple(mat(g) for g in d.get("regradings", [])),
                                      tuple(d.get("criterion_ids", ())), tuple(d.get("responses", ()))))
            except (ValueError, KeyError, TypeError) as e:
                raise ValueError(f"{os.fspath(path)}:{n}: not a seed-group record: {e}") from None
    if not out:
        raise ValueError(f"{os.fspath(path)}: no seed-group record")
    return out


def collect(tasks: Sequence, sample: Callable[[Sequence, int], Sequence[Sequence[str]]],
            score: Callable[[Sequence, Sequence[Sequence[str]]], Sequence[np.ndarray]], *, groups: int = 4,
            regradings: int = 2, batch_tasks: int = 8, seed: int = 0,
            progress: Callable[[str], None] | None = None) -> list[SeedGroups]:
    """The seed policy's groups over `tasks` (each with `.id`, `.points`, `.criteria`): `groups` independent
    groups per task and `regradings` more gradings of the first group.

    sample(tasks, seed) -> one group of responses per task (the seed policy, bare prompts); score(tasks, responses)
    -> one S [K, J] per task under the task's seed criteria (the training judge). Tasks go `batch_tasks` at a time;
    group g of every batch is sampled with seed `seed + g` mixed with the batch index, so groups are independent
    and a rerun is the same. `progress` gets one line per batch with the rate and ETA.
    """
    if groups < 1 or regradings < 0 or batch_tasks < 1:
        raise ValueError(f"cold start: groups >= 1, regradings >= 0, batch_tasks >= 1 (got {groups}, "
                         f"{regradings}, {batch_tasks})")
    out, start = [], time.perf_counter()
    batches = [tasks[i:i + batch_tasks] for i in range(0, len(tasks), batch_tasks)]
    for b, batch in enumerate(batches):
        mats = []  # [group][task] S
        for g in range(groups):
            responses = [list(r) for r in sample(batch, (seed + 1_000_003 * g + 7919 * b) % (2**31 - 1))]
            if len(responses) != len(batch):
                raise ValueError(f"cold start: sample returned {len(responses)} groups for {len(batch)} tasks")
            mats.append([np.asarray(s, np.float64) for s in score(batch, responses)])
            if g == 0:
                first = responses
        regraded = [[np.asarray(s, np.float64) for s in score(batch, first)] for _ in range(regradings)]
        for n, task in enumerate(batch):
            out.append(SeedGroups(task.id, np.asarray(task.points, np.float64), tuple(m[n] for m in mats),
                                  tuple(r[n] for r in regraded), tuple(c.id for c in task.criteria),
                                  tuple(map(str, first[n]))))
        if progress is not None:
            done, elapsed = len(out), time.perf_counter() - start
            progress(f"cold start: {done}/{len(tasks)} tasks, {done / elapsed:.2f} tasks/s, "
                     f"ETA {elapsed / done * (len(tasks) - done):.0f} s")
    return out


def derive(seeds: Sequence[SeedGroups], *, quantiles: Sequence[float] = GAMMA_QUANTILES,
           null_percentile: float = NULL_PERCENTILE, anchor_agreement: float | None = 0.9,
           meta: Mapping[str, Any] | None = None) -> ColdStart:
    """The cold start from the seed policy's groups over the training tasks (see the module docstring)."""
    if not seeds:
        raise ValueError("cold start needs at least one task")
    masses = {s.task_id: task_mass(s) for s in seeds}
    m = np.asarray([v for v in masses.values() if not math.isnan(v)], np.float64)
    gammas, source = GAMMAS, "default: no task has a valid discriminative mass"
    if m.size:
        q = tuple(float(np.quantile(m, p)) for p in quantiles)
        if len(q) == 3 and 1.0 > q[0] > q[1] > q[2] > 0.0:
            gammas, source = q, "quantiles"
        else:
            source = f"default: quantiles {tuple(round(x, 4) for x in q)} are not 1 > g1 > g2 > g3 > 0"
    threshold = float(np.median(m)) if m.size else 0.5

    groups_null, grading_null, ranges = null_between_groups(seeds), null_between_gradings(seeds), \
        within_group_ranges(seeds)
    sources = {}
    g_lo = float(np.percentile(groups_null, null_percentile)) if groups_null.size else GUIDANCE_BAND[0]
    sources["guidance_low"] = "measured" if groups_null.size else "default: fewer than two groups per task"
    r_lo = float(np.percentile(grading_null, null_percentile)) if grading_null.size else RUBRIC_BAND[0]
    sources["rubric_low"] = "measured" if grading_null.size else "default: no repeated grading"
    deterministic = grading_null.size > 0 and r_lo == 0.0
    hi = float(np.median(ranges)) if ranges.size else 0.0
    sources["high"] = "measured"
    if hi <= 0.0:  # no spread in the typical group: there is no scale to measure an effect against
        hi, sources["high"] = GUIDANCE_BAND[1], "default: the median group has no reward spread"
    warnings = []
    if deterministic:
        # A judge that regrades identically (rule checkers, an LLM judge at temperature 0) has no grading noise to
        # measure; a band starting at 0 would take any positive delta_c for an effect, so the paper's value stands.
        r_lo = RUBRIC_BAND[0]
        sources["rubric_low"] = "default: the judge regrades identically (null 0), the paper's value"
        warnings.append(f"the rubric band's null measured 0 (the judge regrades identically at its training "
                        f"settings): its lower bound is the paper's {RUBRIC_BAND[0]:g}")
    for name, lo in (("guidance", g_lo), ("rubric", r_lo)):
        if lo > hi:
            raise ValueError(f"cold start: the {name} band's lower bound {lo:.3g} (null fluctuation) exceeds the "
                             f"upper bound {hi:.3g} (median within-group range): groups are too small or the "
                             f"judge too noisy for the band to separate an effect from noise")
        if lo > NARROW_BAND * hi:
            warnings.append(f"the {name} band [{lo:.3g}, {hi:.3g}] is narrow: its null fluctuation is over "
                            f"{NARROW_BAND:.0%} of the median within-group range, so the critic will accept almost "
                            f"no {name} update; larger groups (J) or more groups per task narrow the null")
    anchors = None
    if anchor_agreement is not None:
        chosen = {s.task_id: choose_anchors(s, anchor_agreement) for s in seeds}
        chosen = {k: v for k, v in chosen.items() if v is not None}
        anchors = chosen or None
    stats = {"null_between_groups": _stats(groups_null, null_percentile),
             "null_between_gradings": _stats(grading_null, null_percentile),
             "within_group_range": ({"n": int(ranges.size), "median": float(np.median(ranges)),
                                     "mean": float(ranges.mean())} if ranges.size else {"n": 0}),
             "mass": ({"n": int(m.size), "mean": float(m.mean()),
                       **{f"q{round(p * 100)}": float(np.quantile(m, p)) for p in sorted(quantiles)}}
                      if m.size else {"n": 0})}
    return ColdStart(tuple(gammas), {"guidance": (g_lo, hi), "rubric": (r_lo, hi)}, threshold, masses, anchors,
                     tuple(quantiles), source, sources, float(null_percentile), stats, dict(meta or {}),
                     tuple(warnings))
