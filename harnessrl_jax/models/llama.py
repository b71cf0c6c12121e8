"""Llama-family decoder (Llama, SmolLM2, Qwen2, Qwen3 dense) as pure functions of a params pytree.

The params are a plain nested dict of arrays, so loaders, the exporter and checkpoints address weights by path
(modules.Llama is this decoder as a Flax NNX module over the same dict). Layers are stacked on a leading axis and run
with `lax.scan`, so compile time does not grow with depth (`scan_layers=False` unrolls them). RoPE is HF's
rotate-half form (GGUF loaders undo llama.cpp's Q/K row permutation). Layout (all matrices stored [in, out], the
transpose of the HF/torch layout):
  embed [V, D]; final_norm [D]; lm_head [D, V] unless tied to embed
  layers/{attn_norm, mlp_norm} [L, D]; {wq [L, D, Hq*Dh], wk, wv [L, D, Hkv*Dh], wo [L, Hq*Dh, D]}
  layers/{bq, bk, bv} when attention_bias; layers/{q_norm, k_norm} [L, Dh] when qk_norm (Qwen3)
  layers/{w_gate, w_up [L, D, F], w_down [L, F, D]}
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

Params = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Hyper-parameters of one decoder; hashable, so it can be a static jit argument."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5
    max_position_embeddings: int = 2048
    tie_embeddings: bool = False
    qk_norm: bool = False
    attention_bias: bool = False
    model_type: str = "llama"  # the HF model_type written on export: llama | qwen2 | qwen3
    param_dtype: str = "float32"
    compute_dtype: str = "float32"  # "bfloat16" for mixed precision; logits are always float32
    remat: bool = False  # rematerialise each layer in the backward pass
    # False: hidden_states runs the layers unrolled, each on its own slice of the stacked weights, and a trainer
    # slices them once per step (split_layers) instead of once per micro-batch. The scan copies every layer's
    # weights out of the stack on each pass, forward and backward, and writes its gradients back, so an update
    # without remat runs faster unrolled (docs/design.md, Measurements), at a compile time that grows with depth
    # and one more copy of the layer weights during the step. Keep it True with remat: unrolled, XLA keeps the
    # recomputed activations alive (4x the temporaries, and slower). The sampler decodes unrolled either way, over
    # layers split once before its loop (decode_layout).
    scan_layers: bool = True

    def __post_init__(self):
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.num_kv_heads})"
            )

    def replace(self, **kw) -> "ModelConfig":
        return dataclasses.replace(self, **kw)

    @property
    def q_dim(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    def num_params(self) -> int:
        shapes = jax.tree.leaves(param_shapes(self), is_leaf=lambda x: isinstance(x, tuple))
        return sum(int(np.prod(s)) for s in shapes)


def param_shapes(config: ModelConfig) -> Params:
    """The params pytree as tuples of ints (the single source of the layout)."""
    c, L = config, config.num_layers
    layers = {
        "attn_norm": (L, c.hidden_size),
        "wq": (L, c.hidden_size, c.q_dim),
        "wk": (L, c.hidden_size, c.kv_dim),
        "wv": (L, c.hidden_size, c.kv_dim),
        "wo": (L, c.q_dim, c.hidden_size),
        "mlp_norm": (L, c.hidden_size),
        "w_gate": (L, c.hidden_size, c.intermediate_size),
        "w_up": (L, c.hidden_size, c.intermediate_size),
        "w_down": (L, c.intermediate_size, c.hidden_size),
    }
    if c.attention_bias:
        layers.update(bq=(L, c.q_dim), bk=(L, c.kv_dim), bv=(L, c.kv_dim))
    if c.qk_norm:
        layers.update(q_norm=(L, c.head_dim), k_norm=(L, c.head_dim))
    shapes = {"embed": (c.vocab_size, c.hidden_size), "layers": layers, "final_norm": (c.hidden_size,)}
    if not c.tie_embeddings:
        shapes["lm_head"] = (c.hidden_size, c.vocab_size)
    return shapes


def init_params(config: ModelConfig, rng: jax.Array, std: float = 0.02) -> Params:
    """Random params (normal(0, std) matrices, unit norms); for tests and from-scratch runs."""
    flat, treedef = jax.tree_util.tree_flatten_with_path(
        param_shapes(config), is_leaf=lambda x: isinstance(x, tuple))
    keys = jax.random.split(rng, len(flat))
    dtype = jnp.dtype(config.param_dtype)
    out = [
        jnp.ones(shape, dtype) if "norm" in jax.tree_util.keystr(path)
        else (std * jax.random.normal(key, shape)).astype(dtype)
        for key, (path, shape) in zip(keys, flat)
    ]
    return jax.tree.unflatten(treedef, out)


class KVCache(NamedTuple):
    """Per-layer keys and values [L, B, Hkv, S, Dh] (once split, tuples of L arrays [B, Hkv, S, Dh]) plus which slots
    hold a real token [B, S]. Heads before slots: a layer's slice is already in the layout of the attention's batched
    dot (batch b and head k leading), so decoding reads it with no transpose."""

    k: jax.Array
    v: jax.Array
    valid: jax.Array

    @classmethod
    def empty(cls, config: ModelConfig, batch: int, length: int) -> "KVCache":
        shape = (config.num_layers, batch, config.num_kv_heads, length, config.head_dim)
        dtype = jnp.dtype(config.compute_dtype)
        return cls(jnp.zeros(shape, dtype), jnp.zeros(shape, dtype), jnp.zeros((batch, length), bool))

    def repeat(self, n: int) -> "KVCache":
        """Each batch row repeated n times in place (row i -> rows i*n .. i*n+n-1)."""
        return KVCache(jnp.repeat(self.k, n, axis=1), jnp.repeat(self.v, n, axis=1), jnp.repeat(self.valid, n, 0))

    def split(self) -> "KVCache":
        """k and v as tuples of per-layer arrays [B, Hkv, S, Dh] (see decode_layout)."""
        return KVCache(tuple(self.k), tuple(self.v), self.valid)


def rms_norm(x: jax.Array, weight: jax.Array, eps: float) -> jax.Array:
    """RMSNorm computed in float32, cast back to the input dtype (as HF does)."""
    x32 = x.astype(jnp.float32)
    x32 = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return (x32 * weight.astype(jnp.float32)).astype(x.dtype)


def rope(x: jax.Array, positions: jax.Array, theta: float) -> jax.Array:
    """Rotate-half rotary embedding. x [B, T, H, Dh], positions [B, T]."""
    half = x.shape[-1] // 2
    inv_freq = 1.0 / (theta ** (jnp.arange(half, dtype=jnp.float32) * 2.0 / x.shape[-1]))
    angles = positions.astype(jnp.float32)[..., None] * inv_freq  # [B, T, half]
    cos = jnp.cos(angles)[:, :, None, :]
    sin = jnp.sin(angles)[:, :, None, :]
    x32 = x.astype(jnp.float32)
    x1, x2 = x32[..., :half], x32[..., half:]
    out = jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)
    return out.astype(x.dtype)


def _attention(q, k, v, mask, config: ModelConfig, kv_layout: str = "bskd"):
    """Grouped-query attention. q [B, T, Hq, Dh], k/v [B, S, Hkv, Dh] (kv_layout 'bskd') or [B, Hkv, S, Dh] ('bksd',
    a cache layer), mask [B, T, S] -> [B, T, Hq*Dh]."""
    b, t, _, dh = q.shape
    groups = config.num_heads // config.num_kv_heads
    q = q.reshape(b, t, config.num_kv_heads, groups, dh)
    scores = jnp.einsum(f"btkgd,{kv_layout}->bkgts", q, k, preferred_element_type=jnp.float32)
    scores = scores * (dh**-0.5)
    scores = jnp.where(mask[:, None, None, :, :], scores, jnp.finfo(jnp.float32).min)
    probs = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
    # The weighted values as [B, Hkv, G, T, Dh], the natural batched matmul (probs [T, S] @ v [S, Dh] per head),
    # then the transpose. Asked for as [B, T, Hkv, G, Dh] directly, XLA's CPU backend computes v^T @ probs^T with
    # Eigen, contracting v's non-minor axis: ~10x slower at a decode step's shapes, ~2x at a training row's.
    out = jnp.einsum(f"bkgts,{kv_layout}->bkgtd", probs, v)
    return out.transpose(0, 3, 1, 2, 4).reshape(b, t, config.q_dim)


def _dense(x: jax.Array, w: jax.Array) -> jax.Array:
    """x [..., D] @ w [D, F] as one 2-D matmul over the flattened leading axes (XLA's CPU backend runs 2-D GEMMs,
    and their gradients, faster than batched 3-D dots)."""
    return (x.reshape(-1, x.shape[-1]) @ w).reshape(*x.shape[:-1], w.shape[-1])


def _qkv(lp, h, positions, config: ModelConfig):
    b, t, _ = h.shape
    q, k, v = _dense(h, lp["wq"]), _dense(h, lp["wk"]), _dense(h, lp["wv"])
    if config.attention_bias:
        q, k, v = q + lp["bq"], k + lp["bk"], v + lp["bv"]
    q = q.reshape(b, t, config.num_heads, config.head_dim)
    k = k.reshape(b, t, config.num_kv_heads, config.head_dim)
    v = v.reshape(b, t, config.num_kv_heads, config.head_dim)
    if config.qk_norm:
        q = rms_norm(q, lp["q_norm"], config.rms_norm_eps)
        k = rms_norm(k, lp["k_norm"], config.rms_norm_eps)
    return rope(q, positions, config.rope_theta), rope(k, positions, config.rope_theta), v


def _mlp(lp, x, config: ModelConfig):
    h = rms_norm(x, lp["mlp_norm"], config.rms_norm_eps)
    return _dense(jax.nn.silu(_dense(h, lp["w_gate"])) * _dense(h, lp["w_up"]), lp["w_down"])


def _cast(params: Params, config: ModelConfig) -> Params:
    dtype = jnp.dtype(config.compute_dtype)
    return jax.tree.map(lambda p: p.astype(dtype) if p.dtype != dtype else p, params)


def output_head(params: Params, config) -> jax.Array:
    """The output head as stored: embed [V, D] when tied, else lm_head [D, V] (an explicit .T may copy it)."""
    return params["embed"] if config.tie_embeddings else params["lm_head"]


def _logits(params: Params, x: jax.Array, config: ModelConfig) -> jax.Array:
    x = rms_norm(x, params["final_norm"], config.rms_norm_eps)
    if config.tie_embeddings:  # contract against embed [V, D] directly
        return jnp.einsum("btd,vd->btv", x, params["embed"], preferred_element_type=jnp.float32)
    return jnp.matmul(x, params["lm_head"], preferred_element_type=jnp.float32)


def _same(x: jax.Array, kind: str) -> jax.Array:
    return x


def hidden_states(
    config: ModelConfig, params: Params, tokens: jax.Array, attention_mask: jax.Array | None = None,
    positions: jax.Array | None = None, constrain: Callable[[jax.Array, str], jax.Array] = _same,
) -> jax.Array:
    """Final-layer hidden states (before the last norm) for a batch without a cache. tokens [B, T].

    `constrain(x, kind)` is applied to the residual stream ('hidden', after the embedding and each layer) and, in
    `forward`, to the logits ('logits'): a sharded caller pins activations to the batch sharding there, so the
    partitioner gathers the FSDP-sharded weights instead of the activations (rl/step.py)."""
    params = _cast(params, config)
    if attention_mask is None:
        attention_mask = jnp.ones(tokens.shape, bool)
    attention_mask = attention_mask.astype(bool)
    if positions is None:
        # Left padding shifts positions so every sequence starts at 0, as in generation.
        positions = jnp.maximum(jnp.cumsum(attention_mask, axis=-1) - 1, 0)
    t = tokens.shape[1]
    causal = jnp.tril(jnp.ones((t, t), bool))
    mask = causal[None] & attention_mask[:, None, :]

    def layer(x, lp):
        h = rms_norm(x, lp["attn_norm"], config.rms_norm_eps)
        q, k, v = _qkv(lp, h, positions, config)
        x = x + _dense(_attention(q, k, v, mask, config), lp["wo"])
        return constrain(x + _mlp(lp, x, config), "hidden"), None

    if config.remat:
        layer = jax.checkpoint(layer, policy=jax.checkpoint_policies.nothing_saveable)
    x = constrain(params["embed"][tokens], "hidden")
    layers = params["layers"]
    if isinstance(layers, dict):  # stacked: scanned, or split here when unrolled
        if config.scan_layers:
            return jax.lax.scan(layer, x, layers)[0]
        layers = split_layers(params)["layers"]
    for lp in layers:
        x = layer(x, lp)[0]
    return x


def split_layers(params: Params) -> Params:
    """params with the stacked layers as a list of per-layer dicts. `hidden_states` (so `forward` and `features`)
    takes this form too, and runs it unrolled without slicing anything more (see ModelConfig.scan_layers)."""
    layers = params["layers"]
    n = jax.tree.leaves(layers)[0].shape[0]
    return {**params, "layers": [jax.tree.map(lambda a: a[i], layers) for i in range(n)]}


def stack_layers(params: Params) -> Params:
    """The inverse of split_layers (e.g. for gradients taken with respect to split params)."""
    return {**params, "layers": jax.tree.map(lambda *xs: jnp.stack(xs), *params["layers"])}


def forward(
    config: ModelConfig, params: Params, tokens: jax.Array, attention_mask: jax.Array | None = None,
    positions: jax.Array | None = None, constrain: Callable[[jax.Array, str], jax.Array] = _same,
) -> jax.Array:
    """Logits [B, T, V] in float32 for tokens [B, T] (no cache). attention_mask marks real tokens; `constrain`:
    see hidden_states."""
    x = hidden_states(config, params, tokens, attention_mask, positions, constrain)
    return constrain(_logits(_cast(params, config), x, config), "logits")


def features(
    config: ModelConfig, params: Params, tokens: jax.Array, attention_mask: jax.Array | None = None,
    positions: jax.Array | None = None, constrain: Callable[[jax.Array, str], jax.Array] = _same,
) -> tuple[jax.Array, jax.Array]:
    """(final-normed hidden states [B, T, D] in the compute dtype, output head): logits = x . head over D, which
    rl/head.py takes a chunk of positions at a time instead of materialising [B, T, V]."""
    params = _cast(params, config)
    x = hidden_states(config, params, tokens, attention_mask, positions, constrain)
    return rms_norm(x, params["final_norm"], config.rms_norm_eps), output_head(params, config)


def forward_cached(
    config: ModelConfig, params: Params, tokens: jax.Array, positions: jax.Array, token_valid: jax.Array,
    cache: KVCache, index: jax.Array,
) -> tuple[jax.Array, KVCache]:
    """Run tokens [B, T] written at cache slots [index, index + T); returns (logits [B, V] at the last input
    position, new cache): sampling needs no other position, and prefill would spend a [B, T, V] head on them.

    Each query attends to the valid cache slots at or before its own slot, so one function serves prefill
    (T = prompt bucket, prompts left-padded so the last position is real) and decode (T = 1). token_valid [B, T]
    marks real (non-pad) input tokens. Stacked layers are scanned; split ones (`decode_layout`: per-layer weights and
    per-layer caches) run unrolled, each layer reading its weights and cache where they lie.
    """
    params = _cast(params, config)
    t = tokens.shape[1]
    valid = jax.lax.dynamic_update_slice(cache.valid, token_valid.astype(bool), (0, index))
    slots = jnp.arange(cache.valid.shape[1])
    query_slots = index + jnp.arange(t)
    mask = (slots[None, :] <= query_slots[:, None])[None] & valid[:, None, :]

    def layer(x, lp, write):
        """One layer; write(k, v) stores this step's keys and values [B, Hkv, T, Dh] and returns the layer's cache."""
        h = rms_norm(x, lp["attn_norm"], config.rms_norm_eps)
        q, k, v = _qkv(lp, h, positions, config)
        k_all, v_all = write(k.swapaxes(1, 2), v.swapaxes(1, 2))
        x = x + _dense(_attention(q, k_all, v_all, mask, config, kv_layout="bksd"), lp["wo"])
        return x + _mlp(lp, x, config)

    x = params["embed"][tokens]
    if isinstance(params["layers"], dict):
        def scanned(carry, xs):
            x, ck, cv = carry
            lp, li = xs

            def write(k, v):
                # Updating the full cache in the carry (not emitting per-layer slices) keeps the update in place.
                nonlocal ck, cv
                ck = jax.lax.dynamic_update_slice(ck, k[None].astype(ck.dtype), (li, 0, 0, index, 0))
                cv = jax.lax.dynamic_update_slice(cv, v[None].astype(cv.dtype), (li, 0, 0, index, 0))
                return (jax.lax.dynamic_index_in_dim(ck, li, keepdims=False),
                        jax.lax.dynamic_index_in_dim(cv, li, keepdims=False))

            x = layer(x, lp, write)
            return (x, ck, cv), None

        layers = (params["layers"], jnp.arange(config.num_layers))
        (x, ck, cv), _ = jax.lax.scan(scanned, (x, cache.k, cache.v), layers)
    else:
        ck, cv = list(cache.k), list(cache.v)
        for li, lp in enumerate(params["layers"]):
            def write(k, v, li=li):
                ck[li] = jax.lax.dynamic_update_slice(ck[li], k.astype(ck[li].dtype), (0, 0, index, 0))
                cv[li] = jax.lax.dynamic_update_slice(cv[li], v.astype(cv[li].dtype), (0, 0, index, 0))
                return ck[li], cv[li]

            x = layer(x, lp, write)
        ck, cv = tuple(ck), tuple(cv)
    return _logits(params, x[:, -1:], config)[:, 0], KVCache(ck, cv, valid)


def decode_layout(params: Params, cache: KVCache) -> tuple[Params, KVCache]:
    """params and cache with their layers split (split_layers, KVCache.split), what forward_cached decodes fastest.

    Scanned, each decode step copies every layer's weights and cache out of the stacks before its dots (XLA's CPU
    backend): the whole model's bytes again per token. A sampler splits them once, before its decode loop."""
    return split_layers(params), cache.split()


def forward_flops(config: ModelConfig, batch: int, seq: int) -> float:
    """Matmul FLOPs of one causal forward over [batch, seq] tokens (2 per multiply-add).

    Counted analytically: XLA's cost analysis counts a scanned layer body once, not num_layers times.
    """
    c = config
    per_token = c.hidden_size * (2 * c.q_dim + 2 * c.kv_dim) + 3 * c.hidden_size * c.intermediate_size
    per_token = c.num_layers * per_token + c.hidden_size * c.vocab_size
    # Scores and weighted values over the causal prefix: seq * (seq + 1) / 2 query-key pairs per head.
    attention = c.num_layers * 2 * c.num_heads * c.head_dim * seq * (seq + 1) / 2
    return 2.0 * batch * (seq * per_token + attention)
