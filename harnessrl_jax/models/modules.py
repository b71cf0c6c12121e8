"""The model families as Flax NNX modules, and any NNX module as a policy the trainer and the sampler run.

A family's module (`Llama`, `Qwen3_5`) holds its params as `nnx.Param`s in the family's layout (the names and
shapes of `param_shapes`, so `nnx.split` gives the params dict that loaders, checkpoints and the exporter use) and
annotates each with logical axes (`AXES`), which `LOGICAL_RULES` maps to the mesh (sharding.py). Calling it runs
the family's pure functions, so a module and `forward` give the same logits on the same weights.

A policy module is called as `module(tokens, positions=None, cache=None, *, valid=None, index=0)`: without a cache,
logits [B, T, V] (float32) of tokens [B, T], `valid` [B, T] marking real tokens; with one, the tokens are written at
cache slots [index, index + T) and it returns (logits [B, V] at the last position, new cache). `as_policy(module)`
turns any NNX module that answers the uncached call into (ModuleConfig, params): the family `module` runs it
through nnx.merge inside the traced function, and samples it by recomputing the prefix each step (TokenCache).
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from harnessrl_jax.models import llama, qwen3_5
from harnessrl_jax.models.llama import KVCache, Params
from harnessrl_jax.models.qwen3_5 import HybridCache

# Logical axes of every parameter of the families, by leaf name (the stacked layer axis first).
AXES: dict[str, tuple[str | None, ...]] = {
    "embed": ("vocab", "embed"),
    "lm_head": ("embed", "vocab"),
    "final_norm": ("norm",),
    **{name: ("layers", "norm") for name in ("attn_norm", "mlp_norm", "q_norm", "k_norm", "gdn_norm")},
    **{name: ("layers", "embed", "heads") for name in ("wq", "wk", "wv", "w_qkv", "w_z", "w_b", "w_a")},
    **{name: ("layers", "heads") for name in ("bq", "bk", "bv", "A_log", "dt_bias")},
    "wo": ("layers", "heads", "embed"),
    "w_out": ("layers", "heads", "embed"),
    "w_gate": ("layers", "embed", "mlp"),
    "w_up": ("layers", "embed", "mlp"),
    "w_down": ("layers", "mlp", "embed"),
    "conv": ("layers", "kernel", "heads"),  # Gated DeltaNet's 4-tap convolution, split along its channels
}

# Logical axis -> mesh axis (data, fsdp, tensor): FSDP over the model dimension, tensor parallel over heads, the
# MLP hidden dimension and the vocabulary (Megatron style); the stacked layer axis is never split. A logical name
# missing here (a foreign module's own) is replicated.
LOGICAL_RULES: dict[str, str | None] = {
    "vocab": "tensor", "embed": "fsdp", "heads": "tensor", "mlp": "tensor", "layers": None, "norm": None,
    "kernel": None,
}


def _param(value, name: str) -> nnx.Param:
    return nnx.Param(value, out_sharding=AXES[name], eager_sharding=False)


class Policy(nnx.Module):
    """A family's decoder as an NNX module over its params dict; subclasses name the family's functions."""

    _forward = _forward_cached = _empty_cache = _init_params = None

    def __init__(self, config, params: Params | None = None, *, rngs: nnx.Rngs | None = None, std: float = 0.02):
        """`params` in the family's layout (arrays or ShapeDtypeStructs), or random ones drawn from `rngs`."""
        if params is None:
            params = type(self)._init_params(config, (rngs or nnx.Rngs(0)).params(), std)
        self.config = config
        self._names = tuple(params)
        for key, value in params.items():
            wrap = lambda path, v: _param(v, path[-1].key)  # noqa: E731
            if isinstance(value, dict):
                setattr(self, key, nnx.data(jax.tree_util.tree_map_with_path(wrap, value)))
            else:
                setattr(self, key, _param(value, key))

    def params(self) -> Params:
        """The params dict (the arrays of the module's nnx.Params)."""
        return jax.tree.map(lambda v: v[...], {k: getattr(self, k) for k in self._names},
                            is_leaf=lambda x: isinstance(x, nnx.Variable))

    def __call__(self, tokens, positions=None, cache=None, *, valid=None, index=0):
        cls, params = type(self), self.params()
        if cache is None:
            return cls._forward(self.config, params, tokens, valid, positions)
        valid = jnp.ones(tokens.shape, bool) if valid is None else valid
        if positions is None:
            positions = jnp.maximum(jnp.cumsum(valid, axis=-1) - 1, 0)
        return cls._forward_cached(self.config, params, tokens, positions, valid, cache, jnp.int32(index))

    def init_cache(self, batch: int, length: int):
        """An empty decoding cache for `batch` rows of `length` slots."""
        return type(self)._empty_cache(self.config, batch, length)


class Llama(Policy):
    """Llama, SmolLM2, Qwen2 and Qwen3 dense (llama.py) as an NNX module."""

    _forward, _forward_cached = staticmethod(llama.forward), staticmethod(llama.forward_cached)
    _empty_cache, _init_params = staticmethod(KVCache.empty), staticmethod(llama.init_params)


class Qwen3_5(Policy):
    """The Qwen3.5 hybrid (qwen3_5.py) as an NNX module."""

    _forward, _forward_cached = staticmethod(qwen3_5.forward), staticmethod(qwen3_5.forward_cached)
    _empty_cache, _init_params = staticmethod(HybridCache.empty), staticmethod(qwen3_5.init_params)


