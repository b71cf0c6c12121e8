"""GRPO advantages and the clipped policy loss, as pure functions of arrays.

Advantages, per task row i of R [T, J] over its valid (non-NaN) entries V_i (NaN rewards stay NaN):
    grpo:     A_ij = (R_ij - mean_V(R_i)) / (std_V(R_i) + 1e-6)        population std, ddof = 0
    dr_grpo:  A_ij =  R_ij - mean_V(R_i)                                 (Dr. GRPO: no std division)
    rloo:     A_ij =  R_ij - mean_{V \\ j}(R_i) = n/(n-1) (R_ij - mean_V(R_i)),   n = |V_i|;  0 when n = 1
Loss, per unmasked token t of sequence b with advantage A_b and task-sampling weight u_b = 1 / (N p_i):
    r     = exp(clip(logp - old_logp, +-log_ratio_clip))
    pg    = -min(r A, clip(r, 1 - clip_low, 1 + clip_high) A)
    k3    = exp(d) - d - 1,   d = clip(ref_logp - logp, +-log_ratio_clip)       (Schulman's k3 KL estimator)
    w_tis = stop_gradient(min(exp(old_logp - engine_logp), tis_cap))   (Yao et al. 2025; 1 without tis_cap)
    loss  = u_b * (w_tis * pg + kl_coef * k3)
A loss returns (loss_sum, denominator, metrics), not a mean, so micro-batches and hosts reduce exactly.
"""

from typing import Callable

import jax
import jax.numpy as jnp

STD_EPS = 1e-6
AGG_MODES = ("token-mean", "sequence-mean-token-mean")


# ----------------------------------------------------------------------------------------------- advantages

def _row_stats(rewards):
    """Valid mask, valid count, mean and population variance per row (NaN entries ignored)."""
    rewards = jnp.asarray(rewards, jnp.float32)
    valid = ~jnp.isnan(rewards)
    n = valid.sum(axis=-1, keepdims=True).astype(jnp.float32)
    safe_n = jnp.maximum(n, 1.0)
    # Zero the NaNs before summing so they cannot leak into their row's statistics.
    r0 = jnp.where(valid, rewards, 0.0)
    mean = r0.sum(axis=-1, keepdims=True) / safe_n
    centred = jnp.where(valid, r0 - mean, 0.0)
    var = (centred ** 2).sum(axis=-1, keepdims=True) / safe_n
    return valid, n, centred, var


def group_advantages(rewards, normalize_std=True):
    """Per-row mean-centred rewards [T, J], over valid entries; divided by (population std + 1e-6) when asked."""
    valid, _, centred, var = _row_stats(rewards)
    adv = centred / (jnp.sqrt(var) + STD_EPS) if normalize_std else centred
    return jnp.where(valid, adv, jnp.nan)


def rloo_advantages(rewards):
    """Leave-one-out baseline per row over valid entries: R_ij - mean of the row's other valid rewards."""
    valid, n, centred, _ = _row_stats(rewards)
    # r_j - (S - r_j)/(n-1) = n/(n-1) (r_j - S/n); a lone valid entry has no baseline and gets 0.
    scale = jnp.where(n > 1, n / jnp.maximum(n - 1.0, 1.0), 0.0)
    return jnp.where(valid, centred * scale, jnp.nan)


def zero_variance_fraction(rewards):
    """Fraction of rows, among those with a valid reward, whose valid rewards are all equal (no learning signal)."""
    rewards = jnp.asarray(rewards, jnp.float32)
    valid = ~jnp.isnan(rewards)
    has_valid = valid.any(axis=-1)
    hi = jnp.where(valid, rewards, -jnp.inf).max(axis=-1)
    lo = jnp.where(valid, rewards, jnp.inf).min(axis=-1)
    flat = has_valid & (hi == lo)
    return flat.sum() / jnp.maximum(has_valid.sum(), 1)


