"""Throughput of one GRPO update (forward, backward, optimiser) in JAX against the same update in PyTorch.

    python launch/bench_train.py [--batch=16] [--seq=128] [--repeats=3] [--micro_batches=1,4] [--layers=scan,unroll]

Both sides run SmolLM2-135M-Instruct in float32 on the CPU from the same GGUF weights: this project's sharded train
step (one device, kl_coef = 0, the head on the completion positions) per --micro_batches and --layers value, and
transformers' model as TRL's GRPOTrainer runs it, then clip_grad_norm_ and AdamW. Runs alternate between the two;
the best repeat is reported, with its matmul FLOP/s against a float32 matmul's rate measured around it, the system
time and page faults per update, and a breakdown of the JAX update. docs/design.md (Measurements) says how it
counts. Keep other work off the machine while it runs.

    .venv-bench/bin/python launch/bench_train.py --tunix    # also google-tunix's GRPO update (`make bench-env`)

With --tunix the same update runs in google-tunix, the JAX peer, in the same process and turn by turn with the
others: its Llama with the same weights, its actor trainer's jitted step with its `grpo` loss (one iteration,
beta = 0, epsilon 0.2, loss_agg_mode token-mean, temperature 1) on the same tokens split into its prompt and
completion halves, and the same optimiser (global-norm clipping at 1, AdamW at 1e-6, no weight decay).
"""

from __future__ import annotations

import os
import resource
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from absl import flags

from harnessrl_jax import cli  # noqa: E402
from harnessrl_jax.errors import UserError  # noqa: E402
from harnessrl_jax.timing import CompileTimer, cpu_model, matmul_rate, median_time  # noqa: E402
from tunix_peer import warm_up  # noqa: E402  (launch/: imports nothing of tunix until asked)

flags.DEFINE_integer("batch", 16, "Sequences per update.")
flags.DEFINE_integer("seq", 128, "Tokens per sequence.")
flags.DEFINE_integer("prompt", 32, "Leading prompt tokens per sequence (no loss on them).")
flags.DEFINE_integer("group", 8, "Rollouts per task (J): tunix's num_generations; the batch holds batch / group tasks.")
flags.DEFINE_integer("repeats", 3, "Timed updates per implementation (the best is reported).")
flags.DEFINE_list("micro_batches", ["1", "4"], "JAX micro-batches per update, one timed variant each.")
flags.DEFINE_list("layers", ["scan", "unroll"], "JAX layer loops (scan | unroll), one timed variant each.")
flags.DEFINE_string("compute_dtype", "float32", "JAX compute dtype (float32 | bfloat16).")
flags.DEFINE_bool("torch", True, "Also time the PyTorch update.")
flags.DEFINE_bool("tunix", False, "Also time google-tunix's GRPO update (needs the benchmark environment).")
FLAGS = flags.FLAGS

TEMPERATURE, CLIP = 1.0, 0.2
TORCH = "PyTorch (transformers, TRL's loss)"
TUNIX = "tunix (its actor trainer, grpo loss)"


def make_batch(vocab: int, rng, pad_id: int = -1):
    """Random tokens (never `pad_id`, from which tunix derives its masks), a prompt/completion split, signed
    advantages: the shapes of a GRPO batch."""
    import numpy as np

    from harnessrl_jax.rl.batch import TrainBatch

    b, t = FLAGS.batch, FLAGS.seq
    tokens = rng.integers(0, vocab, (b, t)).astype(np.int32)
    tokens[tokens == pad_id] = (pad_id + 1) % vocab
    loss_mask = np.zeros((b, t), bool)
    loss_mask[:, FLAGS.prompt - 1:t - 1] = True
    targets = np.concatenate([tokens[:, 1:], np.zeros((b, 1), np.int32)], axis=1)
    return TrainBatch(tokens=tokens, attention_mask=np.ones((b, t), bool), targets=targets, loss_mask=loss_mask,
                      engine_logprobs=np.where(loss_mask, -3.0, 0.0).astype(np.float32),
                      advantages=rng.standard_normal(b).astype(np.float32), weights=np.ones(b, np.float32))


