"""The GSPO and DAPO losses (registered for CoCA's D.5 variants) against NumPy re-derivations."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from harnessrl_jax.rl import grpo


def case(seed=0, B=8, L=7):
    rng = np.random.default_rng(seed)
    logp = -rng.random((B, L)) * 3
    old = logp + rng.normal(0, 0.1, (B, L))
    ref = logp + rng.normal(0, 0.2, (B, L))
    mask = rng.random((B, L)) < 0.8
    mask[:, 0] = True
    adv = rng.standard_normal(B)
    adv[2] = np.nan
    return logp, old, ref, adv, mask, rng.uniform(0.5, 2, B)


def test_gspo_is_the_sequence_ratio_objective_with_its_gradient():
    logp, old, ref, adv, mask, w = case()
    lo, hi = 0.01, 0.015
    total, den, _ = grpo.get_loss_fn("gspo")(jnp.asarray(logp), old, None, adv, mask, w, clip_low=lo, clip_high=hi,
                                             kl_coef=0.0, agg="sequence-mean-token-mean")
    ok = np.isfinite(adv)
    s = np.exp([(logp[b] - old[b])[mask[b]].mean() for b in range(len(adv))])
    per_seq = -np.minimum(s * adv, np.clip(s, 1 - lo, 1 + hi) * adv)
    np.testing.assert_allclose(total, (w * per_seq)[ok].sum(), rtol=1e-5)
    assert den == ok.sum()
    g = jax.grad(lambda lp: grpo.get_loss_fn("gspo")(lp, old, None, adv, mask, w, clip_low=lo, clip_high=hi,
                                                      kl_coef=0.0, agg="sequence-mean-token-mean")[0])(
        jnp.asarray(logp))
    clipped = (adv < 0) & (s < 1 - lo) | (adv > 0) & (s > 1 + hi)
    want = np.where(mask & (ok & ~clipped)[:, None],
                    -(w * s * np.nan_to_num(adv))[:, None] / mask.sum(1, keepdims=True), 0.0)
    np.testing.assert_allclose(g, want, atol=1e-6)
    assert clipped[ok].any() and (~clipped[ok]).any()  # both branches exercised


def test_gspo_keeps_the_per_token_k3_term():
    logp, old, ref, adv, mask, w = case(1)
    kw = dict(clip_low=0.2, clip_high=0.2, agg="token-mean")
    with_kl = grpo.get_loss_fn("gspo")(jnp.asarray(logp), old, ref, adv, mask, w, kl_coef=0.1, **kw)[0]
    without = grpo.get_loss_fn("gspo")(jnp.asarray(logp), old, None, adv, mask, w, kl_coef=0.0, **kw)[0]
    m = mask & np.isfinite(adv)[:, None]
    d = ref - logp
    np.testing.assert_allclose(with_kl - without, 0.1 * (w[:, None] * (np.exp(d) - d - 1) * m).sum(), rtol=1e-4)


def test_dapo_is_the_token_mean_clip_higher_loss_without_kl():
    logp, old, ref, adv, mask, w = case(2)
    got = grpo.get_loss_fn("dapo")(jnp.asarray(logp), old, ref, adv, mask, w, clip_low=0.2, clip_high=0.28,
                                   kl_coef=0.5, agg="sequence-mean-token-mean")
    want = grpo.policy_loss(jnp.asarray(logp), old, None, adv, mask, w, clip_low=0.2, clip_high=0.28, kl_coef=0.0,
                            agg="token-mean")
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    assert got[1] == want[1] == (mask & np.isfinite(adv)[:, None]).sum()


@pytest.mark.parametrize("name", ["grpo", "gspo", "dapo"])
def test_registered(name):
    assert grpo.get_loss_fn(name) is grpo.LOSS_FNS[name]