def advantage_metrics(rewards):
    """Host-side reward statistics for one step (means, not sums: rewards are already global)."""
    rewards = jnp.asarray(rewards, jnp.float32)
    valid = ~jnp.isnan(rewards)
    n = jnp.maximum(valid.sum(), 1)
    r0 = jnp.where(valid, rewards, 0.0)
    mean = r0.sum() / n
    _, _, _, row_var = _row_stats(rewards)
    has_valid = valid.any(axis=-1)
    return {
        "reward_mean": mean,
        "reward_std": jnp.sqrt((jnp.where(valid, r0 - mean, 0.0) ** 2).sum() / n),
        "reward_valid_fraction": valid.mean(),
        "group_std_mean": (jnp.sqrt(row_var[:, 0]) * has_valid).sum() / jnp.maximum(has_valid.sum(), 1),
        "zero_variance_fraction": zero_variance_fraction(rewards),
        "all_failed_fraction": 1.0 - has_valid.mean(),
    }


ADVANTAGE_FNS: dict[str, Callable] = {}
# Estimators whose advantages do not depend on the rewards' scale (they divide by the group's std).
SCALE_FREE: set[str] = set()


def register_advantage(name, *, scale_free: bool = False):
    """Decorator: registers an estimator `rewards [T, J] -> advantages [T, J]` under `name`; `scale_free` when its
    advantages are the same for rewards in any unit (it divides by the group's std)."""
    def deco(fn):
        ADVANTAGE_FNS[name] = fn
        if scale_free:
            SCALE_FREE.add(name)
        return fn
    return deco


register_advantage("grpo", scale_free=True)(lambda rewards: group_advantages(rewards, normalize_std=True))
register_advantage("dr_grpo")(lambda rewards: group_advantages(rewards, normalize_std=False))
register_advantage("rloo")(rloo_advantages)


def get_advantage_fn(name):
    """The registered advantage estimator called `name`."""
    if name not in ADVANTAGE_FNS:
        raise ValueError(f"unknown advantage estimator {name!r}; known: {sorted(ADVANTAGE_FNS)}")
    return ADVANTAGE_FNS[name]


# ------------------------------------------------------------------------------------------------- logits

def token_logprobs(logits, targets, temperature=1.0):
    """log_softmax(logits / temperature) at `targets`: [B, L, V], [B, L] -> [B, L] float32."""
    x = logits.astype(jnp.float32) / temperature
    picked = jnp.take_along_axis(x, targets[..., None].astype(jnp.int32), axis=-1)[..., 0]
    # Equal to gathering log_softmax, without materialising a second [B, L, V] array.
    return picked - jax.nn.logsumexp(x, axis=-1)


def token_entropy(logits, mask):
    """Per-token entropy of softmax(logits) in float32, [B, L]; 0 where mask is off."""
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    p = jnp.exp(logp)
    # -inf logits (banned tokens) give p = 0 and 0 * -inf = NaN; select first so value and gradient stay finite.
    ent = -(p * jnp.where(p > 0, logp, 0.0)).sum(axis=-1)
    return jnp.where(jnp.asarray(mask, bool), ent, 0.0)


# --------------------------------------------------------------------------------------------------- loss

