"""The gated delta rule (Gated DeltaNet's token mixer) in plain JAX: chunk-parallel and token by token.

Per head, with l2-normalised q, k (q scaled by Dk^-1/2), a decay g <= 0 and a write strength beta in (0, 1):

    S_t = e^{g_t} S_{t-1} + k_t beta_t (v_t - e^{g_t} S_{t-1}^T k_t)^T,    o_t = S_t^T q_t.

`chunk_gated_delta_rule` computes it for training and prefill: within a chunk of C tokens the sequential updates
become one unit lower-triangular system (inverted by block elimination) and a few C x C and C x D matmuls; across
chunks a scan carries S. Memory is linear in the sequence (a few C x C blocks per chunk and head).
`recurrent_gated_delta_rule` runs the recurrence one token at a time (decoding, and the reference in tests).
All arithmetic is float32.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def _heads_first(x: jax.Array, n: int, c: int) -> jax.Array:
    """[B, N*C, H, ...] -> [B, H, N, C, ...]."""
    b, _, h, *rest = x.shape
    x = x.reshape(b, n, c, h, *rest)
    return jnp.moveaxis(x, 3, 1)


def unit_lower_inverse(t: jax.Array) -> jax.Array:
    """Inverse of unit lower-triangular matrices [..., n, n] by block elimination, bottom-up: the inverses of
    adjacent diagonal blocks of size s combine into one of size 2s as [[A, 0], [-D T21 A, D]]. log2(n) rounds of
    batched matmuls, no sequential loop; n is padded to a power of two with an identity block.

    (XLA's batched triangular_solve on the CPU intermittently never returned inside the model's backward pass, and
    batched tiny solves are slow on GPUs; FLA's kernels invert their chunks the same way.)"""
    n = t.shape[-1]
    size = 1 << max(0, (n - 1).bit_length())
    if size != n:
        t = jnp.pad(t, [(0, 0)] * (t.ndim - 2) + [(0, size - n), (0, size - n)])
        t = t + jnp.diag(jnp.arange(size) >= n).astype(t.dtype)
    lead = t.shape[:-2]
    blocks = jnp.ones(lead + (size, 1, 1), t.dtype)  # the inverses of the 1 x 1 diagonal blocks
    s = 1
    while s < size:
        pairs = size // (2 * s)
        diag = jnp.diagonal(t.reshape(lead + (pairs, 2 * s, pairs, 2 * s)), axis1=-4, axis2=-2)
        lower_left = jnp.moveaxis(diag, -1, -3)[..., s:, :s]  # [..., pairs, s, s]
        a, d = blocks[..., 0::2, :, :], blocks[..., 1::2, :, :]
        top = jnp.concatenate([a, jnp.zeros_like(a)], axis=-1)
        bottom = jnp.concatenate([-(d @ lower_left @ a), d], axis=-1)
        blocks = jnp.concatenate([top, bottom], axis=-2)
        s *= 2
    return blocks[..., 0, :n, :n]


def chunk_gated_delta_rule(q, k, v, g, beta, initial_state=None, chunk_size: int = 64):
    """The delta-rule recurrence (module docstring) over chunks of `chunk_size` tokens: (o [B, T, H, Dv], final state
    [B, H, Dk, Dv]), in float32. q, k [B, T, H, Dk] (normalised, q scaled), v [B, T, H, Dv], g, beta [B, T, H].

    Within a chunk, with G the cumulative sum of g and D_ij = exp(G_i - G_j) for j <= i, the chunk's corrected
    values are [U | W] = (I + strict_lower(beta k k^T * D))^-1 [beta v | beta k e^G]; then per chunk
    v' = U - W S, o = (q e^G) S + (q k^T * D) v', S <- e^{G_C} S + (k e^{G_C - G})^T v'. Memory is linear in T
    (a few C x C blocks per chunk and head); the scan carries only S.
    """
    f32 = jnp.float32
    b, t, h, dk = k.shape
    dv = v.shape[-1]
    c = min(chunk_size, t)
    pad = -t % c
    q, k, v, g, beta = (x.astype(f32) for x in (q, k, v, g, beta))
    if pad:  # padded steps have k = 0, beta = 0, g = 0: they leave the state alone
        q, k, v = (jnp.pad(x, ((0, 0), (0, pad), (0, 0), (0, 0))) for x in (q, k, v))
        g, beta = (jnp.pad(x, ((0, 0), (0, pad), (0, 0))) for x in (g, beta))
    n = (t + pad) // c
    q, k, v = (_heads_first(x, n, c) for x in (q, k, v))  # [B, H, N, C, D]
    g, beta = (_heads_first(x, n, c) for x in (g, beta))  # [B, H, N, C]

    cum = jnp.cumsum(g, axis=-1)
    lower = jnp.tril(jnp.ones((c, c), bool))
    # exp of a masked difference: the upper triangle (positive, possibly huge) is never exponentiated.
    decay = jnp.exp(jnp.where(lower, cum[..., :, None] - cum[..., None, :], -jnp.inf))
    k_beta = k * beta[..., None]
    system = jnp.where(lower & ~jnp.eye(c, dtype=bool), k_beta @ jnp.swapaxes(k, -1, -2) * decay, 0.0)
    inverse = unit_lower_inverse(system + jnp.eye(c, dtype=f32))
    u = inverse @ (v * beta[..., None])
    w = inverse @ (k_beta * jnp.exp(cum)[..., None])
    intra = q @ jnp.swapaxes(k, -1, -2) * decay
    q_decayed = q * jnp.exp(cum)[..., None]
    k_decayed = k * jnp.exp(cum[..., -1:] - cum)[..., None]
    chunk_decay = jnp.exp(cum[..., -1])[..., None, None]  # [B, H, N, 1, 1]

    def step(state, xs):
        u_i, w_i, q_i, k_i, a_i, d_i = xs
        v_new = u_i - w_i @ state
        out = q_i @ state + a_i @ v_new
        return state * d_i + jnp.swapaxes(k_i, -1, -2) @ v_new, out

    state = jnp.zeros((b, h, dk, dv), f32) if initial_state is None else initial_state.astype(f32)
    xs = tuple(jnp.moveaxis(x, 2, 0) for x in (u, w, q_decayed, k_decayed, intra, chunk_decay))
    state, out = jax.lax.scan(step, state, xs)  # out [N, B, H, C, Dv]
    out = jnp.moveaxis(out, 0, 2).reshape(b, h, n * c, dv)
    return jnp.swapaxes(out, 1, 2)[:, :t], state


def recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=None):
    """The same recurrence one token at a time (decoding; the reference for the chunked form). Shapes as
    `chunk_gated_delta_rule`."""
    f32 = jnp.float32
    b, t, h, dk = k.shape
    q, k, v, g, beta = (jnp.moveaxis(x.astype(f32), 1, 0) for x in (q, k, v, g, beta))

    def step(state, xs):
        q_t, k_t, v_t, g_t, b_t = xs
        state = state * jnp.exp(g_t)[..., None, None]
        delta = (v_t - jnp.einsum("bhk,bhkv->bhv", k_t, state)) * b_t[..., None]
        state = state + k_t[..., :, None] * delta[..., None, :]
        return state, jnp.einsum("bhk,bhkv->bhv", q_t, state)

    state = jnp.zeros((b, h, dk, v.shape[-1]), f32) if initial_state is None else initial_state.astype(f32)
    state, out = jax.lax.scan(step, state, (q, k, v, g, beta))
    return jnp.moveaxis(out, 0, 1), state
