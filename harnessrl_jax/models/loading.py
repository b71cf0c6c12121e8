"""Load decoder weights from GGUF (llama.cpp) files and HF safetensors directories into the params pytree.

GGUF tensors are dequantized with the `gguf` package. llama.cpp's converter permutes the Q and K rows of
llama-architecture models so that its interleaved RoPE works; we undo that permutation so the rotate-half RoPE
of `llama.py` (the HF convention) is right. Other architectures (qwen2, qwen3) are stored unpermuted.
"""

from __future__ import annotations

import json
import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from harnessrl_jax.models.llama import ModelConfig, Params, param_shapes

# GGUF architecture -> (HF model_type, whether llama.cpp permuted Q/K rows).
_GGUF_ARCHS = {"llama": ("llama", True), "qwen2": ("qwen2", False), "qwen3": ("qwen3", False)}
_HF_TYPES = ("llama", "mistral", "qwen2", "qwen3")

# Per-layer weights: our name -> (GGUF name, HF name). Matrices are transposed on the way in.
_LAYER_NAMES = {
    "attn_norm": ("attn_norm.weight", "input_layernorm.weight"),
    "wq": ("attn_q.weight", "self_attn.q_proj.weight"),
    "wk": ("attn_k.weight", "self_attn.k_proj.weight"),
    "wv": ("attn_v.weight", "self_attn.v_proj.weight"),
    "wo": ("attn_output.weight", "self_attn.o_proj.weight"),
    "bq": ("attn_q.bias", "self_attn.q_proj.bias"),
    "bk": ("attn_k.bias", "self_attn.k_proj.bias"),
    "bv": ("attn_v.bias", "self_attn.v_proj.bias"),
    "q_norm": ("attn_q_norm.weight", "self_attn.q_norm.weight"),
    "k_norm": ("attn_k_norm.weight", "self_attn.k_norm.weight"),
    "mlp_norm": ("ffn_norm.weight", "post_attention_layernorm.weight"),
    "w_gate": ("ffn_gate.weight", "mlp.gate_proj.weight"),
    "w_up": ("ffn_up.weight", "mlp.up_proj.weight"),
    "w_down": ("ffn_down.weight", "mlp.down_proj.weight"),
}
_TOP_NAMES = {
    "embed": ("token_embd.weight", "model.embed_tokens.weight"),
    "final_norm": ("output_norm.weight", "model.norm.weight"),
    "lm_head": ("output.weight", "lm_head.weight"),
}


def _assemble(config: ModelConfig, get, source: str) -> Params:
    """Build the params tree from `get(top_name | (layer_index, layer_name)) -> [out, in] float array`."""
    shapes = param_shapes(config)

    def fix(arr, want, what):
        arr = np.asarray(arr, dtype=np.float32)
        if arr.ndim == 2 and what != "embed":
            arr = arr.T  # linear layers: torch/GGUF [out, in] -> ours [in, out]; embeddings are [V, D] in both
        if arr.shape != tuple(want):
            raise ValueError(f"{source}: tensor '{what}' has shape {arr.shape}, expected {tuple(want)}")
        return arr

    params: Params = {}
    for name, shape in shapes.items():
        if name != "layers":
            params[name] = fix(get(name), shape, name)
    params["layers"] = {
        name: np.stack([fix(get((i, name)), shape[1:], f"layer {i} {name}") for i in range(config.num_layers)])
        for name, shape in shapes["layers"].items()
    }
    return jax.tree.map(lambda a: jnp.asarray(a, config.param_dtype), params)


# ----------------------------------------------------------------------------------------------- GGUF


def _gguf_reader(path: str):
    import gguf

    if not os.path.isfile(path):
        raise FileNotFoundError(f"GGUF model file not found: {path}")
    try:
        return gguf.GGUFReader(path)
    except Exception as e:  # the gguf package raises bare ValueErrors/struct errors on garbage
        raise ValueError(f"{path}: not a readable GGUF file ({e})") from e


def gguf_field(reader, key: str, default: Any = None) -> Any:
    """One metadata value of a GGUF file, or `default` when absent."""
    field = reader.fields.get(key)
    return default if field is None else field.contents()


