"""Reward-oracle agreement over rollout pairs and the pair-level failure taxonomy (HarnessRL, sec. 1 and 5).

Within each group every unordered pair (i, j) of rollouts gets d_ij = sign(r_i - r_j) under the rubric they were
graded with and o_ij in {-1, 0, +1} from the oracle (0: a tie or an order-inconsistent verdict), and one class:

    reward_tie       d_ij == 0                   the reward cannot order them (split by the tied reward: below 50
                                                 points `blind`, at or above `saturated`)
    agree            d_ij != 0 and d_ij == o_ij
    wrong_direction  d_ij != 0, o_ij != 0, d_ij == -o_ij
    oracle_tie       d_ij != 0 and o_ij == 0     the reward separates what the oracle does not

agreement = agree / all pairs (ties in the denominator); a pair with a NaN reward or verdict is in no class.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np

from harnessrl_jax.rubric.reward import satisfied

PAIR_CLASSES = ("agree", "reward_tie", "wrong_direction", "oracle_tie")
TIE_SPLIT = 50.0  # a reward tie below this many points counts as blind, at or above as saturated


def pairwise_from_scores(scores) -> np.ndarray:
    """[J, J] o_ij = sign(score_i - score_j) of per-rollout oracle scores (NaN where either is NaN)."""
    s = np.asarray(scores, np.float64)
    return np.sign(s[:, None] - s[None, :])

def pair_counts(rewards, oracle_pairs) -> dict[str, int]:
    """Counts of one group's pairs: `pairs` (classified), each of PAIR_CLASSES, `reward_tie_blind` /
    `reward_tie_saturated`, and `separated` (pairs with o_ij != 0, the denominator of agreement_separated).

    rewards: [J] reward points; oracle_pairs: [J, J] antisymmetric o_ij (NaN: no oracle verdict for that pair).
    """
    r = np.asarray(rewards, np.float64)
    o = np.asarray(oracle_pairs, np.float64)
    J = r.shape[0]
    if o.shape != (J, J):
        raise ValueError(f"oracle_pairs has shape {o.shape}, expected {(J, J)} for {J} rewards")
    iu, ju = np.triu_indices(J, 1)
    d = np.sign(r[iu] - r[ju])
    oij = o[iu, ju]
    ok = ~(np.isnan(d) | np.isnan(oij))
    d, oij, tied_at = d[ok], oij[ok], r[iu][ok]
    tie = d == 0
    return {
        "pairs": int(ok.sum()),
        "agree": int((~tie & (d == oij)).sum()),
        "reward_tie": int(tie.sum()),
        "wrong_direction": int((~tie & (oij != 0) & (d == -oij)).sum()),
        "oracle_tie": int((~tie & (oij == 0)).sum()),
        "reward_tie_blind": int((tie & (tied_at < TIE_SPLIT)).sum()),
        "reward_tie_saturated": int((tie & (tied_at >= TIE_SPLIT)).sum()),
        "separated": int((oij != 0).sum()),
    }

def group_counts(rewards, oracle_scores) -> dict[str, int]:
    """pair_counts of one group whose oracle gives per-rollout scores (o_ij = sign of their difference)."""
    return pair_counts(rewards, pairwise_from_scores(oracle_scores))

def total_counts(groups: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """The sum of several groups' (or steps') pair counts."""
    out: dict[str, int] = {}
    for g in groups:
        for k, v in g.items():
            out[k] = out.get(k, 0) + int(v)
    return out

def agreement_metrics(counts: Mapping[str, int], prefix: str = "oracle/") -> dict[str, float]:
    """`<prefix>pairs`, the share of each pair class over all classified pairs, `agreement` (the agree share) and
    `agreement_separated` (agree / pairs the oracle separates); shares are NaN without pairs."""
    n, sep = counts.get("pairs", 0), counts.get("separated", 0)
    out = {f"{prefix}pairs": float(n)}
    for k in PAIR_CLASSES + ("reward_tie_blind", "reward_tie_saturated"):
        out[f"{prefix}pair_{k}"] = counts.get(k, 0) / n if n else float("nan")
    out[f"{prefix}agreement"] = out[f"{prefix}pair_agree"]
    out[f"{prefix}agreement_separated"] = counts.get("agree", 0) / sep if sep else float("nan")
    return out

# ---------------------------------------------------------------------- criterion-level taxonomy (Figure 3)

CRITERION_CLASSES = ("blind", "saturated", "spurious", "agree")


def criterion_counts(points, S, oracle_scores) -> dict[str, int]:
    """One group's criteria by class, the same way for every method (referenced to the oracle, since only it is
    there for every arm): `blind` no rollout achieves it, `saturated` every rollout does;
    a criterion that splits the group is `agree` when the achieving side's mean oracle score exceeds the other
    side's, `spurious` otherwise. Achievement is polarity-aware (a pitfall is achieved by avoiding it); cells
    without a verdict are left out; `unjudged` counts criteria with none, `no_oracle` split criteria whose sides
    have no oracle score."""

    S = np.asarray(S, np.float64)
    o = np.asarray(oracle_scores, np.float64)
    out = dict.fromkeys(CRITERION_CLASSES + ("unjudged", "no_oracle"), 0)
    for k, p in enumerate(np.asarray(points, np.float64)):
        a = satisfied(S[k], float(p))
        ok = np.isfinite(a)
        if not ok.any():
            out["unjudged"] += 1
        elif np.all(a[ok] == 0):
            out["blind"] += 1
        elif np.all(a[ok] == 1):
            out["saturated"] += 1
        else:
            met, miss = o[ok & (a == 1)], o[ok & (a == 0)]
            met, miss = met[np.isfinite(met)], miss[np.isfinite(miss)]
            if not met.size or not miss.size:
                out["no_oracle"] += 1
            else:
                out["agree" if met.mean() > miss.mean() else "spurious"] += 1
    return out

def criterion_metrics(counts: Mapping[str, int], prefix: str = "taxonomy/") -> dict[str, float]:
    """`<prefix>count/*` and `<prefix>frac_*`, the shares over the classified criteria (NaN without any)."""
    n = sum(counts.get(k, 0) for k in CRITERION_CLASSES)
    out = {f"{prefix}count/{k}": float(v) for k, v in counts.items()}
    out.update({f"{prefix}frac_{k}": counts.get(k, 0) / n if n else float("nan") for k in CRITERION_CLASSES})
    return out