def logical_specs(module: nnx.Module) -> Params:
    """The params dict's logical PartitionSpecs, read from the module's nnx.Param annotations (P() where none)."""
    specs = nnx.to_pure_dict(nnx.get_partition_spec(nnx.state(module, nnx.Param)))
    return jax.tree.map(lambda s: s if isinstance(s, jax.sharding.PartitionSpec) else jax.sharding.PartitionSpec(),
                        specs, is_leaf=lambda x: isinstance(x, jax.sharding.PartitionSpec))


# ------------------------------------------------------------------------------------------ foreign modules


@dataclasses.dataclass(frozen=True)
class ModuleConfig:
    """A policy given as an NNX module: its graph (nnx.split's GraphDef) and its params' layout; hashable, so it can
    be a static jit argument like the families' configs. Built by `as_policy`."""

    graphdef: Any
    layout: tuple[tuple[tuple[str, ...], tuple[int, ...]], ...]  # (path in the params dict, shape) per param
    vocab_size: int
    max_position_embeddings: int = 2048
    param_dtype: str = "float32"
    compute_dtype: str = "float32"
    model_type: str = "nnx"
    tie_embeddings: bool = False
    scan_layers: bool = True
    remat: bool = False

    def replace(self, **kw) -> "ModuleConfig":
        return dataclasses.replace(self, **kw)

    def num_params(self) -> int:
        return sum(int(np.prod(shape)) for _, shape in self.layout)


def as_policy(module: nnx.Module, *, max_position_embeddings: int = 2048) -> tuple[ModuleConfig, Params]:
    """(config, params) of an NNX module called as `module(tokens, positions, cache=None, *, valid=None)`: split
    once here; the trainer and the sampler merge the graph with the params inside their traced functions."""
    graphdef, state = nnx.split(module)
    kinds = {type(v).__name__ for v in jax.tree.leaves(state, is_leaf=lambda x: isinstance(x, nnx.Variable))
             if not isinstance(v, nnx.Param)}
    if kinds:  # the step keeps no state but the params: a variable it would not carry from call to call
        raise ValueError(f"a policy module's state must be nnx.Params only; this one also holds {sorted(kinds)}")
    params = nnx.to_pure_dict(state)
    flat = jax.tree_util.tree_flatten_with_path(params)[0]
    layout = tuple((tuple(str(k.key) for k in path), tuple(leaf.shape)) for path, leaf in flat)
    tokens = jax.ShapeDtypeStruct((1, 1), jnp.int32)
    vocab = jax.eval_shape(lambda p, t: nnx.merge(graphdef, p)(t, jnp.zeros(t.shape, jnp.int32)), params,
                           tokens).shape[-1]
    return ModuleConfig(graphdef, layout, int(vocab), max_position_embeddings), params


def module_param_shapes(config: ModuleConfig) -> Params:
    """The params dict of a ModuleConfig as tuples of ints."""
    out: Params = {}
    for path, shape in config.layout:
        node = out
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = shape
    return out


def module_forward(config: ModuleConfig, params: Params, tokens, attention_mask=None, positions=None,
                   constrain=llama._same):
    """Logits [B, T, V] float32 of the module merged with `params` (positions as llama.forward's)."""
    valid = jnp.ones(tokens.shape, bool) if attention_mask is None else attention_mask.astype(bool)
    if positions is None:
        positions = jnp.maximum(jnp.cumsum(valid, axis=-1) - 1, 0)
    logits = nnx.merge(config.graphdef, params)(tokens, positions, valid=valid)
    return constrain(logits.astype(jnp.float32), "logits")


def module_features(config: ModuleConfig, params: Params, tokens, attention_mask=None, positions=None,
                    constrain=llama._same):
    """(logits, None): a module has no separate output head, so the trainer takes the logits as they come."""
    return module_forward(config, params, tokens, attention_mask, positions, constrain), None


class TokenCache(NamedTuple):
    """A module's decoding state when it keeps none of its own: the tokens so far with their positions and which
    slots hold a real token [B, S]; each step reruns the module over them (causal, so slot i sees slots <= i)."""

    tokens: jax.Array
    positions: jax.Array
    valid: jax.Array

    @classmethod
    def empty(cls, config: ModuleConfig, batch: int, length: int) -> "TokenCache":
        return cls(jnp.zeros((batch, length), jnp.int32), jnp.zeros((batch, length), jnp.int32),
                   jnp.zeros((batch, length), bool))

    def repeat(self, n: int) -> "TokenCache":
        """Each batch row repeated n times in place (row i -> rows i*n .. i*n+n-1)."""
        return TokenCache(*(jnp.repeat(x, n, axis=0) for x in self))


def module_forward_cached(config: ModuleConfig, params: Params, tokens, positions, token_valid, cache: TokenCache,
                          index):
    """One cached step of a module (see llama.forward_cached), recomputing the whole prefix."""
    put = lambda buf, x: jax.lax.dynamic_update_slice(buf, x.astype(buf.dtype), (0, index))  # noqa: E731
    cache = TokenCache(put(cache.tokens, tokens), put(cache.positions, positions), put(cache.valid, token_valid))
    logits = module_forward(config, params, cache.tokens, cache.valid, cache.positions)
    return jax.lax.dynamic_index_in_dim(logits, index + tokens.shape[1] - 1, axis=1, keepdims=False), cache


def module_flops(config: ModuleConfig, batch: int, seq: int) -> float:
    """2 FLOPs per parameter and token: a dense module's matmuls, attention not counted."""
    return 2.0 * config.num_params() * batch * seq


def module_init_params(config: ModuleConfig, rng, std: float = 0.02) -> Params:
    """A module brings its own params (as_policy); there is no layout-wide rule to draw them by."""
    raise ValueError("a ModuleConfig policy has no random init here: build the module with its own init and take "
                     "its params from as_policy")
