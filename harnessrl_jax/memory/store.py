"""The record store: one record per task draw in SQLite, and the time index over it.

A record holds the rollout history (responses, the K x J score matrix S, rewards), the rubric history (the task's
harness slice, the attributor's labels, every proposed action with its deltas and verdict) and the training
dynamics of that draw. `append_step` writes a whole training step in one transaction (WAL, synchronous=FULL), so a
run killed mid-step loses that step and nothing else; `truncate_after(k)` drops later steps so a resume from the
checkpoint of step k is exact.

The responses are stored apart from the rest (table `responses`): the time index reads every earlier draw of a
task and the semantic index every outcome of a donor criterion, but the evolver reads the responses of a few, so a
draw's responses are read and decoded only when one of them is used.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import re
import sqlite3
import time
import zlib
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from harnessrl_jax.words import VERDICTS

SCHEMA_VERSION = 2

_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE steps(step INTEGER PRIMARY KEY, n_draws INTEGER NOT NULL, time REAL NOT NULL);
CREATE TABLE draws(id INTEGER PRIMARY KEY, step INTEGER NOT NULL, task_id TEXT NOT NULL,
                   reward_mean REAL, payload BLOB NOT NULL);
CREATE TABLE responses(draw_id INTEGER PRIMARY KEY, texts BLOB NOT NULL);
CREATE INDEX draws_task ON draws(task_id, step, id);
CREATE INDEX draws_step ON draws(step);
-- One row per wording of a criterion: a rewrite is a new row, so evidence stays tied to the text it was judged by.
-- `judged`: the last step a draw judged it (NULL: never), so donors with fresh evidence come first.
CREATE TABLE criteria(id INTEGER PRIMARY KEY, task_id TEXT NOT NULL, criterion_id TEXT NOT NULL,
                      text TEXT NOT NULL, step INTEGER NOT NULL, judged INTEGER,
                      UNIQUE(task_id, criterion_id, text));
CREATE INDEX criteria_step ON criteria(step);
CREATE INDEX criteria_text ON criteria(text);
-- `achieved`: one byte per response, oriented by the criterion's sign in that draw (a pitfall is achieved when
-- avoided): 1 achieved, 0 missed, 2 no verdict.
CREATE TABLE outcomes(criterion INTEGER NOT NULL, draw_id INTEGER NOT NULL, k INTEGER NOT NULL,
                      n_met INTEGER NOT NULL, n_valid INTEGER NOT NULL, achieved BLOB NOT NULL,
                      PRIMARY KEY(criterion, draw_id)) WITHOUT ROWID;
CREATE INDEX outcomes_draw ON outcomes(draw_id);
CREATE TABLE actions(id INTEGER PRIMARY KEY, draw_id INTEGER NOT NULL, step INTEGER NOT NULL,
                     task_id TEXT NOT NULL, interface TEXT NOT NULL, op TEXT NOT NULL, verdict TEXT NOT NULL,
                     payload TEXT NOT NULL);
CREATE INDEX actions_task ON actions(task_id, step);
CREATE INDEX actions_draw ON actions(draw_id);
-- One vector per distinct criterion text and model: a text shared by many tasks is embedded once and is one faiss
-- row (id = this id), and the index can be rebuilt without the model. float16 halves the size, and the index is
-- built from the same rounded vectors, so a rebuild gives identical scores.
CREATE TABLE embeddings(id INTEGER PRIMARY KEY, model TEXT NOT NULL, text TEXT NOT NULL, vec BLOB NOT NULL,
                        UNIQUE(model, text));
"""


@dataclasses.dataclass(frozen=True)
class ActionRecord:
    """One proposed harness update, as the critic left it; `changes` maps each target to its [before, after]."""

    interface: str  # sampling | guidance | rubric | noop
    op: str  # e.g. downweight, add_field, rewrite
    verdict: str  # accepted | rejected | noop
    label: str | None = None  # the failure label that routed it: blind | saturated | spurious | agree
    criterion_ids: tuple[str, ...] = ()
    evidence_ids: tuple[str, ...] = ()  # draw / criterion ids the proposer cited
    deltas: Mapping[str, float] = dataclasses.field(default_factory=dict)  # delta_c, delta_g, delta_w
    round: int = 0
    reason: str = ""
    changes: Mapping[str, Sequence[Any]] = dataclasses.field(default_factory=dict)
    payload: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # the typed action, as a dict

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")
        for target, pair in self.changes.items():
            if len(pair) != 2:
                raise ValueError(f"changes[{target!r}] must be [before, after], got {pair!r}")


