"""What the proposer and the critic see of one drawn task: the recorded group, its labels and the evidence."""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Mapping, Sequence

import numpy as np

from harnessrl_jax.evolver.attributor import TaskAttribution
from harnessrl_jax.harness import ops
from harnessrl_jax.harness.state import HarnessState, RubricCriterion
from harnessrl_jax.harness.transitions import DEFAULT_TRANSITIONS, Transitions
from harnessrl_jax.memory.store import harness_changes
from harnessrl_jax.rubric.reward import rubric_reward, satisfied
from harnessrl_jax.rubric.schema import Task


def task_slice(state: HarnessState, task_id: str) -> dict[str, Any]:
    """The task's part of H_t as JSON: sampling level, mounted fields, criteria. DrawRecord.harness takes it, and
    the actions' `changes` are diffs of it, so reversals are found by comparing them."""
    i = state.index(task_id)
    return {"level": int(state.sampling.level[i]),
            "fields": {n: {"text": f.text, "criterion_id": f.criterion_id} for n, f in state.fields(task_id)},
            "criteria": {c.id: {"text": c.text, "points": round(float(c.points), 6), "tags": list(c.tags),
                                "anchor": c.anchor} for c in state.rubric_of(task_id)}}


def candidate_changes(state: HarnessState, task_id: str, actions: Sequence[ops.Action],
                      transitions: Transitions = DEFAULT_TRANSITIONS) -> tuple[dict, tuple[dict, ...]]:
    """({target: [before, after]} of the task's harness slice under `actions`, the same per action); empty when
    the actions do not apply to `state`."""
    try:
        before = task_slice(state, task_id)
        per_action, s = [], state
        for a in actions:
            s2 = transitions.apply(s, a)
            per_action.append(harness_changes(task_slice(s, task_id), task_slice(s2, task_id)))
            s = s2
        return harness_changes(before, task_slice(s, task_id)), tuple(per_action)
    except (ops.InvalidAction, KeyError, ValueError):
        return {}, ()


@dataclasses.dataclass(frozen=True, eq=False)
class TaskContext:
    """One drawn task at `step`: H_t, the recorded group Y_t with S_t [K, J] under c_t, the attribution, the time
    index (`history`: earlier DrawRecords, newest first; `updates`: the task's earlier proposed updates with their
    verdicts and whether an accepted one was undone, newest first) and the donors retrieved per criterion id."""

    step: int
    task: Task
    state: HarnessState
    responses: tuple[str, ...]
    S: np.ndarray
    attribution: TaskAttribution
    history: tuple[Any, ...] = ()
    donors: Mapping[str, Sequence[Any]] = dataclasses.field(default_factory=dict)
    draw: int = 0  # position of this group among the step's groups
    updates: tuple[Any, ...] = ()  # memory.store.Update

    def changes(self, actions: Sequence[ops.Action]) -> dict:
        """What `actions` would change in this task's harness slice ({target: [before, after]})."""
        return candidate_changes(self.state, self.task_id, actions)[0]

    @property
    def task_id(self) -> str:
        return self.task.id

    @property
    def criteria(self) -> tuple[RubricCriterion, ...]:
        """c_t of the task, in the rows of S."""
        return self.state.rubric_of(self.task.id)

    @property
    def points(self) -> np.ndarray:
        return self.state.points(self.task.id)

    @functools.cached_property
    def rewards(self) -> np.ndarray:
        """r(Y_t, c_t) [J], reward points."""
        return rubric_reward(self.points, self.S)

    @property
    def rbar(self) -> float:
        """rbar_t: mean reward of the recorded group under the current rubric (NaN entries left out)."""
        r = self.rewards[~np.isnan(self.rewards)]
        return float(r.mean()) if r.size else math.nan

    @property
    def previous_task_label(self) -> str | None:
        """The task-level diagnosis in the task's previous record of the time index (gate (iv))."""
        return self.history[0].task_label if self.history else None

    def earlier_satisfying(self, criterion_id: str, points: float) -> tuple[int | None, str] | None:
        """(draw id, response) of the newest earlier response of this task in the time index that satisfied the
        criterion (any wording of it; oriented by the sign of `points`), or None."""
        for r in self.history:
            if criterion_id in r.criterion_ids:
                row = satisfied(np.asarray(r.scores, float)[r.criterion_ids.index(criterion_id)], points)
                hit = np.flatnonzero(row == 1)
                if hit.size:
                    return r.draw_id, r.responses[hit[0]]
        return None

    def row(self, criterion_id: str) -> np.ndarray | None:
        """The recorded verdicts [J] of one current criterion."""
        k = self.state.rubric.find(self.state.index(self.task.id), criterion_id)
        return None if k is None else np.asarray(self.S[k], np.float64)
