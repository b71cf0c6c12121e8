"""What the Rubric-Mix-10k converters share: reading the sources' release formats row by row, the error that names
file, row and field, and the canonical task record (harnessrl_jax.rubric.schema)."""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any, Iterator

from harnessrl_jax.rubric.schema import Criterion, RecordError, Task, task_from_record


class ConversionError(ValueError):
    """A source record in an unknown layout; the message names the file, the line (row) and the field."""

    def __init__(self, path: str, line: int, field: str, msg: str):
        super().__init__(f"{path}:{line}: field '{field}': {msg}")
        self.path, self.line, self.field = path, line, field


def rows(path: str) -> Iterator[tuple[int, dict]]:
    """(line or row number from 1, record) of a JSONL file, a JSON array file or a parquet file."""
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        for n, row in enumerate(pq.read_table(path).to_pylist(), 1):
            yield n, row
        return
    if path.endswith(".json"):
        with open(path, encoding="utf-8") as f:
            try:
                data = json.load(f)
            except json.JSONDecodeError as e:
                raise ConversionError(path, e.lineno, "<file>", f"invalid JSON: {e.msg}") from None
        if not isinstance(data, list):
            raise ConversionError(path, 1, "<file>", "expected a JSON array of records")
        for n, row in enumerate(data, 1):
            if not isinstance(row, dict):
                raise ConversionError(path, n, "<record>", "expected an object")
            yield n, row
        return
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ConversionError(path, n, "<line>", f"invalid JSON: {e.msg}") from None
            if not isinstance(row, dict):
                raise ConversionError(path, n, "<line>", "expected a JSON object")
            yield n, row


def source_files(directory: str, exts=(".jsonl", ".json", ".parquet")) -> list[str]:
    """The data files of one source's folder, sorted (so a build reads them in a fixed order)."""
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"no source folder {directory!r}: place the source's released files there")
    files = sorted(os.path.join(directory, f) for f in os.listdir(directory) if f.endswith(exts))
    if not files:
        raise FileNotFoundError(f"{directory!r} holds no {'/'.join(exts)} file")
    return files


def need(path: str, line: int, row: dict, name: str, kind=str) -> Any:
    """row[name], present and of type `kind` (non-empty when a string or list)."""
    v = row.get(name)
    if v is None:
        raise ConversionError(path, line, name, "missing")
    if not isinstance(v, kind):
        want = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise ConversionError(path, line, name, f"expected {want}, got {type(v).__name__}")
    if isinstance(v, (str, list)) and not v:
        raise ConversionError(path, line, name, "empty")
    return v


def normalize(text: str) -> str:
    """Whitespace-normalised text: runs of spaces and tabs become one space, line ends kept, ends stripped."""
    lines = [re.sub(r"[ \t\u00a0]+", " ", line).strip() for line in text.replace("\r\n", "\n").split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def key(*parts: str) -> str:
    """A short stable id from content (the same record gets the same id in every build)."""
    return hashlib.sha1("\x1f".join(parts).encode("utf-8")).hexdigest()[:12]


def make_task(path: str, line: int, record: dict) -> Task:
    """The canonical Task of a converted record, validated by rubric.schema (errors name file and line)."""
    try:
        return task_from_record(record)
    except RecordError as e:
        raise ConversionError(path, line, e.field, e.msg) from None


def messages(path: str, line: int, value: Any, field: str) -> list[dict[str, str]]:
    """A prompt given as a string or as chat messages [{role, content}] (parquet lists arrive as lists of dicts)."""
    if isinstance(value, str):
        if not value.strip():
            raise ConversionError(path, line, field, "empty")
        return [{"role": "user", "content": normalize(value)}]
    if isinstance(value, list) and value and all(isinstance(m, dict) and isinstance(m.get("role"), str)
                                                 and isinstance(m.get("content"), str) for m in value):
        return [{"role": m["role"], "content": normalize(m["content"])} for m in value]
    raise ConversionError(path, line, field, "expected a string or a list of {role, content} messages")


def criterion_record(text: str, points: float, tags: list[str], cid: str | None = None) -> dict:
    rec = {"criterion": normalize(text), "points": points, "tags": tags}
    if cid:
        rec["id"] = cid
    return rec


CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def is_english(text: str) -> bool:
    """No Chinese, Japanese or Korean characters (RubricHub is bilingual; the mix keeps English)."""
    return not CJK.search(text)


__all__ = ["CJK", "ConversionError", "Criterion", "criterion_record", "is_english", "key", "make_task", "messages",
           "need", "normalize", "rows", "source_files"]
