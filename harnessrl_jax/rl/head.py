"""Log-probabilities of chosen tokens, and the entropy, from the final hidden states and the output head, a chunk of
positions at a time, so the [rows, positions, vocab] logits never exist whole, forward or backward (the backward
recomputes each chunk's logits from the hidden states).

For z = (x . head) / T over the vocabulary, p = softmax(z), lse = logsumexp(z):
    logp_k = z[id_k] - lse                                   (any K ids per position: the sampled token, top-k ids)
    H      = lse - sum_j p_j z_j                             (the entropy of p)
    d logp_k / dz = onehot(id_k) - p,    dH / dz = -p * (log p + H)
A chunk's backward needs only x, the head, the ids, lse and H: one head matmul more than autodiff of the dense
logits, for memory that no longer grows with positions x vocabulary (400 MB for 16 x 128 positions of SmolLM2's
49,152 tokens in float32, and another array that size per elementwise step of the log-softmax and its gradient).
"""

from __future__ import annotations

import functools
from typing import Callable

import jax
import jax.numpy as jnp

from harnessrl_jax.models.llama import _same  # the no-op `constrain` the models take too


def _logits(xc, w, vocab_axis: int, temperature: float, constrain):
    """z [B, c, V] float32 of a chunk xc [B, c, D] against the head w ([V, D] if vocab_axis == 0 else [D, V])."""
    z = jax.lax.dot_general(xc, w, (((2,), (1 - vocab_axis,)), ((), ())), preferred_element_type=jnp.float32)
    return constrain(z / temperature, "logits")


def _chunks(x, chunk: int):
    """[B, L, ...] -> [L/chunk, B, chunk, ...] (L a multiple of chunk)."""
    b, length = x.shape[:2]
    return x.reshape(b, length // chunk, chunk, *x.shape[2:]).swapaxes(0, 1)


def _unchunk(x):
    """[n, B, chunk, ...] -> [B, n * chunk, ...]."""
    return x.swapaxes(0, 1).reshape(x.shape[1], x.shape[0] * x.shape[2], *x.shape[3:])


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5, 6))
def _gathered(x, w, ids, temperature, vocab_axis, chunk, constrain):
    return _forward(x, w, ids, temperature, vocab_axis, chunk, constrain)[0]


def _forward(x, w, ids, temperature, vocab_axis, chunk, constrain):
    def one(_, xs):
        xc, idc = xs
        z = _logits(xc, w, vocab_axis, temperature, constrain)
        top = jax.lax.stop_gradient(jnp.max(z, axis=-1, keepdims=True))
        e = jnp.exp(z - top)
        total = jnp.sum(e, axis=-1)
        lse = top[..., 0] + jnp.log(total)
        entropy = lse - jnp.sum(e * z, axis=-1) / total
        return None, (jnp.take_along_axis(z, idc, axis=-1) - lse[..., None], entropy, lse)

    _, (logp, entropy, lse) = jax.lax.scan(one, None, (_chunks(x, chunk), _chunks(ids, chunk)))
    logp, entropy, lse = _unchunk(logp), _unchunk(entropy), _unchunk(lse)
    return (logp, entropy), (x, w, ids, lse, entropy)


def _backward(temperature, vocab_axis, chunk, constrain, residuals, cotangents):
    x, w, ids, lse, entropy = residuals
    g_logp, g_entropy = cotangents

    def one(dw, xs):
        xc, idc, lse_c, ent_c, gl, ge = xs
        z = _logits(xc, w, vocab_axis, temperature, constrain)
        p = jnp.exp(z - lse_c[..., None])
        dz = -p * (jnp.sum(gl, axis=-1) + ge * ent_c)[..., None] - (ge[..., None] * p) * (z - lse_c[..., None])
        b, c, k = idc.shape
        rows = jnp.arange(b)[:, None, None]
        cols = jnp.arange(c)[None, :, None]
        dz = dz.at[rows, cols, idc].add(gl)  # the one-hot part of d logp_k / dz
        dz = (dz / temperature).astype(xc.dtype)
        dx = jax.lax.dot_general(dz, w, (((2,), (vocab_axis,)), ((), ())), preferred_element_type=jnp.float32)
        if vocab_axis == 0:  # head [V, D]: dW = dz^T x over the chunk's positions
            dwc = jnp.einsum("bcv,bcd->vd", dz, xc, preferred_element_type=jnp.float32)
        else:
            dwc = jnp.einsum("bcd,bcv->dv", xc, dz, preferred_element_type=jnp.float32)
        return constrain(dw + dwc, "head"), dx.astype(xc.dtype)

    xs = tuple(_chunks(a, chunk) for a in (x, ids, lse, entropy, g_logp.astype(jnp.float32),
                                          g_entropy.astype(jnp.float32)))
    dw, dx = jax.lax.scan(one, constrain(jnp.zeros(w.shape, jnp.float32), "head"), xs)
    return _unchunk(dx), dw.astype(w.dtype), None


_gathered.defvjp(_forward, _backward)


def gathered_logprobs(x: jax.Array, head: jax.Array, ids: jax.Array, *, temperature: float = 1.0,
                      vocab_axis: int = 0, chunk: int = 64,
                      constrain: Callable[[jax.Array, str], jax.Array] = _same) -> tuple[jax.Array, jax.Array]:
    """(log softmax(x . head / T) at `ids` [B, L, K] float32, entropy [B, L] float32), differentiable in x and the
    head; x [B, L, D], head [V, D] (vocab_axis 0) or [D, V] (vocab_axis 1), ids [B, L, K] int. `chunk` positions
    per row at a time (L is padded up to a multiple of it); `constrain(z, 'logits')` is applied to each chunk's
    [B, chunk, V] logits and `constrain(g, 'head')` to the head's gradient as it accumulates (a sharded caller
    pins them to its batch sharding and to the head's own sharding)."""
    if vocab_axis not in (0, 1):
        raise ValueError(f"vocab_axis must be 0 ([V, D] head) or 1 ([D, V] head), got {vocab_axis}")
    length = x.shape[1]
    chunk = max(1, min(int(chunk), length))
    pad = -length % chunk
    if pad:
        x = jnp.pad(x, ((0, 0), (0, pad), (0, 0)))
        ids = jnp.pad(ids, ((0, 0), (0, pad), (0, 0)))
    logp, entropy = _gathered(x, head, ids.astype(jnp.int32), float(temperature), vocab_axis, chunk, constrain)
    return logp[:, :length], entropy[:, :length]
