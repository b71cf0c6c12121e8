"""Tasks and rubric criteria: the typed records, their JSONL form, and a strict all-or-nothing loader.

One task per line. Canonical record (what `dump_tasks` writes):
  {"id", "domain", "prompt": [{"role", "content"}], "rubrics": [{"id", "criterion", "points", "tags"}],
   "reference"?, "oracle_rubrics"?, "extra"?}
Also read unchanged: HealthBench records (`prompt_id` the id, domain "medical" unless given, the ideal completion
the reference, keys not read here kept in `extra`, its `theme:*` example tag among them); RaR-style rubric items
`{title, description, weight}` (text = the self-contained description, a `title:` tag, a weight that is a number or
a category in `RAR_WEIGHTS`); a prompt given as a plain string (one user message).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any, Iterable, Mapping

# RaR's rubric-writing prompt (Gunjal et al. 2025, arXiv:2507.17746) asks for 1-5 on Essential / Important / Optional
# items (5 = most important) and -1 or -2 on Pitfalls, and prefixes each description with its category. It fixes no
# number per category, so a release that gives the category instead of a number gets this project's choice.
RAR_WEIGHTS = {"essential": 5.0, "important": 3.0, "optional": 1.0, "pitfall": -2.0}

# Tags that may appear at most once on a criterion: a criterion is checked by one verifier, with one rule.
_SINGLE_TAGS = ("verifier", "rule", "rule_kwargs")
_READ_KEYS = ("id", "domain", "prompt", "rubrics", "reference", "oracle_rubrics", "extra")


@dataclasses.dataclass(frozen=True)
class Criterion:
    """One binary rubric check; `points` < 0 marks a pitfall (meeting it costs reward)."""

    id: str
    text: str
    points: float
    tags: tuple[str, ...] = ()

    def tag(self, key: str) -> str | None:
        """Value of the first `key:value` tag, or None."""
        for t in self.tags:
            k, _, v = t.partition(":")
            if k == key:
                return v
        return None

    @property
    def verifier(self) -> str | None:
        return self.tag("verifier")

    @property
    def rule_id(self) -> str | None:
        return self.tag("rule")

    @property
    def rule_kwargs(self) -> dict[str, Any]:
        v = self.tag("rule_kwargs")
        return {} if v is None else json.loads(v)

    @property
    def axis(self) -> str | None:
        return self.tag("axis")

    @property
    def is_pitfall(self) -> bool:
        return self.points < 0


@dataclasses.dataclass(frozen=True)
class Task:
    """A prompt with its training rubric and, optionally, a reference answer and a held-out oracle rubric."""

    id: str
    domain: str
    # Messages are dicts so they go straight into chat templates; dicts do not hash, so they are left out of it.
    prompt: tuple[dict[str, str], ...] = dataclasses.field(hash=False)
    criteria: tuple[Criterion, ...]
    reference: str | None = None
    oracle_criteria: tuple[Criterion, ...] = ()
    # Source metadata kept for analysis (HealthBench example_tags, ...).
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict, hash=False)

    @property
    def points(self) -> tuple[float, ...]:
        return tuple(c.points for c in self.criteria)

    @property
    def user_text(self) -> str:
        """The last user message: where the request is, what guidance is mounted after and what prompt-dependent
        rules (combination:repeat_prompt) compare with; the last message when no turn is the user's."""
        users = [m["content"] for m in self.prompt if m.get("role") == "user"]
        return users[-1] if users else (self.prompt[-1]["content"] if self.prompt else "")


class RecordError(ValueError):
    """A record field failed validation; `field` is its path, e.g. `rubrics[2].points`."""

    def __init__(self, field: str, msg: str):
        super().__init__(f"field '{field}': {msg}")
        self.field, self.msg = field, msg


def _show(v: Any) -> str:
    s = json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else repr(v)
    return s if len(s) <= 60 else s[:57] + "..."


def _str(v: Any, field: str, *, empty: bool = False) -> str:
    if not isinstance(v, str):
        raise RecordError(field, f"expected a string, got {_show(v)}")
    if not empty and not v.strip():
        raise RecordError(field, "expected a non-empty string")
    return v


