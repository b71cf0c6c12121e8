"""The evolver model as the methods' writer (the baselines' LLM components use the model HarnessRL's evolver
uses), through the judge protocol `client.complete(messages, schema)`, exactly as the LLM proposer calls
it; and the parse of its typed actions. Every caller has a rule-based fallback for a run without the model."""

from __future__ import annotations

from typing import Any, Sequence

from harnessrl_jax.harness import ops
from harnessrl_jax.rubric.judges.parse import json_objects, strip_thinking


def ask(client, prompt: str, schema: dict, key: str) -> dict | None:
    """The first JSON object of the model's answer that has `key`, or None (no answer, or none parsed)."""
    out = client.complete(({"role": "user", "content": prompt},), schema)
    if getattr(out, "status", "ok") != "ok" or not getattr(out, "text", None):
        return None
    return next((o for o in json_objects(strip_thinking(out.text)) if isinstance(o, dict) and key in o), None)


def parse_actions(raw: Any, task_id: str, interfaces: Sequence[str]) -> tuple[list[ops.Action], str | None]:
    """(typed actions, why invalid or None) from a model's action list for one task, restricted to `interfaces`."""
    if not isinstance(raw, list):
        return [], f"'actions' must be a list, got {type(raw).__name__}"
    actions = []
    for n, d in enumerate(raw):
        if not isinstance(d, dict):
            return [], f"actions[{n}] is not an object"
        try:
            a = ops.action_from_dict({"task_id": task_id, **d})
        except (ValueError, TypeError) as e:
            return [], f"actions[{n}]: {e}"
        if isinstance(a, ops.Noop):
            continue
        if a.interface not in interfaces:
            return [], f"actions[{n}] ({a.op}) is a {a.interface} action; allowed: {list(interfaces)}"
        if getattr(a, "task_id", None) != task_id:
            return [], f"actions[{n}] targets task {getattr(a, 'task_id', None)!r}, not {task_id!r}"
        actions.append(a)
    return actions, None