def policy_loss(logp, old_logp, ref_logp, advantages, mask, weights, *, clip_low, clip_high, kl_coef, agg,
                log_ratio_clip=20.0, tis_cap=None, engine_logp=None):
    """Clipped GRPO loss with k3 KL; returns (loss_sum, denominator, metrics), see the module docstring.

    token-mean: loss_sum sums all unmasked tokens, denominator counts them. sequence-mean-token-mean: loss_sum sums
    each sequence's token mean, denominator counts sequences with at least one unmasked token. A sequence with a
    NaN advantage is fully masked. ref_logp None means no reference (the KL term is 0). metrics: `*_sum` are sums
    over unmasked tokens (reduce by adding, divide by num_tokens), `*_max` reduce by max; see finalize_metrics.
    """
    if agg not in AGG_MODES:
        raise ValueError(f"unknown agg {agg!r}; expected one of {AGG_MODES}")
    if tis_cap is not None and engine_logp is None:
        raise ValueError("tis_cap needs engine_logp (the sampler's per-token logprobs)")
    f32 = jnp.float32
    advantages = jnp.asarray(advantages, f32)
    adv_ok = jnp.isfinite(advantages)
    m = jnp.asarray(mask, bool) & adv_ok[:, None]
    mf = m.astype(f32)
    # Select before any arithmetic: padding may hold -inf logprobs and NaN advantages must not reach the
    # gradient (where's unselected branch gets a zero cotangent, a multiplied-by-zero NaN would not).
    A = jnp.where(adv_ok, advantages, 0.0)[:, None]
    u = jnp.asarray(weights, f32)[:, None]
    lp = jnp.where(m, logp.astype(f32), 0.0)
    olp = jnp.where(m, old_logp.astype(f32), 0.0)

    raw_log_ratio = lp - olp
    ratio = jnp.exp(jnp.clip(raw_log_ratio, -log_ratio_clip, log_ratio_clip))
    lo, hi = 1.0 - clip_low, 1.0 + clip_high
    pg = -jnp.minimum(ratio * A, jnp.clip(ratio, lo, hi) * A)
    # The clipped branch is the (strictly) smaller one exactly in these two cases; there its gradient is zero.
    clipped_low = m & (A < 0) & (ratio < lo)
    clipped_high = m & (A > 0) & (ratio > hi)

    if ref_logp is None:
        k3 = jnp.zeros_like(lp)
    else:
        d = jnp.clip(jnp.where(m, ref_logp.astype(f32), 0.0) - lp, -log_ratio_clip, log_ratio_clip)
        k3 = jnp.exp(d) - d - 1.0

    metrics = {}
    if engine_logp is not None:
        elp = jnp.where(m, engine_logp.astype(f32), 0.0)
        gap = jnp.abs(olp - elp)
        metrics["engine_gap_sum"] = (gap * mf).sum()
        metrics["engine_gap_max"] = jnp.where(m, gap, 0.0).max(initial=0.0)
        if tis_cap is not None:
            w_tis = jnp.exp(jnp.clip(olp - elp, -log_ratio_clip, log_ratio_clip))
            metrics["tis_capped_sum"] = ((w_tis > tis_cap) & m).sum().astype(f32)
            w_tis = jax.lax.stop_gradient(jnp.minimum(w_tis, tis_cap))
            metrics["tis_weight_sum"] = (w_tis * mf).sum()
            pg = pg * w_tis

    per_token = u * (pg + kl_coef * k3) * mf
    n_tok = mf.sum(axis=-1)
    has_tok = n_tok > 0
    if agg == "token-mean":
        loss_sum, denominator = per_token.sum(), n_tok.sum()
    else:
        loss_sum = (per_token.sum(axis=-1) / jnp.maximum(n_tok, 1.0)).sum()
        denominator = has_tok.sum().astype(f32)

    metrics.update(
        num_tokens=n_tok.sum(),
        num_sequences=has_tok.sum().astype(f32),
        clip_low_sum=clipped_low.sum().astype(f32),
        clip_high_sum=clipped_high.sum().astype(f32),
        kl_sum=(k3 * mf).sum(),
        ratio_sum=(ratio * mf).sum(),
        abs_log_ratio_sum=(jnp.abs(raw_log_ratio) * mf).sum(),
    )
    return loss_sum, denominator, metrics


def merge_metrics(a, b):
    """Combines two policy_loss metric dicts (micro-batches, hosts): `*_max` by max, the rest by sum."""
    return {k: jnp.maximum(a[k], b[k]) if k.endswith("_max") else a[k] + b[k] for k in a}