def _number(v: Any, field: str) -> float:
    # bool is an int subclass; `true` as points is a data bug, not 1.
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise RecordError(field, f"expected a number, got {_show(v)}")
    if not math.isfinite(v):
        raise RecordError(field, f"expected a finite number, got {v}")
    return float(v)


def _list(v: Any, field: str) -> list:
    if not isinstance(v, list):
        raise RecordError(field, f"expected a list, got {_show(v)}")
    return v


def _tags(v: Any, field: str) -> tuple[str, ...]:
    tags = tuple(_str(t, f"{field}[{i}]") for i, t in enumerate(_list(v, field)))
    seen = set()
    for i, t in enumerate(tags):
        key, sep, val = t.partition(":")
        if not sep or not key:
            raise RecordError(f"{field}[{i}]", f"expected a 'key:value' tag, got {t!r}")
        if key in _SINGLE_TAGS:
            if key in seen:
                raise RecordError(f"{field}[{i}]", f"tag '{key}:' given more than once")
            seen.add(key)
        if key == "rule_kwargs":
            try:
                kwargs = json.loads(val)
            except json.JSONDecodeError as e:
                raise RecordError(f"{field}[{i}]", f"rule_kwargs is not valid JSON ({e.msg})") from None
            if not isinstance(kwargs, dict):
                raise RecordError(f"{field}[{i}]", f"rule_kwargs must be a JSON object, got {_show(kwargs)}")
    # A rule-verified criterion with no rule could never be scored; catch it at load, not mid-run.
    if any(t == "verifier:rule" for t in tags) and "rule" not in seen:
        raise RecordError(field, "'verifier:rule' needs a 'rule:<checker id>' tag")
    return tags


def _criterion(item: Any, field: str, default_id: str) -> Criterion:
    if not isinstance(item, dict):
        raise RecordError(field, f"expected an object, got {_show(item)}")
    cid = _str(item.get("id", default_id), f"{field}.id")
    tags = _tags(item.get("tags", []), f"{field}.tags")
    if "criterion" in item:  # native and HealthBench
        text = _str(item["criterion"], f"{field}.criterion")
        if "points" not in item:
            raise RecordError(f"{field}.points", "missing")
        points = _number(item["points"], f"{field}.points")
    elif "description" in item:  # RaR
        text = _str(item["description"], f"{field}.description")
        if "weight" not in item:
            raise RecordError(f"{field}.weight", "missing")
        w = item["weight"]
        if isinstance(w, str):
            if w.strip().lower() not in RAR_WEIGHTS:
                raise RecordError(f"{field}.weight", f"expected a number or one of {sorted(RAR_WEIGHTS)}, got {w!r}")
            points = RAR_WEIGHTS[w.strip().lower()]
        else:
            points = _number(w, f"{field}.weight")
        if "title" in item:
            tags += (f"title:{_str(item['title'], f'{field}.title', empty=True)}",)
    else:
        raise RecordError(field, "expected 'criterion' and 'points' (or RaR 'description' and 'weight')")
    return Criterion(cid, text, points, tags)


def _criteria(v: Any, field: str, task_id: str, prefix: str) -> tuple[Criterion, ...]:
    items = _list(v, field)
    crits = tuple(_criterion(c, f"{field}[{i}]", f"{task_id}/{prefix}{i}") for i, c in enumerate(items))
    first = {}
    for i, c in enumerate(crits):
        if c.id in first:
            raise RecordError(f"{field}[{i}].id", f"duplicate criterion id {c.id!r} (also {field}[{first[c.id]}])")
        first[c.id] = i
    # The reward divides by the positive weight; with none it is undefined for every response.
    if crits and not any(c.points > 0 for c in crits):
        raise RecordError(field, "no criterion with positive points, so the reward is undefined")
    return crits


def _prompt(v: Any) -> tuple[dict[str, str], ...]:
    if isinstance(v, str):
        return ({"role": "user", "content": _str(v, "prompt")},)
    msgs = _list(v, "prompt")
    if not msgs:
        raise RecordError("prompt", "expected at least one message")
    out = []
    for i, m in enumerate(msgs):
        if not isinstance(m, dict):
            raise RecordError(f"prompt[{i}]", f"expected a {{role, content}} object, got {_show(m)}")
        for k in ("role", "content"):
            if k not in m:
                raise RecordError(f"prompt[{i}].{k}", "missing")
        out.append({"role": _str(m["role"], f"prompt[{i}].role"),
                    "content": _str(m["content"], f"prompt[{i}].content", empty=True)})
    return tuple(out)