def gguf_model_config(reader, path: str, **overrides) -> ModelConfig:
    """ModelConfig from a GGUF file's metadata; unknown architectures are a ValueError naming the file."""
    arch = gguf_field(reader, "general.architecture")
    if arch not in _GGUF_ARCHS:
        raise ValueError(
            f"{path}: GGUF architecture '{arch}' is not supported (supported: {', '.join(sorted(_GGUF_ARCHS))})"
        )

    def need(key):
        value = gguf_field(reader, f"{arch}.{key}")
        if value is None:
            raise ValueError(f"{path}: GGUF metadata '{arch}.{key}' is missing")
        return value

    tensor_names = {t.name for t in reader.tensors}
    hidden, heads = int(need("embedding_length")), int(need("attention.head_count"))
    tokens = gguf_field(reader, "tokenizer.ggml.tokens")
    vocab = gguf_field(reader, f"{arch}.vocab_size") or (len(tokens) if tokens is not None else None)
    if vocab is None:
        vocab = next(t.shape[1] for t in reader.tensors if t.name == "token_embd.weight")
    kw = dict(
        vocab_size=int(vocab),
        hidden_size=hidden,
        intermediate_size=int(need("feed_forward_length")),
        num_layers=int(need("block_count")),
        num_heads=heads,
        num_kv_heads=int(gguf_field(reader, f"{arch}.attention.head_count_kv", heads)),
        head_dim=int(gguf_field(reader, f"{arch}.attention.key_length", hidden // heads)),
        rope_theta=float(gguf_field(reader, f"{arch}.rope.freq_base", 10000.0)),
        rms_norm_eps=float(gguf_field(reader, f"{arch}.attention.layer_norm_rms_epsilon", 1e-5)),
        max_position_embeddings=int(gguf_field(reader, f"{arch}.context_length", 2048)),
        tie_embeddings="output.weight" not in tensor_names,
        qk_norm="blk.0.attn_q_norm.weight" in tensor_names,
        attention_bias="blk.0.attn_q.bias" in tensor_names,
        model_type=_GGUF_ARCHS[arch][0],
    )
    kw.update(overrides)
    return ModelConfig(**kw)


def _unpermute_qk(w: np.ndarray, n_head: int) -> np.ndarray:
    """Invert llama.cpp's permutation of Q/K rows (interleaved -> rotate-half RoPE order)."""
    dim = w.shape[0] // n_head // 2
    return w.reshape(n_head, dim, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def load_gguf(path: str, **overrides) -> tuple[ModelConfig, Params]:
    """Config and float params from a GGUF file (any quantisation the gguf package can dequantize)."""
    import gguf

    reader = _gguf_reader(path)
    config = gguf_model_config(reader, path, **overrides)
    permuted = _GGUF_ARCHS[gguf_field(reader, "general.architecture")][1]
    tensors = {t.name: t for t in reader.tensors}

    def get(key):
        name = _TOP_NAMES[key][0] if isinstance(key, str) else f"blk.{key[0]}.{_LAYER_NAMES[key[1]][0]}"
        if name not in tensors:
            raise ValueError(f"{path}: tensor '{name}' is missing")
        t = tensors[name]
        w = gguf.quants.dequantize(t.data, t.tensor_type).reshape([int(d) for d in reversed(t.shape)])
        if permuted and not isinstance(key, str) and key[1] in ("wq", "wk"):
            w = _unpermute_qk(w, config.num_heads if key[1] == "wq" else config.num_kv_heads)
        return w

    return config, _assemble(config, get, path)


# ------------------------------------------------------------------------------------- HF safetensors


def hf_model_config(hf: dict, source: str, **overrides) -> ModelConfig:
    """ModelConfig from an HF config.json dict (llama, mistral, qwen2, qwen3)."""
    model_type = hf.get("model_type")
    if model_type not in _HF_TYPES:
        raise ValueError(f"{source}: model_type '{model_type}' is not supported (supported: {', '.join(_HF_TYPES)})")
    # transformers 5 nests rope settings in `rope_parameters`; older configs use rope_theta / rope_scaling.
    rope = hf.get("rope_parameters") or {}
    scaling = hf.get("rope_scaling") or {}
    rope_type = rope.get("rope_type") or scaling.get("rope_type") or scaling.get("type") or "default"
    if rope_type != "default":
        raise ValueError(f"{source}: rope scaling type '{rope_type}' is not supported")
    heads = hf["num_attention_heads"]
    kw = dict(
        vocab_size=hf["vocab_size"],
        hidden_size=hf["hidden_size"],
        intermediate_size=hf["intermediate_size"],
        num_layers=hf["num_hidden_layers"],
        num_heads=heads,
        num_kv_heads=hf.get("num_key_value_heads") or heads,
        head_dim=hf.get("head_dim") or hf["hidden_size"] // heads,
        rope_theta=float(rope.get("rope_theta", hf.get("rope_theta", 10000.0))),
        rms_norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
        max_position_embeddings=hf.get("max_position_embeddings", 2048),
        tie_embeddings=bool(hf.get("tie_word_embeddings", False)),
        qk_norm=model_type == "qwen3",
        # Qwen2 always has q/k/v biases; the others say so in the config.
        attention_bias=model_type == "qwen2" or bool(hf.get("attention_bias", False)),
        model_type="llama" if model_type == "mistral" else model_type,
    )
    kw.update(overrides)
    return ModelConfig(**kw)


def load_hf_dir(path: str, **overrides) -> tuple[ModelConfig, Params]:
    """Config and params from a directory holding config.json and *.safetensors (as save_pretrained writes)."""
    from safetensors import safe_open

    config_path = os.path.join(path, "config.json")
    if not os.path.isfile(config_path):
        raise FileNotFoundError(f"{path}: no config.json (expected an HF model directory)")
    with open(config_path) as f:
        try:
            hf = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{config_path}: invalid JSON ({e})") from e
    config = hf_model_config(hf, config_path, **overrides)
    files = sorted(n for n in os.listdir(path) if n.endswith(".safetensors"))
    if not files:
        raise FileNotFoundError(f"{path}: no *.safetensors weight files")
    where = {}
    for name in files:
        with safe_open(os.path.join(path, name), framework="flax") as f:
            where.update({key: name for key in f.keys()})

    def get(key):
        name = _TOP_NAMES[key][1] if isinstance(key, str) else f"model.layers.{key[0]}.{_LAYER_NAMES[key[1]][1]}"
        if name not in where:
            raise ValueError(f"{path}: tensor '{name}' is missing from the safetensors files")
        with safe_open(os.path.join(path, where[name]), framework="flax") as f:
            return np.asarray(f.get_tensor(name).astype("float32"))

    return config, _assemble(config, get, path)


def hf_tensors(config: ModelConfig, params: Params) -> dict[str, np.ndarray]:
    """The params under HF tensor names in the torch [out, in] layout (for export)."""
    out = {}
    for name, arr in params.items():
        if name == "layers":
            continue
        out[_TOP_NAMES[name][1]] = np.asarray(arr).T if name == "lm_head" else np.asarray(arr)
    for name, stacked in params["layers"].items():
        stacked = np.asarray(stacked)
        for i in range(config.num_layers):
            w = stacked[i]
            out[f"model.layers.{i}.{_LAYER_NAMES[name][1]}"] = w.T if w.ndim == 2 else w
    return out
