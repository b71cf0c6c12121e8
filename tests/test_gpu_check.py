"""launch/gpu_check.py at tiny shapes on the CPU: every part runs through the code the GPU run takes (the HarnessRL
step through train.py, the export read back by transformers, the sharded train step, the JAX engine) and reports;
the layer fit and the chip peaks the GPU run relies on, against figures computed here."""

import importlib.util
import os
import sys
import types

import pytest

from harnessrl_jax.models import preset_config

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("gpu_check", os.path.join(REPO, "launch", "gpu_check.py"))
gpu_check = sys.modules["gpu_check"] = importlib.util.module_from_spec(_spec)  # dataclasses look it up there
_spec.loader.exec_module(gpu_check)  # defines no flags: only running the script does


def test_every_part_runs_at_tiny_shapes_and_reports_one_table():
    report = gpu_check.run_checks(gpu_check.Options(tiny=True, peak_tflops=2.0))
    parts = report["parts"]
    assert {name: row["status"] for name, row in parts.items()} == dict.fromkeys(gpu_check.PARTS, "ok"), parts
    forward = parts["forward"]  # bfloat16 on both sides, from the same exported weights
    assert forward["rel_l2"] < 0.02 and forward["top1_agree"] > 0.95 and forward["transformers_device"] == "cpu"
    train = parts["train_step"]
    assert train["layers"] == "2/2" and train["tokens"] == "2x64" and train["loss_finite"]
    assert train["mfu"] == pytest.approx(train["tflops_per_s"] / 2.0)  # against --peak_tflops=2
    decode = parts["decode"]  # 4 prompts x 8 new tokens (a row that samples the stop id ends early)
    assert 0 < decode["tokens_per_s"] * decode["call_s"] <= 32
    harnessrl = parts["harnessrl"]
    assert harnessrl["step_s"] > 0 and {"rollout_s", "judge_s", "evolver_s", "train_s"} <= set(harnessrl)
    text = gpu_check.table(report)
    assert all(f"\n{name} " in text for name in gpu_check.PARTS) and "rel_l2" in text and "tokens_per_s" in text


def test_a_part_without_time_left_is_skipped_and_says_why():
    report = gpu_check.run_checks(gpu_check.Options(parts=("decode",), tiny=True, budget_s=1.0))
    assert report["parts"]["decode"]["status"] == "skipped" and "needed" in report["parts"]["decode"]["reason"]


def test_the_train_step_keeps_the_layers_whose_state_fits():
    config = preset_config("qwen3.5-4b")
    assert gpu_check.train_layers(config, 141e9) == 32  # an H200: the whole 4B (20 bytes a parameter, ~84 GB)
    assert gpu_check.train_layers(config, None) == 32  # no memory figure (a CPU): all of them
    layers = gpu_check.train_layers(config, 80e9)  # an H100: fewer, whole hybrid blocks of 4
    assert layers % 4 == 0 and 4 <= layers < 32
    state = lambda n: 20 * gpu_check.with_layers(config, n).num_params()  # noqa: E731
    assert state(layers) <= 0.85 * 80e9 < state(layers + 4)


@pytest.mark.parametrize("kind, tflops", [("NVIDIA H100 80GB HBM3", 989.0), ("NVIDIA H100 PCIe", 756.0),
                                          ("NVIDIA H200", 989.0), ("NVIDIA A100-SXM4-80GB", 312.0),
                                          ("NVIDIA L4", 121.0), ("cpu", None)])
def test_the_bf16_peak_comes_from_the_device_kind_or_the_flag(kind, tflops):
    device = types.SimpleNamespace(device_kind=kind)
    assert gpu_check.peak_bf16(device) == (None if tflops is None else tflops * 1e12)
    assert gpu_check.peak_bf16(device, peak_tflops=3.0) == 3e12
