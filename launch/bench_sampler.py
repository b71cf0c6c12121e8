"""Decode throughput of the JAX engine against transformers' `generate` (and google-tunix's sampler), measured in
the same run.

    python launch/bench_sampler.py [--batches=8,32] [--new_tokens=64] [--repeats=3] [--modes=greedy,sample]
    .venv-bench/bin/python launch/bench_sampler.py --tunix    # also tunix's sampler (`make bench-env`)

All sides run SmolLM2-135M-Instruct in float32 on the CPU from the same GGUF weights and the same prompt token ids,
with stopping disabled so every row decodes exactly `new_tokens` tokens: greedy, and sampled at temperature 1 (what
training does; transformers' do_sample with top_k=0, top_p=1.0; tunix's top_p=1.0 without top-k, its full-
vocabulary categorical draw). tunix's sampler (launch/tunix_peer.py) runs its own Llama with the same weights,
called as its VanillaRollout does, with per-token logprobs as the JAX engine returns them, its prompts padded to the
JAX engine's prompt bucket and its KV cache exactly the prompt bucket plus `new_tokens`, so both JAX samplers
attend over the same positions. The timed span is the whole `generate` call, prefill and the host's detokenising
included, on every side; the first call of each JAX sampler (its compiles) is timed apart; then the sides take
turns, `repeats` calls each, and the tables give each side's median and range, one table per mode and one row per
batch size.

The memory-bandwidth bound: decoding one token for every row reads every weight once (float32) plus each row's KV
cache so far, so a step cannot take less than those bytes over the machine's bandwidth, measured in the same run
as the median rate of a 1 GiB memcpy (numpy's copyto, bytes read per second); the rate of a pure streaming read
(summing a 1 GiB array, jitted) is printed beside it. The tables give each side's tokens/s against that bound
(bound = rows / (bytes per step / bandwidth), the cache at its mean length). At larger batches a decode step is
bound by its small-row matmuls rather than by bandwidth, so one step's matmuls are also timed alone, ours and
torch's (the kernels transformers' generate runs), each in its model's weight layout: that time over the new tokens
is a floor under any sampler built on those kernels. Also the forward pass's achieved FLOP/s against this machine's
float32 matmul rate. Keep other work off the machine while it runs.
"""

from __future__ import annotations

import os
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from absl import flags

from harnessrl_jax import cli  # noqa: E402
from harnessrl_jax.timing import CompileTimer, cpu_model, matmul_rate, median_time, read_bandwidth  # noqa: E402
from tunix_peer import warm_up  # noqa: E402  (launch/: imports nothing of tunix until asked)

flags.DEFINE_list("batches", ["8", "32"], "Batch sizes (prompts decoded together).")
flags.DEFINE_list("modes", ["greedy", "sample"], "greedy (argmax) and/or sample (temperature 1).")
flags.DEFINE_integer("new_tokens", 64, "New tokens per row.")
flags.DEFINE_integer("repeats", 3, "Timed repeats per measurement (median reported).")
flags.DEFINE_integer("forward_tokens", 256, "Sequence length of the forward-pass FLOP/s measurement.")
flags.DEFINE_bool("tunix", False, "Also time google-tunix's sampler (needs the benchmark environment).")
flags.DEFINE_bool("transformers", True, "Also time transformers' generate (the slowest side by far on a CPU).")
FLAGS = flags.FLAGS

QUESTIONS = [
    "Explain why the sky is blue.", "Write a limerick about a cat.", "What is 17 times 23?",
    "Name three rivers in Europe.", "Summarise the plot of Hamlet.", "How do vaccines work?",
    "Give me a recipe for pancakes.", "What causes tides?",
]


def copy_bandwidth(gib: int = 1, repeats: int = 5) -> float:
    """Bytes read per second by a memcpy of `gib` GiB (numpy's copyto into a buffer already faulted in)."""
    import numpy as np

    src = np.ones(gib << 28, np.float32)
    dst = np.empty_like(src)
    return src.nbytes / median_time(lambda: np.copyto(dst, src), repeats)


