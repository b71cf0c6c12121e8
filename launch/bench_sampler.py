"""Decode throughput of the JAX engine against transformers' `generate`, measured in the same run.

    python launch/bench_sampler.py [--batches=8,32] [--new_tokens=64] [--repeats=3] [--modes=greedy,sample]

Both run SmolLM2-135M-Instruct in float32 on the CPU from the same GGUF weights, with stopping disabled so every
row decodes exactly `new_tokens` tokens: greedy, and sampled at temperature 1 (what training does; transformers'
do_sample with top_k=0, top_p=1.0). The timed span is the whole `generate` call, prefill included, on both sides;
the two sides take turns, `repeats` calls each, and the table gives each side's median.

The memory-bandwidth limit: decoding one token for every row reads every weight once (float32) plus each row's
KV cache so far, so a step cannot take less than those bytes over the machine's bandwidth, measured in the same
run as the median rate of summing a 1 GiB float32 array (a pure streaming read). The table gives each side's
tokens/s against that bound (bound = rows / (bytes per step / bandwidth), the cache at its mean length). Also
the forward pass's achieved FLOP/s against this machine's float32 matmul rate. Keep other work off the machine
while it runs.
"""

from __future__ import annotations

import os
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from absl import flags

from harnessrl_jax import cli  # noqa: E402
from harnessrl_jax.timing import cpu_model, matmul_rate, median_time, read_bandwidth  # noqa: E402

flags.DEFINE_list("batches", ["8", "32"], "Batch sizes (prompts decoded together).")
flags.DEFINE_list("modes", ["greedy", "sample"], "greedy (argmax) and/or sample (temperature 1).")
flags.DEFINE_integer("new_tokens", 64, "New tokens per row.")
flags.DEFINE_integer("repeats", 3, "Timed repeats per measurement (median reported).")
flags.DEFINE_integer("forward_tokens", 256, "Sequence length of the forward-pass FLOP/s measurement.")
FLAGS = flags.FLAGS

QUESTIONS = [
    "Explain why the sky is blue.", "Write a limerick about a cat.", "What is 17 times 23?",
    "Name three rivers in Europe.", "Summarise the plot of Hamlet.", "How do vaccines work?",
    "Give me a recipe for pancakes.", "What causes tides?",
]


def main(argv):
    del argv
    import jax
    import jax.numpy as jnp
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM

    from harnessrl_jax.models import forward, load_pretrained
    from harnessrl_jax.models.llama import forward_flops
    from harnessrl_jax.models.presets import smollm2_gguf_path
    from harnessrl_jax.rollout import JaxEngine

    config, params, tokenizer = load_pretrained("smollm2-135m-instruct")
    path = smollm2_gguf_path()
    model = AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path),
                                                 dtype=torch.float32).eval()
    engine = JaxEngine(config, params, tokenizer, stop_ids=[-1])  # -1 never sampled: no early stop
    n_new = FLAGS.new_tokens
    rows = []
    for mode in FLAGS.modes:
        if mode not in ("greedy", "sample"):
            raise ValueError(f"--modes: {mode!r} is not greedy or sample")
        sample = mode == "sample"
        for batch in map(int, FLAGS.batches):
            prompts = [tokenizer.apply_chat_template([{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}],
                                                     tokenize=True) for i in range(batch)]
            run_jax = lambda: engine.generate(prompts, n=1, max_new_tokens=n_new,  # noqa: E731
                                              temperature=1.0 if sample else 0.0)
            start = time.perf_counter()
            run_jax()
            compile_s = time.perf_counter() - start

            # transformers: the same prompts left-padded, as its batched generate expects.
            width = max(map(len, prompts))
            ids = torch.tensor([[engine.pad_id] * (width - len(p)) + p for p in prompts])
            mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
            extra = dict(do_sample=True, temperature=1.0, top_k=0, top_p=1.0) if sample else dict(do_sample=False)

            def run_hf():
                with torch.no_grad():
                    out = model.generate(ids, attention_mask=mask, max_new_tokens=n_new, min_new_tokens=n_new,
                                         pad_token_id=engine.pad_id, **extra)
                assert out.shape[1] == width + n_new

            run_hf()
            # The two sides take turns, so a slow spell of the machine falls on both rather than on one side's runs.
            jax_times, hf_times = [], []
            for _ in range(FLAGS.repeats):
                jax_times.append(seconds(run_jax))
                hf_times.append(seconds(run_hf))
            jax_s, hf_s = statistics.median(jax_times), statistics.median(hf_times)
            # bytes one decode step reads: every weight, and each row's K and V at the cache's mean length
            cache = 2 * config.num_layers * config.num_kv_heads * config.head_dim * 4 * (width + n_new / 2)
            step_bytes = 4 * config.num_params() + batch * cache
            rows.append((mode, batch, batch * n_new / jax_s, batch * n_new / hf_s, step_bytes))
            print(f"{mode}, batch {batch}: jax {jax_s:.2f}s, transformers {hf_s:.2f}s (first jax call "
                  f"{compile_s:.1f}s)", flush=True)

    peak = matmul_rate()
    bandwidth = read_bandwidth()
    tokens = jnp.asarray(np.random.default_rng(0).integers(0, config.vocab_size, (8, FLAGS.forward_tokens)))
    fwd = jax.jit(forward, static_argnums=0)
    flops = forward_flops(config, *tokens.shape)
    fwd(config, params, tokens).block_until_ready()
    fwd_s = median_time(lambda: fwd(config, params, tokens).block_until_ready(), FLAGS.repeats, warmup=False)

    print(f"\nDecode throughput, SmolLM2-135M-Instruct float32, {n_new} new tokens per row, prefill included, CPU "
          f"({cpu_model()}, {os.cpu_count()} cores, memory read bandwidth {bandwidth / 1e9:.1f} GB/s); baseline: "
          f"transformers {__import__('transformers').__version__} generate")
    print("| mode | batch | JAX engine tok/s | transformers tok/s | JAX / transformers | bandwidth bound tok/s "
          "| JAX / bound | transformers / bound |")
    print("|---|---|---|---|---|---|---|---|")
    for mode, batch, jax_tps, hf_tps, step_bytes in rows:
        bound = batch * bandwidth / step_bytes
        print(f"| {mode} | {batch} | {jax_tps:.1f} | {hf_tps:.1f} | {jax_tps / hf_tps:.2f} | {bound:.0f} "
              f"| {jax_tps / bound:.0%} | {hf_tps / bound:.0%} |")
    worst = min(jax_tps / hf_tps for _, _, jax_tps, hf_tps, _ in rows)
    print(f"\nverdict: the JAX engine is at least {worst:.2f}x transformers' generate over these batches and modes "
          f"(target 1.5x)")
    print(f"\nForward pass [8 x {FLAGS.forward_tokens}]: {flops / 1e9:.1f} GFLOP (matmuls, counted analytically) in "
          f"{fwd_s * 1e3:.0f} ms = {flops / fwd_s / 1e9:.1f} GFLOP/s; float32 matmul peak "
          f"{peak / 1e9:.1f} GFLOP/s; ratio {flops / fwd_s / peak:.2f}")


def seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


if __name__ == "__main__":
    cli.run(main)
