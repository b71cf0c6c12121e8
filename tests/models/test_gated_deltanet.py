"""The gated delta rule: the chunk-parallel form against the token-by-token recurrence and transformers' reference."""

import jax
import jax.numpy as jnp
import numpy as np
import torch

from harnessrl_jax.models.gated_deltanet import (chunk_gated_delta_rule, recurrent_gated_delta_rule,
                                                 unit_lower_inverse)


def _delta_rule_inputs(rng, b=2, t=45, h=3, dk=8, dv=5):
    q, k = rng.normal(size=(2, b, t, h, dk))
    q = q / np.linalg.norm(q, axis=-1, keepdims=True) * dk**-0.5
    k = k / np.linalg.norm(k, axis=-1, keepdims=True)
    v = rng.normal(size=(b, t, h, dv))
    g = -rng.uniform(0.0, 2.0, size=(b, t, h))
    beta = rng.uniform(0.0, 1.0, size=(b, t, h))
    state = rng.normal(size=(b, h, dk, dv))
    return [np.asarray(x, np.float32) for x in (q, k, v, g, beta, state)]


def test_chunked_and_recurrent_gated_delta_rule_agree():
    from transformers.models.qwen3_5.modeling_qwen3_5 import torch_recurrent_gated_delta_rule

    q, k, v, g, beta, state = _delta_rule_inputs(np.random.default_rng(4))
    chunked = jax.jit(chunk_gated_delta_rule, static_argnums=6)
    out_c, final_c = chunked(q, k, v, g, beta, state, 16)  # 45 tokens: two full chunks and a padded one
    out_r, final_r = jax.jit(recurrent_gated_delta_rule)(q, k, v, g, beta, state)
    np.testing.assert_allclose(out_c, out_r, atol=2e-5)
    np.testing.assert_allclose(final_c, final_r, atol=2e-5)
    # transformers' per-token reference (it normalises q itself, so undo our scaling and let it redo it).
    ref, ref_state = torch_recurrent_gated_delta_rule(
        *(torch.tensor(x) for x in (q * q.shape[-1] ** 0.5, k, v, g, beta)), initial_state=torch.tensor(state),
        output_final_state=True, use_qk_l2norm_in_kernel=True)
    np.testing.assert_allclose(out_r, ref.numpy(), atol=2e-5)
    np.testing.assert_allclose(final_r, ref_state.numpy(), atol=2e-5)

    # And the gradients (through the block inversion and the chunk scan) agree with the recurrence's.
    def loss(fn):
        return lambda *xs: sum(jnp.sum(jnp.sin(o)) for o in fn(*xs))

    args = (q, k, v, g, beta, state)
    gc = jax.jit(jax.grad(loss(lambda *xs: chunk_gated_delta_rule(*xs, 16)), argnums=range(6)))(*args)
    gr = jax.jit(jax.grad(loss(recurrent_gated_delta_rule), argnums=range(6)))(*args)
    for a, b in zip(gc, gr):
        np.testing.assert_allclose(a, b, atol=5e-5, rtol=1e-4)


def test_unit_lower_inverse_matches_numpy():
    rng = np.random.default_rng(6)
    for n in (16, 45):  # a power of two, and one padded to the next
        t = np.tril(rng.normal(size=(2, n, n)) * 0.3, -1) + np.eye(n)
        np.testing.assert_allclose(unit_lower_inverse(jnp.asarray(t, jnp.float32)), np.linalg.inv(t), atol=1e-5)
