"""Typed harness actions, one frozen dataclass per operation of each interface (HarnessRL, sec. 3 and 4.1).

sampling: `DownweightTask` (one level down: 1 -> gamma1 -> gamma2 -> gamma3), `RestoreTask` (back to weight 1);
guidance: `AddField`, `DropField` (fields `criterion`, `reference`, `critique`);
rubric:   `CreateCriterion`, `RewriteCriterion`, `DeleteCriterion`, `ReweightCriterion`, `MergeCriteria`,
          `SplitCriterion`;
`Noop`:   an explicit decision not to act (the proposer's answer after B rejected rounds).

`validate(state)` raises `InvalidAction` naming why an action breaks an invariant of the harness: an anchor's text
is frozen, a task keeps a positive criterion, the anchors' share can still be kept, a reweight keeps its sign (a
flip would change the meaning, not the weight), a task mounts at most `cap` fields, one of each kind.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from harnessrl_jax.harness.state import FIELDS, NUM_LEVELS, HarnessState, RubricCriterion
from harnessrl_jax.rubric import schema
from harnessrl_jax.words import INTERFACES, Interface

PROPOSER_ORIGIN = "proposer"


class InvalidAction(ValueError):
    """An action that cannot apply to the harness; `reason` says why."""

    def __init__(self, action: Action, reason: str):
        super().__init__(f"{type(action).__name__} rejected: {reason}")
        self.action, self.reason = action, reason


_REGISTRY: dict[str, type[Action]] = {}


@dataclasses.dataclass(frozen=True)
class Action:
    """Base of all harness actions: `op` names it in JSON, `interface` is the part of H_t it changes."""

    op: ClassVar[str] = ""
    interface: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.op:
            _REGISTRY[cls.op] = cls

    def __post_init__(self):
        # JSON gives lists and callers may hand numpy scalars; actions are frozen, hashable and written as JSON,
        # so sequences are kept as tuples and numbers as Python numbers.
        def plain(v):
            if isinstance(v, (list, tuple)):
                return tuple(plain(x) for x in v)
            return v.item() if isinstance(v, np.generic) else v
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, plain(getattr(self, f.name)))

    def validate(self, state: HarnessState) -> None:
        """Raises InvalidAction if this action cannot apply to `state`."""
        raise NotImplementedError

    def is_valid(self, state: HarnessState) -> bool:
        try:
            self.validate(state)
        except InvalidAction:
            return False
        return True

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form: {"op": ..., **fields}, sequences as lists."""
        def plain(v):
            return [plain(x) for x in v] if isinstance(v, tuple) else v
        return {"op": self.op, **{f.name: plain(getattr(self, f.name)) for f in dataclasses.fields(self)}}

    def reject(self, reason: str) -> InvalidAction:
        return InvalidAction(self, reason)

    # Shared checks, each raising with its reason.

    def _task(self, state: HarnessState, task_id: Any) -> int:
        if not isinstance(task_id, str) or not state.has_task(task_id):
            raise self.reject(f"unknown task {task_id!r}")
        return state.index(task_id)

    def _criterion(self, state: HarnessState, i: int, criterion_id: Any) -> RubricCriterion:
        k = state.rubric.find(i, criterion_id) if isinstance(criterion_id, str) else None
        if k is None:
            raise self.reject(f"unknown criterion {criterion_id!r} in task {state.task_ids[i]!r}")
        return state.rubric.criteria[i][k]

    def _text(self, text: Any, what: str = "text") -> None:
        if not isinstance(text, str) or not text.strip():
            raise self.reject(f"{what} must be a non-empty string, got {text!r}")

    def _points(self, points: Any, what: str = "points") -> float:
        if isinstance(points, bool) or not isinstance(points, (int, float)) or not math.isfinite(points):
            raise self.reject(f"{what} must be a finite number, got {points!r}")
        if points == 0:
            raise self.reject(f"{what} must be non-zero (a zero-point criterion changes no reward; delete it)")
        return float(points)

    def _tags(self, tags: Any) -> None:
        if not isinstance(tags, tuple) or not all(isinstance(t, str) for t in tags):
            raise self.reject(f"tags must be a sequence of 'key:value' strings, got {tags!r}")
        try:
            schema._tags(list(tags), "tags")  # the loader's own check, so tags mean the same everywhere
        except ValueError as e:
            raise self.reject(f"bad tags: {e}") from None

    def _not_anchor(self, c: RubricCriterion, doing: str) -> None:
        if c.anchor:
            raise self.reject(f"criterion {c.id!r} is an anchor: its text is frozen (reweight only), so it cannot "
                              f"be {doing}")

    def _remaining(self, state: HarnessState, i: int, removed: Sequence[str], added: Sequence[float]) -> None:
        """Checks the rubric left after removing `removed` and adding non-anchors with points `added`."""
        kept = [c for c in state.rubric.criteria[i] if c.id not in removed]
        positive = sum(c.points > 0 for c in kept) + sum(p > 0 for p in added)
        if positive == 0:
            raise self.reject(f"task {state.task_ids[i]!r} would have no positive criterion left")
        share = float(state.rubric.seed_anchor_share[i])
        free = sum(c.points > 0 and not c.anchor for c in kept) + sum(p > 0 for p in added)
        if 0.0 < share < 1.0 and free == 0:
            raise self.reject(f"task {state.task_ids[i]!r} would have no positive non-anchor criterion left, so the "
                              f"anchors' share of positive points ({share:.4g}) could not be kept")
        if share == 1.0 and free > 0:
            raise self.reject(f"task {state.task_ids[i]!r}: its anchors hold all positive points at the seed, so a "
                              f"positive non-anchor criterion would change the anchors' share; only pitfalls "
                              f"(negative points) may be added")


