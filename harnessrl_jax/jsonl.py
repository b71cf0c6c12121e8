"""Reading JSONL files whose records are JSON objects, with errors that name the file and the line."""

from __future__ import annotations

import json
import os
from typing import Iterator


def read_objects(path: str | os.PathLike, error: type[ValueError] = ValueError) -> Iterator[tuple[int, dict]]:
    """(line number, object) for every non-blank line of `path`; `error` (a ValueError) naming `path:line` on a
    line that is not JSON or not an object."""
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise error(f"{path}:{n}: invalid JSON: {e.msg} (column {e.colno})") from None
            if not isinstance(row, dict):
                raise error(f"{path}:{n}: expected a JSON object, got {type(row).__name__}")
            yield n, row
