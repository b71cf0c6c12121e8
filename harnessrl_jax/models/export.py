"""Export params to an HF directory (config.json, safetensors, tokenizer files) that transformers and SGLang load
unchanged; this is also how weights are pushed to an SGLang server (/update_weights_from_disk).

A Qwen3.5 multimodal base (`model_type: qwen3_5`, what SGLang serves) needs `base_dir`, the HF snapshot it was loaded
from: its small files are copied, the decoder goes under model.language_model.*, other towers (model.visual.*,
mtp.*) pass through from its shards, and each tensor keeps the base's dtype. Without a base A_log is float32 and the
rest `dtype`. On several hosts each process writes the tensors of its round-robin share of the leaves (every
process joins every leaf's gather) to its own shard, process 0 the index; files are renamed into place.
"""

from __future__ import annotations

import json
import os
import shutil

import jax
import numpy as np

from harnessrl_jax.models import loading
from harnessrl_jax.models.llama import ModelConfig, Params
from harnessrl_jax.models.qwen3_5 import Qwen3_5Config

_ARCHITECTURES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}
# Files of an HF snapshot that are weights (never copied from a base; written here or passed through by tensor).
_WEIGHT_SUFFIXES = (".safetensors", ".safetensors.index.json", ".bin", ".bin.index.json", ".pt", ".pth", ".gguf")


def hf_config(config: ModelConfig | Qwen3_5Config, dtype: str, tokenizer=None) -> dict:
    """The config.json transformers expects for this architecture (Qwen3.5: the text-only layout)."""
    if isinstance(config, Qwen3_5Config):
        hf = qwen3_5_text_config(config, dtype)
        hf["architectures"] = ["Qwen3_5ForCausalLM"]
    else:
        hf = {
            "architectures": [_ARCHITECTURES[config.model_type]],
            "model_type": config.model_type,
            "vocab_size": config.vocab_size,
            "hidden_size": config.hidden_size,
            "intermediate_size": config.intermediate_size,
            "num_hidden_layers": config.num_layers,
            "num_attention_heads": config.num_heads,
            "num_key_value_heads": config.num_kv_heads,
            "head_dim": config.head_dim,
            "hidden_act": "silu",
            "rope_theta": config.rope_theta,
            "rope_scaling": None,
            "rms_norm_eps": config.rms_norm_eps,
            "max_position_embeddings": config.max_position_embeddings,
            "tie_word_embeddings": config.tie_embeddings,
            "attention_bias": config.attention_bias,
            "torch_dtype": dtype,
        }
    if tokenizer is not None:
        hf.update(bos_token_id=tokenizer.bos_id, eos_token_id=tokenizer.eos_id, pad_token_id=tokenizer.pad_id)
    return hf


def qwen3_5_text_config(config: Qwen3_5Config, dtype: str) -> dict:
    """A Qwen3_5TextConfig as config.json holds it."""
    return {
        "model_type": "qwen3_5_text", "vocab_size": config.vocab_size, "hidden_size": config.hidden_size,
        "intermediate_size": config.intermediate_size, "num_hidden_layers": config.num_layers,
        "num_attention_heads": config.num_heads, "num_key_value_heads": config.num_kv_heads,
        "head_dim": config.head_dim, "hidden_act": "silu", "linear_conv_kernel_dim": config.linear_conv_kernel,
        "linear_key_head_dim": config.linear_key_head_dim, "linear_value_head_dim": config.linear_value_head_dim,
        "linear_num_key_heads": config.linear_num_key_heads,
        "linear_num_value_heads": config.linear_num_value_heads, "layer_types": list(config.layer_types),
        "full_attention_interval": config.full_attention_interval,
        "rope_parameters": {"rope_type": "default", "rope_theta": config.rope_theta,
                            "partial_rotary_factor": config.partial_rotary_factor},
        "rms_norm_eps": config.rms_norm_eps, "max_position_embeddings": config.max_position_embeddings,
        "tie_word_embeddings": config.tie_embeddings, "attention_bias": False, "attn_output_gate": True,
        "torch_dtype": dtype,
    }


def _write_json(path: str, content) -> None:
    with open(path + ".tmp", "w") as f:
        json.dump(content, f, indent=2)
    os.replace(path + ".tmp", path)


def _save(tensors: dict[str, np.ndarray], path: str) -> None:
    from safetensors.numpy import save_file

    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, path + ".tmp", metadata={"format": "pt"})
    os.replace(path + ".tmp", path)


def _host(x) -> np.ndarray:
    """A leaf as a full host array; a leaf spread over several processes is all-gathered (every process must call
    this for the same leaves in the same order)."""
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        from jax.experimental import multihost_utils

        x = multihost_utils.process_allgather(x, tiled=True)
    return np.asarray(x)


