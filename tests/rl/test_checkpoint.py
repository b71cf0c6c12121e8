"""Checkpoints: what is saved comes back with its shardings, and a resumed run is bitwise the run that never stopped."""

import functools
import importlib.util
import json
import os
import sys

import jax
import numpy as np
import optax
import pytest

from harnessrl_jax.models import init_params, preset_config
from harnessrl_jax.models.sharding import make_mesh
from harnessrl_jax.rl.checkpoint import Checkpointer
from harnessrl_jax.rl.optim import make_optimizer
from harnessrl_jax.rl.step import Trainer

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@functools.lru_cache(maxsize=None)
def load_train_module():
    """launch/train.py as a module: the real entry point's train(), without a subprocess per run (loaded once per
    session, shared through sys.modules with the other tests that load it: it defines absl flags)."""
    if "launch_train" in sys.modules:
        return sys.modules["launch_train"]
    spec = importlib.util.spec_from_file_location("launch_train", os.path.join(REPO, "launch", "train.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules["launch_train"] = module
    return module


def assert_bitwise_equal(a, b):
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for (path, x), y in zip(jax.tree_util.tree_leaves_with_path(a), jax.tree.leaves(b)):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and np.array_equal(x.reshape(-1).view(np.uint8), y.reshape(-1).view(np.uint8)), jax.tree_util.keystr(path)


def test_save_restore_roundtrip_keeps_values_shardings_and_extra(tmp_path):
    config = preset_config("tiny").replace(vocab_size=64)
    optimizer, _ = make_optimizer(dict(lr=1e-3))
    trainer = Trainer(config, optimizer, make_mesh(2, 2, 2))
    state = trainer.init_state(init_params(config, jax.random.PRNGKey(0)), jax.random.PRNGKey(7))
    extra = {"data": {"epoch": 3, "index": 5}, "harness": {"version": 2, "fields": ["criterion"]}}
    tree = {"weights": np.linspace(0, 1, 5, dtype=np.float32), "levels": np.arange(4, dtype=np.int32)}
    with Checkpointer(tmp_path / "ckpt") as ckpt:
        assert ckpt.save(3, state, extra, extra_tree=tree)
        assert ckpt.save(4, state, {"data": {}})
        ckpt.wait()
    with Checkpointer(tmp_path / "ckpt") as ckpt:
        assert ckpt.latest_step() == 4 and ckpt.all_steps() == [3, 4]
        restored, got_extra, got_tree = ckpt.restore(trainer.abstract_state(), step=3)
        _, _, no_tree = ckpt.restore(trainer.abstract_state())
    assert got_extra == extra and no_tree is None
    assert_bitwise_equal(got_tree, tree)
    assert_bitwise_equal(restored, state)
    for want, got in zip(jax.tree.leaves(trainer.state_shardings()), jax.tree.leaves(restored)):
        assert got.sharding.is_equivalent_to(want, got.ndim)


def test_a_checkpoint_written_as_one_ocdbt_store_still_restores(tmp_path):
    """Checkpoints were once written with orbax's default OCDBT layout; they resume under the zarr layout."""
    import orbax.checkpoint as ocp

    config = preset_config("tiny").replace(vocab_size=64)
    trainer = Trainer(config, optax.sgd(0.1), make_mesh(2, 2, 2))
    state = trainer.init_state(init_params(config, jax.random.PRNGKey(0)), jax.random.PRNGKey(7))
    old = ocp.CheckpointManager(tmp_path / "ckpt", options=ocp.CheckpointManagerOptions(create=True),
                                item_names=("state", "extra"))
    old.save(2, args=ocp.args.Composite(state=ocp.args.StandardSave(state), extra=ocp.args.JsonSave({"a": 1})))
    old.wait_until_finished()
    old.close()
    assert os.path.exists(tmp_path / "ckpt" / "2" / "state" / "manifest.ocdbt")
    with Checkpointer(tmp_path / "ckpt") as ckpt:
        restored, extra, _ = ckpt.restore(trainer.abstract_state())
        assert ckpt.save(3, restored, extra)
        ckpt.wait()
    assert extra == {"a": 1}
    assert_bitwise_equal(restored, state)
    assert not os.path.exists(tmp_path / "ckpt" / "3" / "state" / "manifest.ocdbt")  # new saves: one zarr per array


def test_restore_without_a_checkpoint_says_where_it_looked(tmp_path):
    config = preset_config("tiny")
    trainer = Trainer(config, optax.sgd(0.1), make_mesh(1, 1, 1, devices=jax.devices()[:1]))
    with Checkpointer(tmp_path / "empty") as ckpt:
        assert ckpt.latest_step() is None
        with pytest.raises(FileNotFoundError, match="empty"):
            ckpt.restore(trainer.abstract_state())


@pytest.mark.parametrize("spec", ["tiny_cpu.py", "tiny_cpu.py:method=harnessrl,tasks=harness"])
def test_resume_is_exact_through_launch_train(tmp_path, spec):
    """4 steps straight vs 2 steps, stop, a step that reached the memory but not the checkpoint (a crash), resume,
    2 steps: bitwise-equal params, optimiser state and metrics, the harness state, the memory positions and
    harness.jsonl; for HarnessRL with the semantic index on (the bundled MiniLM)."""
    from harnessrl_jax.memory import DrawRecord, Memory

    train = load_train_module()
    from harnessrl_jax import settings

    config = settings.load(os.path.join(REPO, "experiments", spec))
    harness = "harnessrl" in spec
    with config.unlocked():
        config.report = False
        config.total_steps = 4
        config.loss.kl_coef = 0.01  # the reference must be the same initial policy after the restart
        config.optim.schedule = "cosine"  # the schedule must continue where it stopped
        config.checkpoint.every = 100  # only the stop and the end save
        config.tensorboard = True  # its events must not change the run, and follow the resumed metrics.jsonl
        if harness:
            config.memory.embedder = "default"

    straight, resumed = str(tmp_path / "straight"), str(tmp_path / "resumed")
    train.train(config, straight)
    train.train(config, resumed, stop_after=2)
    assert Checkpointer(os.path.join(resumed, "checkpoints")).all_steps() == [2]
    # The memory runs ahead of the checkpoint: step 2 was committed (with a criterion wording the semantic index
    # had not seen), then the process died before the next checkpoint.
    embedder = "all-MiniLM-L6-v2" if harness else None
    with Memory.open(os.path.join(resumed, "memory"), embedder=embedder) as mem:
        mem.append_step(2, [DrawRecord(2, "ghost", ("ghost/c0",), ("A wording only the lost step saw",), ("x",),
                                       np.ones((1, 1)), np.ones(1))])
        mem.save()
    train.train(config, resumed)

    def metrics(workdir):
        with open(os.path.join(workdir, "metrics.jsonl")) as f:
            rows = [json.loads(line) for line in f]
        # JSON text, so NaN metrics (e.g. an acceptance rate with no candidates) compare equal
        return [json.dumps({k: v for k, v in row.items() if not k.startswith(("time/", "process/"))}) for row in rows]

    def harness_lines(workdir):
        with open(os.path.join(workdir, "harness.jsonl")) as f:
            return f.read().splitlines()

    assert [json.loads(m)["step"] for m in metrics(resumed)] == [1, 2, 3, 4]
    assert metrics(resumed) == metrics(straight)
    with open(os.path.join(resumed, "metrics.jsonl")) as f:  # every number of every line, at its step, once
        numbers = [(k, row["step"]) for row in map(json.loads, f) for k, v in row.items()
                   if k != "step" and type(v) in (int, float, bool)]
    assert tensorboard_steps(resumed) == {k: [numbers.count((k, s)) for s in (1, 2, 3, 4)] for k, _ in numbers}
    assert harness_lines(resumed) == harness_lines(straight)
    if harness:
        assert harness_lines(straight), "the harness proposed nothing in 4 steps"
        with Memory.open(os.path.join(resumed, "memory"), embedder="all-MiniLM-L6-v2") as mem:
            assert mem.history("ghost") == [] and mem.query("A wording only the lost step saw", min_cosine=0.99) == []
    states = []
    for workdir in (straight, resumed):
        run_trainer = Trainer(train_config_model(config), make_optimizer(config.optim)[0],
                              make_mesh(1, 1, 1, devices=jax.devices()[:1]))
        with Checkpointer(os.path.join(workdir, "checkpoints")) as ckpt:
            state, extra, _ = ckpt.restore(run_trainer.abstract_state())
        states.append((state, extra))
    assert int(states[0][0].step) == 4
    assert states[0][1] == states[1][1]
    assert_bitwise_equal(states[1][0], states[0][0])


def tensorboard_steps(workdir) -> dict[str, list[int]]:
    """{tag: how often each of steps 1..4 was written} over the run's event files, read by TensorBoard's loader."""
    import glob

    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader

    seen: dict[str, list[int]] = {}
    for path in glob.glob(os.path.join(workdir, "tensorboard", "events.out.tfevents.*")):
        for event in LegacyEventFileLoader(path).Load():
            for value in event.summary.value:
                seen.setdefault(value.tag, [0] * 4)[event.step - 1] += 1
    return seen


def train_config_model(config):
    from harnessrl_jax import build
    return build.build_model(config)[0]
