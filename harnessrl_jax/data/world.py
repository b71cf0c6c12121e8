"""A planted-failure world: tasks whose every visible criterion carries the failure class it was planted as, and a
hidden oracle rubric per task (the testbed, docs/testbed.md).

One task per line of a JSONL file, in the task record of `rubric.schema` with two extra keys on each visible rubric
item: `"planted"` (blind | saturated | spurious | agree) and, on a spurious one, `"surface"` (the surface feature it
rewards: any short name, e.g. compliance, padding, stuffing, exclaim). Every visible criterion and every oracle
criterion is rule-verified, and every task has an oracle rubric.

    world = load_world(path)         # World: tasks with the labels removed, labels by (task, criterion) apart
    world.tasks                      # what the harness sees (oracle_criteria are read by the analysis only)
    world.planted[("t1", "t1/blind")]    # 'blind'
"""

from __future__ import annotations

import dataclasses
import json
import os

from harnessrl_jax.rubric import rules
from harnessrl_jax.rubric.schema import RecordError, Task, task_from_record
from harnessrl_jax.words import Label

PLANTED = tuple(label.value for label in Label)  # blind, saturated, spurious, agree
_WORLD_KEYS = ("planted", "surface")
DEFAULT_WORLD = os.path.join(os.path.dirname(__file__), "worlds", "default.jsonl")


@dataclasses.dataclass(frozen=True)
class World:
    """A world's tasks (no planted labels on them) and its labels: (task id, criterion id) -> planted class, and
    the spurious ones' surface feature."""

    path: str
    tasks: tuple[Task, ...]
    planted: dict[tuple[str, str], str]
    surface: dict[tuple[str, str], str]

    def class_of(self, task_id: str, criterion_id: str) -> str | None:
        """The planted class of a criterion, or None for one the world does not declare (a created criterion)."""
        return self.planted.get((task_id, criterion_id))

    def wholly_saturated(self) -> list[str]:
        """Ids of the tasks whose every visible criterion is planted saturated."""
        return [t.id for t in self.tasks if all(self.planted[(t.id, c.id)] == "saturated" for c in t.criteria)]


def _labels(record: dict) -> tuple[list[str], list[str | None]]:
    """The planted class and surface of each visible rubric item, validated; the record loses the extra keys."""
    classes, surfaces = [], []
    items = record.get("rubrics")
    if not isinstance(items, list):
        return classes, surfaces  # task_from_record names the problem
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        field = f"rubrics[{i}]"
        planted = item.pop("planted", None)
        if planted not in PLANTED:
            raise RecordError(f"{field}.planted", f"expected one of {list(PLANTED)}, got {planted!r}")
        surface = item.pop("surface", None)
        if planted == "spurious":
            if not isinstance(surface, str) or not surface.strip():
                raise RecordError(f"{field}.surface", "a spurious criterion names the surface feature it rewards")
        elif surface is not None:
            raise RecordError(f"{field}.surface", f"only a spurious criterion has a surface feature ({planted})")
        classes.append(planted)
        surfaces.append(surface)
    for item in record.get("oracle_rubrics", []) or []:
        if isinstance(item, dict) and any(k in item for k in _WORLD_KEYS):
            raise RecordError("oracle_rubrics", "oracle criteria carry no planted class")
    return classes, surfaces


def _check_rules(task: Task) -> None:
    for field, crits in (("rubrics", task.criteria), ("oracle_rubrics", task.oracle_criteria)):
        for i, c in enumerate(crits):
            if c.verifier != "rule":
                raise RecordError(f"{field}[{i}].tags", "every world criterion is rule-verified ('verifier:rule')")
    if not task.oracle_criteria:
        raise RecordError("oracle_rubrics", "missing: every world task has a hidden oracle rubric")


def load_world(path: str | os.PathLike = DEFAULT_WORLD) -> World:
    """Read a world file; a bad record raises ValueError naming file:line and field."""
    name = os.fspath(path)
    tasks, planted, surface, first = [], {}, {}, {}
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{name}:{lineno}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{where}: invalid JSON: {e.msg} (column {e.colno})") from None
            try:
                classes, surfaces = _labels(record)
                task = task_from_record(record)
                _check_rules(task)
                for field, crits in (("rubrics", task.criteria), ("oracle_rubrics", task.oracle_criteria)):
                    for i, c in enumerate(crits):
                        try:
                            rules.validate_kwargs(c.rule_id, c.rule_kwargs, prompt=task.user_text)
                        except (KeyError, ValueError) as e:
                            raise RecordError(f"{field}[{i}].tags", str(e)) from None
            except RecordError as e:
                raise ValueError(f"{where}: {e}") from None
            if task.id in first:
                raise ValueError(f"{where}: field 'id': duplicate task id {task.id!r} (first on line {first[task.id]})")
            first[task.id] = lineno
            for c, cls, srf in zip(task.criteria, classes, surfaces):
                planted[(task.id, c.id)] = cls
                if srf is not None:
                    surface[(task.id, c.id)] = srf
            tasks.append(task)
    if not tasks:
        raise ValueError(f"{name}: no task")
    return World(name, tuple(tasks), planted, surface)


__all__ = ["DEFAULT_WORLD", "PLANTED", "World", "load_world"]