class JaxUpdate:
    """This project's train step, plus the forward and forward+backward alone for the breakdown."""

    def __init__(self, config, params, batch, micro_batches=1, scan_layers=True, shared=None):
        import jax

        from harnessrl_jax.models.sharding import make_mesh
        from harnessrl_jax.rl.optim import make_optimizer
        from harnessrl_jax.rl.step import LossSettings, Trainer

        config = config.replace(compute_dtype=FLAGS.compute_dtype, scan_layers=scan_layers)
        optimizer, schedule = make_optimizer(dict(lr=1e-6, max_grad_norm=1.0))
        self.trainer = Trainer(config, optimizer, make_mesh(1, 1, 1, devices=jax.devices()[:1]),
                               LossSettings(kl_coef=0.0, clip_low=CLIP, clip_high=CLIP, temperature=TEMPERATURE),
                               schedule=schedule, micro_batches=micro_batches,
                               completion_len=FLAGS.seq - FLAGS.prompt)
        # {"state": TrainState}, one for every variant given the same dict: the process holds one copy of the weights
        self.shared = {} if shared is None else shared
        if "state" not in self.shared:
            self.shared["state"] = self.trainer.init_state(params, jax.random.PRNGKey(0))
        self.batch = self.trainer.put_batch(batch)
        self._forward = jax.jit(lambda p, b: self.trainer._microbatch_loss(p, None, b))
        grad = jax.value_and_grad(self.trainer._microbatch_loss, has_aux=True)
        self._grad = jax.jit(lambda p, b: grad(p, None, b))

    def step(self):
        self.shared["state"], metrics = self.trainer.step(self.shared["state"], self.batch)
        metrics["loss"].block_until_ready()
        self.grad_norm = float(metrics["grad_norm"])

    def forward(self):
        import jax
        jax.block_until_ready(self._forward(self.shared["state"].params, self.batch))

    def forward_backward(self):
        import jax
        jax.block_until_ready(self._grad(self.shared["state"].params, self.batch))


class TorchUpdate:
    """The same update on transformers' model, as TRL's GRPOTrainer computes it (num_iterations = 1, beta = 0)."""

    def __init__(self, batch):
        import torch
        from transformers import AutoModelForCausalLM

        from harnessrl_jax.models.presets import smollm2_gguf_path

        path = smollm2_gguf_path()
        self.torch = torch
        self.model = AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path),
                                                          dtype=torch.float32)
        self.model.train()
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-6, weight_decay=0.0)
        self.ids = torch.from_numpy(batch.tokens.astype("int64"))
        self.attention = torch.from_numpy(batch.attention_mask.astype("int64"))
        # TRL left-pads prompts, so every completion starts at column `prompt`: keep the logits of the positions
        # that predict completion tokens only (its logits_to_keep = completion length + 1, the last one dropped)
        self.keep = FLAGS.seq - FLAGS.prompt + 1
        self.mask = torch.from_numpy(batch.loss_mask[:, FLAGS.prompt - 1:-1].astype("float32"))
        self.advantages = torch.from_numpy(batch.advantages)[:, None]

    def step(self):
        torch = self.torch
        logits = self.model(input_ids=self.ids, attention_mask=self.attention,
                            logits_to_keep=self.keep).logits[:, :-1] / TEMPERATURE
        targets = self.ids[:, FLAGS.prompt:]
        # TRL's selective_log_softmax: gather, then subtract a per-row logsumexp (saves a [B, T, V] log_softmax).
        logp = torch.stack([torch.gather(row, -1, t[:, None])[:, 0] - torch.logsumexp(row, dim=-1)
                            for row, t in zip(logits, targets)])
        ratio = torch.exp(logp - logp.detach())
        loss = -torch.min(ratio * self.advantages, torch.clamp(ratio, 1 - CLIP, 1 + CLIP) * self.advantages)
        loss = (loss * self.mask).sum() / self.mask.sum()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


class TunixUpdate:
    """The same update in google-tunix (launch/tunix_peer.py), the same weights and tokens."""

    def __init__(self, config, params, batch, tokenizer):
        import optax

        import tunix_peer

        model = tunix_peer.llama_model(config, params)
        # rl/optim.make_optimizer's chain; its decay mask only matters with weight decay, which is 0 here
        optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-6, weight_decay=0.0))
        self.update = tunix_peer.GRPOUpdate(
            model, optimizer, batch.tokens, batch.advantages, prompt=FLAGS.prompt, pad_id=tokenizer.pad_id,
            eos_id=tokenizer.eos_id, num_generations=FLAGS.group, clip=CLIP, temperature=TEMPERATURE)
        self.grad_norm = None

    def step(self):
        self.grad_norm = self.update.step()


def _variant(name: str) -> str:
    """'4 micro-batches, layers scan' of 'JAX (rl/step.py), 4 micro-batches, layers scan'."""
    return name.split(", ", 1)[-1]


