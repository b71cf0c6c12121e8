"""Qwen3.5 hybrid decoder (Gated DeltaNet layers + gated full attention) as pure functions of a params pytree.

A layer is `x + mixer(norm(x))` then `x + mlp(norm(x))`: the mixer is a Gated DeltaNet on most layers and gated
grouped-query attention with partial rotary on every `full_attention_interval`-th (`config.layer_types`). The forward
scans over blocks of one period of `layer_types`, so compile time does not grow with depth. RMSNorms store an offset
and scale by (1 + w), except the DeltaNet's gated one (plain scale). Layout (matrices [in, out], torch's transposed):
  embed [V, D]; final_norm [D]; lm_head [D, V] unless tied; layers/{attn_norm, mlp_norm} [L, D]; {w_gate, w_up
  [L, D, F], w_down [L, F, D]}; linear_attn/{w_qkv [Lg, D, 2*Hk*Dk + Hv*Dv], w_z [Lg, D, Hv*Dv], w_b, w_a [Lg, D, Hv],
  conv [Lg, K, conv_dim], A_log, dt_bias [Lg, Hv], gdn_norm [Lg, Dv], w_out [Lg, Hv*Dv, D]}; full_attn/{wq [La, D,
  Hq*2*Dh] (per head [query | gate]), wk, wv [La, D, Hkv*Dh], wo [La, Hq*Dh, D], q_norm, k_norm [La, Dh]}
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from harnessrl_jax.models.gated_deltanet import chunk_gated_delta_rule, recurrent_gated_delta_rule
from harnessrl_jax.models.llama import _attention, _dense, _same, output_head, rms_norm, rope

Params = dict[str, Any]

LINEAR, FULL = "linear_attention", "full_attention"
# Small tensors kept in float32 whatever the compute dtype (the published checkpoints store A_log in float32).
_FLOAT32_LEAVES = ("A_log", "dt_bias", "attn_norm", "mlp_norm", "final_norm", "q_norm", "k_norm", "gdn_norm")


@dataclasses.dataclass(frozen=True)
class Qwen3_5Config:
    """Hyper-parameters of one Qwen3.5 text decoder; hashable, so it can be a static jit argument."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    linear_num_key_heads: int
    linear_num_value_heads: int
    linear_key_head_dim: int
    linear_value_head_dim: int
    linear_conv_kernel: int = 4
    layer_types: tuple[str, ...] = ()  # empty: full attention on every full_attention_interval-th layer
    full_attention_interval: int = 4
    rope_theta: float = 10_000_000.0
    partial_rotary_factor: float = 0.25
    rms_norm_eps: float = 1e-6
    max_position_embeddings: int = 262144
    tie_embeddings: bool = False
    # The HF layout written on export: 'qwen3_5' (Qwen3_5ForConditionalGeneration, weights under
    # model.language_model.*, what SGLang serves) or 'qwen3_5_text' (Qwen3_5ForCausalLM).
    model_type: str = "qwen3_5"
    param_dtype: str = "float32"
    compute_dtype: str = "float32"  # "bfloat16" for mixed precision; logits and the DeltaNet state are float32
    remat: bool = False  # rematerialise each layer in the backward pass
    chunk_size: int = 64  # DeltaNet chunk length for training and prefill
    scan_layers: bool = True  # unrolled layers (False) are the llama family's only (llama.ModelConfig.scan_layers)

    def __post_init__(self):
        types = tuple(self.layer_types) or tuple(
            FULL if (i + 1) % self.full_attention_interval == 0 else LINEAR for i in range(self.num_layers))
        object.__setattr__(self, "layer_types", types)
        if len(types) != self.num_layers or set(types) - {LINEAR, FULL}:
            raise ValueError(f"layer_types must list {self.num_layers} entries of '{LINEAR}' or '{FULL}', got {types}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.num_kv_heads})")
        if self.linear_num_value_heads % self.linear_num_key_heads:
            raise ValueError(f"linear_num_value_heads ({self.linear_num_value_heads}) must be a multiple of "
                             f"linear_num_key_heads ({self.linear_num_key_heads})")
        if self.rotary_dim % 2 or not 0 < self.rotary_dim <= self.head_dim:
            raise ValueError(f"partial_rotary_factor {self.partial_rotary_factor} x head_dim {self.head_dim} must "
                             f"give an even rotary dimension")
        if self.model_type not in ("qwen3_5", "qwen3_5_text"):
            raise ValueError(f"model_type must be 'qwen3_5' or 'qwen3_5_text', got {self.model_type!r}")
        if not self.scan_layers:
            raise ValueError("scan_layers=False (unrolled layers) is implemented for the llama family only; "
                             "Qwen3.5 runs its layer blocks with lax.scan")

    def replace(self, **kw) -> "Qwen3_5Config":
        return dataclasses.replace(self, **kw)

    @property
    def q_dim(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def key_dim(self) -> int:
        return self.linear_num_key_heads * self.linear_key_head_dim

    @property
    def value_dim(self) -> int:
        return self.linear_num_value_heads * self.linear_value_head_dim

    @property
    def conv_dim(self) -> int:
        return 2 * self.key_dim + self.value_dim

    @property
    def rotary_dim(self) -> int:
        return int(self.head_dim * self.partial_rotary_factor)

    @property
    def num_linear(self) -> int:
        return self.layer_types.count(LINEAR)

    @property
    def num_full(self) -> int:
        return self.layer_types.count(FULL)

    @property
    def block(self) -> tuple[str, ...]:
        """The shortest period of layer_types: the layers one scan step runs (the whole stack if none repeats)."""
        n = self.num_layers
        for p in range(1, n + 1):
            if n % p == 0 and self.layer_types == self.layer_types[:p] * (n // p):
                return self.layer_types[:p]
        return self.layer_types

    def num_params(self) -> int:
        shapes = jax.tree.leaves(param_shapes(self), is_leaf=lambda x: isinstance(x, tuple))
        return sum(int(np.prod(s)) for s in shapes)


def param_shapes(config: Qwen3_5Config) -> Params:
    """The params pytree as tuples of ints (the single source of the layout)."""
    c, L, Lg, La = config, config.num_layers, config.num_linear, config.num_full
    D, Hv = c.hidden_size, c.linear_num_value_heads
    shapes: Params = {
        "embed": (c.vocab_size, D),
        "layers": {"attn_norm": (L, D), "mlp_norm": (L, D), "w_gate": (L, D, c.intermediate_size),
                   "w_up": (L, D, c.intermediate_size), "w_down": (L, c.intermediate_size, D)},
        "final_norm": (D,),
    }
    if Lg:
        shapes["linear_attn"] = {
            "w_qkv": (Lg, D, c.conv_dim), "w_z": (Lg, D, c.value_dim), "w_b": (Lg, D, Hv), "w_a": (Lg, D, Hv),
            "conv": (Lg, c.linear_conv_kernel, c.conv_dim), "A_log": (Lg, Hv), "dt_bias": (Lg, Hv),
            "gdn_norm": (Lg, c.linear_value_head_dim), "w_out": (Lg, c.value_dim, D)}
    if La:
        shapes["full_attn"] = {
            "wq": (La, D, 2 * c.q_dim), "wk": (La, D, c.kv_dim), "wv": (La, D, c.kv_dim), "wo": (La, c.q_dim, D),
            "q_norm": (La, c.head_dim), "k_norm": (La, c.head_dim)}
    if not c.tie_embeddings:
        shapes["lm_head"] = (D, c.vocab_size)
    return shapes


def init_params(config: Qwen3_5Config, rng: jax.Array, std: float = 0.02) -> Params:
    """Random params for tests and from-scratch runs: normal(0, std) matrices and convolution taps, zero norm
    offsets (scale 1), unit gated-norm scales, dt_bias 1 and A = exp(A_log) uniform in [1, 16] as HF initialises."""
    flat, treedef = jax.tree_util.tree_flatten_with_path(
        param_shapes(config), is_leaf=lambda x: isinstance(x, tuple))
    keys = jax.random.split(rng, len(flat))
    dtype = jnp.dtype(config.param_dtype)

    def one(key, path, shape):
        name = path[-1].key
        if name == "gdn_norm" or name == "dt_bias":
            return jnp.ones(shape, dtype)
        if name.endswith("norm"):
            return jnp.zeros(shape, dtype)
        if name == "A_log":
            return jnp.log(jax.random.uniform(key, shape, minval=1.0, maxval=16.0)).astype(dtype)
        return (std * jax.random.normal(key, shape)).astype(dtype)

    return jax.tree.unflatten(treedef, [one(k, p, s) for k, (p, s) in zip(keys, flat)])


class HybridCache(NamedTuple):
    """Decoding state: keys and values of the attention layers [La, B, S, Hkv, Dh] with the slots that hold a real
    token [B, S], and per DeltaNet layer the last K-1 convolution inputs [Lg, B, K-1, conv_dim] and the recurrent
    state [Lg, B, Hv, Dk, Dv] (float32)."""

    k: jax.Array
    v: jax.Array
    valid: jax.Array
    conv: jax.Array
    state: jax.Array

    @classmethod
    def empty(cls, config: Qwen3_5Config, batch: int, length: int) -> "HybridCache":
        c, dtype = config, jnp.dtype(config.compute_dtype)
        kv = (c.num_full, batch, length, c.num_kv_heads, c.head_dim)
        return cls(jnp.zeros(kv, dtype), jnp.zeros(kv, dtype), jnp.zeros((batch, length), bool),
                   jnp.zeros((c.num_linear, batch, c.linear_conv_kernel - 1, c.conv_dim), dtype),
                   jnp.zeros((c.num_linear, batch, c.linear_num_value_heads, c.linear_key_head_dim,
                              c.linear_value_head_dim), jnp.float32))

    def repeat(self, n: int) -> "HybridCache":
        """Each batch row repeated n times in place (row i -> rows i*n .. i*n+n-1)."""
        return HybridCache(jnp.repeat(self.k, n, 1), jnp.repeat(self.v, n, 1), jnp.repeat(self.valid, n, 0),
                           jnp.repeat(self.conv, n, 1), jnp.repeat(self.state, n, 1))


# ------------------------------------------------------------------------------------------- Gated DeltaNet


def _l2norm(x: jax.Array, eps: float = 1e-6) -> jax.Array:
    return x * jax.lax.rsqrt(jnp.sum(x * x, axis=-1, keepdims=True) + eps)


def _causal_conv(x: jax.Array, taps: jax.Array, state: jax.Array | None):
    """Depthwise causal convolution + SiLU over time. x [B, T, C], taps [K, C], state: the K-1 inputs before x
    (zeros when None). Returns (out [B, T, C], the last K-1 inputs)."""
    kernel, t = taps.shape[0], x.shape[1]
    prev = jnp.zeros((x.shape[0], kernel - 1, x.shape[2]), x.dtype) if state is None else state.astype(x.dtype)
    padded = jnp.concatenate([prev, x], axis=1)
    out = sum(padded[:, j:j + t] * taps[j] for j in range(kernel))
    return jax.nn.silu(out), padded[:, t:]


def gated_rms_norm(x: jax.Array, gate: jax.Array, weight: jax.Array, eps: float) -> jax.Array:
    """RMSNorm with a plain scale, then times SiLU(gate): the DeltaNet's output norm."""
    x32 = x.astype(jnp.float32)
    x32 = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return (weight.astype(jnp.float32) * x32 * jax.nn.silu(gate.astype(jnp.float32))).astype(x.dtype)


def gated_deltanet(lp: Params, h: jax.Array, valid: jax.Array, config: Qwen3_5Config,
                   conv_state: jax.Array | None = None, state: jax.Array | None = None, recurrent: bool = False):
    """One DeltaNet mixer over h [B, T, D] (already normed): (out [B, T, D], conv state, recurrent state).

    Positions where `valid` is False are skipped: their input is zeroed (as HF does for padding) and their decay
    is 1, so a padded slot leaves the state as it found it."""
    c = config
    b, t, _ = h.shape
    hv, dk, dv = c.linear_num_value_heads, c.linear_key_head_dim, c.linear_value_head_dim
    h = h * valid[..., None].astype(h.dtype)
    mixed, conv_state = _causal_conv(_dense(h, lp["w_qkv"]), lp["conv"], conv_state)
    z = _dense(h, lp["w_z"]).reshape(b, t, hv, dv)
    beta = jax.nn.sigmoid(_dense(h, lp["w_b"]).astype(jnp.float32))
    a = _dense(h, lp["w_a"]).astype(jnp.float32)
    g = -jnp.exp(lp["A_log"].astype(jnp.float32)) * jax.nn.softplus(a + lp["dt_bias"].astype(jnp.float32))
    g = jnp.where(valid[..., None], g, 0.0)

    q = mixed[..., : c.key_dim].reshape(b, t, c.linear_num_key_heads, dk).astype(jnp.float32)
    k = mixed[..., c.key_dim: 2 * c.key_dim].reshape(b, t, c.linear_num_key_heads, dk).astype(jnp.float32)
    v = mixed[..., 2 * c.key_dim:].reshape(b, t, hv, dv)
    q, k = _l2norm(q) * dk**-0.5, _l2norm(k)
    groups = hv // c.linear_num_key_heads  # each key head serves `groups` consecutive value heads
    q, k = jnp.repeat(q, groups, axis=2), jnp.repeat(k, groups, axis=2)
    if recurrent:
        out, state = recurrent_gated_delta_rule(q, k, v, g, beta, state)
    else:
        out, state = chunk_gated_delta_rule(q, k, v, g, beta, state, c.chunk_size)
    out = gated_rms_norm(out.astype(h.dtype), z, lp["gdn_norm"], c.rms_norm_eps)
    return _dense(out.reshape(b, t, c.value_dim), lp["w_out"]), conv_state, state


# ---------------------------------------------------------------------------------------- gated attention


def offset_rms_norm(x: jax.Array, offset: jax.Array, eps: float) -> jax.Array:
    """The zero-centred RMSNorm of Qwen3.5: scale by (1 + w), w stored as an offset."""
    return rms_norm(x, 1.0 + offset.astype(jnp.float32), eps)


def _partial_rope(x: jax.Array, positions: jax.Array, config: Qwen3_5Config) -> jax.Array:
    # Text-only inputs give M-RoPE the same position on all three axes, which is plain RoPE on the first dims.
    r = config.rotary_dim
    return jnp.concatenate([rope(x[..., :r], positions, config.rope_theta), x[..., r:]], axis=-1)


def _attention_qkv(lp: Params, h: jax.Array, positions: jax.Array, config: Qwen3_5Config):
    """Rotated q, k, v [B, T, H, Dh] and the output gate [B, T, Hq*Dh]."""
    c = config
    b, t, _ = h.shape
    qg = _dense(h, lp["wq"]).reshape(b, t, c.num_heads, 2 * c.head_dim)
    q, gate = qg[..., : c.head_dim], qg[..., c.head_dim:]
    k = _dense(h, lp["wk"]).reshape(b, t, c.num_kv_heads, c.head_dim)
    v = _dense(h, lp["wv"]).reshape(b, t, c.num_kv_heads, c.head_dim)
    q = _partial_rope(offset_rms_norm(q, lp["q_norm"], c.rms_norm_eps), positions, c)
    k = _partial_rope(offset_rms_norm(k, lp["k_norm"], c.rms_norm_eps), positions, c)
    return q, k, v, gate.reshape(b, t, c.q_dim)


def _gated_output(lp: Params, attn: jax.Array, gate: jax.Array) -> jax.Array:
    return _dense(attn * jax.nn.sigmoid(gate), lp["wo"])


def _mlp(lp: Params, x: jax.Array, config: Qwen3_5Config) -> jax.Array:
    h = offset_rms_norm(x, lp["mlp_norm"], config.rms_norm_eps)
    return _dense(jax.nn.silu(_dense(h, lp["w_gate"])) * _dense(h, lp["w_up"]), lp["w_down"])


# ----------------------------------------------------------------------------------------------- the stack


def _cast(params: Params, config: Qwen3_5Config) -> Params:
    dtype = jnp.dtype(config.compute_dtype)
    return jax.tree_util.tree_map_with_path(
        lambda path, p: p if path[-1].key in _FLOAT32_LEAVES or p.dtype == dtype else p.astype(dtype), params)


def _blocks(params: Params, config: Qwen3_5Config) -> tuple[Params, Params, Params]:
    """The stacked layer params regrouped [num_blocks, layers of that kind per block, ...] for the scan."""
    period = config.block
    nb = config.num_layers // len(period)

    def split(tree, per_block):
        return jax.tree.map(lambda a: a.reshape(nb, per_block, *a.shape[1:]), tree) if tree else {}

    return (split(params["layers"], len(period)), split(params.get("linear_attn"), period.count(LINEAR)),
            split(params.get("full_attn"), period.count(FULL)))


def _take(tree: Params, i: int) -> Params:
    return jax.tree.map(lambda a: a[i], tree)


def hidden_states(
    config: Qwen3_5Config, params: Params, tokens: jax.Array, attention_mask: jax.Array | None = None,
    positions: jax.Array | None = None, constrain: Callable[[jax.Array, str], jax.Array] = _same,
) -> jax.Array:
    """Final-layer hidden states (before the last norm) for a batch without a cache; as llama.hidden_states.

    Padding may lead or trail a row, not sit inside it (the convolution would see it)."""
    params = _cast(params, config)
    if attention_mask is None:
        attention_mask = jnp.ones(tokens.shape, bool)
    valid = attention_mask.astype(bool)
    if positions is None:
        positions = jnp.maximum(jnp.cumsum(valid, axis=-1) - 1, 0)
    t = tokens.shape[1]
    mask = jnp.tril(jnp.ones((t, t), bool))[None] & valid[:, None, :]

    def layer(kind, x, common, lp):
        h = offset_rms_norm(x, common["attn_norm"], config.rms_norm_eps)
        if kind == LINEAR:
            out = gated_deltanet(lp, h, valid, config)[0]
        else:
            q, k, v, gate = _attention_qkv(lp, h, positions, config)
            out = _gated_output(lp, _attention(q, k, v, mask, config), gate)
        x = x + out
        return constrain(x + _mlp(common, x, config), "hidden")

    if config.remat:
        layer = jax.checkpoint(layer, static_argnums=(0,), policy=jax.checkpoint_policies.nothing_saveable)

    def block(x, bp):
        common, linear, full = bp
        counts = {LINEAR: 0, FULL: 0}
        for i, kind in enumerate(config.block):
            x = layer(kind, x, _take(common, i), _take(linear if kind == LINEAR else full, counts[kind]))
            counts[kind] += 1
        return x, None

    x = constrain(params["embed"][tokens], "hidden")
    x, _ = jax.lax.scan(block, x, _blocks(params, config))
    return x


def _logits(params: Params, x: jax.Array, config: Qwen3_5Config) -> jax.Array:
    x = offset_rms_norm(x, params["final_norm"], config.rms_norm_eps)
    if config.tie_embeddings:
        return jnp.einsum("btd,vd->btv", x, params["embed"], preferred_element_type=jnp.float32)
    return jnp.matmul(x, params["lm_head"], preferred_element_type=jnp.float32)


def forward(
    config: Qwen3_5Config, params: Params, tokens: jax.Array, attention_mask: jax.Array | None = None,
    positions: jax.Array | None = None, constrain: Callable[[jax.Array, str], jax.Array] = _same,
) -> jax.Array:
    """Logits [B, T, V] in float32 for tokens [B, T] (no cache); arguments as llama.forward."""
    x = hidden_states(config, params, tokens, attention_mask, positions, constrain)
    return constrain(_logits(_cast(params, config), x, config), "logits")


def features(
    config: Qwen3_5Config, params: Params, tokens: jax.Array, attention_mask: jax.Array | None = None,
    positions: jax.Array | None = None, constrain: Callable[[jax.Array, str], jax.Array] = _same,
) -> tuple[jax.Array, jax.Array]:
    """(final-normed hidden states [B, T, D], output head); as llama.features."""
    params = _cast(params, config)
    x = hidden_states(config, params, tokens, attention_mask, positions, constrain)
    return offset_rms_norm(x, params["final_norm"], config.rms_norm_eps), output_head(params, config)


def forward_cached(
    config: Qwen3_5Config, params: Params, tokens: jax.Array, positions: jax.Array, token_valid: jax.Array,
    cache: HybridCache, index: jax.Array,
) -> tuple[jax.Array, HybridCache]:
    """Run tokens [B, T] written at cache slots [index, index + T); returns (logits [B, V] at the last input
    position, new cache), as llama.forward_cached.

    Attention layers attend to the valid cache slots at or before each query's slot; DeltaNet layers continue from
    the cached convolution inputs and state (chunked for T > 1, recurrent for T = 1), skipping invalid tokens.
    """
    params = _cast(params, config)
    t = tokens.shape[1]
    token_valid = token_valid.astype(bool)
    valid = jax.lax.dynamic_update_slice(cache.valid, token_valid, (0, index))
    slots = jnp.arange(cache.valid.shape[1])
    mask = (slots[None, :] <= (index + jnp.arange(t))[:, None])[None] & valid[:, None, :]
    period = config.block
    per_linear, per_full = period.count(LINEAR), period.count(FULL)

    def block(carry, xs):
        x, ck, cv, conv, state = carry
        (common, linear, full), bi = xs
        counts = {LINEAR: 0, FULL: 0}
        for i, kind in enumerate(period):
            j = counts[kind]
            counts[kind] += 1
            lc = _take(common, i)
            h = offset_rms_norm(x, lc["attn_norm"], config.rms_norm_eps)
            if kind == LINEAR:
                li = bi * per_linear + j
                out, new_conv, new_state = gated_deltanet(
                    _take(linear, j), h, token_valid, config, jax.lax.dynamic_index_in_dim(conv, li, keepdims=False),
                    jax.lax.dynamic_index_in_dim(state, li, keepdims=False), recurrent=t == 1)
                conv = jax.lax.dynamic_update_slice(conv, new_conv[None].astype(conv.dtype), (li, 0, 0, 0))
                state = jax.lax.dynamic_update_slice(state, new_state[None], (li, 0, 0, 0, 0))
            else:
                li, lp = bi * per_full + j, _take(full, j)
                q, k, v, gate = _attention_qkv(lp, h, positions, config)
                ck = jax.lax.dynamic_update_slice(ck, k[None].astype(ck.dtype), (li, 0, index, 0, 0))
                cv = jax.lax.dynamic_update_slice(cv, v[None].astype(cv.dtype), (li, 0, index, 0, 0))
                k_all = jax.lax.dynamic_index_in_dim(ck, li, keepdims=False)
                v_all = jax.lax.dynamic_index_in_dim(cv, li, keepdims=False)
                out = _gated_output(lp, _attention(q, k_all, v_all, mask, config), gate)
            x = x + out
            x = x + _mlp(lc, x, config)
        return (x, ck, cv, conv, state), None

    x = params["embed"][tokens]
    nb = config.num_layers // len(period)
    (x, ck, cv, conv, state), _ = jax.lax.scan(
        block, (x, cache.k, cache.v, cache.conv, cache.state), (_blocks(params, config), jnp.arange(nb)))
    return _logits(params, x[:, -1:], config)[:, 0], HybridCache(ck, cv, valid, conv, state)


# ------------------------------------------------------------------------------------------------- FLOPs


def gdn_flops(config: Qwen3_5Config, tokens: int) -> float:
    """FLOPs of the chunked delta rule of one DeltaNet layer over `tokens` tokens (2 per multiply-add).

    Per chunk and head: the C x C products beta k k^T and q k^T (full blocks, as the hardware computes them), the
    block inversion of the C x C system (2/3 C^3), the inverse times [beta v | beta k e^G], intra-chunk attention
    times v', and three state products (W S, q S, k^T v')."""
    c, dk, dv = config.chunk_size, config.linear_key_head_dim, config.linear_value_head_dim
    per_token = 2 * c * dk + c * c / 3 + c * (dk + dv) + c * dv + 3 * dk * dv
    return 2.0 * tokens * config.linear_num_value_heads * per_token


def forward_flops(config: Qwen3_5Config, batch: int, seq: int) -> float:
    """Matmul FLOPs of one causal forward over [batch, seq] tokens (2 per multiply-add), counted analytically."""
    c = config
    D = c.hidden_size
    full = D * (3 * c.q_dim + 2 * c.kv_dim)
    linear = D * (c.conv_dim + c.value_dim + 2 * c.linear_num_value_heads) + c.value_dim * D
    per_token = c.num_full * full + c.num_linear * linear + c.num_layers * 3 * D * c.intermediate_size
    per_token += D * c.vocab_size
    attention = c.num_full * 2 * c.num_heads * c.head_dim * seq * (seq + 1) / 2
    return 2.0 * batch * (seq * per_token + attention) + batch * c.num_linear * gdn_flops(c, seq)
