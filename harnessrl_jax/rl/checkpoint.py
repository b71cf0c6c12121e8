"""Checkpoints with orbax: the train state (params, optimiser state, step, RNG; under LoRA the adapters, not the
frozen base) and an `extra` slot, saved together.

`extra` is JSON (whatever later parts need to resume exactly); `extra_tree` an optional pytree of arrays. A
checkpoint at step k holds the state after k updates, and resuming from it gives bitwise the params of never
stopping: every random draw of step k derives from the saved root key and k. Every process of a multi-host run
calls `save` and `restore` alike (a shared filesystem is assumed). Each save records a fingerprint of every array
(two wrapping uint32 sums of its bits, exact whatever the sharding) and the SHA-256 of `extra`, which `restore`
checks, since orbax restores a flipped byte silently; `restore_intact` moves a damaged checkpoint to
`<directory>_damaged/` and uses the one before, and a chosen `step` moves newer ones to `<directory>_set_aside/`.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import io
import json
import logging
import os
import re
import shutil
import sys
import time
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import orbax.checkpoint as ocp

from harnessrl_jax.errors import UserError
from harnessrl_jax.rl.step import TrainState

log = logging.getLogger(__name__)

INTEGRITY = "harnessrl_integrity"  # the key of the fingerprints in a step's orbax custom metadata
METADATA_FILE = "_CHECKPOINT_METADATA"  # orbax's per-step metadata file (it holds the custom metadata)
_SETTLE_S = 0.5  # how long a failed restore waits for TensorStore's threads to finish reporting (quietly)
_PARTIAL = re.compile(r"^(\d+)\.orbax-checkpoint-tmp")  # a write that never finished


class DamagedCheckpoint(UserError):
    """A checkpoint that cannot be restored as it was saved; `step` and `reason` (one line) say which and why. A
    cli.UserError: launch scripts report it in one line."""

    def __init__(self, step: int, directory: str, reason: str):
        self.step, self.directory, self.reason = step, directory, reason
        super().__init__(f"checkpoint {os.path.join(directory, str(step))} is damaged: {reason}")


def _as_uint32(x) -> jax.Array:
    """The bits of an array as uint32 values (narrower types widened, wider ones split)."""
    x = jnp.asarray(x)
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        x = jax.random.key_data(x)
    size = x.dtype.itemsize
    if x.dtype == jnp.bool_:
        return x.astype(jnp.uint32)
    if size == 4:
        return jax.lax.bitcast_convert_type(x, jnp.uint32)
    if size in (1, 2):
        return jax.lax.bitcast_convert_type(x, jnp.dtype(f"uint{8 * size}")).astype(jnp.uint32)
    return jax.lax.bitcast_convert_type(x, jnp.uint32)  # 8 bytes: a trailing axis of two words


@jax.jit
def _leaf_fingerprint(x):
    u = _as_uint32(x).reshape(-1)
    weights = jnp.arange(1, u.size + 1, dtype=jnp.uint32)
    return jnp.stack([jnp.sum(u, dtype=jnp.uint32), jnp.sum(u * weights, dtype=jnp.uint32)])


def fingerprint(tree: Any) -> list[list[int]]:
    """Per leaf of `tree` (in jax.tree order) [sum, position-weighted sum] of its bits, wrapping uint32: equal for
    bitwise-equal arrays whatever their sharding, different for almost any change.

    One leaf per call: XLA's CPU backend materialises the bit-cast words (and the weighted product), so one call
    over every leaf held about twice the whole state in temporaries at each checkpoint. Each call is waited for
    before the next: dispatching them all at once over arrays orbax had just restored onto an 8-device CPU mesh
    aborted the process about one time in four (jax 0.10.2)."""
    leaves = jax.tree.leaves(tree)
    return [[int(v) for v in jax.device_get(_leaf_fingerprint(x))] for x in leaves]


def _sha256(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _one_line(e: BaseException, n: int = 200) -> str:
    text = " ".join(str(e).split()) or "no message"
    text = text if len(text) <= n else text[:n] + "..."
    return f"{type(e).__name__}: {text}"


@contextlib.contextmanager
def _quiet():
    """Orbax and TensorStore print pages of 'exception ignored' tracebacks from background coroutines when a read
    fails; the failure itself is reported once, by the caller. Their output goes nowhere while a restore runs."""
    hook, stderr = sys.unraisablehook, sys.stderr
    aio = logging.getLogger("asyncio")  # 'Task exception was never retrieved', with the whole TensorStore spec
    level = aio.level
    sys.unraisablehook, sys.stderr = (lambda unraisable: None), io.StringIO()
    aio.setLevel(logging.CRITICAL)
    try:
        yield
    except BaseException:
        # TensorStore's reader threads report into the closed event loop for a moment after a failed read.
        time.sleep(_SETTLE_S)
        raise
    finally:
        # The abandoned coroutines and tasks report now, while nothing is printed: their exceptions go to the hook
        # above, and a coroutine a failed read never awaited warns (RuntimeWarning), which is the same failure again.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="coroutine .* was never awaited", category=RuntimeWarning)
            gc.collect()
        sys.unraisablehook, sys.stderr = hook, stderr
        aio.setLevel(level)


class _NoMergeNotice(logging.Filter):
    """Orbax tries to merge per-process OCDBT stores after every save and warns when there are none, as there never
    are with the zarr layout used here."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Skipping merge of OCDBT checkpoints" not in record.getMessage()


