"""Damaged and partial checkpoints: each kind of damage is found (also the kinds orbax restores without an error),
named in one line and set aside, and the newest intact checkpoint is restored bitwise; or the run stops, by a flag;
--restore_step picks one. (Whole runs resumed this way: tests/test_failures.py.)"""

import glob
import logging
import os
import re

import jax
import numpy as np
import pytest

from harnessrl_jax.rl import checkpoint
from harnessrl_jax.rl.checkpoint import Checkpointer, DamagedCheckpoint, fingerprint


@pytest.fixture(scope="module")
def trainer_and_states():
    """(target, two states): a small train-state-like pytree (arrays, a step, a key) and its abstract target."""
    sharding = jax.sharding.SingleDeviceSharding(jax.devices()[0])

    def state(seed):
        k = jax.random.PRNGKey(seed)
        return {"params": {"w": jax.random.normal(k, (64, 64)), "b": jax.numpy.arange(64.0) * seed},
                "opt": {"mu": jax.random.normal(jax.random.fold_in(k, 1), (64, 64), jax.numpy.bfloat16)},
                "step": jax.numpy.int32(seed), "rng": k}

    states = [state(1), state(2)]
    target = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding), states[0])
    return Target(target), states


class Target:
    """What Checkpointer.restore takes as its target (Trainer.abstract_state() in training)."""

    def __init__(self, tree):
        self.tree = tree

    def abstract_state(self):
        return self.tree


def saved(tmp_path, states) -> str:
    directory = str(tmp_path / "checkpoints")
    with Checkpointer(directory) as ckpt:
        for step, state in zip((1, 2), states):
            ckpt.save(step, state, {"harness": f"harness-of-step-{step}"})
        ckpt.wait()
    return directory


