"""CoCA's frontier-guided on-policy self-distillation term: forward KL(teacher || student) over k + 1 bins, the
teacher's k most likely tokens plus one bin for the rest of the mass.

Per completion position t, with pT = softmax(z_T / T), pS = softmax(z_S / T) and V_t the teacher's top-k ids:

    tailT = 1 - sum_{v in V_t} pT(v),   tailS = 1 - sum_{v in V_t} pS(v)
    KL_t  = sum_{v in V_t} pT(v) (log pT(v) - log pS(v)) + tailT (log tailT - log tailS)

Float32; log tail clamped to >= log(1e-12); no gradient reaches the teacher. `topk_forward_kl` takes both full
logits; the train step uses `kl_sum_from_logps` on the teacher's top-k (`Trainer.teacher_topk`, once per batch) and
the student's log-probabilities at those ids. Both return a sum and a denominator, as the GRPO loss does.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

LOG_TAIL_FLOOR = float(jnp.log(1e-12))


def log_tail(logp_topk):
    """log(1 - sum exp(logp)) over the last axis, clamped to >= log(1e-12) (the mass outside the top k)."""
    mass = jnp.sum(jnp.exp(logp_topk), axis=-1)
    # select before log1p: at mass >= 1 (rounding, or a padding position's placeholder ids) its derivative is
    # infinite, and a zero cotangent times it would be NaN
    ok = mass < 1.0
    tail = jnp.where(ok, jnp.log1p(-jnp.where(ok, mass, 0.0)), LOG_TAIL_FLOOR)
    return jnp.maximum(tail, LOG_TAIL_FLOOR)


def teacher_topk(teacher_logits, *, k: int, temperature: float = 1.0):
    """(ids [.., k] int32, log-probabilities [.., k] float32) of the k most likely tokens of softmax(logits / T),
    with no gradient."""
    logp = jax.nn.log_softmax(jax.lax.stop_gradient(teacher_logits).astype(jnp.float32) / temperature, axis=-1)
    values, ids = jax.lax.top_k(logp, k)
    return ids.astype(jnp.int32), values


def kl_terms(teacher_ids, teacher_logp, student_logits, temperature: float = 1.0):
    """KL_t [B, L] from the teacher's top-k (ids, logp) [B, L, k] and the student's logits [B, L, V]."""
    teacher_logp = jax.lax.stop_gradient(teacher_logp.astype(jnp.float32))
    x = student_logits.astype(jnp.float32) / temperature
    student_logp = jnp.take_along_axis(x, teacher_ids, axis=-1) - jax.nn.logsumexp(x, axis=-1)[..., None]
    return kl_from_logps(teacher_logp, student_logp)


def kl_from_logps(teacher_logp, student_logp):
    """KL_t [B, L] from the teacher's and the student's log-probabilities [B, L, k] of the teacher's top-k ids
    (the train step gathers the student's at those ids from its chunked head, rl/head.py)."""
    teacher_logp = jax.lax.stop_gradient(teacher_logp.astype(jnp.float32))
    student_logp = student_logp.astype(jnp.float32)
    pT = jnp.exp(teacher_logp)
    tail_t, tail_s = log_tail(teacher_logp), log_tail(student_logp)
    return jnp.sum(pT * (teacher_logp - student_logp), axis=-1) + jnp.exp(tail_t) * (tail_t - tail_s)


def topk_kl_from_teacher(teacher_ids, teacher_logp, student_logits, mask, *, temperature: float = 1.0):
    """(sum_t mask_t KL_t, sum_t mask_t) with the teacher given as its top-k (ids, logp) [B, L, k]."""
    m = jnp.asarray(mask, bool)
    kl = kl_terms(teacher_ids, teacher_logp, student_logits, temperature)
    # select, not multiply: a padded position's KL may be anything, and must not reach the gradient
    return jnp.sum(jnp.where(m, kl, 0.0)), jnp.sum(m).astype(jnp.float32)


def kl_sum_from_logps(teacher_logp, student_logp, mask):
    """(sum_t mask_t KL_t, sum_t mask_t), as topk_kl_from_teacher, from the student's log-probabilities at the
    teacher's top-k ids [B, L, k]."""
    m = jnp.asarray(mask, bool)
    return jnp.sum(jnp.where(m, kl_from_logps(teacher_logp, student_logp), 0.0)), jnp.sum(m).astype(jnp.float32)


def topk_forward_kl(teacher_logits, student_logits, mask, *, k: int, temperature: float = 1.0):
    """(sum, denom) of the top-k + tail forward KL per masked position (see the module docstring); logits
    [B, L, V], mask [B, L]; the teacher gets no gradient."""
    ids, logp = teacher_topk(teacher_logits, k=k, temperature=temperature)
    return topk_kl_from_teacher(ids, logp, student_logits, mask, temperature=temperature)


__all__ = ["kl_from_logps", "kl_sum_from_logps", "kl_terms", "log_tail", "teacher_topk", "topk_forward_kl",
           "topk_kl_from_teacher"]
