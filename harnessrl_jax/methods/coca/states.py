"""CoCA's pure parts: its settings, the achievement rates of the two groups, the five criterion states, the frontier
gate and the state-transition table of its analysis."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Iterable, Sequence

import numpy as np

from harnessrl_jax.methods.updates import achieved
from harnessrl_jax.words import CriterionState

UNJUDGED, TOO_HARD, LEARNABLE, REGRESSIVE, SATURATED, DISCRIMINATIVE = (
    CriterionState.UNJUDGED, CriterionState.TOO_HARD, CriterionState.LEARNABLE, CriterionState.REGRESSIVE,
    CriterionState.SATURATED, CriterionState.DISCRIMINATIVE)
STATES = (TOO_HARD, LEARNABLE, REGRESSIVE, SATURATED, DISCRIMINATIVE)  # the five (unjudged is no state)
LEARNABLE_RULES = ("zero", "gap")
DISTILL_ON = ("current_frontier", "guided_frontier", "all_normal")
GUIDED_GATES = ("dynamic", "always", "never")


@dataclasses.dataclass(frozen=True)
class CoCAConfig:
    """config.coca: every number and switch of CoCA."""

    groups: tuple[int, int] = (6, 6)  # (G_N, G_G); their sum is config.num_generations (the rollout budget)
    learnable_rule: str = "zero"  # 'zero' (pN = 0 < pG) | 'gap' (pG - pN >= learnable_margin, pN < 1)
    learnable_margin: float = 0.5  # m_learn of the 'gap' rule
    regress_margin: float = 0.0  # m_reg: regressive iff pG < pN - m_reg
    frontier_margin: float = 0.0  # delta_F in reward points: the Guided Frontier must beat best_N by more
    topk: int = 20  # k of the top-k + tail KL (vLLM's max_logprobs)
    distill_coef: float = 1.0  # lambda_D
    distill_on: str = "current_frontier"  # the best Normal response | 'guided_frontier' (D.3) | 'all_normal'
    teacher_demo: bool = True  # the Guided Frontier in the teacher's context (D.3: False drops it)
    guided_gate: str = "dynamic"  # Guided GRPO on unqualified queries only | 'always' (D.4) | 'never' (- L_GGRPO)
    pooled_baseline: bool = False  # False: a baseline per group; True: one over G_N + G_G rewards
    calibrate: bool = True  # False: the "- rubric calibration" ablation (C~ = C)
    rewrite_length_factor: float = 3.0  # invariant: a rewrite is at most this many times the original's length
    guided_template: str = "coca_guided"  # methods/prompts/<name>.txt or a path ({criteria})
    teacher_template: str = "coca_teacher"  # ({criteria}, {demonstration})

    def __post_init__(self):
        if len(self.groups) != 2 or min(int(g) for g in self.groups) < 1:
            raise ValueError(f"groups must be two group sizes >= 1 (G_N, G_G), got {self.groups}")
        object.__setattr__(self, "groups", tuple(int(g) for g in self.groups))
        if self.learnable_rule not in LEARNABLE_RULES:
            raise ValueError(f"learnable_rule must be one of {LEARNABLE_RULES}, got {self.learnable_rule!r}")
        if self.distill_on not in DISTILL_ON:
            raise ValueError(f"distill_on must be one of {DISTILL_ON}, got {self.distill_on!r}")
        if self.guided_gate not in GUIDED_GATES:
            raise ValueError(f"guided_gate must be one of {GUIDED_GATES}, got {self.guided_gate!r}")
        if self.distill_on == "guided_frontier" and self.guided_gate == "always":
            raise ValueError("distill_on='guided_frontier' trains the Guided Frontier's row in the bare context, "
                             "guided_gate='always' trains it in the guided one: choose one")
        if self.topk < 1 or self.distill_coef < 0 or self.frontier_margin < 0 or self.regress_margin < 0:
            raise ValueError("topk must be >= 1 and distill_coef, frontier_margin, regress_margin >= 0")
        if not 0 < self.learnable_margin <= 1 or self.rewrite_length_factor < 1:
            raise ValueError("learnable_margin must lie in (0, 1] and rewrite_length_factor be >= 1")


# ------------------------------------------------------------------------------------------------ diagnosis


def achievement(S, points) -> np.ndarray:
    """[K, J]: 1 where a response achieves criterion k (a requirement met, a pitfall avoided), NaN: no verdict."""
    return achieved(S, points)


def rates(S_normal, S_guided, points) -> tuple[np.ndarray, np.ndarray]:
    """(pN, pG) [K]: achievement rates over each group's valid cells (NaN where a group has none)."""
    def rate(S):
        a = achievement(S, points)
        n = (~np.isnan(a)).sum(axis=1)
        return np.where(n > 0, np.nansum(a, axis=1) / np.maximum(n, 1), np.nan)
    return rate(S_normal), rate(S_guided)


