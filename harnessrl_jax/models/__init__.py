"""Model families as pure functions of a params pytree, their loaders, exporter, tokenizer and sharding rules."""

from __future__ import annotations

import os

from harnessrl_jax.models.llama import KVCache, ModelConfig, Params, forward, forward_cached, init_params
from harnessrl_jax.models.presets import PRESETS, preset_config, weights_path


def load_pretrained(name_or_path: str, **config_overrides):
    """(model_config, params, tokenizer) from a preset name, a .gguf file or a local HF directory.

    The tokenizer is None for an HF directory without tokenizer files. Nothing is ever downloaded.
    """
    from harnessrl_jax.models import loading, tokenizer as tok

    path = weights_path(name_or_path) if name_or_path in PRESETS else name_or_path
    if os.path.isdir(path):
        config, params = loading.load_hf_dir(path, **config_overrides)
        return config, params, tok.load_tokenizer(path)
    if path.endswith(".gguf"):
        config, params = loading.load_gguf(path, **config_overrides)
        return config, params, tok.Tokenizer.from_gguf(path)
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"model '{name_or_path}' not found: expected a preset name ({', '.join(sorted(PRESETS))}), "
            "a .gguf file or a local HF directory"
        )
    raise ValueError(f"{path}: not a .gguf file or an HF model directory")


__all__ = [
    "KVCache", "ModelConfig", "Params", "PRESETS", "forward", "forward_cached", "init_params", "load_pretrained",
    "preset_config",
]
