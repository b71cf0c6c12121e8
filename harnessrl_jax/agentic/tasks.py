"""Workspace tasks: an instruction, a starting file tree and workspace checks; read from the shipped JSONL
(`harnessrl_jax/data/agentic/tasks.jsonl`, written by launch/build_agentic_tasks.py) as ordinary rubric `Task`s.

A record is `{id, kind, split: train|heldout, instruction, files: {path: text}, checks: [{rule, kwargs, points,
text}]}`; each check becomes a `verifier:rule` criterion over the rollout's outcome JSON (rubric.rules.
workspace_rules), and the starting files sit in `Task.extra["files"]`.
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping

from harnessrl_jax.jsonl import read_objects
from harnessrl_jax.rubric.rules import registered, validate_kwargs
from harnessrl_jax.rubric.schema import Criterion, Task

TASKS_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "agentic",
                          "tasks.jsonl")
SPLITS = ("train", "heldout")


def outcome_text(files: Mapping[str, str], answer: str | None) -> str:
    """The response a rollout is judged on: its final workspace and answer as JSON (workspace_rules.outcome)."""
    return json.dumps({"files": dict(sorted(files.items())), "answer": answer}, sort_keys=True)


def record_task(record: Mapping[str, Any], where: str = "record") -> Task:
    """The rubric Task of one record; ValueError naming `where` and the field on bad input."""
    def need(key, kind):
        if key not in record:
            raise ValueError(f"{where}: field '{key}' is missing")
        if not isinstance(record[key], kind):
            raise ValueError(f"{where}: field '{key}' must be {kind.__name__}, got {type(record[key]).__name__}")
        return record[key]

    tid, kind, split, instruction = need("id", str), need("kind", str), need("split", str), need("instruction", str)
    files, checks = need("files", dict), need("checks", list)
    if split not in SPLITS:
        raise ValueError(f"{where}: field 'split' must be one of {list(SPLITS)}, got {split!r}")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise ValueError(f"{where}: field 'files' must map paths to texts")
    if not checks:
        raise ValueError(f"{where}: field 'checks' is empty")
    criteria = []
    for n, c in enumerate(checks):
        at = f"{where}: field 'checks[{n}]'"
        if not isinstance(c, dict) or not {"rule", "kwargs", "points", "text"} <= set(c):
            raise ValueError(f"{at} needs rule, kwargs, points and text")
        if c["rule"] not in registered():
            raise ValueError(f"{at}.rule: unknown checker {c['rule']!r}")
        try:
            validate_kwargs(c["rule"], c["kwargs"])
        except (KeyError, ValueError) as e:
            raise ValueError(f"{at}.kwargs: {e}") from None
        criteria.append(Criterion(id=f"{tid}/{n}", text=str(c["text"]), points=float(c["points"]),
                                  tags=("verifier:rule", f"rule:{c['rule']}",
                                        "rule_kwargs:" + json.dumps(c["kwargs"], sort_keys=True))))
    return Task(id=tid, domain=kind, prompt=({"role": "user", "content": instruction},), criteria=tuple(criteria),
                extra={"files": dict(files), "split": split})


def load_agent_tasks(path: str = TASKS_PATH, split: str | None = None) -> list[Task]:
    """The tasks of a workspace-task JSONL file (all, or one split); errors name the file and line."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"split {split!r}: known {list(SPLITS)}")
    if not os.path.isfile(path):
        raise ValueError(f"{path}: no such file (launch/build_agentic_tasks.py writes it)")
    out = []
    for n, record in read_objects(path):
        task = record_task(record, f"{path}:{n}")
        if split is None or task.extra["split"] == split:
            out.append(task)
    return out


def start_files(task: Task) -> dict[str, str]:
    """The task's starting file tree (a copy)."""
    return dict(task.extra.get("files", {}))


__all__ = ["SPLITS", "TASKS_PATH", "load_agent_tasks", "outcome_text", "record_task", "start_files"]