@dataclasses.dataclass(frozen=True, eq=False)
class DrawRecord:
    """Everything recorded about one draw of one task at one step."""

    step: int
    task_id: str
    criterion_ids: tuple[str, ...]  # K
    criterion_texts: tuple[str, ...]  # K: the wording judged at this draw
    responses: tuple[str, ...]  # J
    scores: np.ndarray  # [K, J] in {0, 1}, NaN where the judge failed
    rewards: np.ndarray  # [J], NaN where the reward failed
    harness: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # the task's harness slice
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)  # criterion id -> attributor label
    task_label: str | None = None  # task-level diagnosis, e.g. saturated (gate (iv) for sampling updates)
    actions: tuple[ActionRecord, ...] = ()
    dynamics: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # level, u, loss, ... of this draw
    draw_id: int | None = None  # assigned by the store

    def validate(self) -> None:
        """Raises ValueError naming the first inconsistent field."""
        k, j = len(self.criterion_ids), len(self.responses)
        if len(self.criterion_texts) != k:
            raise ValueError(f"task {self.task_id}: {len(self.criterion_texts)} criterion texts for {k} ids")
        if len(set(self.criterion_ids)) != k:
            raise ValueError(f"task {self.task_id}: duplicate criterion ids {list(self.criterion_ids)}")
        if np.shape(self.scores) != (k, j):
            raise ValueError(f"task {self.task_id}: scores shape {np.shape(self.scores)}, expected {(k, j)}")
        if np.shape(self.rewards) != (j,):
            raise ValueError(f"task {self.task_id}: rewards shape {np.shape(self.rewards)}, expected {(j,)}")
        s = np.asarray(self.scores, np.float64)
        if not np.all(np.isnan(s) | (s == 0) | (s == 1)):
            raise ValueError(f"task {self.task_id}: scores must be 0, 1 or NaN")


def _jsonable(x):
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, (set, frozenset)):
        return sorted(x)
    raise TypeError(f"not JSON-serialisable: {type(x).__name__}")


def _dumps(obj) -> str:
    # NaN stays NaN (Python's JSON extension): failed judge cells must round-trip as failed, not as 0.
    return json.dumps(obj, default=_jsonable, separators=(",", ":"), ensure_ascii=False)


def _encode(r: DrawRecord, actions: Sequence[Mapping[str, Any]]) -> tuple[bytes, bytes]:
    """(payload, responses): the record less its responses, and the responses, each compressed JSON; `actions`:
    its actions as dicts."""
    body = {
        "criterion_ids": list(r.criterion_ids), "criterion_texts": list(r.criterion_texts),
        "scores": np.asarray(r.scores, np.float64),
        "rewards": np.asarray(r.rewards, np.float64), "harness": r.harness, "labels": r.labels,
        "task_label": r.task_label, "actions": actions, "dynamics": r.dynamics,
    }
    # Level 1: a step's 512 draws of paper-length responses compress ~5x faster than at 6, for ~20% more bytes
    # (launch/bench_scale.py); any level reads back the same.
    return zlib.compress(_dumps(body).encode(), 1), zlib.compress(_dumps(list(r.responses)).encode(), 1)


def _action(d: Mapping[str, Any]) -> ActionRecord:
    d = dict(d)
    for key in ("criterion_ids", "evidence_ids"):
        d[key] = tuple(d.get(key, ()))
    return ActionRecord(**d)


class _Responses(Sequence[str]):
    """A draw's J responses, read from the store and decoded at the first access to one of them."""

    def __init__(self, db: sqlite3.Connection, draw_id: int, n: int):
        self._db, self._id, self._n, self._texts = db, draw_id, n, None

    def _load(self) -> tuple[str, ...]:
        if self._texts is None:
            (blob,), = self._db.execute("SELECT texts FROM responses WHERE draw_id=?", (self._id,))
            self._texts = tuple(json.loads(zlib.decompress(blob)))
        return self._texts

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, j):
        return self._load()[j]

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __repr__(self) -> str:
        return repr(self._load())