def _time(fn) -> tuple[float, float, int]:
    """(wall seconds, system seconds, minor page faults) of one call."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    fn()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    return wall, after.ru_stime - before.ru_stime, after.ru_minflt - before.ru_minflt


def main(argv):
    del argv
    bad = set(FLAGS.layers) - {"scan", "unroll"}
    if bad:
        raise UserError(f"--layers takes scan and/or unroll, got {sorted(bad)}")

    import numpy as np

    from harnessrl_jax.models import load_pretrained
    from harnessrl_jax.models.llama import forward_flops

    config, params, tokenizer = load_pretrained("smollm2-135m-instruct")
    batch = make_batch(config.vocab_size, np.random.default_rng(0), tokenizer.pad_id)
    tokens = FLAGS.batch * FLAGS.seq
    # the head only at the completion positions (both sides), the layers at every position
    head = 2 * FLAGS.batch * FLAGS.prompt * config.hidden_size * config.vocab_size
    flops = 3 * (forward_flops(config, FLAGS.batch, FLAGS.seq) - head)

    updates, compile_s, shared, grad_norms = {}, {}, {}, {}
    for layers in FLAGS.layers:
        for m in map(int, FLAGS.micro_batches):
            name = f"JAX (rl/step.py), {m} micro-batch{'es' if m > 1 else ''}, layers {layers}"
            print(f"compiling {name} ({FLAGS.batch} x {FLAGS.seq} tokens) ...", flush=True)
            updates[name] = JaxUpdate(config, params, batch, m, scan_layers=layers == "scan", shared=shared)
            compile_s[name] = warm_up(updates[name].step)
            grad_norms.setdefault("jax", updates[name].grad_norm)  # the first update, from the loaded weights
    if FLAGS.tunix:
        import tunix_peer

        print(f"compiling {TUNIX} ...", flush=True)
        updates[TUNIX] = TunixUpdate(config, params, batch, tokenizer)
        compile_s[TUNIX] = warm_up(updates[TUNIX].step)
        grad_norms["tunix"] = updates[TUNIX].grad_norm
    if FLAGS.torch:
        updates[TORCH] = TorchUpdate(batch)
        updates[TORCH].step()  # warm-up: allocator, thread pool
    runs = {name: [] for name in updates}
    timed_compiles = {name: 0 for name in updates}  # should stay 0: the warm-up compiled everything
    peaks = [matmul_rate()]  # before the first repeat, then after each
    for i in range(FLAGS.repeats):
        for name, update in updates.items():
            with CompileTimer() as compiles:
                runs[name].append(_time(update.step))
            timed_compiles[name] += compiles.compiles
        peaks.append(matmul_rate())
        print(f"repeat {i + 1}/{FLAGS.repeats}: " + ", ".join(f"{n.split(' (')[0]} {r[-1][0]:.2f}s"
                                                              for n, r in runs.items())
              + f", matmul peak {peaks[-1] / 1e9:.1f} GFLOP/s", flush=True)
    around = [max(before, after) for before, after in zip(peaks, peaks[1:])]  # the faster rate around each repeat
    shares = {name: sorted(flops / r[0] / p for r, p in zip(results, around)) for name, results in runs.items()}

    first = next(iter(updates))
    full = updates[first]
    full.forward(), full.forward_backward()  # compile both
    breakdown = {name: min(_time(fn)[0] for _ in range(FLAGS.repeats))
                 for name, fn in (("forward", full.forward), ("forward+backward", full.forward_backward))}

    import jax
    import torch
    import transformers
    torch_peak = torch_matmul_rate() if FLAGS.torch else None
    print(f"\nOne GRPO update, SmolLM2-135M-Instruct, {FLAGS.batch} x {FLAGS.seq} tokens, CPU ({cpu_model()}, "
          f"{os.cpu_count()} cores); jax {jax.__version__} ({FLAGS.compute_dtype}), torch {torch.__version__} + "
          f"transformers {transformers.__version__} (float32); {flops / 1e12:.2f} TFLOP per update (3 x forward, "
          "matmuls); "
          f"float32 matmul peak {statistics.median(peaks) / 1e9:.1f} GFLOP/s [{min(peaks) / 1e9:.1f}, "
          f"{max(peaks) / 1e9:.1f}] in {len(peaks)} measurements (2048^3, jitted)"
          + (f", PyTorch's on the same product {torch_peak / 1e9:.1f} GFLOP/s (the libraries' matmuls differ by "
             f"{torch_peak / statistics.median(peaks):.2f}x)" if torch_peak else "") + "; "
          f"GLIBC_TUNABLES={os.environ.get('GLIBC_TUNABLES', '(unset)')}"
          + (f"; google-tunix {tunix_peer.version()} (float32, its Llama at SmolLM2's shapes, the same weights)"
             if FLAGS.tunix else ""))
    version = tunix_peer.version() if FLAGS.tunix else None
    print("| implementation | s / update (best) | median [min, max] | tokens/s (best) | GFLOP/s (best) "
          "| share of matmul peak, median [min, max] | system s | page faults |")
    print("|---|---|---|---|---|---|---|---|")
    best, median = {}, {}
    for name, results in runs.items():
        wall, sys_s, faults = min(results)
        walls = sorted(r[0] for r in results)
        best[name], median[name] = wall, statistics.median(walls)
        share = shares[name]
        print(f"| {name} | {wall:.2f} | {median[name]:.2f} [{walls[0]:.2f}, {walls[-1]:.2f}] | {tokens / wall:.0f} | "
              f"{flops / wall / 1e9:.1f} | {statistics.median(share):.0%} [{share[0]:.0%}, {share[-1]:.0%}] | "
              f"{sys_s:.1f} | {faults:,} |")
    torch_s = best.pop(TORCH) if FLAGS.torch else None
    tunix_s, tunix_median = (best.pop(TUNIX), median.pop(TUNIX)) if FLAGS.tunix else (None, None)
    warm = {n: " + ".join(f"{s:.1f}s" for s, _ in calls) for n, calls in compile_s.items()}
    jax_compiles = {n: w for n, w in warm.items() if n != TUNIX}
    if FLAGS.torch:
        print("\nJAX / PyTorch speed: " + ", ".join(f"{_variant(n)}: {torch_s / s:.2f}x" for n, s in best.items())
              + "; first JAX calls (compile + run): " + ", ".join(jax_compiles.values()))
    if FLAGS.tunix:
        print("JAX / tunix speed, medians (best): " + ", ".join(
            f"{_variant(n)}: {tunix_median / median[n]:.2f}x ({tunix_s / s:.2f}x)" for n, s in best.items())
              + f"; warm-up calls until one compiled nothing (compile + run): JAX {', '.join(jax_compiles.values())}, "
              f"tunix {warm[TUNIX]}; gradient norm of the first update from the same weights: JAX "
              f"{grad_norms['jax']:.4g}, tunix {grad_norms['tunix']:.4g}")
    if any(timed_compiles.values()):
        print("warning: XLA compiled during the timed repeats: " + ", ".join(
            f"{n} {c}" for n, c in timed_compiles.items() if c))
    step_s = min(runs[first])[0]
    fwd, fb = breakdown["forward"], breakdown["forward+backward"]
    print(f"JAX breakdown (the full batch at once, layers {first.rsplit(' ', 1)[-1]}): forward (the loss) {fwd:.2f}s "
          f"({flops / 3 / fwd / 1e9:.1f} GFLOP/s), "
          f"forward+backward with the loss {fb:.2f}s ({flops / fb / 1e9:.1f} GFLOP/s), "
          f"the rest of the step (clip, AdamW, metrics, allocation) {step_s - fb:.2f}s")
    fastest = min(best, key=best.get)
    verdict = f"the fastest JAX update ({_variant(fastest)}) runs at {statistics.median(shares[fastest]):.0%} " \
              "of the matmul peak (the median over the repeats; target 65%)"
    if FLAGS.torch:
        verdict += f" and {torch_s / best[fastest]:.2f}x the PyTorch update (target 1.25x)"
    if FLAGS.tunix:
        slowest = max(median, key=median.get)
        verdict += (f"; against tunix {version}'s GRPO update, medians: the fastest JAX variant "
                    f"{tunix_median / median[fastest]:.2f}x, the slowest ({_variant(slowest)}) "
                    f"{tunix_median / median[slowest]:.2f}x (target 1.0x)")
    print("\nverdict: " + verdict)


def torch_matmul_rate(n: int = 2048, repeats: int = 5) -> float:
    """PyTorch's float32 FLOP/s on the product timing.matmul_rate times, so the table shows how far the two
    libraries' matmuls (XLA's against PyTorch's BLAS) differ on this CPU."""
    import torch

    a, b = torch.randn(n, n), torch.randn(n, n)
    return 2 * n**3 / median_time(lambda: torch.mm(a, b), repeats)


if __name__ == "__main__":
    cli.run(main)
