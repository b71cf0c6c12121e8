"""Checkers of an agent's outcome: the response is the JSON `{"files": {path: text}, "answer": str | null}` that an
agentic rollout ends in (harnessrl_jax.agentic), so a workspace task is scored by the same judge as any rubric."""

from __future__ import annotations

import json

from harnessrl_jax.rubric.rules.registry import Text, register


def outcome(response: str) -> tuple[dict, str | None]:
    """(files, answer) of an outcome JSON; an unreadable response is an empty workspace with no answer."""
    try:
        data = json.loads(response)
    except (TypeError, ValueError):
        return {}, None
    if not isinstance(data, dict):
        return {}, None
    files = data.get("files")
    answer = data.get("answer")
    return (files if isinstance(files, dict) else {}), (answer if isinstance(answer, str) else None)


def _norm(text: str) -> str:
    return "\n".join(line.strip() for line in text.strip().splitlines())


@register("workspace:file_equals")
def file_equals(response, *, path: Text, text: str) -> bool:
    """The final workspace has `path` with exactly `text` (lines stripped of surrounding blanks)."""
    files, _ = outcome(response)
    return isinstance(files.get(path), str) and _norm(files[path]) == _norm(text)


@register("workspace:file_contains")
def file_contains(response, *, path: Text, text: Text) -> bool:
    """The final workspace has `path`, and its text contains `text`."""
    files, _ = outcome(response)
    return isinstance(files.get(path), str) and text in files[path]


@register("workspace:file_absent_text")
def file_absent_text(response, *, path: Text, text: Text) -> bool:
    """The final workspace has `path`, and its text no longer contains `text`."""
    files, _ = outcome(response)
    return isinstance(files.get(path), str) and text not in files[path]


@register("workspace:answer_equals")
def answer_equals(response, *, text: Text) -> bool:
    """The agent stopped with `done` and its answer is `text` (case and surrounding blanks ignored)."""
    _, answer = outcome(response)
    return answer is not None and answer.strip().lower() == text.strip().lower()