def task_from_record(record: Any) -> Task:
    """Validate one JSON record (native, HealthBench or with RaR items) into a Task; raises RecordError."""
    if not isinstance(record, dict):
        raise RecordError("<record>", f"expected a JSON object, got {_show(record)}")
    if "id" in record:
        tid = _str(record["id"], "id")
        read = set(_READ_KEYS)
    elif "prompt_id" in record:  # HealthBench
        tid = _str(record["prompt_id"], "prompt_id")
        read = set(_READ_KEYS) | {"prompt_id"}
    else:
        raise RecordError("id", "missing (nor is there a HealthBench 'prompt_id')")
    if "domain" in record:
        domain = _str(record["domain"], "domain")
    elif "prompt_id" in record:
        domain = "medical"
    else:
        raise RecordError("domain", "missing")
    for k in ("prompt", "rubrics"):
        if k not in record:
            raise RecordError(k, "missing")
    prompt = _prompt(record["prompt"])
    criteria = _criteria(record["rubrics"], "rubrics", tid, "c")
    if not criteria:
        raise RecordError("rubrics", "expected at least one criterion")
    oracle = _criteria(record.get("oracle_rubrics", []), "oracle_rubrics", tid, "o")

    reference = record.get("reference")
    if reference is not None:
        reference = _str(reference, "reference")
    else:
        icd = record.get("ideal_completions_data")
        if isinstance(icd, dict) and icd.get("ideal_completion") is not None:
            reference = _str(icd["ideal_completion"], "ideal_completions_data.ideal_completion")

    extra = record.get("extra", {})
    if not isinstance(extra, dict):
        raise RecordError("extra", f"expected an object, got {_show(extra)}")
    extra = {**extra, **{k: v for k, v in record.items() if k not in read}}
    return Task(tid, domain, prompt, criteria, reference, oracle, extra)


def _criterion_record(c: Criterion) -> dict[str, Any]:
    p = int(c.points) if float(c.points).is_integer() else c.points
    return {"id": c.id, "criterion": c.text, "points": p, "tags": list(c.tags)}


def task_to_record(task: Task) -> dict[str, Any]:
    """The canonical JSON record of a task; `task_from_record` inverts it."""
    rec: dict[str, Any] = {
        "id": task.id,
        "domain": task.domain,
        "prompt": [dict(m) for m in task.prompt],
        "rubrics": [_criterion_record(c) for c in task.criteria],
    }
    if task.reference is not None:
        rec["reference"] = task.reference
    if task.oracle_criteria:
        rec["oracle_rubrics"] = [_criterion_record(c) for c in task.oracle_criteria]
    if task.extra:
        rec["extra"] = dict(task.extra)
    return rec


def load_tasks(path: str | os.PathLike) -> list[Task]:
    """Read a JSONL task file; any bad record raises ValueError naming file:line and field, returning nothing."""
    name = os.fspath(path)
    tasks, first_line = [], {}
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            where = f"{name}:{lineno}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(f"{where}: not UTF-8 ({e.reason} at byte {e.start})") from None
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{where}: invalid JSON: {e.msg} (column {e.colno})") from None
            try:
                task = task_from_record(record)
            except RecordError as e:
                raise ValueError(f"{where}: {e}") from None
            if task.id in first_line:
                raise ValueError(f"{where}: field 'id': duplicate task id {task.id!r} "
                                 f"(first on line {first_line[task.id]})")
            first_line[task.id] = lineno
            tasks.append(task)
    return tasks


def dump_tasks(tasks: Iterable[Task], path: str | os.PathLike) -> None:
    """Write tasks as canonical JSONL; the file is replaced only once every line is written."""
    tmp = f"{os.fspath(path)}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            for t in tasks:
                f.write(json.dumps(task_to_record(t), ensure_ascii=False) + "\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