def decode_matmul_seconds(config, params, batch: int, repeats: int) -> tuple[float, float, float]:
    """(JAX seconds, torch seconds, FLOPs) of one decode step's matmuls alone at `batch` rows: every layer's weight
    matrices and the output head, each side in its own model's layout (ours x @ W [in, out] and x . embed over D;
    transformers' F.linear against [out, in]), so the two rates are of the kernels each sampler runs."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    import torch

    from harnessrl_jax.models.llama import output_head

    names = ("wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down")
    mats = [np.asarray(params["layers"][n][i]) for i in range(config.num_layers) for n in names]
    head = np.asarray(output_head(params, config))  # [V, D] when tied, else [D, V]
    head_vd = head if config.tie_embeddings else head.T
    flops = 2 * batch * (sum(m.size for m in mats) + head.size)
    rng = np.random.default_rng(0)
    xs = {d: rng.standard_normal((batch, d)).astype(np.float32) for d in {m.shape[0] for m in mats}}

    def ours(x, mats, head):
        outs = [x[w.shape[0]] @ w for w in mats]
        logits = x[head.shape[1]] @ head.T if config.tie_embeddings else x[head.shape[0]] @ head
        return outs, logits

    step = jax.jit(ours)
    jx, jm, jh = {d: jnp.asarray(v) for d, v in xs.items()}, [jnp.asarray(m) for m in mats], jnp.asarray(head)
    jax_s = median_time(lambda: jax.block_until_ready(step(jx, jm, jh)), repeats)
    tx = {d: torch.from_numpy(v) for d, v in xs.items()}
    tm = [torch.from_numpy(np.ascontiguousarray(m.T)) for m in mats]
    th = torch.from_numpy(np.array(head_vd))  # a writable copy

    def theirs():
        with torch.no_grad():
            [torch.nn.functional.linear(tx[w.shape[1]], w) for w in tm]
            torch.nn.functional.linear(tx[th.shape[1]], th)

    return jax_s, median_time(theirs, repeats), flops


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
    from harnessrl_jax.rollout.jax_engine import _prompt_bucket

    bad = set(FLAGS.modes) - {"greedy", "sample"}
    if bad:
        raise ValueError(f"--modes: {sorted(bad)} not greedy or sample")
    config, params, tokenizer = load_pretrained("smollm2-135m-instruct")
    path = smollm2_gguf_path()
    model = AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path),
                                                 dtype=torch.float32).eval() if FLAGS.transformers else None
    engine = JaxEngine(config, params, tokenizer, stop_ids=[-1])  # -1 never sampled: no early stop
    tunix_model = None
    if FLAGS.tunix:
        import tunix_peer
        tunix_model = tunix_peer.llama_model(config, params)
    n_new = FLAGS.new_tokens
    rows = []  # (mode, batch, {side: [seconds]}, {side: first call seconds}, bytes per step)
    for mode in FLAGS.modes:
        sample = mode == "sample"
        for batch in map(int, FLAGS.batches):
            prompts = [tokenizer.apply_chat_template([{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}],
                                                     tokenize=True) for i in range(batch)]
            width = max(map(len, prompts))
            sides, first = {}, {}
            sides["JAX engine"] = lambda: engine.generate(prompts, n=1, max_new_tokens=n_new,  # noqa: E731
                                                          temperature=1.0 if sample else 0.0)
            if tunix_model is not None:
                # the JAX engine's prompt bucket and cache: the same padded shapes on both JAX sides
                tunix_sampler = tunix_peer.Sampler(tunix_model, config, tokenizer, prompts,
                                                   prompt_len=_prompt_bucket(width, engine.prompt_bucket),
                                                   new_tokens=n_new)
                sides["tunix"] = lambda s=tunix_sampler: s.generate(sample)  # noqa: E731

            # transformers: the same prompts left-padded, as its batched generate expects.
            ids = torch.tensor([[engine.pad_id] * (width - len(p)) + p for p in prompts])
            mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
            extra = dict(do_sample=True, temperature=1.0, top_k=0, top_p=1.0) if sample else dict(do_sample=False)

            def run_hf():
                with torch.no_grad():
                    out = model.generate(ids, attention_mask=mask, max_new_tokens=n_new, min_new_tokens=n_new,
                                         pad_token_id=engine.pad_id, **extra)
                assert out.shape[1] == width + n_new

            if FLAGS.transformers:
                sides["transformers"] = run_hf
            for name, fn in sides.items():  # warm-up: compiles (JAX sides), allocator and threads (transformers)
                first[name] = warm_up(fn)
            # The sides take turns, so a slow spell of the machine falls on all rather than on one side's runs.
            times = {name: [] for name in sides}
            for i in range(FLAGS.repeats):
                for name, fn in sides.items():
                    with CompileTimer() as compiles:
                        times[name].append(seconds(fn))
                    if compiles.compiles:
                        print(f"warning: {name} compiled {compiles.compiles} programs in a timed call", flush=True)
                print(f"{mode}, batch {batch}, repeat {i + 1}/{FLAGS.repeats}: "
                      + ", ".join(f"{n} {t[-1]:.2f}s ({batch * n_new / t[-1]:.0f} tok/s)" for n, t in times.items()),
                      flush=True)
            # bytes one decode step reads: every weight, and each row's K and V at the cache's mean length
            cache = 2 * config.num_layers * config.num_kv_heads * config.head_dim * 4 * (width + n_new / 2)
            step_bytes = 4 * config.num_params() + batch * cache
            rows.append((mode, batch, times, first, step_bytes))
            print(f"{mode}, batch {batch}: warm-up calls " + ", ".join(
                f"{n} " + " + ".join(f"{s:.1f}s ({c} compiles)" for s, c in calls) for n, calls in first.items()),
                flush=True)

    peak = matmul_rate()
    copy_bw, read_bw = copy_bandwidth(), read_bandwidth()
    tokens = jnp.asarray(np.random.default_rng(0).integers(0, config.vocab_size, (8, FLAGS.forward_tokens)))
    fwd = jax.jit(forward, static_argnums=0)
    flops = forward_flops(config, *tokens.shape)
    fwd(config, params, tokens).block_until_ready()
    fwd_s = median_time(lambda: fwd(config, params, tokens).block_until_ready(), FLAGS.repeats, warmup=False)

    matmuls = {batch: decode_matmul_seconds(config, params, batch, max(FLAGS.repeats, 5))
               for batch in sorted({r[1] for r in rows})}

    import transformers
    names = list(rows[0][2])
    peers = [n for n in names if n != "JAX engine"]
    print(f"\nDecode throughput, SmolLM2-135M-Instruct float32, {n_new} new tokens per row, prefill included, CPU "
          f"({cpu_model()}, {os.cpu_count()} cores, memcpy bandwidth {copy_bw / 1e9:.1f} GB/s read, streaming "
          f"read {read_bw / 1e9:.1f} GB/s); jax {jax.__version__}"
          + (f", transformers {transformers.__version__} generate" if FLAGS.transformers else "")
          + (f", google-tunix {tunix_peer.version()} Sampler" if FLAGS.tunix else "")
          + f"; tok/s as the median [min, max] of {FLAGS.repeats} calls; bound at the memcpy bandwidth")
    ratios = {peer: [] for peer in peers}
    for mode in FLAGS.modes:
        print(f"\n{mode}:")
        header = (["batch"] + [f"{n} tok/s" for n in names] + [f"JAX / {p}" for p in peers] + ["bandwidth bound tok/s"]
                  + [f"{n} / bound" for n in names] + ["first call s, compiles included (" + ", ".join(names) + ")"])
        print("| " + " | ".join(header) + " |\n" + "|---" * len(header) + "|")
        for row_mode, batch, times, first, step_bytes in rows:
            if row_mode != mode:
                continue
            tps = {n: sorted(batch * n_new / t for t in ts) for n, ts in times.items()}
            med = {n: statistics.median(v) for n, v in tps.items()}
            bound = batch * copy_bw / step_bytes
            for p in peers:
                ratios[p].append((mode, batch, med["JAX engine"] / med[p]))
            cells = ([str(batch)] + [f"{med[n]:.1f} [{tps[n][0]:.1f}, {tps[n][-1]:.1f}]" for n in names]
                     + [f"{med['JAX engine'] / med[p]:.2f}" for p in peers] + [f"{bound:.0f}"]
                     + [f"{med[n] / bound:.0%}" for n in names] + [", ".join(f"{first[n][0][0]:.1f}" for n in names)])
            print("| " + " | ".join(cells) + " |")
    print(f"\nOne decode step's matmuls alone (every weight matrix and the output head against the batch's rows; "
          f"ours as the JAX engine lays them out, transformers' as torch's F.linear runs them), and that time over "
          f"{n_new} steps: what any sampler using these kernels spends on matmuls, the prefill apart")
    print("| batch | JAX GFLOP/s | torch GFLOP/s | JAX / torch | JAX matmul s per call | torch matmul s per call |")
    print("|---|---|---|---|---|---|")
    for batch, (jax_s, torch_s, mm_flops) in matmuls.items():
        print(f"| {batch} | {mm_flops / jax_s / 1e9:.1f} | {mm_flops / torch_s / 1e9:.1f} | {torch_s / jax_s:.2f} | "
              f"{n_new * jax_s:.2f} | {n_new * torch_s:.2f} |")
    print()
    for p in peers:
        worst = min(ratios[p], key=lambda r: r[2])  # noqa: B023
        target = "1.0x" if p == "tunix" else "1.5x"
        print(f"verdict: the JAX engine is at least {worst[2]:.2f}x {p} over these batches and modes (lowest: "
              f"{worst[0]}, batch {worst[1]}; target {target}): "
              + ", ".join(f"{m} {b}: {r:.2f}x" for m, b, r in ratios[p]))
    shares = []
    for row_mode, batch, times, _, step_bytes in rows:
        tps = statistics.median(batch * n_new / t for t in times["JAX engine"])
        shares.append(f"{row_mode} {batch}: {tps / (batch * copy_bw / step_bytes):.0%} "
                      f"({tps / (batch * read_bw / step_bytes):.0%} at the streaming-read rate)")
    print("verdict: the JAX engine's share of the memory-bandwidth bound: " + ", ".join(shares))
    print(f"\nForward pass [8 x {FLAGS.forward_tokens}]: {flops / 1e9:.1f} GFLOP (matmuls, counted analytically) in "
          f"{fwd_s * 1e3:.0f} ms = {flops / fwd_s / 1e9:.1f} GFLOP/s; float32 matmul peak "
          f"{peak / 1e9:.1f} GFLOP/s; ratio {flops / fwd_s / peak:.2f}")


def seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


if __name__ == "__main__":
    cli.run(main)
