"""What a config's train step needs per device, from compiling it on fake devices (nothing runs, no weights load).

    python launch/plan.py --config=experiments/rubric_mix_4b.py --devices=128
    python launch/plan.py --config=experiments/smollm2_cpu.py:method=harnessrl   # the CPU default, on its one device

Builds the config's mesh over --devices fake CPU devices, the model's shapes (a preset name, or the config.json of
a local HF directory or the header of a .gguf file) and the sharded train step of rl/step.py with abstract
inputs, compiles it, and prints per device: parameters, optimiser state, the batch, XLA's temporaries (from the
compiled program's memory analysis), their total against --device_memory_gb, and the step's FLOPs with the time
they take at --peak_tflops x --mfu. For CoCA the step carries the teacher's top-k targets and the FLOPs include the
teacher's forward (Trainer.teacher_topk; its own temporaries are not counted). The rollout engine's memory (KV
cache) is not included: at scale rollouts run in SGLang on their own budget. XLA's CPU compiler lays out buffers
like the GPU one but not identically; read the temporaries as an estimate.
"""

from __future__ import annotations

import os
import sys

# Fake devices must exist before jax is imported.
_DEVICES = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--devices=")), "8")
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           f" --xla_force_host_platform_device_count={int(_DEVICES)}").strip()
os.environ["JAX_PLATFORMS"] = "cpu"
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harnessrl_jax import cli  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from absl import app, flags  # noqa: E402
from ml_collections import config_flags  # noqa: E402

config_flags.DEFINE_config_file("config", None, "Experiment config file (experiments/*.py[:arg]).", lock_config=True)
flags.DEFINE_integer("devices", 8, "Fake devices to plan for (the mesh's size); without it a config that fixes "
                     "mesh.num_devices (the CPU configs) is planned on that many.")
flags.DEFINE_float("device_memory_gb", 80.0, "Memory per device, GB (H100: 80).")
flags.DEFINE_float("peak_tflops", 989.0, "Peak dense TFLOP/s per device at the compute dtype (H100 bf16: 989).")
flags.DEFINE_float("mfu", 0.4, "Model FLOPs utilisation assumed for the time estimate.")
flags.mark_flag_as_required("config")
FLAGS = flags.FLAGS


def model_shapes(config):
    """The ModelConfig of config.model_name without loading weights."""
    import json

    from harnessrl_jax.models import PRESETS, loading
    from harnessrl_jax.models.gguf_file import read_gguf
    from harnessrl_jax.settings import section

    overrides = section(config, "model").overrides()
    name = config.model_name
    if name in PRESETS:
        return PRESETS[name].replace(**overrides)
    if os.path.isdir(name):
        with open(os.path.join(name, "config.json")) as f:
            return loading.hf_model_config(json.load(f), name, **overrides)
    if name.endswith(".gguf") and os.path.isfile(name):
        return loading.gguf_model_config(read_gguf(name), name, **overrides)
    raise FileNotFoundError(f"config.model_name {name!r}: not a preset ({', '.join(sorted(PRESETS))}), an HF "
                            f"directory with config.json, or a .gguf file")