def action_from_dict(d: Mapping[str, Any]) -> Action:
    """Inverse of `Action.to_dict`; ValueError on an unknown op or fields."""
    d = dict(d)
    op = d.pop("op", None)
    if op not in _REGISTRY:
        raise ValueError(f"unknown action op {op!r} (known: {', '.join(sorted(_REGISTRY))})")
    cls = _REGISTRY[op]
    names = {f.name for f in dataclasses.fields(cls)}
    if set(d) - names:
        raise ValueError(f"{op}: unknown fields {sorted(set(d) - names)}")
    return cls(**d)


# ----------------------------------------------------------------------------------------------------- noop

@dataclasses.dataclass(frozen=True)
class Noop(Action):
    """An explicit decision not to act; `interface` / `task_id` / `reason` say where and why, for the record."""

    op: ClassVar[str] = "noop"
    interface: str = "none"
    task_id: str | None = None
    reason: str = ""

    def validate(self, state: HarnessState) -> None:
        if self.interface not in (*INTERFACES, "none"):
            raise self.reject(f"interface must be one of {[*INTERFACES, 'none']}, got {self.interface!r}")


# ---------------------------------------------------------------------------------------------- sampling (p_t)

@dataclasses.dataclass(frozen=True)
class DownweightTask(Action):
    """Move a (saturated) task one sampling level down: 1 -> gamma1 -> gamma2 -> gamma3."""

    op: ClassVar[str] = "downweight_task"
    interface: ClassVar[Interface] = Interface.SAMPLING
    task_id: str

    def validate(self, state: HarnessState) -> None:
        i = self._task(state, self.task_id)
        if int(state.sampling.level[i]) >= NUM_LEVELS - 1:
            raise self.reject(f"task {self.task_id!r} is already at the lowest level "
                              f"(gamma3 = {state.sampling.gammas[-1]})")


@dataclasses.dataclass(frozen=True)
class RestoreTask(Action):
    """Put a down-weighted task back to weight 1 (level 0)."""

    op: ClassVar[str] = "restore_task"
    interface: ClassVar[Interface] = Interface.SAMPLING
    task_id: str

    def validate(self, state: HarnessState) -> None:
        i = self._task(state, self.task_id)
        if int(state.sampling.level[i]) == 0:
            raise self.reject(f"task {self.task_id!r} is already at full weight (level 0)")


# ---------------------------------------------------------------------------------------------- guidance (g_t)

