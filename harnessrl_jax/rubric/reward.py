"""Rubric reward and group statistics over a score matrix S [K criteria, J responses] with cells in {0, 1, NaN}.

NaN marks a verdict that could not be parsed. It is treated as "not judged", never as a fail: the criterion
leaves both the numerator and the denominator for that response only, so one lost verdict neither penalises nor
rewards the response. A response left with no valid positive criterion has reward NaN (downstream, GRPO's group
advantages skip NaN entries).
"""

from __future__ import annotations

import numpy as np

# Lambda in r = Lambda * sum_m(l_m s_m) / sum_m(max(l_m, 0)) (HarnessRL, sec. 4.1): rewards in reward points.
LAMBDA = 100.0


def _xp(*arrays):
    """jax.numpy if any input is a jax array or tracer, else numpy; keeps host-side callers free of jax."""
    if any(type(a).__module__.startswith("jax") for a in arrays):
        import jax.numpy as jnp
        return jnp
    return np


def _float(xp, x):
    # float64 on the host; jax's default float (float32 unless x64 is on) so no dtype warning under jax.
    return xp.asarray(x, dtype=float if xp is np else xp.result_type(float))


def _check(points, S):
    if points.ndim != 1 or S.ndim != 2 or S.shape[0] != points.shape[0]:
        raise ValueError(f"expected points [K] and S [K, J], got {tuple(points.shape)} and {tuple(S.shape)}")


def rubric_reward(points, S, scale: float = LAMBDA):
    """Rewards [J] = scale * sum_k(points_k S_kj) / sum_k(max(points_k, 0)), NaN cells left out per response."""
    xp = _xp(points, S)
    points = _float(xp, points)
    S = _float(xp, S)
    _check(points, S)
    if xp is np:  # values are only inspectable on the host (not under jit)
        if not np.all(np.isfinite(points)):
            raise ValueError(f"points must be finite, got {points}")
        bad = ~(np.isnan(S) | (S == 0) | (S == 1))
        if bad.any():
            raise ValueError(f"S must hold 0, 1 or NaN; got {S[bad][:5]}")
    valid = ~xp.isnan(S)
    s = xp.where(valid, S, 0.0)
    num = (points[:, None] * s).sum(axis=0)
    den = (xp.maximum(points, 0.0)[:, None] * valid).sum(axis=0)
    safe = xp.where(den > 0, den, 1.0)  # keeps the division (and its gradient under jax) NaN-free
    return xp.where(den > 0, scale * num / safe, xp.nan)


def pass_rates(S):
    """Per criterion [K]: share of responses that meet it, over valid cells; NaN where no cell is valid."""
    xp = _xp(S)
    S = _float(xp, S)
    valid = ~xp.isnan(S)
    n = valid.sum(axis=1)
    hits = xp.where(valid, S, 0.0).sum(axis=1)
    return xp.where(n > 0, hits / xp.maximum(n, 1), xp.nan)


def varies(S):
    """Per criterion [K]: True where the group is split (some valid pass and some valid fail)."""
    xp = _xp(S)
    S = _float(xp, S)
    return xp.any(S == 1, axis=1) & xp.any(S == 0, axis=1)  # NaN compares unequal to both


def discriminative_mass(points, S, *, weighted: bool = False):
    """Share of criteria that vary within the group (paper); `weighted`: share of the positive weight instead.

    HarnessRL's discriminative mass is "the share of criteria that separate the group" (close reading, sec. 4.3,
    the attributor's Stage question); a saturated task is one whose all-pass criteria pull it down. The paper
    gives it unweighted, so that is the default. Criteria with no valid verdict are left out of the share;
    NaN when nothing is left.
    """
    xp = _xp(points, S)
    points = _float(xp, points)
    S = _float(xp, S)
    _check(points, S)
    judged = xp.any(~xp.isnan(S), axis=1)
    w = xp.maximum(points, 0.0) if weighted else xp.ones_like(points)
    total = (w * judged).sum()
    mass = xp.where(total > 0, (w * varies(S)).sum() / xp.where(total > 0, total, 1.0), xp.nan)
    return float(mass) if xp is np else mass


def satisfied(S_row, points: float) -> np.ndarray:
    """[J] float: 1 where the response satisfies the criterion (S = 1 for a requirement, 0 for a pitfall), NaN
    where there is no verdict."""
    s = np.asarray(S_row, np.float64)
    return s if points > 0 else np.where(np.isnan(s), np.nan, 1.0 - s)
