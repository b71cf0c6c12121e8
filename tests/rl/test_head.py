"""The chunked output head (rl/head.py) against a float64 NumPy re-derivation of log-softmax, entropy and their
gradients, for either head layout, several ids per position, a length that is not a multiple of the chunk and a
temperature."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from harnessrl_jax.rl.head import gathered_logprobs

B, L, D, V, K, T = 3, 11, 8, 37, 3, 0.7


def numpy_head(x, w, ids, g_logp, g_entropy):
    """(logp, entropy, d objective / dx, d objective / dw) for objective = sum(g_logp logp) + sum(g_entropy H)."""
    z = np.einsum("bld,vd->blv", x, w) / T
    z = z - z.max(-1, keepdims=True)
    logp_all = z - np.log(np.exp(z).sum(-1, keepdims=True))
    p = np.exp(logp_all)
    entropy = -(p * logp_all).sum(-1)
    logp = np.take_along_axis(logp_all, ids, -1)
    dz = np.zeros_like(z)
    for k in range(ids.shape[-1]):  # d logp_k / dz = onehot(id_k) - p
        np.put_along_axis(dz, ids[..., k:k + 1], np.take_along_axis(dz, ids[..., k:k + 1], -1)
                          + g_logp[..., k:k + 1], -1)
        dz -= g_logp[..., k:k + 1] * p
    dz -= g_entropy[..., None] * p * (logp_all + entropy[..., None])  # dH / dz = -p (log p + H)
    dz /= T
    return logp, entropy, np.einsum("blv,vd->bld", dz, w), np.einsum("blv,bld->vd", dz, x)


@pytest.mark.parametrize("vocab_axis", [0, 1])
@pytest.mark.parametrize("chunk", [1, 4, 64])
def test_logprobs_entropy_and_gradients_match_numpy(vocab_axis, chunk):
    rng = np.random.default_rng(vocab_axis + 10 * chunk)
    x, w = rng.standard_normal((B, L, D)), rng.standard_normal((V, D))
    ids = rng.integers(0, V, (B, L, K))
    ids[0, 0] = 5  # the same id twice at one position
    g_logp, g_entropy = rng.standard_normal((B, L, K)), rng.standard_normal((B, L))
    head = w if vocab_axis == 0 else w.T

    def run(x, head):
        return gathered_logprobs(x, head, jnp.asarray(ids), temperature=T, vocab_axis=vocab_axis, chunk=chunk)

    def objective(x, head):
        logp, entropy = run(x, head)
        return jnp.sum(logp * g_logp) + jnp.sum(entropy * g_entropy)

    x32, head32 = jnp.asarray(x, jnp.float32), jnp.asarray(head, jnp.float32)
    logp, entropy = jax.jit(run)(x32, head32)
    dx, dhead = jax.jit(jax.grad(objective, (0, 1)))(x32, head32)
    want_logp, want_entropy, want_dx, want_dw = numpy_head(x, w, ids, g_logp, g_entropy)
    np.testing.assert_allclose(logp, want_logp, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(entropy, want_entropy, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dx, want_dx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dhead, want_dw if vocab_axis == 0 else want_dw.T, rtol=1e-4, atol=1e-4)


def test_bfloat16_inputs_give_float32_outputs_and_input_dtype_gradients():
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((B, L, D)), jnp.bfloat16)
    w = jnp.asarray(rng.standard_normal((V, D)), jnp.bfloat16)
    ids = rng.integers(0, V, (B, L, 1))
    logp, entropy = gathered_logprobs(x, w, jnp.asarray(ids), temperature=T, chunk=4)
    assert logp.dtype == entropy.dtype == jnp.float32
    want = numpy_head(np.asarray(x, np.float64), np.asarray(w, np.float64), ids, np.zeros((B, L, 1)),
                      np.zeros((B, L)))
    np.testing.assert_allclose(logp, want[0], atol=0.05)  # bfloat16 inputs, float32 accumulation
    dx, dw = jax.grad(lambda x, w: gathered_logprobs(x, w, jnp.asarray(ids), chunk=4)[0].sum(), (0, 1))(x, w)
    assert dx.dtype == dw.dtype == jnp.bfloat16
    assert np.isfinite(np.asarray(dx, np.float32)).all() and np.isfinite(np.asarray(dw, np.float32)).all()


def test_a_wrong_vocab_axis_is_an_error():
    with pytest.raises(ValueError, match="vocab_axis must be 0"):
        gathered_logprobs(jnp.zeros((1, 2, D)), jnp.zeros((V, D)), jnp.zeros((1, 2, 1), jnp.int32), vocab_axis=2)