@dataclasses.dataclass(frozen=True)
class AddField(Action):
    """Mount a guidance field on a task; `criterion_id` optionally names the blind criterion it targets."""

    op: ClassVar[str] = "add_field"
    interface: ClassVar[Interface] = Interface.GUIDANCE
    task_id: str
    field: str
    text: str
    criterion_id: str | None = None

    def validate(self, state: HarnessState) -> None:
        i = self._task(state, self.task_id)
        if self.field not in FIELDS:
            raise self.reject(f"unknown guidance field {self.field!r} (fields: {', '.join(FIELDS)})")
        self._text(self.text)
        if self.criterion_id is not None:
            self._criterion(state, i, self.criterion_id)
        if state.guidance.fields[i][FIELDS.index(self.field)] is not None:
            raise self.reject(f"task {self.task_id!r} already has a <{self.field}> field mounted (drop it first)")
        cap = int(state.guidance.cap)
        if state.guidance.count(i) + 1 > cap:
            raise self.reject(f"task {self.task_id!r} has {state.guidance.count(i)} field(s) mounted and the cap is "
                              f"{cap}: one more would exceed it")


@dataclasses.dataclass(frozen=True)
class DropField(Action):
    """Unmount a guidance field from a task."""

    op: ClassVar[str] = "drop_field"
    interface: ClassVar[Interface] = Interface.GUIDANCE
    task_id: str
    field: str

    def validate(self, state: HarnessState) -> None:
        i = self._task(state, self.task_id)
        if self.field not in FIELDS:
            raise self.reject(f"unknown guidance field {self.field!r} (fields: {', '.join(FIELDS)})")
        if state.guidance.fields[i][FIELDS.index(self.field)] is None:
            raise self.reject(f"task {self.task_id!r} has no <{self.field}> field mounted")


# ------------------------------------------------------------------------------------------------ rubric (c_t)

@dataclasses.dataclass(frozen=True)
class CreateCriterion(Action):
    """Add a criterion (negative points: a pitfall); the harness gives it a fresh id."""

    op: ClassVar[str] = "create_criterion"
    interface: ClassVar[Interface] = Interface.RUBRIC
    task_id: str
    text: str
    points: float
    tags: tuple[str, ...] = ()
    origin: str = PROPOSER_ORIGIN

    def validate(self, state: HarnessState) -> None:
        i = self._task(state, self.task_id)
        self._text(self.text)
        self._tags(self.tags)
        self._remaining(state, i, (), (self._points(self.points),))


@dataclasses.dataclass(frozen=True)
class RewriteCriterion(Action):
    """New text for a non-anchor criterion (its version goes up by one); `tags` None keeps its tags."""

    op: ClassVar[str] = "rewrite_criterion"
    interface: ClassVar[Interface] = Interface.RUBRIC
    task_id: str
    criterion_id: str
    text: str
    tags: tuple[str, ...] | None = None

    def validate(self, state: HarnessState) -> None:
        i = self._task(state, self.task_id)
        c = self._criterion(state, i, self.criterion_id)
        self._not_anchor(c, "rewritten")
        self._text(self.text)
        if self.tags is not None:
            self._tags(self.tags)
        if self.text == c.text and (self.tags is None or self.tags == c.tags):
            raise self.reject(f"criterion {c.id!r} already has this text")


@dataclasses.dataclass(frozen=True)
class DeleteCriterion(Action):
    """Remove a non-anchor criterion."""

    op: ClassVar[str] = "delete_criterion"
    interface: ClassVar[Interface] = Interface.RUBRIC
    task_id: str
    criterion_id: str

    def validate(self, state: HarnessState) -> None:
        i = self._task(state, self.task_id)
        c = self._criterion(state, i, self.criterion_id)
        self._not_anchor(c, "deleted")
        self._remaining(state, i, (c.id,), ())


@dataclasses.dataclass(frozen=True)
class ReweightCriterion(Action):
    """New points for a criterion (anchors included), same sign; the anchors' share is then restored."""

    op: ClassVar[str] = "reweight_criterion"
    interface: ClassVar[Interface] = Interface.RUBRIC
    task_id: str
    criterion_id: str
    points: float

    def validate(self, state: HarnessState) -> None:
        i = self._task(state, self.task_id)
        c = self._criterion(state, i, self.criterion_id)
        points = self._points(self.points)
        if (points > 0) != (c.points > 0):
            raise self.reject(f"reweighting {c.id!r} from {c.points:g} to {points:g} flips its sign (a requirement "
                              f"would become a pitfall or back): rewrite or create instead")
        if points == c.points:
            raise self.reject(f"criterion {c.id!r} already has {points:g} points")
        share = float(state.rubric.seed_anchor_share[i])
        free = [x for x in state.rubric.criteria[i] if x.points > 0 and not x.anchor]
        if not c.anchor and c.points > 0 and 0.0 < share < 1.0 and len(free) == 1:
            raise self.reject(f"{c.id!r} is the only positive non-anchor criterion of {self.task_id!r}: keeping the "
                              f"anchors' share ({share:.4g}) fixes its points, so a reweight would change nothing")