def finalize_metrics(metrics):
    """Turns `X_sum` into the per-token mean `X` (e.g. clip_low is the low-side clip fraction); keeps the rest."""
    n = jnp.maximum(metrics["num_tokens"], 1.0)
    return {(k[:-4] if k.endswith("_sum") else k): (v / n if k.endswith("_sum") else v) for k, v in metrics.items()}


LOSS_FNS: dict[str, Callable] = {}


def register_loss(name):
    """Decorator: registers a loss with policy_loss's signature under `name`."""
    def deco(fn):
        LOSS_FNS[name] = fn
        return fn
    return deco


register_loss("grpo")(policy_loss)


@register_loss("gspo")
def gspo_loss(logp, old_logp, ref_logp, advantages, mask, weights, *, clip_low, clip_high, kl_coef, agg,
              log_ratio_clip=20.0, tis_cap=None, engine_logp=None):
    """GSPO (Zheng et al. 2025): policy_loss with the sequence-level ratio s_b = exp(mean_t(logp - old_logp)) of
    each sequence in place of the token ratios, in its token form s_bt = sg(s_b) pi(y_t) / sg(pi(y_t)) (value s_b,
    gradient s_b grad log pi(y_t)), clipped per sequence; with agg 'sequence-mean-token-mean' this is GSPO's
    objective exactly. The k3 term to the reference stays per token. CoCA's D.5 variant."""
    f32 = jnp.float32
    adv_ok = jnp.isfinite(jnp.asarray(advantages, f32))
    m = jnp.asarray(mask, bool) & adv_ok[:, None]
    lp = jnp.where(m, logp.astype(f32), 0.0)
    olp = jnp.where(m, old_logp.astype(f32), 0.0)
    seq = jnp.sum(lp - olp, axis=-1, keepdims=True) / jnp.maximum(m.sum(axis=-1, keepdims=True), 1)
    shifted = olp + jax.lax.stop_gradient(seq) + lp - jax.lax.stop_gradient(lp)
    loss_sum, denominator, metrics = policy_loss(
        shifted, olp, None, advantages, mask, weights, clip_low=clip_low, clip_high=clip_high, kl_coef=0.0, agg=agg,
        log_ratio_clip=log_ratio_clip, tis_cap=tis_cap, engine_logp=engine_logp)
    if ref_logp is not None and kl_coef:
        kl_only = jnp.where(adv_ok, 0.0, jnp.nan)  # same rows, no policy-gradient term
        kl_sum, _, kl_metrics = policy_loss(logp, jax.lax.stop_gradient(logp), ref_logp, kl_only, mask, weights,
                                            clip_low=clip_low, clip_high=clip_high, kl_coef=kl_coef, agg=agg,
                                            log_ratio_clip=log_ratio_clip)
        loss_sum, metrics["kl_sum"] = loss_sum + kl_sum, kl_metrics["kl_sum"]
    return loss_sum, denominator, metrics


@register_loss("dapo")
def dapo_loss(logp, old_logp, ref_logp, advantages, mask, weights, *, clip_low, clip_high, kl_coef, agg,
              log_ratio_clip=20.0, tis_cap=None, engine_logp=None):
    """DAPO's loss (Yu et al. 2025): the clipped surrogate with decoupled clip range (clip-higher: set
    loss.clip_high, 0.28 in the paper), token-level aggregation and no KL term, whatever `agg` and `kl_coef` say.
    Its dynamic sampling and overlong shaping are not part of the loss (not implemented)."""
    del agg, kl_coef
    return policy_loss(logp, old_logp, ref_logp, advantages, mask, weights, clip_low=clip_low, clip_high=clip_high,
                       kl_coef=0.0, agg="token-mean", log_ratio_clip=log_ratio_clip, tis_cap=tis_cap,
                       engine_logp=engine_logp)


def get_loss_fn(name):
    """The registered loss called `name`."""
    if name not in LOSS_FNS:
        raise ValueError(f"unknown loss {name!r}; known: {sorted(LOSS_FNS)}")
    return LOSS_FNS[name]
