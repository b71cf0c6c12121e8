"""CoCA's top-k + tail forward KL against a NumPy re-derivation: values, the student's gradient (closed form and
finite differences), no gradient into the teacher, and the precomputed-teacher form the train step uses."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from harnessrl_jax.rl import distill


def np_log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def np_kl(teacher, student, mask, k, T):
    """Per-position KL_t and its gradient w.r.t. the student logits, float64, written out from the definition."""
    lpT, lpS = np_log_softmax(teacher / T), np_log_softmax(student / T)
    pT, pS = np.exp(lpT), np.exp(lpS)
    B, L, V = teacher.shape
    kl, grad = np.zeros((B, L)), np.zeros_like(student)
    for b in range(B):
        for t in range(L):
            top = np.argsort(-lpT[b, t], kind="stable")[:k]
            inV = np.zeros(V, bool)
            inV[top] = True
            tailT = max(1 - pT[b, t, top].sum(), 1e-12)
            tailS = max(1 - pS[b, t, top].sum(), 1e-12)
            kl[b, t] = (pT[b, t, top] * (lpT[b, t, top] - lpS[b, t, top])).sum() + tailT * (np.log(tailT) -
                                                                                          np.log(tailS))
            # d/dx_j of -sum_V pT log pS - tailT log tailS, x = z / T
            sV = pS[b, t, top].sum()
            g = -pT[b, t] * inV + pS[b, t] * (1 - tailT) - tailT / tailS * pS[b, t] * (sV - inV)
            grad[b, t] = g / T * mask[b, t]
    return kl, grad


def case(seed=0, B=2, L=5, V=11):
    rng = np.random.default_rng(seed)
    teacher = rng.normal(0, 2.0, (B, L, V))
    student = rng.normal(0, 2.0, (B, L, V))
    mask = rng.random((B, L)) < 0.7
    mask[0, 0] = True
    return teacher, student, mask


@pytest.mark.parametrize("k, T", [(3, 1.0), (1, 0.7), (10, 1.3)])
def test_value_and_student_gradient_match_numpy(k, T):
    teacher, student, mask = case()
    kl, grad = np_kl(teacher, student, mask, k, T)
    total, denom = distill.topk_forward_kl(jnp.asarray(teacher, jnp.float32), jnp.asarray(student, jnp.float32),
                                           mask, k=k, temperature=T)
    np.testing.assert_allclose(total, (kl * mask).sum(), rtol=1e-5)
    assert denom == mask.sum()

    def f(s):
        return distill.topk_forward_kl(jnp.asarray(teacher, jnp.float32), s, mask, k=k, temperature=T)[0]

    got = jax.grad(f)(jnp.asarray(student, jnp.float32))
    np.testing.assert_allclose(got, grad, atol=1e-5)


def test_gradient_matches_finite_differences():
    teacher, student, mask = case(seed=3)
    k, T, eps = 4, 1.0, 1e-5
    kl, grad = np_kl(teacher, student, mask, k, T)
    rng = np.random.default_rng(1)
    for _ in range(12):
        idx = tuple(rng.integers(0, n) for n in student.shape)
        up, down = student.copy(), student.copy()
        up[idx] += eps
        down[idx] -= eps
        fd = ((np_kl(teacher, up, mask, k, T)[0] * mask).sum() - (np_kl(teacher, down, mask, k, T)[0] * mask).sum())
        np.testing.assert_allclose(fd / (2 * eps), grad[idx], atol=1e-6)


def test_no_gradient_flows_into_the_teacher():
    teacher, student, mask = case(seed=2)
    g = jax.grad(lambda t: distill.topk_forward_kl(t, jnp.asarray(student, jnp.float32), mask, k=3)[0])(
        jnp.asarray(teacher, jnp.float32))
    assert not np.any(np.asarray(g))


def test_k_of_all_but_one_token_is_the_full_kl():
    teacher, student, mask = case(seed=4)
    V = teacher.shape[-1]
    lpT, lpS = np_log_softmax(teacher), np_log_softmax(student)
    full = (np.exp(lpT) * (lpT - lpS)).sum(-1)
    total, _ = distill.topk_forward_kl(jnp.asarray(teacher, jnp.float32), jnp.asarray(student, jnp.float32), mask,
                                       k=V - 1)
    np.testing.assert_allclose(total, (full * mask).sum(), rtol=1e-4)


def test_identical_teacher_and_student_give_zero_and_masked_positions_count_nothing():
    teacher, _, mask = case(seed=5)
    t = jnp.asarray(teacher, jnp.float32)
    total, _ = distill.topk_forward_kl(t, t, mask, k=3)
    assert abs(float(total)) < 1e-5
    student = np.asarray(teacher, np.float32).copy()
    student[~mask] = 50.0 * np.random.default_rng(0).standard_normal(student[~mask].shape)
    value, g = jax.value_and_grad(lambda s: distill.topk_forward_kl(t, s, mask, k=3)[0])(jnp.asarray(student))
    assert abs(float(value)) < 1e-5  # positions off the mask count nothing, in value or gradient
    assert not np.any(np.asarray(g)[~mask])


def test_precomputed_teacher_form_equals_the_contract():
    teacher, student, mask = case(seed=6)
    t, s = jnp.asarray(teacher, jnp.float32), jnp.asarray(student, jnp.float32)
    ids, logp = distill.teacher_topk(t, k=5, temperature=0.8)
    a = distill.topk_kl_from_teacher(ids, logp, s, mask, temperature=0.8)
    b = distill.topk_forward_kl(t, s, mask, k=5, temperature=0.8)
    np.testing.assert_allclose(a, b, rtol=1e-6)


def test_a_top_k_holding_all_the_mass_is_finite_in_value_and_gradient():
    """Placeholder targets (id 0 k times, logp 0: what padding rows of the batch hold) put the mass >= 1; the
    tail is then clamped, and nothing becomes NaN, even though those positions are masked off."""
    ids = jnp.zeros((1, 2, 4), jnp.int32)
    logp = jnp.zeros((1, 2, 4), jnp.float32)
    student = jnp.asarray(np.random.default_rng(0).normal(size=(1, 2, 6)) + np.array([9.0, 0, 0, 0, 0, 0]),
                          jnp.float32)
    g = jax.grad(lambda s: distill.topk_kl_from_teacher(ids, logp, s, np.array([[True, False]]))[0])(student)
    assert np.all(np.isfinite(np.asarray(g)))