def _same_sign(points: Sequence[float]) -> bool:
    return all(p > 0 for p in points) or all(p < 0 for p in points)


@dataclasses.dataclass(frozen=True)
class MergeCriteria(Action):
    """Replace two or more non-anchor criteria of one sign by one; `tags` None keeps the tags they all share."""

    op: ClassVar[str] = "merge_criteria"
    interface: ClassVar[Interface] = Interface.RUBRIC
    task_id: str
    criterion_ids: tuple[str, ...]
    text: str
    points: float
    tags: tuple[str, ...] | None = None
    origin: str = PROPOSER_ORIGIN

    def validate(self, state: HarnessState) -> None:
        i = self._task(state, self.task_id)
        ids = self.criterion_ids
        if not isinstance(ids, tuple) or len(ids) < 2:
            raise self.reject(f"a merge needs at least two criterion ids, got {ids!r}")
        if len(set(ids)) != len(ids):
            raise self.reject(f"criterion ids repeat: {ids!r}")
        parents = [self._criterion(state, i, cid) for cid in ids]
        for c in parents:
            self._not_anchor(c, "merged")
        self._text(self.text)
        points = self._points(self.points)
        if not _same_sign([c.points for c in parents] + [points]):
            raise self.reject("merged criteria and the result must all be requirements (points > 0) or all be "
                              "pitfalls (points < 0)")
        self._tags(self.tags if self.tags is not None else merged_tags(parents))
        self._remaining(state, i, ids, (points,))


def merged_tags(parents: Sequence[RubricCriterion]) -> tuple[str, ...]:
    """Default tags of a merge: those every parent carries, in the first parent's order."""
    return tuple(t for t in parents[0].tags if all(t in p.tags for p in parents[1:]))


@dataclasses.dataclass(frozen=True)
class SplitCriterion(Action):
    """Replace a non-anchor criterion by two or more parts of its sign; `tags` None gives each part its tags."""

    op: ClassVar[str] = "split_criterion"
    interface: ClassVar[Interface] = Interface.RUBRIC
    task_id: str
    criterion_id: str
    texts: tuple[str, ...]
    points: tuple[float, ...]
    tags: tuple[tuple[str, ...], ...] | None = None
    origin: str = PROPOSER_ORIGIN

    def validate(self, state: HarnessState) -> None:
        i = self._task(state, self.task_id)
        c = self._criterion(state, i, self.criterion_id)
        self._not_anchor(c, "split")
        if not isinstance(self.texts, tuple) or len(self.texts) < 2:
            raise self.reject(f"a split needs at least two parts, got texts {self.texts!r}")
        if not isinstance(self.points, tuple) or len(self.points) != len(self.texts):
            raise self.reject(f"a split needs one points value per part: {len(self.texts)} texts, "
                              f"points {self.points!r}")
        for k, text in enumerate(self.texts):
            self._text(text, f"texts[{k}]")
        points = [self._points(p, f"points[{k}]") for k, p in enumerate(self.points)]
        if not _same_sign([c.points] + points):
            raise self.reject(f"the parts must keep the sign of {c.id!r} ({c.points:g} points)")
        if self.tags is not None:
            if not isinstance(self.tags, tuple) or len(self.tags) != len(self.texts):
                raise self.reject(f"tags must give one tag list per part, got {self.tags!r}")
            for t in self.tags:
                self._tags(t)
        self._remaining(state, i, (c.id,), points)


SAMPLING_ACTIONS = (DownweightTask, RestoreTask)
GUIDANCE_ACTIONS = (AddField, DropField)
RUBRIC_ACTIONS = (CreateCriterion, RewriteCriterion, DeleteCriterion, ReweightCriterion, MergeCriteria,
                  SplitCriterion)
