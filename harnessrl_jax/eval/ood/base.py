"""What every OOD benchmark module shares: the item record, strict readers of local files, and score helpers.

A benchmark module has `NAME`, `load(path, **options) -> list[Item]` (the benchmark's published file format, from a
local path; nothing downloads) and `score(responses, items, **context) -> dict` where responses[i] holds the
samples drawn for items[i]. `score` returns `{"score": headline 0-100, <sub-scores>, "items": n, "per_item": [...]}`;
an item's score is the mean over its samples.
"""

from __future__ import annotations

import csv
import dataclasses
import os
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from harnessrl_jax.jsonl import read_objects


@dataclasses.dataclass(frozen=True)
class Item:
    """One benchmark item: the messages the policy answers, what it is scored against, and source metadata."""

    id: str
    messages: tuple[dict[str, str], ...] = dataclasses.field(hash=False)
    target: Any = dataclasses.field(default=None, hash=False)
    meta: Mapping[str, Any] = dataclasses.field(default_factory=dict, hash=False)


class FormatError(ValueError):
    """A benchmark file that is not in the published layout; the message names the file, the line and the field."""


def require_file(path: str, benchmark: str, expected: str) -> str:
    """`path` if it is a file; else FileNotFoundError naming the benchmark and what to place there."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{benchmark}: no file at {path!r}; place the benchmark's released {expected} there "
                                f"(nothing is downloaded)")
    return path


def read_jsonl(path: str) -> Iterator[tuple[int, dict]]:
    """(line number, record) for every non-blank line; FormatError on a line that is not a JSON object."""
    return read_objects(path, FormatError)


def read_csv(path: str) -> Iterator[tuple[int, dict]]:
    """(line number of the row's start, row as a dict) of a CSV file with a header row."""
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        line = reader.line_num
        for row in reader:
            yield line + 1, row
            line = reader.line_num


def field(path: str, line: int, row: Mapping[str, Any], name: str, kind: type | tuple[type, ...] = str,
          *, nonempty: bool = True) -> Any:
    """row[name] checked for presence and type; FormatError naming file, line and field otherwise."""
    if name not in row or row[name] is None:
        raise FormatError(f"{path}:{line}: field {name!r}: missing")
    v = row[name]
    if not isinstance(v, kind) or isinstance(v, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        want = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise FormatError(f"{path}:{line}: field {name!r}: expected {want}, got {type(v).__name__}")
    if nonempty and isinstance(v, (str, list, dict)) and not (v.strip() if isinstance(v, str) else v):
        raise FormatError(f"{path}:{line}: field {name!r}: empty")
    return v


def check_responses(responses: Sequence[Sequence[str]], items: Sequence[Item]) -> None:
    if len(responses) != len(items):
        raise ValueError(f"{len(responses)} response lists for {len(items)} items")
    for item, rs in zip(items, responses):
        if isinstance(rs, str) or not len(rs):
            raise ValueError(f"item {item.id!r}: expected a non-empty list of sampled responses")


def mean100(x) -> float | None:
    """100 x the mean of the finite entries (None when there are none), rounded for the record."""
    x = np.asarray(x, np.float64)
    x = x[np.isfinite(x)]
    return float(100.0 * x.mean()) if x.size else None
