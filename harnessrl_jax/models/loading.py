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

from harnessrl_jax.models import qwen3_5
from harnessrl_jax.models.gguf_file import GGUFFile, read_gguf
from harnessrl_jax.models.llama import ModelConfig, Params, param_shapes

# GGUF architecture -> (HF model_type, whether llama.cpp permuted Q/K rows).
_GGUF_ARCHS = {"llama": ("llama", True), "qwen2": ("qwen2", False), "qwen3": ("qwen3", False)}
_HF_TYPES = ("llama", "mistral", "qwen2", "qwen3")
# Qwen3.5: the multimodal checkpoint (text decoder under model.language_model.*) and the text-only one.
QWEN3_5_TYPES = ("qwen3_5", "qwen3_5_text")

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
    params["layers"] = {}
    for name, shape in shapes["layers"].items():
        stacked = np.empty(shape, np.float32)  # each layer copied (transposed) straight into place
        for i in range(config.num_layers):
            stacked[i] = fix(get((i, name)), shape[1:], f"layer {i} {name}")
        params["layers"][name] = stacked
    return jax.tree.map(lambda a: jnp.asarray(a, config.param_dtype), params)


# ----------------------------------------------------------------------------------------------- GGUF


def gguf_field(gguf_file: GGUFFile, key: str, default: Any = None) -> Any:
    """One metadata value of a GGUF file, or `default` when absent."""
    return gguf_file.get(key, default)