def diagnose(p_normal, p_guided, *, rule: str = "zero", regress_margin: float = 0.0,
             learnable_margin: float = 0.5) -> list[str]:
    """Per criterion, its state from the achievement rates of the query-only and the rubric-guided group (NaN: no
    valid verdict), tested in this order: unjudged (either NaN), too_hard (both 0), learnable (pN 0, pG > 0),
    regressive (pG < pN - regress_margin), saturated (pN 1), discriminative. rule='gap' (the alternative):
    learnable iff pG - pN >= learnable_margin and pN < 1, tested after too_hard."""
    out = []
    for pn, pg in zip(np.asarray(p_normal, np.float64).reshape(-1), np.asarray(p_guided, np.float64).reshape(-1)):
        if np.isnan(pn) or np.isnan(pg):
            out.append(UNJUDGED)
        elif pn == 0 and pg == 0:
            out.append(TOO_HARD)
        elif (pn == 0 and pg > 0) if rule == "zero" else (pg - pn >= learnable_margin and pn < 1):
            out.append(LEARNABLE)
        elif pg < pn - regress_margin:
            out.append(REGRESSIVE)
        elif pn == 1:
            out.append(SATURATED)
        else:
            out.append(DISCRIMINATIVE)
    return out


# ---------------------------------------------------------------------------------------------------- gate


@dataclasses.dataclass(frozen=True)
class Gate:
    """One query's frontier selection: qualified, the Guided Frontier's index in the Guided group (-1 if none),
    the Current Frontier's in the Normal group, the learnable criteria's indices, and rG(y_GF) - best_N."""

    qualified: bool
    gf_index: int
    cf_index: int
    learnable: tuple[int, ...]
    gain: float


def select_frontiers(states: Sequence[str], A_guided, r_normal, r_guided, *, margin: float = 0.0) -> Gate:
    """CoCA's frontier gate: `A_guided` [K, G_G] achievement of the Guided group under C~, rewards rN [G_N]
    and rG [G_G] under C~. Qualified iff some learnable criterion exists (else Guided GRPO) and some Guided response
    achieves every one of them and has rG > max rN + margin; ties go to the lowest index. NaN rewards never win."""
    learnable = tuple(k for k, s in enumerate(states) if s == LEARNABLE)
    rN = np.asarray(r_normal, np.float64)
    rG = np.asarray(r_guided, np.float64)
    cf = int(np.nanargmax(rN)) if np.isfinite(rN).any() else 0
    best_n = float(rN[cf]) if np.isfinite(rN).any() else -np.inf
    if not learnable or not np.isfinite(rG).any():
        return Gate(False, -1, cf, learnable, float("nan"))
    A = np.asarray(A_guided, np.float64)[list(learnable)]
    meets = np.all(A == 1.0, axis=0) & np.isfinite(rG) & (rG > best_n + margin)
    if not meets.any():
        return Gate(False, -1, cf, learnable, float("nan"))
    gf = int(np.flatnonzero(meets)[np.argmax(rG[meets])])  # argmax keeps the first of equal maxima
    return Gate(True, gf, cf, learnable, float(rG[gf] - best_n))


# ------------------------------------------------------------------------------------------ transition table


def transitions(lines: Iterable[dict]) -> tuple[Counter, dict[str, dict[str, float]]]:
    """From coca.jsonl lines (step order): the joint counts of (previous state, current state) over every
    (query, criterion) visited again, and P(to | from) per source state."""
    last: dict[tuple[str, str], str] = {}
    joint: Counter = Counter()
    for line in sorted(lines, key=lambda d: d["step"]):
        for cid, state in line["states"].items():
            key = (line["task_id"], cid)
            if key in last and state != UNJUDGED and last[key] != UNJUDGED:
                joint[(last[key], state)] += 1
            last[key] = state
    conditional = {}
    for a in STATES:
        total = sum(joint[(a, b)] for b in STATES)
        if total:
            conditional[a] = {b: joint[(a, b)] / total for b in STATES}
    return joint, conditional


__all__ = ["CoCAConfig", "DISCRIMINATIVE", "Gate", "LEARNABLE", "REGRESSIVE", "SATURATED", "STATES", "TOO_HARD",
           "UNJUDGED", "achievement", "diagnose", "rates", "select_frontiers", "transitions"]
