"""The training-time harness H_t = (p_t, g_t, c_t) over N tasks, as immutable pytrees (HarnessRL, sec. 3 and 4.1).

- `SamplingState` (p_t): per task a level, weight 1 or a down-weight gamma1 > gamma2 > gamma3 (0.61, 0.38, 0.17);
  p_t is proportional to the weights and each draw carries u = 1 / (N p_i), so a task's expected share is kept.
- `GuidanceState` (g_t): per task the mounted fields among `criterion`, `reference`, `critique`, and the cap, which
  falls by one each quarter of training (`guidance_cap`), so guidance is empty before evaluation.
- `RubricState` (c_t): per task the weighted criteria, each with an anchor flag, origin, text version and parents.

Anchors keep their text (reweight only) and their share of the task's positive points, the reward's normaliser.
Text is static pytree metadata and per-task numbers read-only numpy leaves: the harness changes only through
`transitions`; `to_dict` / `from_dict` give the JSON form that goes into checkpoints.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Collection, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from harnessrl_jax.rubric import schema

# Sampling levels 1-3 down-weight a task to gamma1, gamma2, gamma3 (cold-start defaults, sec. 4.1).
GAMMAS = (0.61, 0.38, 0.17)
NUM_LEVELS = 1 + len(GAMMAS)
# Guidance fields in the order they are rendered (sec. 4.1: <criterion>, <reference>, <critique>).
FIELDS = ("criterion", "reference", "critique")
# At most one field of each kind, so the cap starts at 3 and reaches 0 after three of four quarters.
INITIAL_CAP = len(FIELDS)
ANCHOR_TAG = "anchor:true"
SEED_ORIGIN = "seed"
FORMAT_VERSION = 1


def _frozen_array(x, dtype=None) -> np.ndarray:
    a = np.array(x, dtype=dtype)  # a copy: the caller's array may change later
    a.setflags(write=False)
    return a


def _freeze_leaves(obj, names):
    # Only host numpy arrays: under jit or tree_map the leaves are tracers or placeholders and pass through.
    for name in names:
        v = getattr(obj, name)
        if isinstance(v, np.ndarray) and v.flags.writeable:
            object.__setattr__(obj, name, _frozen_array(v))


def _pytree(data_fields, meta_fields=()):
    def register(cls):
        return jax.tree_util.register_dataclass(cls, data_fields=list(data_fields), meta_fields=list(meta_fields))
    return register


def _number(x) -> float | int:
    x = float(x)
    return int(x) if x.is_integer() and abs(x) < 2**53 else x


# ------------------------------------------------------------------------------------------------ sampling (p_t)

@_pytree(data_fields=("level", "level_weights"))
@dataclasses.dataclass(frozen=True, eq=False)
class SamplingState:
    """p_t: `level` int32 [N] in 0..3; `level_weights` [4] = (1, gamma1, gamma2, gamma3)."""

    level: Any
    level_weights: Any

    def __post_init__(self):
        _freeze_leaves(self, ("level", "level_weights"))

    @classmethod
    def create(cls, num_tasks: int, gammas: Sequence[float] = GAMMAS, levels=None) -> SamplingState:
        """All tasks at level 0 unless `levels` (e.g. the cold start's quantile levels) is given."""
        gammas = tuple(float(g) for g in gammas)
        if len(gammas) != NUM_LEVELS - 1 or not 1.0 > gammas[0] > gammas[1] > gammas[2] > 0.0:
            raise ValueError(f"gammas must be three numbers with 1 > gamma1 > gamma2 > gamma3 > 0, got {gammas}")
        level = np.zeros(num_tasks, np.int32) if levels is None else np.asarray(levels)
        if level.shape != (num_tasks,) or not np.issubdtype(level.dtype, np.integer):
            raise ValueError(f"levels must be {num_tasks} integers, got shape {level.shape} dtype {level.dtype}")
        if num_tasks and (level.min() < 0 or level.max() >= NUM_LEVELS):
            raise ValueError(f"levels must lie in 0..{NUM_LEVELS - 1}, got {level.min()}..{level.max()}")
        return cls(_frozen_array(level, np.int32), _frozen_array((1.0, *gammas), np.float64))

    @property
    def gammas(self) -> tuple[float, ...]:
        return tuple(float(g) for g in self.level_weights[1:])

    def weights(self) -> np.ndarray:
        """Per-task sampling weight [N]: 1, gamma1, gamma2 or gamma3 by level."""
        return np.asarray(self.level_weights)[np.asarray(self.level)]

    def probs(self) -> np.ndarray:
        """p_t [N], float64."""
        w = self.weights()
        return w / w.sum()

    def importance_weights(self) -> np.ndarray:
        """u = 1 / (N p_i) [N], float64 (sec. 3, after prioritized replay)."""
        p = self.probs()
        return 1.0 / (p.shape[0] * p)


@functools.partial(jax.jit, static_argnames="batch_size")
def sample_tasks(sampling: SamplingState, rng: jax.Array, batch_size: int) -> tuple[jax.Array, jax.Array]:
    """`batch_size` i.i.d. draws from Cat(p_t) (with replacement) -> (task indices int32, u = 1 / (N p_i))."""
    w = jnp.asarray(sampling.level_weights)[jnp.asarray(sampling.level)]
    p = w / w.sum()
    n = p.shape[0]
    idx = jax.random.choice(rng, n, (batch_size,), replace=True, p=p)
    return idx.astype(jnp.int32), 1.0 / (n * p[idx])


# ------------------------------------------------------------------------------------------------ guidance (g_t)

def guidance_cap(step: int, total_steps: int, initial_cap: int = INITIAL_CAP) -> int:
    """Per-task field cap at `step`: `initial_cap`, less one per elapsed quarter of training; 0 from the end on."""
    if total_steps <= 0:
        raise ValueError(f"total_steps must be positive, got {total_steps}")
    if step >= total_steps:
        return 0
    return max(0, initial_cap - (4 * max(step, 0)) // total_steps)


@dataclasses.dataclass(frozen=True)
class MountedField:
    """One mounted guidance field; `criterion_id` names the (blind) criterion it targets, when it targets one."""

    text: str
    criterion_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"text": self.text}
        if self.criterion_id is not None:
            d["criterion_id"] = self.criterion_id
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MountedField:
        return cls(d["text"], d.get("criterion_id"))


@_pytree(data_fields=("cap",), meta_fields=("initial_cap", "fields"))
@dataclasses.dataclass(frozen=True, eq=False)
class GuidanceState:
    """g_t: `fields[i][k]` is task i's mounted `FIELDS[k]` or None; `cap` int32 [] is the current per-task cap."""

    cap: Any
    initial_cap: int
    fields: tuple[tuple[MountedField | None, ...], ...]

    def __post_init__(self):
        _freeze_leaves(self, ("cap",))

    @classmethod
    def create(cls, num_tasks: int, initial_cap: int = INITIAL_CAP) -> GuidanceState:
        """The seed guidance: nothing mounted, cap at `initial_cap`."""
        if not 0 <= initial_cap <= len(FIELDS):
            raise ValueError(f"initial_cap must lie in 0..{len(FIELDS)} (one field of each kind), got {initial_cap}")
        return cls(_frozen_array(initial_cap, np.int32), int(initial_cap), ((None,) * len(FIELDS),) * num_tasks)

    def mounted(self) -> np.ndarray:
        """bool [N, 3]: which fields each task has mounted, columns in `FIELDS` order."""
        return np.array([[f is not None for f in row] for row in self.fields], dtype=bool).reshape(-1, len(FIELDS))

    def count(self, i: int) -> int:
        """Number of fields task i has mounted."""
        return sum(f is not None for f in self.fields[i])

    def task_fields(self, i: int) -> tuple[tuple[str, MountedField], ...]:
        """Task i's mounted (name, field) pairs in `FIELDS` order."""
        return tuple((name, f) for name, f in zip(FIELDS, self.fields[i]) if f is not None)


# -------------------------------------------------------------------------------------------------- rubric (c_t)

@dataclasses.dataclass(frozen=True)
class RubricCriterion:
    """A criterion as the harness holds it: the scored check plus anchor flag, origin, text version and lineage.

    `version` counts text versions (1 = as created; each rewrite adds one); `parent_ids` are the criteria a merge
    or split made it from.
    """

    id: str
    text: str
    points: float
    tags: tuple[str, ...] = ()
    anchor: bool = False
    origin: str = SEED_ORIGIN
    version: int = 1
    parent_ids: tuple[str, ...] = ()

    def to_criterion(self) -> schema.Criterion:
        """The schema criterion a judge scores."""
        return schema.Criterion(self.id, self.text, self.points, self.tags)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "text": self.text, "points": _number(self.points), "tags": list(self.tags),
                "anchor": self.anchor, "origin": self.origin, "version": self.version,
                "parent_ids": list(self.parent_ids)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RubricCriterion:
        return cls(d["id"], d["text"], float(d["points"]), tuple(d.get("tags", ())), bool(d.get("anchor", False)),
                   d.get("origin", SEED_ORIGIN), int(d.get("version", 1)), tuple(d.get("parent_ids", ())))


def positive_weight(criteria: Sequence[RubricCriterion], *, anchor: bool) -> float:
    """Sum of the positive points of the anchors (`anchor=True`) or of the other criteria."""
    return math.fsum(c.points for c in criteria if c.anchor == anchor and c.points > 0)


def anchor_share(criteria: Sequence[RubricCriterion]) -> float:
    """The anchors' share of the positive points: A / (A + B); 0 when nothing is positive."""
    a, b = positive_weight(criteria, anchor=True), positive_weight(criteria, anchor=False)
    return a / (a + b) if a + b > 0 else 0.0


def seed_anchor_ids(task: schema.Task) -> frozenset[str]:
    """The anchors without a cold start's: the criteria tagged `anchor:true`, else the top-weighted half (rounded
    down, ties in seed order) of the positive ones, so one positive criterion is always left for rubric updates."""
    tagged = frozenset(c.id for c in task.criteria if ANCHOR_TAG in c.tags)
    if tagged:
        return tagged
    positive = [c for c in task.criteria if c.points > 0]
    ranked = sorted(positive, key=lambda c: -c.points)  # stable: ties keep seed order
    return frozenset(c.id for c in ranked[: len(positive) // 2])


@_pytree(data_fields=("seed_anchor_share", "next_id"), meta_fields=("criteria",))
@dataclasses.dataclass(frozen=True, eq=False)
class RubricState:
    """c_t: `criteria[i]` is task i's rubric; `seed_anchor_share` float64 [N] is the anchors' share at the seed,
    which every transition keeps; `next_id` int64 [N] numbers the criteria the harness adds (never reused)."""

    seed_anchor_share: Any
    next_id: Any
    criteria: tuple[tuple[RubricCriterion, ...], ...]

    def __post_init__(self):
        _freeze_leaves(self, ("seed_anchor_share", "next_id"))

    def points(self, i: int) -> np.ndarray:
        """Task i's points [K], float64, in criterion order (what `rubric_reward` takes)."""
        return np.array([c.points for c in self.criteria[i]], dtype=np.float64)

    def find(self, i: int, criterion_id: str) -> int | None:
        """Position of `criterion_id` in task i's rubric, or None."""
        for k, c in enumerate(self.criteria[i]):
            if c.id == criterion_id:
                return k
        return None


# --------------------------------------------------------------------------------------------- the whole harness

@_pytree(data_fields=("sampling", "guidance", "rubric"), meta_fields=("task_ids",))
@dataclasses.dataclass(frozen=True, eq=False)
class HarnessState:
    """H_t = (p_t, g_t, c_t) over the tasks `task_ids`; row i of every part is task `task_ids[i]`."""

    sampling: SamplingState
    guidance: GuidanceState
    rubric: RubricState
    task_ids: tuple[str, ...]

    @functools.cached_property
    def _index(self) -> dict[str, int]:
        return {t: i for i, t in enumerate(self.task_ids)}

    @property
    def num_tasks(self) -> int:
        return len(self.task_ids)

    def index(self, task_id: str) -> int:
        """Row of `task_id`; KeyError if the harness has no such task."""
        return self._index[task_id]

    def has_task(self, task_id: str) -> bool:
        return task_id in self._index

    def rubric_of(self, task_id: str) -> tuple[RubricCriterion, ...]:
        """The task's current criteria as the harness holds them."""
        return self.rubric.criteria[self.index(task_id)]

    def criteria(self, task_id: str) -> tuple[schema.Criterion, ...]:
        """The task's current rubric as schema criteria, for scoring."""
        return tuple(c.to_criterion() for c in self.rubric_of(task_id))

    def points(self, task_id: str) -> np.ndarray:
        """The task's current points [K]."""
        return self.rubric.points(self.index(task_id))

    def fields(self, task_id: str) -> tuple[tuple[str, MountedField], ...]:
        """The task's mounted guidance fields, in render order."""
        return self.guidance.task_fields(self.index(task_id))

    def to_tasks(self, tasks: Sequence[schema.Task]) -> list[schema.Task]:
        """`tasks` (in harness order) with their criteria replaced by the harness's current rubric."""
        if tuple(t.id for t in tasks) != self.task_ids:
            raise ValueError("tasks must be the harness's tasks, in its order")
        return [dataclasses.replace(t, criteria=self.criteria(t.id)) for t in tasks]

    def replace(self, **parts) -> HarnessState:
        """A new harness with some parts (`sampling`, `guidance`, `rubric`) replaced."""
        new = dataclasses.replace(self, **parts)
        if "_index" in self.__dict__ and new.task_ids == self.task_ids:  # same tasks: reuse the id -> row map
            new.__dict__["_index"] = self.__dict__["_index"]
        return new

    # ------------------------------------------------------------------------------------------- construction

    @classmethod
    def from_tasks(cls, tasks: Sequence[schema.Task], *, gammas: Sequence[float] = GAMMAS, levels=None,
                   initial_cap: int = INITIAL_CAP,
                   anchors: Mapping[str, Collection[str]] | None = None) -> HarnessState:
        """The seed harness: seed criteria, nothing mounted, all tasks at level 0 unless `levels` is given.

        `anchors` maps task id -> anchor criterion ids (the cold start's choice); tasks it leaves out, or all tasks
        when it is None, get `seed_anchor_ids`.
        """
        ids = tuple(t.id for t in tasks)
        if len(set(ids)) != len(ids):
            raise ValueError("duplicate task ids")
        rubrics, shares = [], []
        for t in tasks:
            chosen = anchors.get(t.id) if anchors is not None else None
            chosen = seed_anchor_ids(t) if chosen is None else frozenset(chosen)
            unknown = chosen - {c.id for c in t.criteria}
            if unknown:
                raise ValueError(f"task {t.id!r}: anchors {sorted(unknown)} are not among its criteria")
            rubric = tuple(RubricCriterion(c.id, c.text, float(c.points), tuple(c.tags), c.id in chosen)
                           for c in t.criteria)
            if not any(c.points > 0 for c in rubric):
                raise ValueError(f"task {t.id!r}: no criterion with positive points")
            rubrics.append(rubric)
            shares.append(anchor_share(rubric))
        rubric_state = RubricState(_frozen_array(shares, np.float64), _frozen_array(np.zeros(len(ids)), np.int64),
                                   tuple(rubrics))
        return cls(SamplingState.create(len(ids), gammas, levels), GuidanceState.create(len(ids), initial_cap),
                   rubric_state, ids)

    # ------------------------------------------------------------------------------------------- JSON form

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict; `from_dict` inverts it exactly (floats as Python floats round-trip through JSON)."""
        return {
            "format": FORMAT_VERSION,
            "task_ids": list(self.task_ids),
            "sampling": {"level": [int(x) for x in self.sampling.level],
                         "gammas": [float(g) for g in self.sampling.gammas]},
            "guidance": {"cap": int(self.guidance.cap), "initial_cap": self.guidance.initial_cap,
                         "fields": [{name: f.to_dict() for name, f in zip(FIELDS, row) if f is not None}
                                    for row in self.guidance.fields]},
            "rubric": {"seed_anchor_share": [float(s) for s in self.rubric.seed_anchor_share],
                       "next_id": [int(n) for n in self.rubric.next_id],
                       "criteria": [[c.to_dict() for c in row] for row in self.rubric.criteria]},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HarnessState:
        """Inverse of `to_dict`."""
        if d.get("format") != FORMAT_VERSION:
            raise ValueError(f"harness state format {d.get('format')!r}, expected {FORMAT_VERSION}")
        ids = tuple(d["task_ids"])
        n = len(ids)
        g, r = d["guidance"], d["rubric"]
        for name, rows in (("guidance.fields", g["fields"]), ("rubric.criteria", r["criteria"]),
                           ("rubric.seed_anchor_share", r["seed_anchor_share"]), ("rubric.next_id", r["next_id"])):
            if len(rows) != n:
                raise ValueError(f"{name} has {len(rows)} rows for {n} tasks")
        unknown = {k for row in g["fields"] for k in row} - set(FIELDS)
        if unknown:
            raise ValueError(f"unknown guidance fields {sorted(unknown)}")
        sampling = SamplingState.create(n, d["sampling"]["gammas"], np.asarray(d["sampling"]["level"], np.int64))
        guidance = GuidanceState(_frozen_array(g["cap"], np.int32), int(g["initial_cap"]),
                                 tuple(tuple(MountedField.from_dict(row[name]) if name in row else None
                                             for name in FIELDS) for row in g["fields"]))
        rubric = RubricState(_frozen_array(r["seed_anchor_share"], np.float64), _frozen_array(r["next_id"], np.int64),
                             tuple(tuple(RubricCriterion.from_dict(c) for c in row) for row in r["criteria"]))
        return cls(sampling, guidance, rubric, ids)