def _decode(draw_id: int, step: int, task_id: str, blob: bytes, responses: bytes | sqlite3.Connection
            ) -> DrawRecord:
    """The record from its payload and its responses: their blob, or the store to read them from when first used."""
    b = json.loads(zlib.decompress(blob))
    rewards = np.asarray(b["rewards"], np.float64)
    if isinstance(responses, bytes):
        responses = tuple(json.loads(zlib.decompress(responses)))
    else:
        responses = _Responses(responses, draw_id, len(rewards))
    return DrawRecord(
        step=step, task_id=task_id, criterion_ids=tuple(b["criterion_ids"]),
        criterion_texts=tuple(b["criterion_texts"]), responses=responses,
        scores=np.asarray(b["scores"], np.float64).reshape(len(b["criterion_ids"]), len(rewards)), rewards=rewards,
        harness=b["harness"], labels=b["labels"], task_label=b["task_label"],
        actions=tuple(_action(a) for a in b["actions"]), dynamics=b["dynamics"], draw_id=draw_id)


def undoes(later: ActionRecord, earlier: ActionRecord) -> bool:
    """True when `later` puts every target `earlier` changed back to its value before `earlier`."""
    if not earlier.changes:
        return False
    return all(t in later.changes and later.changes[t][1] == before for t, (before, _) in earlier.changes.items())


def redoes(changes: Mapping[str, Sequence[Any]], earlier: ActionRecord) -> bool:
    """True when `changes` ({target: [before, after]}) make exactly the change `earlier` made: same targets, same
    values after."""
    if not earlier.changes or set(changes) != set(earlier.changes):
        return False
    return all(_same(changes[t][1], after) for t, (_, after) in earlier.changes.items())


def _same(a, b) -> bool:
    return json.loads(_dumps(a)) == json.loads(_dumps(b))


@dataclasses.dataclass(frozen=True)
class Update:
    """One of a task's earlier proposed updates, as the proposers see it: the step, the record (verdict, deltas,
    changes) and, for an accepted one, whether a later accepted update of the task undid it."""

    step: int
    record: ActionRecord
    undone: bool = False


_SCALARS = (str, int, float, bool, type(None))


def harness_changes(before: Mapping[str, Any], after: Mapping[str, Any], prefix: str = "") -> dict[str, list]:
    """Leaves of two harness slices that differ, as {dotted.path: [before, after]} (absent = None)."""
    out: dict[str, list] = {}
    for key in sorted(set(before) | set(after), key=str):
        b, a = before.get(key), after.get(key)
        path = f"{prefix}{key}"
        if isinstance(b, Mapping) and isinstance(a, Mapping):
            out.update(harness_changes(b, a, path + "."))
        elif type(b) in _SCALARS and type(a) in _SCALARS:  # stored as they are
            if b != a:
                out[path] = [b, a]
        elif _strings(b) and _strings(a):  # e.g. tags: stored as lists of the same strings
            if list(b) != list(a):
                out[path] = [list(b), list(a)]
        elif json.loads(_dumps(b)) != json.loads(_dumps(a)):  # compare as stored: tuples == lists, numpy == float
            out[path] = [json.loads(_dumps(b)), json.loads(_dumps(a))]
    return out


def _strings(x) -> bool:
    return isinstance(x, (list, tuple)) and all(type(v) is str for v in x)