def _base_tensors(base_dir: str) -> tuple[dict[str, str], dict[str, str]]:
    """(tensor name -> shard file, tensor name -> safetensors dtype string) of a base snapshot."""
    from safetensors import safe_open

    where = loading.safetensors_index(base_dir)
    dtypes = {}
    for name in sorted(set(where.values())):
        with safe_open(os.path.join(base_dir, name), framework="numpy") as f:
            dtypes.update({key: f.get_slice(key).get_dtype() for key in f.keys()})
    return where, dtypes


_SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": jax.numpy.bfloat16, "F64": np.float64}


def export_hf(config: ModelConfig | Qwen3_5Config, params: Params, directory: str, tokenizer=None,
              dtype: str = "float32", *, base_dir: str | None = None) -> str:
    """Write an HF model directory (see the module docstring); files are written under temporary names and
    renamed, so a reader (an SGLang server reloading from disk) never sees a half-written file. Returns it."""
    qwen = isinstance(config, Qwen3_5Config)
    multimodal = qwen and config.model_type == "qwen3_5"
    if multimodal and base_dir is None:
        raise ValueError("exporting a multimodal Qwen3.5 (model_type 'qwen3_5') needs base_dir, the HF snapshot it "
                         "was loaded from (its vision tower and config are copied from there); for a text-only "
                         "checkpoint export config.replace(model_type='qwen3_5_text')")
    rank, nproc = jax.process_index(), jax.process_count()
    os.makedirs(directory, exist_ok=True)
    base_where, base_dtypes = _base_tensors(base_dir) if base_dir else ({}, {})
    if base_dir:
        base_config = loading.hf_model_config(loading.read_hf_config(base_dir), base_dir)
        if type(base_config) is not type(config) or base_config.replace(
                param_dtype=config.param_dtype, compute_dtype=config.compute_dtype, remat=config.remat,
                scan_layers=config.scan_layers, **({"chunk_size": config.chunk_size} if qwen else {})) != config:
            raise ValueError(f"base_dir {base_dir}: its config.json describes another model than the one exported")

    leaves = loading.hf_leaves(config)
    passthrough = sorted(n for n in base_where if not n.startswith(loading.qwen3_5_prefix(config)) and
                         n != "lm_head.weight") if qwen else []
    writers = min(nproc, len(leaves))
    num_files = writers + (1 if passthrough else 0)
    file_of = (lambda k: "model.safetensors") if num_files == 1 else \
        (lambda k: f"model-{k + 1:05d}-of-{num_files:05d}.safetensors")

    def cast(name, arr):
        want = base_dtypes.get(name)
        if want is not None:
            return arr.astype(_SAFETENSORS_DTYPES.get(want, arr.dtype))
        return arr.astype(np.float32 if name.endswith("A_log") else jax.numpy.dtype(dtype))

    mine, weight_map = {}, {}
    for i, path in enumerate(leaves):
        owner = i % writers
        host = _host(loading.leaf_of(params, path))
        for name, arr in loading.hf_leaf_tensors(config, path, host):
            weight_map[name] = file_of(owner)
            if owner == rank:
                mine[name] = cast(name, arr)
    if rank < writers:
        _save(mine, os.path.join(directory, file_of(rank)))
    if passthrough:
        weight_map.update({n: file_of(writers) for n in passthrough})
        if rank == 0:
            _save(_read_tensors(base_dir, base_where, passthrough), os.path.join(directory, file_of(writers)))
    if rank == 0:
        if num_files > 1:
            _write_json(os.path.join(directory, "model.safetensors.index.json"),
                        {"metadata": {}, "weight_map": dict(sorted(weight_map.items()))})
        if base_dir:
            _copy_small_files(base_dir, directory)
        else:
            _write_small_files(config, directory, tokenizer, dtype)
    return directory


def _read_tensors(base_dir: str, where: dict[str, str], names) -> dict[str, np.ndarray]:
    from safetensors import safe_open

    out = {}
    for file in sorted({where[n] for n in names}):
        with safe_open(os.path.join(base_dir, file), framework="numpy") as f:
            out.update({n: f.get_tensor(n) for n in names if where[n] == file})
    return out


def _copy_small_files(base_dir: str, directory: str) -> None:
    for name in sorted(os.listdir(base_dir)):
        src = os.path.join(base_dir, name)
        if os.path.isfile(src) and not name.endswith(_WEIGHT_SUFFIXES):
            shutil.copyfile(src, os.path.join(directory, name + ".tmp"))
            os.replace(os.path.join(directory, name + ".tmp"), os.path.join(directory, name))


def _write_small_files(config, directory: str, tokenizer, dtype: str) -> None:
    generation = {}
    if tokenizer is not None:
        tokenizer.save_pretrained(directory)
        generation = {"bos_token_id": tokenizer.bos_id, "eos_token_id": tokenizer.eos_id,
                      "pad_token_id": tokenizer.pad_id}
    _write_json(os.path.join(directory, "config.json"), hf_config(config, dtype, tokenizer))
    _write_json(os.path.join(directory, "generation_config.json"), generation)
