"""Multi-host: two processes on localhost (CPU, gloo collectives), initialised the way launch/train.py does it, run
one sharded step over a mesh spanning both and get the single-process result.

Run as a script, this file is one of the two worker processes.
"""

import json
import os
import subprocess
import sys

import numpy as np

from harnessrl_jax.rubric.judges.local_server import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MESH = (1, 2, 2)  # fsdp spans the two processes (rows and weight shards), tensor splits within each


def one_step(mesh):
    """(params after one SGD step at lr 1, step metrics) on a fixed batch, gathered to every host."""
    import jax
    import optax
    from jax.experimental import multihost_utils

    from harnessrl_jax.models import init_params
    from harnessrl_jax.rl.step import Trainer, metrics_to_host
    from test_step import CONFIG, LOSS, random_batch

    params = init_params(CONFIG, jax.random.PRNGKey(0), std=0.2)
    ref = jax.tree.map(lambda p, n: p + 0.05 * n, params, init_params(CONFIG, jax.random.PRNGKey(1)))
    trainer = Trainer(CONFIG, optax.sgd(1.0), mesh, LOSS, micro_batches=2)
    state = trainer.init_state(params, jax.random.PRNGKey(0))
    state, metrics = trainer.step(state, trainer.put_batch(random_batch()), trainer.place_params(ref))
    gathered = multihost_utils.process_allgather(state.params, tiled=True)
    return [np.asarray(x) for x in jax.tree.leaves(gathered)], metrics_to_host(metrics)


def worker(process_id: int, port: int, out: str) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("launch_train", os.path.join(REPO, "launch", "train.py"))
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    train.initialize_distributed(f"localhost:{port}", 2, process_id)

    import jax
    from harnessrl_jax.models.sharding import make_mesh

    assert jax.process_count() == 2 and jax.device_count() == 4 and jax.local_device_count() == 2
    leaves, metrics = one_step(make_mesh(*MESH))
    if process_id == 0:
        np.savez(out, *leaves)
        with open(out + ".json", "w") as f:
            json.dump(metrics, f)
    jax.distributed.shutdown()


def test_two_processes_reproduce_the_single_process_step(tmp_path):
    out = str(tmp_path / "params.npz")
    port = free_port()
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu"}
    procs = [subprocess.Popen([sys.executable, __file__, str(i), str(port), out], cwd=REPO, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(2)]
    try:
        logs = [p.communicate(timeout=300)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    for p, log in zip(procs, logs):
        assert p.returncode == 0, log[-4000:]

    import jax
    from harnessrl_jax.models.sharding import make_mesh

    want_leaves, want_metrics = one_step(make_mesh(1, 1, 1, devices=jax.devices()[:1]))
    with np.load(out) as got:
        got_leaves = [got[f"arr_{i}"] for i in range(len(got.files))]
    assert len(got_leaves) == len(want_leaves)
    for got, want in zip(got_leaves, want_leaves):
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)
    with open(out + ".json") as f:
        got_metrics = json.load(f)
    for k, v in want_metrics.items():
        np.testing.assert_allclose(got_metrics[k], v, atol=1e-5, rtol=1e-5, err_msg=k)


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    worker(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
