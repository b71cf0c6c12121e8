"""Chunked Gated DeltaNet forward and forward+backward FLOP/s against this machine's matmul rate, in the same run.

    python launch/bench_gdn.py [--shapes=1x2048x32,4x512x32] [--chunk=64] [--repeats=3]

Each shape is batch x tokens x value heads, with Qwen3.5's head sizes (Dk = Dv = 128). It times
`gated_deltanet.chunk_gated_delta_rule` (jitted, float32), its gradient with respect to every input, and the
token-by-token recurrence on the same inputs, then prints achieved GFLOP/s (models/qwen3_5.gdn_flops; forward+backward
counted as 3x the forward) and the ratio against a 2048 x 2048 float32 matmul timed in the same run. Keep other work
off the machine while it runs.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402

from harnessrl_jax.timing import matmul_rate, median_time  # noqa: E402

flags.DEFINE_list("shapes", ["1x2048x32", "4x512x32", "8x256x16"], "batch x tokens x value heads.")
flags.DEFINE_integer("chunk", 64, "DeltaNet chunk length.")
flags.DEFINE_integer("head_dim", 128, "Key and value head dimension.")
flags.DEFINE_integer("repeats", 3, "Timed repeats per measurement (median reported).")
flags.DEFINE_bool("recurrent", True, "Also time the token-by-token recurrence.")
FLAGS = flags.FLAGS


def inputs(batch: int, tokens: int, heads: int, dim: int):
    """Random delta-rule inputs shaped as Qwen3.5's (normalised q, k; decays <= 0; beta in (0, 1))."""
    import jax
    import jax.numpy as jnp

    kq, kk, kv, kg, kb = jax.random.split(jax.random.PRNGKey(0), 5)
    shape = (batch, tokens, heads, dim)
    unit = lambda x: x * jax.lax.rsqrt(jnp.sum(x * x, -1, keepdims=True))
    q = unit(jax.random.normal(kq, shape)) * dim**-0.5
    k = unit(jax.random.normal(kk, shape))
    v = jax.random.normal(kv, shape)
    g = -jax.random.uniform(kg, shape[:3], minval=0.0, maxval=1.0)
    beta = jax.random.uniform(kb, shape[:3])
    return q, k, v, g, beta


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    import jax
    import jax.numpy as jnp

    from harnessrl_jax.models import preset_config
    from harnessrl_jax.models.gated_deltanet import chunk_gated_delta_rule, recurrent_gated_delta_rule
    from harnessrl_jax.models.qwen3_5 import gdn_flops

    chunked = jax.jit(lambda *xs: chunk_gated_delta_rule(*xs, chunk_size=FLAGS.chunk)[0])
    grads = jax.jit(jax.grad(lambda *xs: jnp.sum(chunk_gated_delta_rule(*xs, chunk_size=FLAGS.chunk)[0]),
                             argnums=(0, 1, 2, 3, 4)))
    recurrent = jax.jit(lambda *xs: recurrent_gated_delta_rule(*xs)[0])
    peak = matmul_rate()
    print(f"matmul baseline (2048 x 2048 float32, same run): {peak / 1e9:.1f} GFLOP/s on "
          f"{jax.devices()[0].platform} ({os.cpu_count()} cores)")
    header = ("batch x tokens x heads", "GFLOP fwd", "fwd ms", "fwd GFLOP/s", "fwd+bwd ms", "fwd+bwd GFLOP/s",
              "vs matmul", "recurrent fwd ms")
    rows = []
    for spec in FLAGS.shapes:
        b, t, h = (int(x) for x in spec.split("x"))
        config = preset_config("qwen3.5-4b").replace(linear_num_value_heads=h, linear_num_key_heads=h,
                                                    linear_key_head_dim=FLAGS.head_dim,
                                                    linear_value_head_dim=FLAGS.head_dim, chunk_size=FLAGS.chunk)
        xs = inputs(b, t, h, FLAGS.head_dim)
        flops = b * gdn_flops(config, t)
        fwd = median_time(lambda: chunked(*xs).block_until_ready(), FLAGS.repeats)
        both = median_time(lambda: jax.block_until_ready(grads(*xs)), FLAGS.repeats)
        rec = median_time(lambda: recurrent(*xs).block_until_ready(), FLAGS.repeats) if FLAGS.recurrent else None
        rate = 3 * flops / both
        rows.append((spec, f"{flops / 1e9:.2f}", f"{fwd * 1e3:.0f}", f"{flops / fwd / 1e9:.1f}", f"{both * 1e3:.0f}",
                     f"{rate / 1e9:.1f}", f"{rate / peak:.2f}", "-" if rec is None else f"{rec * 1e3:.0f}"))
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    for r in [header] + rows:
        print("  ".join(str(x).rjust(w) for x, w in zip(r, widths)))


if __name__ == "__main__":
    app.run(main)
