"""Checkpoints with orbax: the train state (params, optimiser state, step, RNG) and an `extra` slot, saved together.

`extra` is JSON (data position, harness and memory bookkeeping: whatever later parts need to resume exactly);
`extra_tree` is an optional pytree of arrays for state too large or too numeric for JSON (a harness pytree). A
checkpoint at step k holds the state *after* k updates; resuming from it and running on gives bitwise the same
params as never stopping (tests/rl/test_checkpoint.py), because every random draw of step k derives from the
saved root key and k, and the data position is in `extra`.

Multi-host: every process calls `save` and `restore` with the same arguments; orbax writes each shard once and
restores straight into the target shardings (a shared filesystem is assumed).
"""

from __future__ import annotations

import os
from typing import Any

import jax
import orbax.checkpoint as ocp

from harnessrl_jax.rl.step import TrainState


class Checkpointer:
    """Saves and restores (TrainState, extra, extra_tree) under one directory, one subdirectory per step."""

    def __init__(self, directory: str | os.PathLike, *, max_to_keep: int | None = 3, save_every: int = 1,
                 async_save: bool = True):
        options = ocp.CheckpointManagerOptions(
            max_to_keep=max_to_keep, create=True,
            # Async writes overlap the next steps; the device-to-host copy happens before save() returns, so
            # the donated state can be reused right away.
            enable_async_checkpointing=async_save)
        self.save_every = max(int(save_every), 1)
        self.directory = os.path.abspath(os.fspath(directory))
        self.manager = ocp.CheckpointManager(self.directory, options=options,
                                             item_names=("state", "extra", "extra_tree"))

    def latest_step(self) -> int | None:
        """The newest complete checkpoint's step, or None."""
        return self.manager.latest_step()

    def all_steps(self) -> list[int]:
        return list(self.manager.all_steps())

    def save(self, step: int, state: TrainState, extra: dict[str, Any] | None = None, extra_tree: Any = None,
             *, force: bool = False) -> bool:
        """Save at `step` if it is a multiple of `save_every` (or `force`); returns whether a save started."""
        if not force and step % self.save_every:
            return False
        items = dict(state=ocp.args.StandardSave(state), extra=ocp.args.JsonSave(extra or {}))
        if extra_tree is not None:
            items["extra_tree"] = ocp.args.StandardSave(extra_tree)
        # The interval is decided here: orbax's own policy would also save the first step it sees.
        return self.manager.save(int(step), args=ocp.args.Composite(**items), force=True)

    def restore(self, target: TrainState, step: int | None = None, extra_tree_target: Any = None):
        """(state, extra, extra_tree) at `step` (default: latest). `target` gives shapes, dtypes and shardings
        (Trainer.abstract_state()); extra_tree is None when none was saved."""
        step = self.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"no checkpoint under {self.directory}")
        items = dict(state=ocp.args.StandardRestore(target), extra=ocp.args.JsonRestore())
        # Steps are plain-numbered subdirectories (the manager's default naming), one folder per item.
        has_tree = os.path.isdir(os.path.join(self.directory, str(step), "extra_tree"))
        if has_tree:
            items["extra_tree"] = ocp.args.StandardRestore(extra_tree_target)
        out = self.manager.restore(step, args=ocp.args.Composite(**items))
        state = jax.tree.unflatten(jax.tree.structure(target), jax.tree.leaves(out["state"]))
        return state, dict(out["extra"] or {}), out["extra_tree"] if has_tree else None

    def wait(self) -> None:
        """Block until pending async writes are on disk."""
        self.manager.wait_until_finished()

    def close(self) -> None:
        self.manager.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
