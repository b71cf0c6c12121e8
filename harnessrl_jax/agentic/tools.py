"""The agent's workspace (an in-memory file tree, a dict path -> text) and its tools, with one parser per tool schema.

    ls [dir]              the paths under dir (all when none)
    cat PATH              a file's text
    write PATH TEXT       create or overwrite
    append PATH TEXT      add a line at the end
    replace PATH OLD NEW  every OLD in the file becomes NEW
    done ANSWER           stop; ANSWER is the final answer (may be empty)

Schemas: `json` ({"tool": "write", "args": ["a.txt", "hi"]}), `xml` (<write path="a.txt">hi</write>,
<replace path="a.txt" old="x">y</replace>, <cat path="a.txt"/>, <done>answer</done>) and `cli` (one command per line,
`write a.txt hi there`: the text is the rest of the line; `replace a.txt OLD NEW`: OLD one word).
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Mapping

COMMANDS = ("ls", "cat", "write", "append", "replace", "done")
ARITY = {"ls": (0, 1), "cat": (1, 1), "write": (2, 2), "append": (2, 2), "replace": (3, 3), "done": (0, 1)}
SCHEMAS = ("json", "xml", "cli")
MAX_OUTPUT_CHARS = 80  # a tool result is cut to this, so trajectories keep to the context


@dataclasses.dataclass(frozen=True)
class Call:
    """One parsed tool call."""

    name: str
    args: tuple[str, ...] = ()

    def __post_init__(self):
        if self.name not in COMMANDS:
            raise ValueError(f"unknown tool {self.name!r}: known {list(COMMANDS)}")
        lo, hi = ARITY[self.name]
        if not lo <= len(self.args) <= hi:
            raise ValueError(f"{self.name} takes {lo}..{hi} arguments, got {len(self.args)}")


@dataclasses.dataclass(frozen=True)
class Outcome:
    """A call's effect: the new files, the tool's output text, and the answer when the call was `done`."""

    files: Mapping[str, str]
    output: str
    answer: str | None = None


def execute(files: Mapping[str, str], call: Call) -> Outcome:
    """The pure effect of `call` on the file tree `files` (never mutated)."""
    out = dict(files)
    a = call.args
    if call.name == "ls":
        prefix = a[0].rstrip("/") + "/" if a and a[0] not in ("", ".", "/") else ""
        names = sorted(p for p in out if p.startswith(prefix))
        return Outcome(out, " ".join(names) if names else "(empty)")
    if call.name == "done":
        return Outcome(out, "done", a[0].strip() if a else "")
    path = a[0].strip()
    if not path:
        return Outcome(out, "error: empty path")
    if call.name == "write":
        out[path] = a[1]
        return Outcome(out, f"wrote {path}")
    if path not in out:
        return Outcome(out, f"error: no file {path}")
    if call.name == "cat":
        return Outcome(out, out[path] or "(empty file)")
    if call.name == "append":
        out[path] = out[path] + ("\n" if out[path] and not out[path].endswith("\n") else "") + a[1]
        return Outcome(out, f"appended to {path}")
    old, new = a[1], a[2]
    if not old or old not in out[path]:
        return Outcome(out, f"error: {old!r} not in {path}")
    out[path] = out[path].replace(old, new)
    return Outcome(out, f"replaced in {path}")


def parse(text: str, schema: str) -> Call | None:
    """The first tool call in a policy turn under `schema`, or None when there is none (or it is malformed)."""
    if schema not in SCHEMAS:
        raise ValueError(f"unknown tool schema {schema!r}: known {list(SCHEMAS)}")
    try:
        return {"json": _parse_json, "xml": _parse_xml, "cli": _parse_cli}[schema](text)
    except ValueError:
        return None


def _parse_json(text: str) -> Call | None:
    start = text.find("{")
    while start >= 0:
        try:
            obj, _ = json.JSONDecoder().raw_decode(text[start:])
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        if isinstance(obj, dict) and isinstance(obj.get("tool"), str):
            args = obj.get("args", [])
            if not isinstance(args, list) or not all(isinstance(x, str) for x in args):
                return None
            return Call(obj["tool"], tuple(args))
        start = text.find("{", start + 1)
    return None


_XML = re.compile(r"<(ls|cat|write|append|replace|done)((?:\s+\w+=\"[^\"]*\")*)\s*(?:/>|>(.*?)</\1>)", re.S)
_ATTR = re.compile(r"(\w+)=\"([^\"]*)\"")


def _parse_xml(text: str) -> Call | None:
    m = _XML.search(text)
    if not m:
        return None
    name, attrs, body = m.group(1), dict(_ATTR.findall(m.group(2) or "")), m.group(3)
    if name == "ls":
        return Call(name, (attrs["path"],) if "path" in attrs else ())
    if name == "done":
        return Call(name, (body or "",))
    if "path" not in attrs:
        return None
    if name == "cat":
        return Call(name, (attrs["path"],))
    if name == "replace":
        return Call(name, (attrs["path"], attrs.get("old", ""), body or "")) if "old" in attrs else None
    return Call(name, (attrs["path"], body or ""))


def _parse_cli(text: str) -> Call | None:
    for line in text.splitlines():
        words = line.strip().split(" ")
        name = words[0]
        if name not in COMMANDS:
            continue
        rest = words[1:]
        if name in ("write", "append"):
            return Call(name, (rest[0], " ".join(rest[1:]))) if len(rest) >= 2 else None
        if name == "replace":
            return Call(name, (rest[0], rest[1], " ".join(rest[2:]))) if len(rest) >= 3 else None
        if name == "done":
            return Call(name, (" ".join(rest),))
        return Call(name, tuple(rest[:1]))
    return None


def render_call(call: Call, schema: str) -> str:
    """`call` written in `schema` (what a harness's system prompt shows, and what hand-written trajectories use)."""
    a = call.args
    if schema == "json":
        return json.dumps({"tool": call.name, "args": list(a)})
    if schema == "xml":
        if call.name == "done":
            return f"<done>{a[0] if a else ''}</done>"
        if call.name in ("ls", "cat"):
            return f'<{call.name} path="{a[0]}"/>' if a else f"<{call.name}/>"
        if call.name == "replace":
            return f'<replace path="{a[0]}" old="{a[1]}">{a[2]}</replace>'
        return f'<{call.name} path="{a[0]}">{a[1]}</{call.name}>'
    if schema == "cli":
        return " ".join((call.name,) + a).rstrip()
    raise ValueError(f"unknown tool schema {schema!r}: known {list(SCHEMAS)}")


__all__ = ["ARITY", "COMMANDS", "Call", "MAX_OUTPUT_CHARS", "Outcome", "SCHEMAS", "execute", "parse", "render_call"]
