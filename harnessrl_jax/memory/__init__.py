"""The training-time memory M: a record per task draw, read through a time index and a semantic index.

    memory = Memory.open(workdir)                    # or Memory.open(workdir, positions=ckpt_extra["memory"])
    memory.append_step(step, records)                # once per step, after the critic: atomic
    memory.history(task_id, before_step=step)        # time index: earlier draws, newest first
    memory.query(text, exclude_task=task_id)         # semantic index: donors from other tasks
    extra["memory"] = memory.save()                  # at checkpoint time: positions to restore from
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any, Iterable, Mapping, Sequence

from harnessrl_jax.memory.semantic import (DEFAULT_EMBEDDER, MIN_COSINE, Donor, Embedder, Example, SemanticIndex,
                                           embedder_path)
from harnessrl_jax.memory.store import (SCHEMA_VERSION, ActionRecord, DrawRecord, RecordStore, Update,
                                        harness_changes, redoes, undoes)

__all__ = ["Memory", "RecordStore", "SemanticIndex", "Embedder", "DrawRecord", "ActionRecord", "Donor", "Example",
           "DEFAULT_EMBEDDER", "SCHEMA_VERSION", "Update", "embedder_path", "harness_changes", "redoes", "undoes"]


class Memory:
    """The record store and its semantic index, in one directory (normally the run's workdir)."""

    def __init__(self, directory: str, store: RecordStore, semantic: SemanticIndex | None):
        self.directory, self.store, self.semantic = directory, store, semantic

    @classmethod
    def open(cls, directory: str, *, embedder: "str | Embedder | None" = DEFAULT_EMBEDDER, index_kind: str = "ivf",
             ivf_min: int = 20_000, nprobe: int = 32, positions: Mapping[str, Any] | int | None = None) -> "Memory":
        """Opens (or creates) the memory in `directory`; with `positions`, drops every step after the checkpoint's.

        `embedder` is the bundled model's name, a local model directory or an Embedder; None keeps only the record
        store (no semantic index, no model). `index_kind`, `ivf_min`, `nprobe`: see `memory.semantic`."""
        store = RecordStore(os.path.join(directory, RecordStore.FILE))
        if positions is not None:
            step = positions if isinstance(positions, int) else int(positions["step"])
            store.truncate_after(step)
            have = store.positions()
            if not isinstance(positions, int) and (have["step"], have["draws"]) != (step, positions["draws"]):
                store.close()
                raise ValueError(f"memory in {directory} holds {have['draws']} draws up to step {have['step']}, the "
                                 f"checkpoint recorded {positions['draws']} up to step {step}: not this run's memory")
        semantic = None
        if embedder is not None:
            semantic = SemanticIndex(store, embedder, index_kind, ivf_min=ivf_min, nprobe=nprobe)
            semantic.sync(directory)
        return cls(directory, store, semantic)

    def append_step(self, step: int, records: Iterable[DrawRecord]) -> None:
        """Records every draw of `step` in one transaction, and indexes criterion wordings not seen before."""
        records = list(records)
        vectors, model = None, None
        if self.semantic is not None:
            # Embed before the transaction: the model never runs while the write lock is held.
            vectors = self.semantic.embed_missing(t for r in records for t in r.criterion_texts)
            model = self.semantic.model
        self.store.append_step(step, records, model=model, vectors=vectors)
        if self.semantic is not None:
            self.semantic.catch_up()

    def embed_deferred(self) -> None:
        """Embeds the rows `add_criteria(..., embed=False)` left without vectors now, waiting for the embedding
        model if it is still loading, rather than at the first query or write (which would do the same)."""
        if self.semantic is not None:
            self.semantic.embed_deferred()

    def add_criteria(self, items: Iterable[tuple[str, str, str]], step: int | None = None, *,
                     embed: bool = True) -> int:
        """Indexes (task_id, criterion_id, text) triples ahead of any draw, e.g. the seed rubrics; returns #new.

        embed=False writes the rows now and embeds them at the semantic index's first use, before anything written
        after them (the same index, without waiting here for the embedding model)."""
        items = list(items)
        vectors, model = None, None
        if self.semantic is not None and embed:
            vectors, model = self.semantic.embed_missing(t for _, _, t in items), self.semantic.model
        n_new = self.store.add_criteria(items, step=step, model=model, vectors=vectors)
        if self.semantic is not None and embed:
            self.semantic.catch_up()
        elif self.semantic is not None:
            self.semantic.embed_later()
        return n_new

    def history(self, task_id: str, before_step: int | None = None, limit: int | None = None) -> list[DrawRecord]:
        """Time index: the task's earlier draws, newest first."""
        return self.store.history(task_id, before_step, limit)

    def updates(self, task_id: str, before_step: int | None = None) -> list[Update]:
        """Time index: the task's earlier proposed updates, newest first, accepted ones marked when undone."""
        return self.store.updates(task_id, before_step)

    def query(self, text: str, k: int = 4, min_cosine: float = MIN_COSINE, exclude_task: str | None = None,
              examples: int = 2) -> list[Donor]:
        """Semantic index: related criteria of other tasks with their donor responses."""
        if self.semantic is None:
            raise RuntimeError("this memory was opened without an embedder")
        return self.semantic.query(text, k, min_cosine, exclude_task, examples)

    def query_many(self, texts: Sequence[str], exclude_tasks: Sequence[str | None] | None = None, **kw
                   ) -> list[list[Donor]]:
        if self.semantic is None:
            raise RuntimeError("this memory was opened without an embedder")
        return self.semantic.query_many(texts, exclude_tasks, **kw)

    def positions(self) -> dict[str, int]:
        """Last committed step and counts, for the checkpoint's `extra` slot."""
        return self.store.positions()

    def save(self, directory: str | None = None) -> dict[str, int]:
        """Flushes the log and writes the index file; into `directory` too (a full copy) if given. Returns positions."""
        self.store.checkpoint_wal()
        if self.semantic is not None:
            self.semantic.save(self.directory)
        if directory is not None and os.path.abspath(directory) != os.path.abspath(self.directory):
            os.makedirs(directory, exist_ok=True)
            target = os.path.join(directory, RecordStore.FILE)
            tmp = target + ".tmp"
            if os.path.exists(tmp):
                os.remove(tmp)
            # The backup API copies a consistent snapshot even while readers hold the database open.
            copy = sqlite3.connect(tmp)
            with copy:
                self.store.db.backup(copy)
            copy.close()
            os.replace(tmp, target)
            if self.semantic is not None:
                self.semantic.save(directory)
        return self.positions()

    def close(self) -> None:
        self.store.close()

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()
