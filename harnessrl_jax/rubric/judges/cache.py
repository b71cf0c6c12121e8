"""On-disk cache of judge completions (SQLite), keyed by everything that determines the answer.

The key is a SHA-256 over the judge's identity (API flavour, model), the full messages sent, the sampling
parameters and the structured-output schema; never over credentials. The raw completion text is stored, not the
parsed verdict, so a better parser re-reads old answers. Only successful calls are stored: a timeout or a dropped
connection is retried next time. SQLite serialises writers across threads and processes, so several runs may
share one file.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from typing import Any, Callable, Mapping, Sequence


def _dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def cache_key(identity: Mapping[str, Any]) -> str:
    """SHA-256 hex digest of a JSON-serialisable identity (keys sorted, so dict order does not matter)."""
    return hashlib.sha256(_dumps(identity).encode("utf-8")).hexdigest()


_MESSAGES, _SCHEMA = _dumps("\0messages\0"), _dumps("\0schema\0")


def call_keyer(identity: Mapping[str, Any]) -> Callable[[Sequence[Mapping[str, Any]], dict], str]:
    """`key(messages, schema)` == `cache_key({**identity, "messages": list(messages), "schema": schema})`, the
    same digest at a fraction of the cost: the identity is serialised once, a {role, content} message of strings
    is written directly and each schema object once (keep it unchanged while the keyer is in use)."""
    frame = _dumps({**identity, "messages": "\0messages\0", "schema": "\0schema\0"}).split(_MESSAGES)
    frame = frame[:1] + frame[1].split(_SCHEMA) if len(frame) == 2 else []
    if len(frame) != 3:  # the identity itself holds a marker: the slow way
        return lambda messages, schema: cache_key({**identity, "messages": list(messages), "schema": schema})
    head, middle, tail = frame
    string = json.encoder.encode_basestring  # what json.dumps(ensure_ascii=False) writes a string with
    schemas: dict[int, tuple[dict, str]] = {}

    def message(m: Mapping[str, Any]) -> str:
        if type(m) is dict and len(m) == 2 and type(m.get("content")) is str and type(m.get("role")) is str:
            return f'{{"content":{string(m["content"])},"role":{string(m["role"])}}}'
        return _dumps(m)

    def key(messages: Sequence[Mapping[str, Any]], schema: dict) -> str:
        held = schemas.get(id(schema))
        if held is None or held[0] is not schema:
            held = schemas[id(schema)] = (schema, _dumps(schema))
        blob = f"{head}[{','.join(map(message, messages))}]{middle}{held[1]}{tail}"
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    return key


class JudgeCache:
    """`get(key) -> (text, finish reason) | None`, `put(key, text, model, finish)`; `path` may be ':memory:'."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        if self.path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, timeout=60.0, isolation_level=None)
        if self.path != ":memory:":
            self._conn.execute("PRAGMA journal_mode=WAL")  # readers do not block the writer
        self._conn.execute("CREATE TABLE IF NOT EXISTS completions ("
                           "key TEXT PRIMARY KEY, model TEXT, text TEXT NOT NULL, finish TEXT, created REAL)")

    def get(self, key: str) -> tuple[str, str] | None:
        with self._lock:
            row = self._conn.execute("SELECT text, finish FROM completions WHERE key = ?", (key,)).fetchone()
        return None if row is None else (row[0], row[1] or "")

    def put(self, key: str, text: str, model: str = "", finish: str = "") -> None:
        with self._lock:
            self._conn.execute("INSERT OR REPLACE INTO completions (key, model, text, finish, created) "
                               "VALUES (?, ?, ?, ?, ?)", (key, model, text, finish, time.time()))

    def __len__(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM completions").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._conn.close()