def gguf_model_config(gguf_file: GGUFFile, path: str, **overrides) -> ModelConfig:
    """ModelConfig from a GGUF file's metadata; unknown architectures are a ValueError naming the file."""
    arch = gguf_field(gguf_file, "general.architecture")
    if arch not in _GGUF_ARCHS:
        raise ValueError(
            f"{path}: GGUF architecture '{arch}' is not supported (supported: {', '.join(sorted(_GGUF_ARCHS))})"
        )

    def need(key):
        value = gguf_field(gguf_file, f"{arch}.{key}")
        if value is None:
            raise ValueError(f"{path}: GGUF metadata '{arch}.{key}' is missing")
        return value

    tensor_names = set(gguf_file.tensors)
    hidden, heads = int(need("embedding_length")), int(need("attention.head_count"))
    tokens = gguf_field(gguf_file, "tokenizer.ggml.tokens")
    vocab = gguf_field(gguf_file, f"{arch}.vocab_size") or (len(tokens) if tokens is not None else None)
    if vocab is None:
        if "token_embd.weight" not in tensor_names:
            raise ValueError(f"{path}: no vocabulary size (no {arch}.vocab_size, token list or 'token_embd.weight')")
        vocab = gguf_file.tensors["token_embd.weight"].shape[1]
    kw = dict(
        vocab_size=int(vocab),
        hidden_size=hidden,
        intermediate_size=int(need("feed_forward_length")),
        num_layers=int(need("block_count")),
        num_heads=heads,
        num_kv_heads=int(gguf_field(gguf_file, f"{arch}.attention.head_count_kv", heads)),
        head_dim=int(gguf_field(gguf_file, f"{arch}.attention.key_length", hidden // heads)),
        rope_theta=float(gguf_field(gguf_file, f"{arch}.rope.freq_base", 10000.0)),
        rms_norm_eps=float(gguf_field(gguf_file, f"{arch}.attention.layer_norm_rms_epsilon", 1e-5)),
        max_position_embeddings=int(gguf_field(gguf_file, f"{arch}.context_length", 2048)),
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


def load_gguf(path_or_file: str | GGUFFile, **overrides) -> tuple[ModelConfig, Params]:
    """Config and float params from a GGUF file (any quantisation the gguf package can dequantize), given its path
    or the `read_gguf` of it (which the tokenizer can share)."""
    gguf_file = path_or_file if isinstance(path_or_file, GGUFFile) else read_gguf(path_or_file)
    path = gguf_file.path
    config = gguf_model_config(gguf_file, path, **overrides)
    permuted = _GGUF_ARCHS[gguf_field(gguf_file, "general.architecture")][1]

    def get(key):
        name = _TOP_NAMES[key][0] if isinstance(key, str) else f"blk.{key[0]}.{_LAYER_NAMES[key[1]][0]}"
        if name not in gguf_file.tensors:
            raise ValueError(f"{path}: tensor '{name}' is missing")
        w = gguf_file.tensors[name].dequantize()
        if permuted and not isinstance(key, str) and key[1] in ("wq", "wk"):
            w = _unpermute_qk(w, config.num_heads if key[1] == "wq" else config.num_kv_heads)
        return w

    return config, _assemble(config, get, path)


# ------------------------------------------------------------------------------------- HF safetensors


def hf_model_config(hf: dict, source: str, **overrides) -> ModelConfig | qwen3_5.Qwen3_5Config:
    """The model config of an HF config.json dict: llama, mistral, qwen2, qwen3, or Qwen3.5 (qwen3_5, qwen3_5_text)."""
    model_type = hf.get("model_type")
    if model_type in QWEN3_5_TYPES:
        return qwen3_5_model_config(hf, source, **overrides)
    if model_type not in _HF_TYPES:
        raise ValueError(f"{source}: model_type '{model_type}' is not supported (supported: "
                         f"{', '.join(_HF_TYPES + QWEN3_5_TYPES)})")
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


def qwen3_5_model_config(hf: dict, source: str, **overrides) -> qwen3_5.Qwen3_5Config:
    """Qwen3_5Config from a qwen3_5 (multimodal: the decoder's settings in `text_config`) or qwen3_5_text
    config.json; `model_type` records which, so the exporter writes the same layout back."""
    multimodal = hf.get("model_type") == "qwen3_5"
    text = hf.get("text_config") if multimodal else hf
    if not isinstance(text, dict):
        raise ValueError(f"{source}: a qwen3_5 config needs a 'text_config' object")
    rope = dict(text.get("rope_parameters") or {})
    rope_type = rope.get("rope_type", "default")
    if rope_type != "default":
        raise ValueError(f"{source}: rope type '{rope_type}' is not supported for Qwen3.5 (expected 'default')")
    if text.get("attention_bias"):
        raise ValueError(f"{source}: attention_bias=true is not supported for Qwen3.5")
    try:
        heads = text["num_attention_heads"]
        # The multimodal checkpoint says whether lm_head is tied at its top level.
        tied = hf.get("tie_word_embeddings", text.get("tie_word_embeddings", False)) if multimodal else \
            text.get("tie_word_embeddings", False)
        kw = dict(
            vocab_size=text["vocab_size"], hidden_size=text["hidden_size"],
            intermediate_size=text["intermediate_size"], num_layers=text["num_hidden_layers"],
            num_heads=heads, num_kv_heads=text.get("num_key_value_heads") or heads,
            head_dim=text.get("head_dim") or text["hidden_size"] // heads,
            linear_num_key_heads=text["linear_num_key_heads"],
            linear_num_value_heads=text["linear_num_value_heads"],
            linear_key_head_dim=text["linear_key_head_dim"], linear_value_head_dim=text["linear_value_head_dim"],
            linear_conv_kernel=text.get("linear_conv_kernel_dim", 4),
            layer_types=tuple(text.get("layer_types") or ()),
            full_attention_interval=text.get("full_attention_interval", 4),
            rope_theta=float(rope.get("rope_theta", text.get("rope_theta", 10_000_000.0))),
            partial_rotary_factor=float(rope.get("partial_rotary_factor",
                                                 text.get("partial_rotary_factor", 0.25))),
            rms_norm_eps=float(text.get("rms_norm_eps", 1e-6)),
            max_position_embeddings=text.get("max_position_embeddings", 262144),
            tie_embeddings=bool(tied),
            model_type="qwen3_5" if multimodal else "qwen3_5_text",
        )
    except KeyError as e:
        raise ValueError(f"{source}: field {e.args[0]!r} is missing{' from text_config' if multimodal else ''}") \
            from None
    kw.update(overrides)
    try:
        return qwen3_5.Qwen3_5Config(**kw)
    except ValueError as e:
        raise ValueError(f"{source}: {e}") from None


# Qwen3.5 per-layer weights: (our group, our name) -> HF name after `<prefix>layers.{i}.`
QWEN3_5_NAMES = {
    ("layers", "attn_norm"): "input_layernorm.weight",
    ("layers", "mlp_norm"): "post_attention_layernorm.weight",
    ("layers", "w_gate"): "mlp.gate_proj.weight",
    ("layers", "w_up"): "mlp.up_proj.weight",
    ("layers", "w_down"): "mlp.down_proj.weight",
    ("linear_attn", "w_qkv"): "linear_attn.in_proj_qkv.weight",
    ("linear_attn", "w_z"): "linear_attn.in_proj_z.weight",
    ("linear_attn", "w_b"): "linear_attn.in_proj_b.weight",
    ("linear_attn", "w_a"): "linear_attn.in_proj_a.weight",
    ("linear_attn", "conv"): "linear_attn.conv1d.weight",
    ("linear_attn", "A_log"): "linear_attn.A_log",
    ("linear_attn", "dt_bias"): "linear_attn.dt_bias",
    ("linear_attn", "gdn_norm"): "linear_attn.norm.weight",
    ("linear_attn", "w_out"): "linear_attn.out_proj.weight",
    ("full_attn", "wq"): "self_attn.q_proj.weight",
    ("full_attn", "wk"): "self_attn.k_proj.weight",
    ("full_attn", "wv"): "self_attn.v_proj.weight",
    ("full_attn", "wo"): "self_attn.o_proj.weight",
    ("full_attn", "q_norm"): "self_attn.q_norm.weight",
    ("full_attn", "k_norm"): "self_attn.k_norm.weight",
}


def qwen3_5_prefix(config: qwen3_5.Qwen3_5Config) -> str:
    """Where the decoder's tensors sit: under model.language_model. in the multimodal layout, else model."""
    return "model.language_model." if config.model_type == "qwen3_5" else "model."


def qwen3_5_hf_names(config: qwen3_5.Qwen3_5Config) -> dict[tuple[str, ...], list[str]]:
    """Our leaf path -> the HF tensor names of its entries (one per stacked layer; one name for top-level leaves)."""
    prefix = qwen3_5_prefix(config)
    layers = {"layers": range(config.num_layers),
              "linear_attn": [i for i, t in enumerate(config.layer_types) if t == qwen3_5.LINEAR],
              "full_attn": [i for i, t in enumerate(config.layer_types) if t == qwen3_5.FULL]}
    names = {("embed",): [prefix + "embed_tokens.weight"], ("final_norm",): [prefix + "norm.weight"]}
    if not config.tie_embeddings:
        names[("lm_head",)] = ["lm_head.weight"]
    shapes = qwen3_5.param_shapes(config)
    for (group, leaf), hf_name in QWEN3_5_NAMES.items():
        if group in shapes:
            names[(group, leaf)] = [f"{prefix}layers.{i}.{hf_name}" for i in layers[group]]
    return names


def _qwen3_5_from_hf(leaf: str, arr: np.ndarray) -> np.ndarray:
    if leaf == "conv":  # torch Conv1d [C, 1, K] -> taps [K, C]
        return arr.reshape(arr.shape[0], arr.shape[-1]).T
    return arr.T if arr.ndim == 2 and leaf != "embed" else arr


def _qwen3_5_to_hf(leaf: str, arr: np.ndarray) -> np.ndarray:
    if leaf == "conv":
        return arr.T[:, None, :]
    return arr.T if arr.ndim == 2 and leaf != "embed" else arr


def _assemble_qwen3_5(config: qwen3_5.Qwen3_5Config, read, source: str) -> Params:
    """The params tree from `read(hf_name) -> float32 array`."""
    shapes = qwen3_5.param_shapes(config)
    params: Params = {}
    for path, hf_names in qwen3_5_hf_names(config).items():
        want = shapes[path[0]] if len(path) == 1 else shapes[path[0]][path[1]]
        parts = [_qwen3_5_from_hf(path[-1], read(name)) for name in hf_names]
        arr = parts[0] if len(path) == 1 else np.stack(parts)
        if arr.shape != tuple(want):
            raise ValueError(f"{source}: tensor '{hf_names[0]}' gives '{'/'.join(path)}' of shape {arr.shape}, "
                             f"expected {tuple(want)}")
        if len(path) == 1:
            params[path[0]] = arr
        else:
            params.setdefault(path[0], {})[path[1]] = arr
    return jax.tree.map(lambda a: jnp.asarray(a, config.param_dtype), params)


def read_hf_config(path: str) -> dict:
    """The config.json of an HF model directory as a dict; a clear error when it is missing or not JSON."""
    config_path = os.path.join(path, "config.json")
    if not os.path.isfile(config_path):
        raise FileNotFoundError(f"{path}: no config.json (expected an HF model directory)")
    with open(config_path) as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{config_path}: invalid JSON ({e})") from e


def safetensors_index(path: str) -> dict[str, str]:
    """Tensor name -> the *.safetensors file in `path` that holds it."""
    from safetensors import safe_open

    files = sorted(n for n in os.listdir(path) if n.endswith(".safetensors"))
    if not files:
        raise FileNotFoundError(f"{path}: no *.safetensors weight files")
    where = {}
    for name in files:
        with safe_open(os.path.join(path, name), framework="numpy") as f:
            where.update({key: name for key in f.keys()})
    return where


def load_hf_dir(path: str, **overrides) -> tuple[ModelConfig | qwen3_5.Qwen3_5Config, Params]:
    """Config and params from a directory holding config.json and *.safetensors (as save_pretrained writes)."""
    from safetensors import safe_open

    config = hf_model_config(read_hf_config(path), os.path.join(path, "config.json"), **overrides)
    where = safetensors_index(path)

    def read(name):
        if name not in where:
            raise ValueError(f"{path}: tensor '{name}' is missing from the safetensors files")
        with safe_open(os.path.join(path, where[name]), framework="numpy") as f:
            return np.asarray(f.get_tensor(name), np.float32)

    if isinstance(config, qwen3_5.Qwen3_5Config):
        return config, _assemble_qwen3_5(config, read, path)

    def get(key):
        return read(_TOP_NAMES[key][1] if isinstance(key, str) else
                    f"model.layers.{key[0]}.{_LAYER_NAMES[key[1]][1]}")

    return config, _assemble(config, get, path)


def hf_tensors(config: ModelConfig | qwen3_5.Qwen3_5Config, params: Params) -> dict[str, np.ndarray]:
    """The params under HF tensor names in the torch [out, in] layout (for export)."""
    return dict(item for leaf in hf_leaves(config) for item in hf_leaf_tensors(config, leaf, leaf_of(params, leaf)))


def hf_leaves(config) -> list[tuple[str, ...]]:
    """The paths of the params tree in a fixed order (the exporter assigns them to processes by it)."""
    if isinstance(config, qwen3_5.Qwen3_5Config):
        return list(qwen3_5_hf_names(config))
    shapes = param_shapes(config)
    return [(k,) for k in shapes if k != "layers"] + [("layers", k) for k in shapes["layers"]]


def leaf_of(params: Params, path: tuple[str, ...]):
    """params[path[0]][path[1]]..."""
    for key in path:
        params = params[key]
    return params


def hf_leaf_tensors(config, path: tuple[str, ...], arr) -> list[tuple[str, np.ndarray]]:
    """(HF name, array in the torch layout) for every tensor that one leaf of our params holds."""
    arr = np.asarray(arr)
    if isinstance(config, qwen3_5.Qwen3_5Config):
        names = qwen3_5_hf_names(config)[path]
        if len(path) == 1:
            return [(names[0], _qwen3_5_to_hf(path[0], arr))]
        return [(name, _qwen3_5_to_hf(path[-1], arr[i])) for i, name in enumerate(names)]
    if len(path) == 1:
        return [(_TOP_NAMES[path[0]][1], arr.T if path[0] == "lm_head" else arr)]
    return [(f"model.layers.{i}.{_LAYER_NAMES[path[1]][1]}", arr[i].T if arr[i].ndim == 2 else arr[i])
            for i in range(config.num_layers)]
