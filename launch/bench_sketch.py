"""The cost of HarnessBandit's gradient sketch per train step: the same sharded GRPO step with and without it.

    python launch/bench_sketch.py --model=smollm2-135m-instruct --batch=4 --seq=64 --sketch_dim=131072

Builds random params of the preset's shape (no weights read), one AdamW update per call on one device, and times
the step without a sketch and with `--sketch_dim` coordinates of the last `--blocks` blocks (rl.sketch),
alternating so machine load hits both alike; reports the best of --repeats for each, the difference, and the
sketch alone (the jitted gather from a gradient-shaped pytree). Keep other work off the machine while it runs.
"""

from __future__ import annotations

import os
import sys
import time

from absl import flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harnessrl_jax import cli  # noqa: E402

flags.DEFINE_string("model", "smollm2-135m-instruct", "Preset whose shape is benchmarked (random params).")
flags.DEFINE_integer("num_layers", 0, "Override the preset's layer count (0: keep it).")
flags.DEFINE_integer("batch", 4, "Sequences per update.")
flags.DEFINE_integer("seq", 64, "Tokens per sequence.")
flags.DEFINE_integer("sketch_dim", 131_072, "d.")
flags.DEFINE_integer("blocks", 4, "The last K blocks.")
flags.DEFINE_integer("repeats", 5, "Timed updates per variant.")
FLAGS = flags.FLAGS


def main(argv):
    del argv
    import jax
    import numpy as np
    import optax

    from harnessrl_jax.models import init_params, preset_config
    from harnessrl_jax.models.sharding import make_mesh
    from harnessrl_jax.rl.batch import TrainBatch
    from harnessrl_jax.rl.sketch import make_sketch_spec, sketch
    from harnessrl_jax.rl.step import LossSettings, Trainer

    config = preset_config(FLAGS.model)
    if FLAGS.num_layers:
        config = config.replace(num_layers=FLAGS.num_layers)
    params = init_params(config, jax.random.PRNGKey(0))
    rng = np.random.default_rng(0)
    B, T = FLAGS.batch, FLAGS.seq
    tokens = rng.integers(0, config.vocab_size, (B, T)).astype(np.int32)
    mask = np.zeros((B, T), bool)
    mask[:, T // 4:-1] = True
    batch = TrainBatch(tokens, np.ones((B, T), bool), np.roll(tokens, -1, 1), mask, np.zeros((B, T), np.float32),
                       rng.standard_normal(B).astype(np.float32), np.ones(B, np.float32))
    mesh = make_mesh(1, 1, 1, devices=jax.devices()[:1])
    spec = make_sketch_spec(config, FLAGS.sketch_dim, last_blocks=FLAGS.blocks)
    loss = LossSettings(kl_coef=0.0)
    trainers = {"plain": Trainer(config, optax.adamw(1e-6), mesh, loss),
                "sketch": Trainer(config, optax.adamw(1e-6), mesh, loss, sketch_spec=spec)}
    states = {k: t.init_state(params, jax.random.PRNGKey(0)) for k, t in trainers.items()}
    batches = {k: t.put_batch(batch) for k, t in trainers.items()}
    times = {k: [] for k in trainers}
    for r in range(FLAGS.repeats + 1):  # the first call compiles
        for k, t in trainers.items():
            start = time.perf_counter()
            out = t.step(states[k], batches[k], None, **({"return_sketch": True} if k == "sketch" else {}))
            jax.block_until_ready(out)
            states[k] = out[0]
            if r:
                times[k].append(time.perf_counter() - start)
    grads = jax.tree.map(lambda p: np.asarray(p), states["plain"].params)
    fn = jax.jit(lambda g: sketch(g, spec))
    fn(grads).block_until_ready()
    alone = []
    for _ in range(FLAGS.repeats):
        start = time.perf_counter()
        fn(grads).block_until_ready()
        alone.append(time.perf_counter() - start)
    plain, with_sketch = min(times["plain"]), min(times["sketch"])
    print(f"{FLAGS.model} ({config.num_layers} layers, {config.num_params() / 1e6:.0f}M params), batch {B} x {T}, "
          f"d = {spec.d} of the last {FLAGS.blocks} blocks")
    print(f"step without sketch {plain * 1e3:.1f} ms, with {with_sketch * 1e3:.1f} ms: "
          f"+{(with_sketch - plain) * 1e3:.1f} ms ({100 * (with_sketch - plain) / plain:+.1f}%); "
          f"the sketch alone {min(alone) * 1e3:.2f} ms")


if __name__ == "__main__":
    cli.run(main)
