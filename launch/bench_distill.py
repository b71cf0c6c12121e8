"""What CoCA's distillation term costs in the train step: the same sharded update with and without distill targets,
and the teacher's top-k forward, on one batch shape.

    python launch/bench_distill.py [--model=smollm2-135m-instruct] [--rows=8] [--seq=368] [--distilled=2] \\
        [--k=20] [--repeats=3] [--micro_batches=2]

Random weights of the preset's architecture (the cost does not depend on their values). The batch has `rows`
sequences of `seq` tokens (a prompt of `prompt`, the rest completion); `distilled` of them carry teacher targets, whose
teacher sequences are `teacher_seq` tokens long (default: seq + the completion, CoCA's teacher budget). Timed:
the step without targets (what every other method runs), the step with them (the term's share is the difference
over the step with them) and Trainer.teacher_topk. Runs alternate so machine load hits all alike; the best of the
repeats is reported, after one compiling call each; XLA's cost analysis of both compiled steps (flops, bytes
accessed) gives the term's share independently of machine load. Keep other work off the machine while it runs.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import flags  # noqa: E402

from harnessrl_jax import cli  # noqa: E402

flags.DEFINE_string("model", "smollm2-135m-instruct", "A ModelConfig preset (random weights).")
flags.DEFINE_integer("rows", 8, "Sequences per update.")
flags.DEFINE_integer("seq", 368, "Tokens per sequence.")
flags.DEFINE_integer("prompt", 128, "Prompt tokens per sequence.")
flags.DEFINE_integer("distilled", 2, "Rows with distillation targets (CoCA: one per qualified query).")
flags.DEFINE_integer("teacher_seq", 0, "Teacher sequence length (0: seq + the completion length).")
flags.DEFINE_integer("k", 20, "Top-k of the teacher.")
flags.DEFINE_integer("repeats", 3, "Timed calls per variant (the best is reported).")
flags.DEFINE_integer("micro_batches", 1, "Micro-batches per update.")
FLAGS = flags.FLAGS


def main(argv):
    del argv
    import jax
    import numpy as np
    import optax

    from harnessrl_jax.models import init_params, preset_config
    from harnessrl_jax.models.sharding import make_mesh
    from harnessrl_jax.rl.batch import TrainBatch, round_up
    from harnessrl_jax.rl.step import LossSettings, Trainer

    config = preset_config(FLAGS.model)
    params = init_params(config, jax.random.PRNGKey(0), std=0.02)
    R, L, P = FLAGS.rows, FLAGS.seq, FLAGS.prompt
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, config.vocab_size, (R, L)).astype(np.int32)
    mask = np.zeros((R, L), bool)
    mask[:, P - 1:L - 1] = True
    targets = np.concatenate([tokens[:, 1:], np.zeros((R, 1), np.int32)], axis=1)
    batch = TrainBatch(tokens, np.ones((R, L), bool), targets, mask, np.zeros((R, L), np.float32),
                       rng.standard_normal(R).astype(np.float32), np.ones(R, np.float32))
    trainer = Trainer(config, optax.adamw(1e-6), make_mesh(1, 1, 1, devices=jax.devices()[:1]),
                      LossSettings(kl_coef=0.0), micro_batches=FLAGS.micro_batches)
    state = trainer.init_state(params, jax.random.PRNGKey(0))
    D = round_up(max(FLAGS.distilled, 1), FLAGS.micro_batches)
    T_T = FLAGS.teacher_seq or round_up(L + (L - P), 8)
    t_tokens = rng.integers(0, config.vocab_size, (D, T_T)).astype(np.int32)
    positions = np.tile(np.clip(np.arange(L) + (T_T - L), 0, T_T - 1), (D, 1)).astype(np.int32)
    rows = np.where(np.arange(D) < FLAGS.distilled, np.arange(D), -1).astype(np.int32)
    distill_mask = mask & (np.arange(R) < FLAGS.distilled)[:, None]

    def teacher():
        out = trainer.teacher_topk(state.params, t_tokens, np.ones((D, T_T), bool), positions, rows, k=FLAGS.k,
                                   num_rows=R)
        jax.block_until_ready(out)
        return out

    ids, logp = teacher()
    plain = trainer.put_batch(batch)
    with_targets = trainer.put_batch(batch._replace(distill_ids=ids, distill_logp=logp, distill_mask=distill_mask))

    def step(b):
        nonlocal state
        state, metrics = trainer.step(state, b)
        jax.block_until_ready(metrics)

    # XLA's own cost model of the two compiled steps: a figure machine load cannot move
    cost = {}
    for name, b in (("step", plain), ("step_with_distill", with_targets)):
        compiled = trainer._step.lower(state, b, None).compile()
        analysis = compiled.cost_analysis()
        analysis = analysis[0] if isinstance(analysis, (list, tuple)) else analysis
        cost[name] = (float(analysis.get("flops", 0.0)), float(analysis.get("bytes accessed", 0.0)))

    times = {"step": [], "step_with_distill": [], "teacher": []}
    step(plain), step(with_targets)  # compile both
    for _ in range(FLAGS.repeats):
        for name, fn in (("step", lambda: step(plain)), ("step_with_distill", lambda: step(with_targets)),
                         ("teacher", teacher)):
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    best = {k: min(v) for k, v in times.items()}
    term = best["step_with_distill"] - best["step"]
    print(f"model {FLAGS.model} (V={config.vocab_size}), {R} rows x {L} tokens, {FLAGS.distilled} distilled, "
          f"teacher {D} x {T_T}, k={FLAGS.k}, micro_batches={FLAGS.micro_batches}, best of {FLAGS.repeats}")
    for k, v in best.items():
        print(f"  {k:18s} {v:8.3f} s   (all: {', '.join(f'{x:.3f}' for x in times[k])})")
    print(f"  distillation term in the step: {term:+.3f} s = {100 * term / best['step_with_distill']:.1f}% of the "
          f"step with it")
    (f0, b0), (f1, b1) = cost["step"], cost["step_with_distill"]
    print(f"  XLA cost analysis of the step: flops +{100 * (f1 - f0) / f1:.2f}%, bytes accessed "
          f"+{100 * (b1 - b0) / b1:.2f}% with the term")
    print(f"  teacher forward: {100 * best['teacher'] / (best['teacher'] + best['step_with_distill']):.1f}% of "
          f"teacher + step")


if __name__ == "__main__":
    cli.run(main)