def flip(path):
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        data[len(data) // 2] ^= 0x01
        f.seek(0)
        f.write(data)


def biggest(step_dir):
    """The largest array chunk file of the step's train state (zarr: chunk files are named by their indices)."""
    chunks = [p for p in glob.glob(os.path.join(step_dir, "state", "**", "*"), recursive=True)
              if re.fullmatch(r"[0-9.]+", os.path.basename(p))]
    return max(chunks, key=os.path.getsize)


def edit_extra(step_dir):
    path = os.path.join(step_dir, "extra", "metadata")
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(text.replace("step-2", "step-3"))  # still valid JSON: orbax restores it without a word


DAMAGE = {
    "an array chunk with one byte changed": lambda d: flip(biggest(d)),
    "an array chunk deleted": lambda d: os.remove(biggest(d)),
    "an array's metadata overwritten": lambda d: open(os.path.join(os.path.dirname(biggest(d)), ".zarray"),
                                                      "wb").write(b"x"),
    "the harness json edited": edit_extra,
    "the step metadata deleted": lambda d: os.remove(os.path.join(d, "_CHECKPOINT_METADATA")),
}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_a_damaged_newest_checkpoint_is_named_set_aside_and_the_one_before_restored(tmp_path, trainer_and_states,
                                                                                    kind, caplog):
    trainer, states = trainer_and_states
    directory = saved(tmp_path, states)
    DAMAGE[kind](os.path.join(directory, "2"))
    with caplog.at_level(logging.WARNING), Checkpointer(directory) as ckpt:
        state, extra, _, step = ckpt.restore_intact(trainer.abstract_state())
        assert ckpt.all_steps() == [1]
    assert step == 1 and extra == {"harness": "harness-of-step-1"}
    assert fingerprint(state) == fingerprint(states[0])  # bitwise the state saved at step 1
    (line,) = [r.getMessage() for r in caplog.records if r.name == "harnessrl_jax.rl.checkpoint"]
    assert f"checkpoint {directory}/2 is damaged" in line and "restoring step 1 instead" in line
    assert "\n" not in line and len(line) < 600
    assert os.listdir(directory + "_damaged") == ["2"]


def test_a_partial_write_is_set_aside_and_orbax_never_sees_it(tmp_path, trainer_and_states, caplog):
    trainer, states = trainer_and_states
    directory = saved(tmp_path, states)
    os.rename(os.path.join(directory, "2"), os.path.join(directory, "2.orbax-checkpoint-tmp-1234"))
    with caplog.at_level(logging.WARNING), Checkpointer(directory) as ckpt:
        assert ckpt.restore_intact(trainer.abstract_state())[3] == 1
    (line,) = [r.getMessage() for r in caplog.records if r.name == "harnessrl_jax.rl.checkpoint"]
    assert f"checkpoint {directory}/2.orbax-checkpoint-tmp-1234 was never finished" in line
    assert os.listdir(directory + "_damaged") == ["2.orbax-checkpoint-tmp-1234"]


def test_with_fallback_off_the_run_stops_naming_the_checkpoint_and_the_flags(tmp_path, trainer_and_states):
    trainer, states = trainer_and_states
    directory = saved(tmp_path, states)
    flip(biggest(os.path.join(directory, "2")))
    with Checkpointer(directory) as ckpt, pytest.raises(DamagedCheckpoint) as e:
        ckpt.restore_intact(trainer.abstract_state(), fallback=False)
    msg = str(e.value)
    assert msg.startswith(f"checkpoint {directory}/2 is damaged: the train state differs from the fingerprint")
    assert "--restore_step=1" in msg and "--on_damaged_checkpoint=previous" in msg and "\n" not in msg
    assert sorted(os.listdir(directory)) == ["1", "2"]  # nothing moved


def test_restore_step_picks_a_checkpoint_and_sets_the_newer_ones_aside(tmp_path, trainer_and_states):
    trainer, states = trainer_and_states
    directory = saved(tmp_path, states)
    with Checkpointer(directory) as ckpt:
        with pytest.raises(FileNotFoundError, match="--restore_step=7: no checkpoint 7 .*there are: 1, 2"):
            ckpt.restore_intact(trainer.abstract_state(), 7)
        state, _, _, step = ckpt.restore_intact(trainer.abstract_state(), 1)
        assert step == 1 and ckpt.all_steps() == [1] and ckpt.latest_step() == 1
        ckpt.save(2, states[1], {"harness": "again"})  # the run goes on from 1 and saves 2 anew
        ckpt.wait()
    assert fingerprint(state) == fingerprint(states[0])
    assert os.listdir(directory + "_set_aside") == ["2"]


def test_when_no_intact_checkpoint_is_left_nothing_restarts_from_step_0_by_itself(tmp_path, trainer_and_states):
    trainer, states = trainer_and_states
    directory = saved(tmp_path, states)
    for step in ("1", "2"):
        flip(biggest(os.path.join(directory, step)))
    with Checkpointer(directory) as ckpt, pytest.raises(DamagedCheckpoint, match="no earlier intact checkpoint"):
        ckpt.restore_intact(trainer.abstract_state())
    assert os.listdir(directory) == ["1"] and os.listdir(directory + "_damaged") == ["2"]


def test_fingerprints_are_exact_for_any_dtype_and_see_a_single_bit():
    tree = {"f32": np.linspace(0, 1, 7, dtype=np.float32), "bf16": jax.numpy.ones((3, 5), jax.numpy.bfloat16),
            "i32": np.arange(4, dtype=np.int32), "b": np.array([True, False]), "key": jax.random.key(3)}
    fp = fingerprint(tree)
    assert fp == fingerprint(jax.tree.map(lambda x: x, tree))
    changed = dict(tree, f32=tree["f32"].copy())
    changed["f32"].view(np.uint32)[3] ^= 1
    assert fingerprint(changed) != fp
    swapped = dict(tree, i32=tree["i32"][::-1].copy())  # same values, other order
    assert fingerprint(swapped) != fp


def test_a_restore_leaves_no_warning_from_the_coroutines_a_failed_read_abandons(recwarn):
    """A failed orbax read leaves coroutines that were never awaited, in reference cycles: the restore's own garbage
    collection finds them, and that is the same failure again, not a warning for the user."""
    async def read():
        pass

    class Cycle:
        pass

    with checkpoint._quiet():
        abandoned = Cycle()
        abandoned.self, abandoned.coroutine = abandoned, read()
        del abandoned
    assert not [w for w in recwarn if "never awaited" in str(w.message)]
    never = read()  # outside a restore such a warning is still the user's to see
    del never
    assert [w for w in recwarn if "never awaited" in str(w.message)]