logging.getLogger("absl").addFilter(_NoMergeNotice())


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
        # Arrays as one zarr store each, not OCDBT's single key-value store: an OCDBT write holds its whole
        # transaction in memory until it commits (about 0.7x the train state on top of the state). Restore reads
        # either layout, so checkpoints written with OCDBT still resume.
        self.manager = ocp.CheckpointManager(
            self.directory, options=options, item_names=("state", "extra", "extra_tree"),
            item_handlers={"state": ocp.StandardCheckpointHandler(use_ocdbt=False),
                           "extra": ocp.JsonCheckpointHandler(),
                           "extra_tree": ocp.StandardCheckpointHandler(use_ocdbt=False)})

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
        if isinstance(state, TrainState):  # a LoRA state's frozen base comes back from the config's weights
            state = state._replace(frozen=None)
        extra = extra or {}
        items = dict(state=ocp.args.StandardSave(state), extra=ocp.args.JsonSave(extra))
        integrity = {"state": fingerprint(state), "extra_sha256": _sha256(extra)}
        if extra_tree is not None:
            items["extra_tree"] = ocp.args.StandardSave(extra_tree)
            integrity["extra_tree"] = fingerprint(extra_tree)
        # The interval is decided here: orbax's own policy would also save the first step it sees.
        return self.manager.save(int(step), args=ocp.args.Composite(**items), force=True,
                                 custom_metadata={INTEGRITY: integrity})

    def restore(self, target: TrainState, step: int | None = None, extra_tree_target: Any = None):
        """(state, extra, extra_tree) at `step` (default: latest). `target` gives shapes, dtypes and shardings
        (Trainer.abstract_state()); extra_tree is None when none was saved. Raises DamagedCheckpoint (one line)
        when a file is missing or unreadable or the contents differ from the fingerprints saved with them."""
        step = self.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"no checkpoint under {self.directory}")
        integrity = self._integrity(step)
        items = dict(state=ocp.args.StandardRestore(target), extra=ocp.args.JsonRestore())
        # Steps are plain-numbered subdirectories (the manager's default naming), one folder per item.
        has_tree = os.path.isdir(os.path.join(self.directory, str(step), "extra_tree"))
        if has_tree:
            items["extra_tree"] = ocp.args.StandardRestore(extra_tree_target)
        try:
            with _quiet():
                out = self.manager.restore(step, args=ocp.args.Composite(**items))
            state = jax.tree.unflatten(jax.tree.structure(target), jax.tree.leaves(out["state"]))
        except Exception as e:  # noqa: BLE001 - orbax and TensorStore raise many types for one damaged file
            raise DamagedCheckpoint(step, self.directory, _one_line(e)) from None
        extra, tree = dict(out["extra"] or {}), out["extra_tree"] if has_tree else None
        if integrity:  # checkpoints written before fingerprints were recorded have none
            if fingerprint(state) != integrity.get("state"):
                raise DamagedCheckpoint(step, self.directory, "the train state differs from the fingerprint saved "
                                        "with it (an array file or the step's metadata was changed)")
            if _sha256(extra) != integrity.get("extra_sha256"):
                raise DamagedCheckpoint(step, self.directory, "`extra` (harness, sampler, memory positions) differs "
                                        "from the digest saved with it")
            if has_tree and fingerprint(tree) != integrity.get("extra_tree"):
                raise DamagedCheckpoint(step, self.directory, "extra_tree differs from the fingerprint saved with it")
        return state, extra, tree

    def _integrity(self, step: int) -> dict[str, Any]:
        """The fingerprints recorded with `step` ({} for a checkpoint older than them); DamagedCheckpoint when the
        step's metadata file is missing or unreadable."""
        path = os.path.join(self.directory, str(step), METADATA_FILE)
        try:
            with open(path, encoding="utf-8") as f:
                meta = json.load(f)
        except (OSError, ValueError) as e:
            raise DamagedCheckpoint(step, self.directory, f"its {METADATA_FILE} is missing or unreadable "
                                    f"({_one_line(e)})") from None
        return dict((meta.get("custom_metadata") or {}).get(INTEGRITY) or {})

    def restore_intact(self, target: TrainState, step: int | None = None, *, fallback: bool = True,
                       extra_tree_target: Any = None):
        """(state, extra, extra_tree, step) of the newest intact checkpoint, or of `step` when given; None when
        there is none. Leftover partial writes are set aside first. A damaged newest checkpoint is named in one
        log line, moved to `<directory>_damaged/` and the one before it tried (with `fallback`; otherwise
        DamagedCheckpoint); when no intact one is left, DamagedCheckpoint (the last is kept in place, so nothing
        restarts from step 0 by itself). A chosen `step` must be intact; the newer ones are moved to
        `<directory>_set_aside/`."""
        for name in sorted(os.listdir(self.directory)) if os.path.isdir(self.directory) else []:
            m = _PARTIAL.match(name)
            if m:
                moved = self._move(name, "_damaged", f"{name}")
                log.warning("checkpoint %s was never finished (the process stopped while writing it); moved to %s",
                            os.path.join(self.directory, name), moved)
        self.manager.reload()
        steps = sorted(self.all_steps(), reverse=True)
        if step is not None:
            if step not in steps:
                raise FileNotFoundError(f"--restore_step={step}: no checkpoint {step} under {self.directory} (there "
                                        f"are: {', '.join(map(str, sorted(steps))) or 'none'})")
            out = self.restore(target, step, extra_tree_target)
            newer = [s for s in steps if s > step]
            if newer:
                moved = [self._move(str(s), "_set_aside", str(s)) for s in sorted(newer)]
                log.warning("--restore_step=%d: the newer checkpoints %s moved to %s", step,
                            ", ".join(map(str, sorted(newer))), os.path.dirname(moved[0]))
                self.manager.reload()
            return (*out, step)
        for n, s in enumerate(steps):
            try:
                return (*self.restore(target, s, extra_tree_target), s)
            except DamagedCheckpoint as e:
                earlier = steps[n + 1:]
                if not earlier:  # kept in place: starting over from step 0 is the user's call
                    raise DamagedCheckpoint(s, self.directory, f"{e.reason}; no earlier intact checkpoint is left: "
                                            f"move {self.directory} away to start over from step 0") from None
                if not fallback:
                    raise DamagedCheckpoint(s, self.directory, f"{e.reason}; resume from an earlier one with "
                                            f"--restore_step={earlier[0]} (there are: "
                                            f"{', '.join(map(str, sorted(earlier)))}) or let the run fall back by "
                                            f"itself with --on_damaged_checkpoint=previous") from None
                moved = self._move(str(s), "_damaged", str(s))
                log.warning("%s; moved to %s, restoring step %d instead", e, moved, earlier[0])
                self.manager.reload()
        return None

    def _move(self, name: str, suffix: str, to: str) -> str:
        """Moves `<directory>/<name>` to `<directory><suffix>/<to>` (a free name); returns the new path."""
        parent = self.directory.rstrip(os.sep) + suffix
        dest = os.path.join(parent, to)
        n = 1
        while os.path.exists(dest):
            n += 1
            dest = os.path.join(parent, f"{to}-{n}")
        if jax.process_index() == 0:
            os.makedirs(parent, exist_ok=True)
            shutil.move(os.path.join(self.directory, name), dest)
        if jax.process_count() > 1:
            from jax.experimental import multihost_utils

            multihost_utils.sync_global_devices(f"checkpoint move {name}")
        return dest

    def wait(self) -> None:
        """Block until pending async writes are on disk."""
        self.manager.wait_until_finished()

    def close(self) -> None:
        self.manager.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
