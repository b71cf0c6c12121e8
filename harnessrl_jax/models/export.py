"""Export params to an HF directory (config.json, model.safetensors, tokenizer files) that transformers and
SGLang load unchanged; this is also how weights are pushed to an SGLang server (/update_weights_from_disk)."""

from __future__ import annotations

import json
import os

import jax.numpy as jnp
import numpy as np

from harnessrl_jax.models.llama import ModelConfig, Params
from harnessrl_jax.models.loading import hf_tensors

_ARCHITECTURES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}


def hf_config(config: ModelConfig, dtype: str, tokenizer=None) -> dict:
    """The config.json transformers expects for this architecture."""
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


def export_hf(config: ModelConfig, params: Params, directory: str, tokenizer=None, dtype: str = "float32") -> str:
    """Write an HF model directory; files are written under temporary names and renamed, so a reader (an
    SGLang server reloading from disk) never sees a half-written model. Returns the directory."""
    from safetensors.flax import save_file

    os.makedirs(directory, exist_ok=True)
    tensors = {k: jnp.asarray(np.ascontiguousarray(v), dtype) for k, v in hf_tensors(config, params).items()}
    tmp = os.path.join(directory, "model.safetensors.tmp")
    save_file(tensors, tmp, metadata={"format": "pt"})
    os.replace(tmp, os.path.join(directory, "model.safetensors"))
    generation = {}
    if tokenizer is not None:
        tokenizer.save_pretrained(directory)
        generation = {"bos_token_id": tokenizer.bos_id, "eos_token_id": tokenizer.eos_id,
                      "pad_token_id": tokenizer.pad_id}
    for name, content in (("config.json", hf_config(config, dtype, tokenizer)),
                          ("generation_config.json", generation)):
        with open(os.path.join(directory, name + ".tmp"), "w") as f:
            json.dump(content, f, indent=2)
        os.replace(os.path.join(directory, name + ".tmp"), os.path.join(directory, name))
    return directory