def plan(config) -> dict:
    """Per-device memory and per-step FLOPs of config's train step (see the module docstring)."""
    from harnessrl_jax import build, methods
    from harnessrl_jax.methods.coca import CoCAScheme
    from harnessrl_jax.methods.parts import part_class
    from harnessrl_jax.models import forward_flops
    from harnessrl_jax.models.sharding import make_mesh
    from harnessrl_jax.rl.batch import TrainBatch, round_up
    from harnessrl_jax.settings import section

    model_config = model_shapes(config)
    # --devices when given; otherwise the config's first num_devices devices, as build.setup takes them (the CPU
    # configs: one), or every fake device for num_devices 0
    explicit = any(a.startswith("--devices") for a in sys.argv[1:])
    mesh_section = section(config, "mesh")
    count = mesh_section.num_devices
    devices = jax.devices()[:count] if count and not explicit else jax.devices()
    mesh = make_mesh(mesh_section.data, mesh_section.fsdp, mesh_section.tensor, devices=devices)
    method = methods.describe(config)
    trainer = build.make_trainer(config, model_config, mesh, method)
    mini = config.mini_batches
    rows = round_up(config.tasks_per_step * config.num_generations, mini * config.micro_batches * trainer.data_parallel)
    seq = round_up(config.max_prompt_len + build.guidance_budget(config, method) + config.max_new_tokens, 8)
    update_rows = rows // mini

    def spec(dtype, *shape):
        return jax.ShapeDtypeStruct(shape, dtype, sharding=trainer.batch_sharding)

    batch = TrainBatch(spec(jnp.int32, update_rows, seq), spec(jnp.bool_, update_rows, seq),
                       spec(jnp.int32, update_rows, seq), spec(jnp.bool_, update_rows, seq),
                       spec(jnp.float32, update_rows, seq), spec(jnp.float32, update_rows),
                       spec(jnp.float32, update_rows), spec(jnp.float32, update_rows, seq) if mini > 1 else None)
    teacher_fwd = 0.0
    if issubclass(part_class(method.scheme), CoCAScheme):  # the step carries the teacher's top-k; its forward first
        coca = methods.settings(config, "coca")
        batch = batch._replace(distill_ids=spec(jnp.int32, update_rows, seq, coca.topk),
                               distill_logp=spec(jnp.float32, update_rows, seq, coca.topk),
                               distill_mask=spec(jnp.bool_, update_rows, seq))
        per = coca.groups[0] if coca.distill_on == "all_normal" else 1
        teacher_rows = round_up(config.tasks_per_step * per, trainer.data_parallel * config.micro_batches)
        teacher_seq = round_up(seq - config.max_new_tokens + 2 * config.max_new_tokens, 8)
        teacher_fwd = forward_flops(model_config, teacher_rows, teacher_seq)
    state = trainer.abstract_state()
    frozen = trainer.abstract_params() if trainer.lora is not None else None  # LoRA: the base, also the reference
    ref = trainer.abstract_params() if section(config, "loss").kl_coef and frozen is None else None
    compiled = trainer._step.lower(state, batch, ref, frozen).compile()
    mem = compiled.memory_analysis()

    def per_device(tree) -> int:
        total = 0
        for leaf in jax.tree.leaves(tree):
            shard = leaf.sharding.shard_shape(leaf.shape)
            n = 1
            for d in shard:
                n *= d
            total += n * jnp.dtype(leaf.dtype).itemsize
        return total

    params_b, opt_b = per_device((state.params, frozen)), per_device(state.opt_state)
    ref_b = per_device(ref) if ref is not None else 0
    batch_b = per_device([x for x in batch if x is not None])
    temp_b = int(mem.temp_size_in_bytes) if mem is not None else 0
    fwd = forward_flops(model_config, rows, seq)
    # one forward + backward (2x) per update row; the reference forward (KL); the old-policy forward (mini-batches)
    flops = 3 * fwd * (1 + (1 / 3 if model_config.remat else 0)) + (fwd if section(config, "loss").kl_coef else 0) + \
        (fwd if mini > 1 else 0) + teacher_fwd
    n = len(devices)
    return {"devices": n, "mesh": dict(mesh.shape), "model": config.model_name,
            "params": sum(x.size for x in jax.tree.leaves(frozen or state.params)), "rows": rows, "seq": seq,
            "updates": mini, "micro_batches": config.micro_batches, "compute_dtype": model_config.compute_dtype,
            "bytes": {"params": params_b, "optimizer": opt_b, "reference": ref_b, "batch": batch_b,
                      "temporaries": temp_b, "total": params_b + opt_b + ref_b + batch_b + temp_b},
            "flops_per_step": flops, "flops_per_device": flops / n}


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    p = plan(FLAGS.config)
    gb = 1e9
    b = p["bytes"]
    seconds = p["flops_per_device"] / (FLAGS.peak_tflops * 1e12 * FLAGS.mfu)
    rows = [("model", f"{p['model']} ({p['params'] / 1e9:.2f} B params, compute {p['compute_dtype']})"),
            ("mesh", f"{p['mesh']} over {p['devices']} devices"),
            ("train batch", f"{p['rows']} rows x {p['seq']} tokens, {p['updates']} update(s), "
                            f"{p['micro_batches']} micro-batch(es) each"),
            ("params (float32)", f"{b['params'] / gb:.2f} GB / device"),
            ("optimiser state", f"{b['optimizer'] / gb:.2f} GB / device"),
            ("reference params", f"{b['reference'] / gb:.2f} GB / device"),
            ("batch", f"{b['batch'] / gb:.3f} GB / device"),
            ("XLA temporaries", f"{b['temporaries'] / gb:.2f} GB / device"),
            ("total", f"{b['total'] / gb:.2f} GB of {FLAGS.device_memory_gb:g} GB / device "
                      f"({'fits' if b['total'] <= FLAGS.device_memory_gb * gb else 'DOES NOT FIT'})"),
            ("FLOPs per step", f"{p['flops_per_step'] / 1e12:.4g} TFLOP ({p['flops_per_device'] / 1e12:.4g} "
                               f"TFLOP / device)"),
            ("train time per step", f"{seconds:.3g} s at {FLAGS.peak_tflops:g} TFLOP/s x MFU {FLAGS.mfu:g} "
                                    f"(training only; rollouts and judging come on top)")]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")


if __name__ == "__main__":
    cli.run(main)