class RecordStore:
    """SQLite record store with the time index; one writer, any number of readers (WAL)."""

    FILE = "memory.sqlite"

    def __init__(self, path: str):
        self.path = path
        self._undone_cache: dict[int, dict[str, Any]] = {}  # within -> the whole store's `_undone`, by task
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        # Autocommit mode: every write below opens its own explicit transaction.
        self.db = sqlite3.connect(path, isolation_level=None, timeout=30.0)
        self.db.execute("PRAGMA journal_mode=WAL")
        # FULL: a committed step survives power loss too, so a checkpoint never points past the memory.
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("PRAGMA foreign_keys=OFF")
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        if version == 0:
            self._create()
        elif version != SCHEMA_VERSION:
            raise RuntimeError(f"{path}: memory schema version {version}, this code reads {SCHEMA_VERSION}; "
                               "open it with the version of harnessrl_jax that wrote it")

    def _create(self):
        with self._tx():
            if self.db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                raise RuntimeError(f"{self.path}: not a memory database (tables present, no schema version)")
            for stmt in re.sub(r"--[^\n]*", "", _SCHEMA).split(";"):
                if stmt.strip():
                    self.db.execute(stmt)
            self.db.execute("INSERT INTO meta VALUES ('created', ?)", (str(time.time()),))
            self.db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    @contextlib.contextmanager
    def _tx(self):
        # IMMEDIATE takes the write lock now, so a second writer fails here rather than mid-step.
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def close(self):
        self.db.close()

    # --- writes -------------------------------------------------------------------------------------------------

    @property
    def last_step(self) -> int | None:
        """Last committed step, or None for an empty store."""
        return self.db.execute("SELECT max(step) FROM steps").fetchone()[0]

    def steps(self) -> list[int]:
        """Every committed step, in order."""
        return [s for (s,) in self.db.execute("SELECT step FROM steps ORDER BY step")]

    def append_step(self, step: int, records: Iterable[DrawRecord], *, model: str | None = None,
                    vectors: Mapping[str, np.ndarray] | None = None) -> None:
        """Commits all draws of `step` atomically, with the vectors of `model` for criterion texts new to it."""
        records = list(records)
        for r in records:
            if r.step != step:
                raise ValueError(f"record of task {r.task_id} has step {r.step}, appending step {step}")
            r.validate()
        last = self.last_step
        if last is not None and step <= last:
            raise ValueError(f"step {step} is not after the last committed step {last}; "
                             "truncate_after() first when resuming")
        with self._tx():
            self._put_embeddings(model, vectors)
            for r in records:
                self._insert_draw(r)
            self.db.execute("INSERT INTO steps VALUES (?, ?, ?)", (step, len(records), time.time()))
        for cached in self._undone_cache.values():
            if cached["step"] == last:  # current before this step: only the tasks it drew changed
                cached["step"] = step
                cached["dirty"].update(r.task_id for r in records)

    def _put_embeddings(self, model, vectors):
        if vectors:
            self.db.executemany("INSERT OR IGNORE INTO embeddings(model, text, vec) VALUES (?, ?, ?)",
                                [(model, t, np.asarray(v, np.float16).tobytes()) for t, v in vectors.items()])

    def put_embeddings(self, model: str, vectors: Mapping[str, np.ndarray]) -> None:
        """Caches vectors of existing criterion texts (e.g. under a new model) in their own transaction."""
        with self._tx():
            self._put_embeddings(model, vectors)

    def _criterion_rows(self, task_id: str, pairs: Sequence[tuple[str, str]], step: int) -> tuple[list[int], int]:
        rows, n_new = [], 0
        for cid, text in pairs:
            cur = self.db.execute("INSERT OR IGNORE INTO criteria(task_id, criterion_id, text, step) "
                                  "VALUES (?, ?, ?, ?)", (task_id, cid, text, step))
            if cur.rowcount:
                rows.append(cur.lastrowid)
                n_new += 1
            else:
                rows.append(self.db.execute("SELECT id FROM criteria WHERE task_id=? AND criterion_id=? AND text=?",
                                            (task_id, cid, text)).fetchone()[0])
        return rows, n_new

    def _insert_draw(self, r: DrawRecord) -> None:
        rewards = np.asarray(r.rewards, np.float64)
        mean = float(np.nanmean(rewards)) if np.any(~np.isnan(rewards)) else None
        actions = [dataclasses.asdict(a) for a in r.actions]  # into the payload and the actions table
        payload, responses = _encode(r, actions)
        draw_id = self.db.execute("INSERT INTO draws(step, task_id, reward_mean, payload) VALUES (?, ?, ?, ?)",
                                  (r.step, r.task_id, mean, payload)).lastrowid
        self.db.execute("INSERT INTO responses VALUES (?, ?)", (draw_id, responses))
        rows, _ = self._criterion_rows(r.task_id, list(zip(r.criterion_ids, r.criterion_texts)), r.step)
        s = np.asarray(r.scores, np.float64)
        valid = ~np.isnan(s)
        self.db.executemany("UPDATE criteria SET judged=? WHERE id=?", [(r.step, row) for row in rows])
        pitfall = np.array([_points(r, k) < 0 for k in range(len(rows))], bool)[:, None]
        achieved = np.where(valid, (s == 1) != pitfall, 2).astype(np.uint8)
        self.db.executemany("INSERT INTO outcomes VALUES (?, ?, ?, ?, ?, ?)", [
            (row, draw_id, k, int(np.sum(s[k][valid[k]] == 1)), int(valid[k].sum()), achieved[k].tobytes())
            for k, row in enumerate(rows)])
        self.db.executemany(
            "INSERT INTO actions(draw_id, step, task_id, interface, op, verdict, payload) VALUES (?,?,?,?,?,?,?)",
            [(draw_id, r.step, r.task_id, a["interface"], a["op"], a["verdict"], _dumps(a)) for a in actions])

    def add_criteria(self, items: Iterable[tuple[str, str, str]], *, step: int | None = None,
                     model: str | None = None, vectors: Mapping[str, np.ndarray] | None = None) -> int:
        """Registers (task_id, criterion_id, text) before any draw of them (e.g. the seed rubrics); returns #new.

        They belong to `step` (default: the last committed one) and go when a resume truncates before it."""
        step = (self.last_step or 0) if step is None else step
        n_new = 0
        with self._tx():
            self._put_embeddings(model, vectors)
            for task_id, cid, text in items:
                n_new += self._criterion_rows(task_id, [(cid, text)], step)[1]
        return n_new

    def truncate_after(self, step: int) -> int:
        """Drops every record, action and criterion row of steps after `step`; returns #draws dropped."""
        self._undone_cache.clear()
        with self._tx():
            for table in ("outcomes", "responses"):
                self.db.execute(f"DELETE FROM {table} WHERE draw_id IN (SELECT id FROM draws WHERE step > ?)", (step,))
            n = self.db.execute("DELETE FROM draws WHERE step > ?", (step,)).rowcount
            for table in ("actions", "steps", "criteria"):
                self.db.execute(f"DELETE FROM {table} WHERE step > ?", (step,))
            self.db.execute("UPDATE criteria SET judged = (SELECT max(d.step) FROM outcomes o JOIN draws d "
                            "ON d.id = o.draw_id WHERE o.criterion = criteria.id) WHERE judged > ?", (step,))
            # Texts first seen after `step` leave the semantic index with their rows.
            self.db.execute("DELETE FROM embeddings WHERE text NOT IN (SELECT text FROM criteria)")
        return n

    def meta(self, key: str, default: str | None = None) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return default if row is None else row[0]

    def set_meta(self, key: str, value: str) -> None:
        with self._tx():
            self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def checkpoint_wal(self):
        """Folds the write-ahead log into the database file, so the file alone is a complete copy."""
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def positions(self) -> dict[str, int]:
        """Where the store stands, for the checkpoint's `extra` slot; `step` is -1 when nothing is committed."""
        q = lambda sql: self.db.execute(sql).fetchone()[0]  # noqa: E731
        last = self.last_step
        return {"schema": SCHEMA_VERSION, "step": -1 if last is None else last,
                "draws": q("SELECT count(*) FROM draws"), "criteria": q("SELECT count(*) FROM criteria")}

    # --- time index ---------------------------------------------------------------------------------------------

    def history(self, task_id: str, before_step: int | None = None, limit: int | None = None) -> list[DrawRecord]:
        """All recorded draws of `task_id` (before `before_step`), newest first; each record's responses are read
        from the store when first used."""
        rows = self.db.execute(
            "SELECT id, step, task_id, payload FROM draws WHERE task_id=? AND step < ? ORDER BY step DESC, id DESC "
            "LIMIT ?", (task_id, _before(before_step), -1 if limit is None else limit)).fetchall()
        return [_decode(*row, self.db) for row in rows]

    def draws(self, steps: Iterable[int] | None = None) -> Iterable[DrawRecord]:
        """Every recorded draw (of `steps` only, when given) in step order."""
        wanted = None if steps is None else set(int(s) for s in steps)
        ids = [i for i, s in self.db.execute("SELECT id, step FROM draws ORDER BY step, id")
               if wanted is None or s in wanted]
        for draw_id in ids:
            yield self.record(draw_id)

    def record(self, draw_id: int) -> DrawRecord:
        """One draw by id (the ids `evidence_ids` and donor examples refer to)."""
        row = self.db.execute("SELECT d.id, d.step, d.task_id, d.payload, r.texts FROM draws d JOIN responses r "
                              "ON r.draw_id = d.id WHERE d.id=?", (draw_id,)).fetchone()
        if row is None:
            raise KeyError(f"no draw {draw_id}")
        return _decode(*row)

    def _last_draws(self, task_id, before_step, last):
        return ("SELECT id FROM draws WHERE task_id=? AND step < ? ORDER BY step DESC, id DESC LIMIT ?",
                (task_id, _before(before_step), -1 if last is None else last))

    def ever_met(self, task_id: str, criterion_id: str, before_step: int | None = None,
                 text: str | None = None) -> bool:
        """Was the criterion met by any rollout in an earlier draw (of any wording, or only of `text`)?"""
        sql = ("SELECT 1 FROM outcomes o JOIN criteria c ON c.id = o.criterion JOIN draws d ON d.id = o.draw_id "
               "WHERE c.task_id=? AND c.criterion_id=? AND d.step < ? AND o.n_met > 0")
        args = [task_id, criterion_id, _before(before_step)]
        if text is not None:
            sql, args = sql + " AND c.text=?", args + [text]
        return self.db.execute(sql + " LIMIT 1", args).fetchone() is not None

    def met_criteria(self, task_id: str, before_step: int | None = None) -> set[str]:
        """Criterion ids of the task met by at least one rollout in an earlier draw."""
        return {cid for (cid,) in self.db.execute(
            "SELECT DISTINCT c.criterion_id FROM outcomes o JOIN criteria c ON c.id = o.criterion "
            "JOIN draws d ON d.id = o.draw_id WHERE c.task_id=? AND d.step < ? AND o.n_met > 0",
            (task_id, _before(before_step)))}

    def pass_rates(self, task_id: str, before_step: int | None = None, last: int | None = None
                   ) -> dict[str, np.ndarray]:
        """Per criterion id, its pass rate in each of the task's `last` draws where it was judged, newest first."""
        sub, args = self._last_draws(task_id, before_step, last)
        out: dict[str, list] = {}
        for cid, met, valid in self.db.execute(
                "SELECT c.criterion_id, o.n_met, o.n_valid FROM outcomes o JOIN criteria c ON c.id = o.criterion "
                f"JOIN draws d ON d.id = o.draw_id WHERE o.draw_id IN ({sub}) ORDER BY d.step DESC, d.id DESC",
                args):
            out.setdefault(cid, []).append(met / valid if valid else math.nan)
        return {cid: np.asarray(v) for cid, v in out.items()}

    def reward_trajectory(self, task_id: str, before_step: int | None = None) -> np.ndarray:
        """[n, 2] array of (step, mean reward) over the task's draws, oldest first."""
        rows = self.db.execute("SELECT step, reward_mean FROM draws WHERE task_id=? AND step < ? ORDER BY step, id",
                               (task_id, _before(before_step))).fetchall()
        return np.asarray([(s, math.nan if m is None else m) for s, m in rows], np.float64).reshape(-1, 2)

    def actions(self, task_id: str | None = None, before_step: int | None = None, verdict: str | None = None,
                last_draws: int | None = None, limit: int | None = None) -> list[tuple[int, int, ActionRecord]]:
        """(step, draw id, action) of a task's (or every task's) recorded actions, newest first (the `limit` newest
        when given)."""
        sql, args = "SELECT step, draw_id, payload FROM actions WHERE step < ?", [_before(before_step)]
        if task_id is not None:
            sql, args = sql + " AND task_id=?", args + [task_id]
        if verdict is not None:
            sql, args = sql + " AND verdict=?", args + [verdict]
        if last_draws is not None:
            if task_id is None:
                raise ValueError("last_draws needs a task_id")
            sub, sub_args = self._last_draws(task_id, before_step, last_draws)
            sql, args = sql + f" AND draw_id IN ({sub})", args + list(sub_args)
        sql += " ORDER BY step DESC, draw_id DESC, id"
        if limit is not None:
            sql, args = sql + " LIMIT ?", args + [limit]
        rows = self.db.execute(sql, args)
        return [(s, d, _action(json.loads(p))) for s, d, p in rows]

    def updates(self, task_id: str, before_step: int | None = None, limit: int | None = 50) -> list[Update]:
        """The task's earlier updates (accepted, rejected, noop), newest first, each accepted one marked `undone`
        when a later accepted update of the task put its targets back."""
        # Only the `limit` newest are listed, and whether one was undone depends only on newer ones: the older ones
        # are not read, so a call decodes at most `limit` actions however many the task has.
        acts = self.actions(task_id, before_step, limit=limit)
        out = []
        for n, (step, _, a) in enumerate(acts):
            undone = a.verdict == "accepted" and any(
                later.verdict == "accepted" and undoes(later, a) for _, _, later in acts[:n])
            out.append(Update(step, a, undone))
        return out

    def would_reverse(self, task_id: str, candidate: ActionRecord, before_step: int | None = None,
                      within: int = 2) -> tuple[int, ActionRecord] | None:
        """The accepted action of the task's last `within` draws that `candidate` would undo, as (step, action)."""
        for step, _, earlier in self.actions(task_id, before_step, "accepted", last_draws=within):
            if undoes(candidate, earlier):
                return step, earlier
        return None

    def reversals(self, since_step: int | None = None, before_step: int | None = None, within: int = 2
                  ) -> tuple[int, int]:
        """(reversed, accepted): accepted actions from `since_step` on, and how many were undone within the
        next `within` draws of their task (the paper's reversal rate is their ratio)."""
        flags = self._undone(since_step, before_step, within)
        return sum(undone for _, undone, _ in flags), len(flags)

    def reversal_windows(self, window: int = 100, within: int = 2) -> dict[str, Any]:
        """The reversal rate per `window` steps and overall: each accepted action counts in the window of the step
        that accepted it, reversed when undone within the next `within` draws of its task, whenever they come.
        `open`: accepted actions whose task had fewer than `within` later draws (counted as not reversed, as in
        the run total). Every window from the first to the last committed step is listed; rate NaN where none
        was accepted."""
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        first, last = self.db.execute("SELECT min(step), max(step) FROM steps").fetchone()
        flags = self._undone(None, None, within)
        if first is None:
            return {"window": window, "within": within, "accepted": 0, "reversed": 0, "rate": math.nan,
                    "windows": []}
        by_window: dict[int, list[tuple[bool, int]]] = {}
        for step, undone, later in flags:
            by_window.setdefault(step // window, []).append((undone, later))
        rows = []
        for k in range(first // window, last // window + 1):
            mine = by_window.get(k, [])
            n, r = len(mine), sum(u for u, _ in mine)
            rows.append({"window": f"{k * window}-{(k + 1) * window - 1}", "start": k * window, "accepted": n,
                         "reversed": r, "rate": r / n if n else math.nan,
                         "open": sum(later < within for _, later in mine)})
        n, r = len(flags), sum(u for _, u, _ in flags)
        return {"window": window, "within": within, "accepted": n, "reversed": r,
                "rate": r / n if n else math.nan, "windows": rows}

    def _undone(self, since_step, before_step, within) -> list[tuple[int, bool, int]]:
        """(step, undone, later draws seen, up to `within`) of every accepted action in [since_step, before_step),
        in step order; only draws and actions in that range count."""
        if since_step is None and before_step is None:
            by_task = self._undone_all(within)
        else:
            lo, hi = -1 if since_step is None else since_step, _before(before_step)
            by_task = {t: self._task_undone(t, acts, lo, hi, within)
                       for t, acts in self._accepted(lo, hi).items()}
        return sorted((x for flags in by_task.values() for x in flags), key=lambda x: x[0])

    def _accepted(self, lo: int, hi: int, task_id: str | None = None) -> dict[str, list]:
        """Accepted actions in [lo, hi) by task, each (draw id, step, action), in draw order."""
        sql, args = "SELECT draw_id, step, task_id, payload FROM actions WHERE verdict='accepted' AND step >= ? " \
            "AND step < ?", [lo, hi]
        if task_id is not None:
            sql, args = sql + " AND task_id=?", args + [task_id]
        by_task: dict[str, list] = {}
        for draw_id, step, task, payload in self.db.execute(sql + " ORDER BY draw_id", args):
            by_task.setdefault(task, []).append((draw_id, step, _action(json.loads(payload))))
        return by_task

    def _task_undone(self, task_id: str, acts: list, lo: int, hi: int, within: int) -> list[tuple[int, bool, int]]:
        draws = [i for (i,) in self.db.execute(
            "SELECT id FROM draws WHERE task_id=? AND step >= ? AND step < ? ORDER BY step, id", (task_id, lo, hi))]
        pos = {d: i for i, d in enumerate(draws)}
        return [(step, any(0 < pos[d2] - pos[d] <= within and undoes(b, a) for d2, _, b in acts),
                 min(len(draws) - 1 - pos[d], within)) for d, step, a in acts]

    def _undone_all(self, within: int) -> dict[str, list]:
        """`_undone` over the whole store by task, kept between calls: after this store's own `append_step` only
        the tasks it drew are read again (the run total is asked every step, and a full pass reads every accepted
        action the run has); a step another writer committed makes it read everything."""
        last, cached = self.last_step, self._undone_cache.get(within)
        hi = _before(None)
        if cached is None or cached["step"] != last:
            cached = self._undone_cache[within] = {"step": last, "dirty": set(), "by_task": {
                t: self._task_undone(t, acts, -1, hi, within) for t, acts in self._accepted(-1, hi).items()}}
        for task_id in cached["dirty"]:
            acts = self._accepted(-1, hi, task_id).get(task_id)
            if acts:
                cached["by_task"][task_id] = self._task_undone(task_id, acts, -1, hi, within)
        cached["dirty"].clear()
        return cached["by_task"]

    # --- what the semantic index reads --------------------------------------------------------------------------

    def criterion_rows(self) -> list[tuple[int, str, str, str]]:
        """(row, task id, criterion id, text) of every criterion wording, in row order."""
        return self.db.execute("SELECT id, task_id, criterion_id, text FROM criteria ORDER BY id").fetchall()

    def embeddings(self, model: str, texts: Iterable[str]) -> dict[str, np.ndarray]:
        """Cached float16 vectors of `model` for those of `texts` that have one."""
        texts = list(dict.fromkeys(texts))
        out = {}
        for i in range(0, len(texts), 900):  # SQLite's bound-parameter limit
            chunk = texts[i:i + 900]
            for text, blob in self.db.execute(
                    f"SELECT text, vec FROM embeddings WHERE model=? AND text IN ({','.join('?' * len(chunk))})",
                    [model] + chunk):
                out[text] = np.frombuffer(blob, np.float16)
        return out

    def unembedded_texts(self, model: str) -> list[str]:
        """Criterion texts with no vector of `model` (rows written without an embedder, or a new model), in the
        order they were first written."""
        return [t for (t,) in self.db.execute(
            "SELECT text FROM criteria WHERE text NOT IN (SELECT text FROM embeddings WHERE model=?) "
            "GROUP BY text ORDER BY min(id)", (model,))]

    def embedding_ids(self, model: str) -> np.ndarray:
        return np.asarray([i for (i,) in self.db.execute("SELECT id FROM embeddings WHERE model=? ORDER BY id",
                                                         (model,))], np.int64)

    def embedding_rows(self, model: str, after_id: int = -1, limit: int | None = None
                       ) -> tuple[np.ndarray, np.ndarray]:
        """(ids, float16 vectors [n, d]) of `model`'s texts with id > after_id, in id order."""
        rows = self.db.execute("SELECT id, vec FROM embeddings WHERE model=? AND id > ? ORDER BY id LIMIT ?",
                               (model, after_id, -1 if limit is None else limit)).fetchall()
        if not rows:
            return np.zeros(0, np.int64), np.zeros((0, 0), np.float16)
        return (np.asarray([i for i, _ in rows], np.int64),
                np.stack([np.frombuffer(v, np.float16) for _, v in rows]))

    def own_text_count(self, task_id: str) -> int:
        """Distinct criterion texts of a task: at most this many index hits can belong to it alone."""
        return self.db.execute("SELECT count(DISTINCT text) FROM criteria WHERE task_id=?", (task_id,)).fetchone()[0]

    def rows_of_embedding(self, embedding_id: int, exclude_task: str | None, limit: int
                          ) -> list[tuple[int, str, str, str]]:
        """Criterion rows with the text of `embedding_id`, other tasks only: those judged most recently first."""
        return self.db.execute(
            "SELECT c.id, c.task_id, c.criterion_id, c.text FROM embeddings e JOIN criteria c ON c.text = e.text "
            "WHERE e.id = ? AND c.task_id IS NOT ? ORDER BY c.judged IS NULL, c.judged DESC, c.id LIMIT ?",
            (embedding_id, exclude_task, limit)).fetchall()

    def examples(self, row: int, n: int = 2) -> tuple[list[tuple[int, int, int, str]], list[tuple[int, int, int, str]]]:
        """Newest (draw id, step, j, response) examples that achieved / did not achieve criterion row `row`, up to `n`
        each, oriented by the criterion's sign in that draw: a requirement is achieved when met (S = 1), a pitfall
        when avoided (S = 0)."""
        achieved, missed = [], []
        # Draw ids grow with the step (an INTEGER PRIMARY KEY takes the largest id + 1, and steps are appended in
        # order, truncation dropping the largest ids): the criterion's own key range, read backwards, is newest
        # first, with no join and no sort (~4x faster at 256,000 draws, launch/bench_scale.py).
        for draw_id, cells in self.db.execute(
                "SELECT draw_id, achieved FROM outcomes WHERE criterion=? ORDER BY draw_id DESC", (row,)):
            responses, step = _Responses(self.db, draw_id, len(cells)), None
            for j, c in enumerate(cells):
                side = achieved if c == 1 else missed if c == 0 else None
                if side is not None and len(side) < n:
                    if step is None:
                        (step,), = self.db.execute("SELECT step FROM draws WHERE id=?", (draw_id,))
                    side.append((draw_id, step, j, responses[j]))
            if len(achieved) >= n and len(missed) >= n:
                break
        return achieved, missed


def _points(record: DrawRecord, k: int) -> float:
    """The points criterion row k of a draw had then (its sign orients the examples); 1 when not recorded."""
    cid = record.criterion_ids[k]
    return float(((record.harness or {}).get("criteria") or {}).get(cid, {}).get("points", 1.0))


def _before(step: int | None) -> int:
    return (1 << 62) if step is None else int(step)
