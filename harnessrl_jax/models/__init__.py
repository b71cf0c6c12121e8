"""Model families as pure functions of a params pytree and as Flax NNX modules, their loaders, exporter, tokenizer
and sharding rules.

A family is looked up from the type of its config (`family(config)`): llama.py (Llama, SmolLM2, Qwen2/3 dense,
`ModelConfig`), qwen3_5.py (the Qwen3.5 hybrid, `Qwen3_5Config`) and any NNX module (`ModuleConfig`, from
modules.as_policy). The functions below dispatch on it, so the trainer and the sampler run any family without
naming one.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable

from flax import nnx

from harnessrl_jax.models import llama, modules, qwen3_5
from harnessrl_jax.models.llama import KVCache, ModelConfig, Params
from harnessrl_jax.models.modules import Llama, ModuleConfig, Qwen3_5, TokenCache, as_policy
from harnessrl_jax.models.presets import PRESETS, RANDOM_PRESETS, preset_config, weights_path
from harnessrl_jax.models.qwen3_5 import HybridCache, Qwen3_5Config


@dataclasses.dataclass(frozen=True)
class Family:
    """What the trainer, the sampler and the planner need of one model family."""

    name: str
    forward: Callable  # (config, params, tokens, attention_mask=None, positions=None, constrain=...) -> logits
    # (config, params, tokens, positions, token_valid, cache, index) -> (logits [B, V] at the last position, cache)
    forward_cached: Callable
    init_cache: Callable  # (config, batch, length) -> an empty cache with a .repeat(n) method
    param_shapes: Callable  # config -> the params pytree as tuples of ints
    init_params: Callable  # (config, rng, std) -> random params
    forward_flops: Callable  # (config, batch, seq) -> matmul FLOPs of one forward
    # (config, params, tokens, attention_mask=None, positions=None, constrain=...) -> (final-normed hidden states,
    # output head: [V, D] when config.tie_embeddings, else [D, V], or None: the first is already the logits), what
    # the trainer's chunked head takes
    features: Callable
    module: Callable  # (config, params) -> the policy as an NNX module over those params (arrays or abstract)
    # (params, cache) -> the same in the layout forward_cached decodes fastest, taken once before a decode loop
    decode_layout: Callable = lambda params, cache: (params, cache)


FAMILIES: dict[type, Family] = {
    ModelConfig: Family("llama", llama.forward, llama.forward_cached, KVCache.empty, llama.param_shapes,
                        llama.init_params, llama.forward_flops, llama.features, Llama, llama.decode_layout),
    Qwen3_5Config: Family("qwen3_5", qwen3_5.forward, qwen3_5.forward_cached, HybridCache.empty,
                          qwen3_5.param_shapes, qwen3_5.init_params, qwen3_5.forward_flops, qwen3_5.features,
                          Qwen3_5),
    ModuleConfig: Family("module", modules.module_forward, modules.module_forward_cached, TokenCache.empty,
                         modules.module_param_shapes, modules.module_init_params, modules.module_flops,
                         modules.module_features, lambda config, params: nnx.merge(config.graphdef, params)),
}


def family(config) -> Family:
    """The family of a model config."""
    try:
        return FAMILIES[type(config)]
    except KeyError:
        raise TypeError(f"no model family for config type {type(config).__name__} "
                        f"(known: {', '.join(t.__name__ for t in FAMILIES)})") from None


def forward(config, params: Params, tokens, *args, **kwargs):
    """Logits [batch, seq, vocab] in float32 for tokens [batch, seq], for any family (see llama.forward)."""
    return family(config).forward(config, params, tokens, *args, **kwargs)


def features(config, params: Params, tokens, *args, **kwargs):
    """(final-normed hidden states [batch, seq, D], output head) for any family (see llama.features)."""
    return family(config).features(config, params, tokens, *args, **kwargs)


def forward_cached(config, params: Params, tokens, positions, token_valid, cache, index):
    """One cached step of any family (see llama.forward_cached): (last position's logits [B, V], new cache)."""
    return family(config).forward_cached(config, params, tokens, positions, token_valid, cache, index)


def decode_layout(config, params: Params, cache):
    """(params, cache) in the layout forward_cached decodes fastest (see llama.decode_layout); a sampler takes it
    once, before its decode loop."""
    return family(config).decode_layout(params, cache)


def init_cache(config, batch: int, length: int):
    """An empty decoding cache of `config`'s family for `batch` rows of `length` slots."""
    return family(config).init_cache(config, batch, length)


def param_shapes(config) -> Params:
    """The params pytree of `config` as tuples of ints."""
    return family(config).param_shapes(config)


def init_params(config, rng, std: float = 0.02) -> Params:
    """Random params of `config`'s family."""
    return family(config).init_params(config, rng, std)


def forward_flops(config, batch: int, seq: int) -> float:
    """Matmul FLOPs of one causal forward over [batch, seq] tokens."""
    return family(config).forward_flops(config, batch, seq)


def nnx_module(config, params: Params) -> nnx.Module:
    """The policy of `config` as an NNX module holding `params` (nnx.split gives them back as this dict)."""
    return family(config).module(config, params)


def load_pretrained(name_or_path: str, *, timings: dict[str, float] | None = None,
                    **config_overrides) -> tuple[Any, Params, Any]:
    """(model_config, params, tokenizer) from a preset name, a .gguf file or a local HF directory.

    An HF directory's family follows its config.json's model_type; its tokenizer is None when the directory holds
    no tokenizer files. A random preset (`qwen3.5-tiny`) gives seeded random params and its bundled tokenizer.
    Nothing is ever downloaded. `timings`, when given, receives the wall seconds of `weights_s` (reading the file
    and building the params) and `tokenizer_s`.
    """
    import time

    from harnessrl_jax.models import loading, tokenizer as tok

    timings = {} if timings is None else timings
    clock = time.perf_counter()

    def lap(key):
        nonlocal clock
        timings[key] = timings.get(key, 0.0) + time.perf_counter() - clock
        clock = time.perf_counter()

    if name_or_path in RANDOM_PRESETS:
        import jax

        config = preset_config(name_or_path).replace(**config_overrides)
        tokenizer = tok.Tokenizer.from_gguf(weights_path(RANDOM_PRESETS[name_or_path]))  # the tokenizer only
        lap("tokenizer_s")
        if tokenizer.vocab_size > config.vocab_size:
            raise ValueError(f"preset {name_or_path!r}: tokenizer has {tokenizer.vocab_size} ids, model "
                             f"{config.vocab_size}")
        params = init_params(config, jax.random.PRNGKey(0))
        lap("weights_s")
        return config, params, tokenizer
    path = weights_path(name_or_path) if name_or_path in PRESETS else name_or_path
    if os.path.isdir(path):
        config, params = loading.load_hf_dir(path, **config_overrides)
        lap("weights_s")
        tokenizer = tok.load_tokenizer(path)
        lap("tokenizer_s")
        return config, params, tokenizer
    if path.endswith(".gguf"):
        gguf_file = loading.read_gguf(path)  # one read of the file serves the weights and the tokenizer
        config, params = loading.load_gguf(gguf_file, **config_overrides)
        lap("weights_s")
        tokenizer = tok.Tokenizer.from_gguf(gguf_file)
        lap("tokenizer_s")
        return config, params, tokenizer
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"model '{name_or_path}' not found: expected a preset name ({', '.join(sorted(PRESETS))}), "
            "a .gguf file or a local HF directory"
        )
    raise ValueError(f"{path}: not a .gguf file or an HF model directory")


__all__ = [
    "FAMILIES", "Family", "HybridCache", "KVCache", "Llama", "ModelConfig", "ModuleConfig", "Params", "PRESETS",
    "Qwen3_5", "Qwen3_5Config", "TokenCache", "as_policy", "decode_layout", "family", "features", "forward",
    "forward_cached", "forward_flops", "init_cache", "init_params", "load_pretrained", "nnx_module", "param_shapes",
    "preset_config",
]
