"""The just-in-time critic: measure each candidate on the frozen current policy before accepting it (HarnessRL, eq. 5).

In reward points, on the candidate harness H~ = transitions.apply(H_t, candidate):

    delta_c = rbar(Y_t, c_t) - rbar(Y_t, c~)    rubric: regrade the recorded group (a valid fix LOWERS its reward)
    delta_g = rbar(Y~, c_t) - rbar(Y_t, c_t)    guidance: resample Y~ under the candidate guidance, current rubric
    delta_w = (w - w~) * rbar(Y_t, c_t)         sampling: the weight freed times the mean reward; no policy query

Accepted when (i) the sign is right, (ii) delta_g and delta_c lie in their bands [eps_low, eps_high], (iii) every
rewritten or created criterion still varies within the group, (iv) a sampling update follows a saturation record.
The policy and the judge are reached through injected hooks (`CriticHooks`), so the critic runs with no model.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Sequence

import numpy as np

from harnessrl_jax.evolver.context import TaskContext
from harnessrl_jax.evolver.candidates import TOO_STRONG, TOO_WEAK, Candidate
from harnessrl_jax.harness import ops
from harnessrl_jax.harness.state import HarnessState
from harnessrl_jax.harness.transitions import DEFAULT_TRANSITIONS, Transitions
from harnessrl_jax.rubric.reward import rubric_reward, varies
from harnessrl_jax.words import Interface, Verdict

# The paper's calibrated bands in reward points (sec. 4.3-4.4, from the 4B cold start, reused for 9B).
# Condition (iv) on a sampling update: the task's previous record shows saturation (the paper's), or this group, or
# no condition.
SAMPLING_GATES = ("previous", "current", "off")
GUIDANCE_BAND = (10.2, 28.0)
RUBRIC_BAND = (3.1, 28.0)


@dataclasses.dataclass(frozen=True)
class Bands:
    """Acceptance bands [eps_low, eps_high] of delta_g and delta_c, reward points."""

    guidance: tuple[float, float] = GUIDANCE_BAND
    rubric: tuple[float, float] = RUBRIC_BAND

    def __post_init__(self):
        for name in ("guidance", "rubric"):
            lo, hi = (float(x) for x in getattr(self, name))
            if not 0.0 <= lo <= hi:
                raise ValueError(f"{name} band must satisfy 0 <= low <= high, got {(lo, hi)}")
            object.__setattr__(self, name, (lo, hi))


@dataclasses.dataclass(frozen=True)
class CriticHooks:
    """How the critic reaches the frozen policy and the judge; the batch forms let a loop pool judge calls and
    generation across a round's candidates (`measure_many`)."""

    regrade: Callable[..., Any] | None = None  # (task, responses, criteria) -> S [K, J], an array or a ScoreMatrix
    resample: Callable[..., Sequence[str]] | None = None  # (task, fields) -> J responses; fields: (name, text) pairs
    regrade_batch: Callable[[Sequence[tuple]], Sequence[Any]] | None = None  # a list of regrade's argument tuples
    resample_batch: Callable[[Sequence[tuple]], Sequence[Sequence[str]]] | None = None
    # (task, fields) -> why the guided prompt cannot be sampled as proposed (over the budget even shortened), or
    # None; such a candidate is rejected unmeasured, never measured on another prompt
    prompt_problem: Callable[..., str | None] | None = None
    # (tasks, one stages.TaskPrompts each) -> J responses per task from the frozen policy: a group sampled in
    # prompts a part wrote (SkillRL's validation rollouts under its skills)
    sample_prompts: Callable[[Sequence[Any], Sequence[Any]], Sequence[Sequence[str]]] | None = None

    def regrade_many(self, items: Sequence[tuple]) -> list[np.ndarray]:
        if not items:
            return []
        if self.regrade_batch is not None:
            out = self.regrade_batch(list(items))
        elif self.regrade is not None:
            out = [self.regrade(*it) for it in items]
        else:
            raise RuntimeError("the critic needs a `regrade(task, responses, criteria)` hook to measure this")
        return [_matrix(s) for s in out]

    def resample_many(self, items: Sequence[tuple]) -> list[list[str]]:
        if not items:
            return []
        if self.resample_batch is not None:
            out = self.resample_batch(list(items))
        elif self.resample is not None:
            out = [self.resample(*it) for it in items]
        else:
            raise RuntimeError("the critic needs a `resample(task, fields)` hook to measure guidance")
        return [list(r) for r in out]


def _matrix(s) -> np.ndarray:
    return np.asarray(getattr(s, "verdicts", s), np.float64)


def _mean(x: np.ndarray) -> float:
    x = np.asarray(x, np.float64)
    x = x[~np.isnan(x)]
    return float(x.mean()) if x.size else math.nan


@dataclasses.dataclass(frozen=True)
class Measurement:
    """What the critic measured for one candidate and its verdict.

    `delta` is the delta that decides (delta_c, delta_g or delta_w); `band` the band it was held to (None for
    sampling); `direction` tells the proposer which way to move: 'too_weak' (wrong sign or under the band),
    'too_strong' (over the band), or None (rejected for another reason, or accepted)."""

    verdict: str
    reason: str
    interface: str
    delta: float | None = None
    band: tuple[float, float] | None = None
    direction: str | None = None
    delta_c: float | None = None
    delta_g: float | None = None
    delta_w: float | None = None
    rbar_t: float | None = None
    rbar_candidate: float | None = None
    conditions: dict[str, bool] = dataclasses.field(default_factory=dict)
    non_varying: tuple[str, ...] = ()
    candidate_rewards: tuple[float, ...] = ()
    measured: bool = True  # False: decided without a policy or judge query (invalid, gate, critic off)

    @property
    def accepted(self) -> bool:
        return self.verdict == Verdict.ACCEPTED

    def deltas(self) -> dict[str, float]:
        """The deltas measured, by name (for ActionRecord.deltas)."""
        return {k: v for k, v in (("delta_c", self.delta_c), ("delta_g", self.delta_g), ("delta_w", self.delta_w))
                if v is not None}

    def to_dict(self) -> dict[str, Any]:
        def num(x):
            return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else x
        return {"verdict": self.verdict, "reason": self.reason, "interface": self.interface,
                "delta": num(self.delta), "band": list(self.band) if self.band else None,
                "direction": self.direction, "delta_c": num(self.delta_c), "delta_g": num(self.delta_g),
                "delta_w": num(self.delta_w), "rbar_t": num(self.rbar_t), "rbar_candidate": num(self.rbar_candidate),
                "conditions": dict(self.conditions), "non_varying": list(self.non_varying),
                "candidate_rewards": [num(float(r)) for r in self.candidate_rewards], "measured": self.measured}


def _reject(interface: str, reason: str, **kw) -> Measurement:
    return Measurement(Verdict.REJECTED, reason, interface, measured=kw.pop("measured", False), **kw)


def in_band(delta: float, band: tuple[float, float]) -> tuple[bool, str | None]:
    """(inside, direction): sign and band test of a delta that must be positive."""
    lo, hi = band
    if not math.isfinite(delta) or delta <= 0.0:
        return False, TOO_WEAK
    if delta < lo:
        return False, TOO_WEAK
    if delta > hi:
        return False, TOO_STRONG
    return True, None


class Critic:
    """Measures candidates on the frozen policy and decides; `enabled=False` is the no-critic ablation (every
    valid candidate accepted unmeasured, gate (iv) included). `sampling_gate`: 'previous' (the paper's (iv): the
    previous record's diagnosis), 'current' (this step's diagnosis suffices) or 'off'."""

    def __init__(self, bands: Bands = Bands(), *, transitions: Transitions = DEFAULT_TRANSITIONS,
                 enabled: bool = True, sampling_gate: str = "previous"):
        if sampling_gate not in SAMPLING_GATES:
            raise ValueError(f"sampling_gate must be one of {SAMPLING_GATES}, got {sampling_gate!r}")
        self.bands, self.transitions, self.enabled, self.sampling_gate = bands, transitions, enabled, sampling_gate

    def measure(self, ctx: TaskContext, candidate: Candidate, hooks: CriticHooks = CriticHooks()) -> Measurement:
        """Measure and judge one candidate."""
        return self.measure_many([(ctx, candidate)], hooks)[0]

    def measure_many(self, items: Sequence[tuple[TaskContext, Candidate]],
                     hooks: CriticHooks = CriticHooks()) -> list[Measurement]:
        """Measure and judge many candidates; policy and judge queries are pooled: one `resample_many`, then one
        `regrade_many` over every regrade request of the batch."""
        out: list[Measurement | None] = [None] * len(items)
        plans: dict[int, dict[str, Any]] = {}
        for n, (ctx, cand) in enumerate(items):
            early, plan = self._prepare(ctx, cand)
            if early is not None:
                out[n] = early
            else:
                plans[n] = plan
        # A guided prompt that cannot be sampled as proposed is rejected, not measured on another prompt.
        if hooks.prompt_problem is not None:
            for n in [n for n, p in plans.items() if p["kind"] == Interface.GUIDANCE]:
                why = hooks.prompt_problem(items[n][0].task, plans[n]["fields"])
                if why:
                    out[n] = _reject(Interface.GUIDANCE, why, rbar_t=items[n][0].rbar, conditions={"fits": False})
                    del plans[n]
        # Guidance: resample every candidate group first, then grade them with the rubric regrades below.
        g = [n for n, p in plans.items() if p["kind"] == Interface.GUIDANCE]
        groups = hooks.resample_many([(items[n][0].task, plans[n]["fields"]) for n in g])
        for n, ys in zip(g, groups):
            plans[n]["responses"] = ys
        requests, owners = [], []
        for n, p in plans.items():
            ctx = items[n][0]
            if p["kind"] == Interface.GUIDANCE:
                requests.append((ctx.task, tuple(p["responses"]), ctx.state.criteria(ctx.task_id)))
                owners.append(n)
            elif p["kind"] == Interface.RUBRIC and p["regrade"]:
                requests.append((ctx.task, tuple(ctx.responses), tuple(c.to_criterion() for c in p["regrade"])))
                owners.append(n)
        for n, s in zip(owners, hooks.regrade_many(requests)):
            plans[n]["S"] = s
        for n, p in plans.items():
            ctx, cand = items[n]
            out[n] = self._rubric(ctx, cand, p) if p["kind"] == Interface.RUBRIC else self._guidance(ctx, cand, p)
        return out  # type: ignore[return-value]

    # -- per interface ----------------------------------------------------------------------------------------

    def _prepare(self, ctx: TaskContext, cand: Candidate) -> tuple[Measurement | None, dict[str, Any]]:
        """Decides what needs no policy query (invalid, sampling, critic off); otherwise the measurement plan."""
        iface = cand.interface
        if cand.invalid is not None:
            return _reject(iface, f"invalid: {cand.invalid}"), {}
        if not cand.actions:
            return _reject(iface, "invalid: no actions"), {}
        wrong = [a.op for a in cand.actions if a.interface != iface or getattr(a, "task_id", None) != ctx.task_id]
        if wrong:
            return _reject(iface, f"invalid: actions {wrong} are not {iface} actions of task {ctx.task_id!r}"), {}
        try:
            new = self.transitions.apply(ctx.state, cand.actions)
        except ops.InvalidAction as e:
            return _reject(iface, f"invalid: {e.reason}"), {}
        rbar_t = ctx.rbar
        if iface == Interface.SAMPLING:
            return self._sampling(ctx, new, rbar_t), {}
        if not self.enabled:
            return Measurement(Verdict.ACCEPTED, "accepted unmeasured (critic disabled)", iface, rbar_t=rbar_t,
                               measured=False), {}
        if not math.isfinite(rbar_t):
            return _reject(iface, "the recorded group has no valid reward to compare with", rbar_t=rbar_t), {}
        if iface == Interface.GUIDANCE:
            return None, {"kind": Interface.GUIDANCE, "new": new, "fields": tuple((n, f.text) for n, f in
                                                                           new.fields(ctx.task_id))}
        # rubric: regrade only the criteria whose check changed; unchanged rows keep their recorded verdicts.
        old = {c.id: c for c in ctx.criteria}
        cand_crits = new.rubric_of(ctx.task_id)
        regrade = [c for c in cand_crits if c.id not in old or (old[c.id].text, old[c.id].tags) != (c.text, c.tags)]
        return None, {"kind": Interface.RUBRIC, "new": new, "regrade": regrade}

    def _sampling(self, ctx: TaskContext, new: HarnessState, rbar_t: float) -> Measurement:
        i = ctx.state.index(ctx.task_id)
        w, w_new = float(ctx.state.sampling.weights()[i]), float(new.sampling.weights()[i])
        delta_w = (w - w_new) * rbar_t if math.isfinite(rbar_t) else math.nan
        if not self.enabled:
            return Measurement(Verdict.ACCEPTED, "accepted unmeasured (critic disabled)", Interface.SAMPLING, delta=delta_w,
                               delta_w=delta_w, rbar_t=rbar_t, measured=False)
        sign = math.isfinite(delta_w) and delta_w > 0.0
        if self.sampling_gate == "previous":
            gate = ctx.previous_task_label == "saturated"
            why = "the task's previous record carries no saturation diagnosis"
        elif self.sampling_gate == "current":
            gate = ctx.attribution.task_label == "saturated"
            why = "the task is not diagnosed saturated"
        else:
            gate, why = True, ""
        conditions = {"sign": sign, "saturation_record": gate}
        common = dict(delta=delta_w, delta_w=delta_w, rbar_t=rbar_t, conditions=conditions, measured=True)
        if not sign:
            return _reject(Interface.SAMPLING, f"delta_w = {delta_w:.3g} is not positive", direction=TOO_WEAK, **common)
        if not gate:
            return _reject(Interface.SAMPLING, why, **common)
        return Measurement(Verdict.ACCEPTED, f"delta_w = {delta_w:.3g} > 0 after a recorded saturation diagnosis",
                           Interface.SAMPLING, **common)

    def _guidance(self, ctx: TaskContext, cand: Candidate, plan: dict[str, Any]) -> Measurement:
        rbar_t = ctx.rbar
        S = plan["S"]
        rewards = rubric_reward(ctx.points, S)
        rbar_new = _mean(rewards)
        delta_g = rbar_new - rbar_t
        band = self.bands.guidance
        common = dict(delta=delta_g, delta_g=delta_g, band=band, rbar_t=rbar_t, rbar_candidate=rbar_new,
                      candidate_rewards=tuple(float(r) for r in rewards), measured=True)
        if all(isinstance(a, ops.DropField) for a in cand.actions):
            ok = math.isfinite(delta_g) and delta_g >= -band[0]
            conditions = {"no_loss": ok}
            if ok:
                return Measurement(Verdict.ACCEPTED, f"drop: delta_g = {delta_g:.3g} >= -{band[0]:g} (no loss beyond the "
                                   f"null band)", Interface.GUIDANCE, conditions=conditions, **common)
            return _reject(Interface.GUIDANCE, f"drop: delta_g = {delta_g:.3g} < -{band[0]:g}: the policy still needs it",
                           direction=TOO_STRONG, conditions=conditions, **common)
        ok, direction = in_band(delta_g, band)
        conditions = {"sign": math.isfinite(delta_g) and delta_g > 0, "band": ok}
        if ok:
            return Measurement(Verdict.ACCEPTED, f"delta_g = {delta_g:.3g} in [{band[0]:g}, {band[1]:g}]", Interface.GUIDANCE,
                               conditions=conditions, **common)
        return _reject(Interface.GUIDANCE, _band_reason("delta_g", delta_g, band), direction=direction,
                       conditions=conditions, **common)

    def _rubric(self, ctx: TaskContext, cand: Candidate, plan: dict[str, Any]) -> Measurement:
        new: HarnessState = plan["new"]
        tid = ctx.task_id
        cand_crits = new.rubric_of(tid)
        fresh = dict(zip((c.id for c in plan["regrade"]), plan.get("S", np.zeros((0, len(ctx.responses))))))
        rows = []
        for c in cand_crits:
            if c.id in fresh:
                rows.append(np.asarray(fresh[c.id], np.float64))
            else:
                rows.append(ctx.row(c.id))
        S_new = np.stack(rows) if rows else np.zeros((0, len(ctx.responses)))
        points = new.points(tid)
        rewards = rubric_reward(points, S_new)
        rbar_t, rbar_new = ctx.rbar, _mean(rewards)
        delta_c = rbar_t - rbar_new
        band = self.bands.rubric

        # (iii): rewritten / created / merged / split criteria must split the recorded group.
        old_ids = {c.id for c in ctx.criteria}
        dedup_merges = set()
        for a in cand.actions:
            if isinstance(a, ops.MergeCriteria) and not any(varies(ctx.row(p)[None])[0] for p in a.criterion_ids):
                dedup_merges.add(frozenset(a.criterion_ids))
        non_varying = []
        for c, row in zip(cand_crits, S_new):
            if c.id in fresh and not varies(row[None])[0]:
                if c.id not in old_ids and frozenset(c.parent_ids) in dedup_merges:
                    continue
                non_varying.append(c.id)
        ok, direction = in_band(delta_c, band)
        conditions = {"sign": math.isfinite(delta_c) and delta_c > 0, "band": ok, "varies": not non_varying}
        common = dict(delta=delta_c, delta_c=delta_c, band=band, rbar_t=rbar_t, rbar_candidate=rbar_new,
                      conditions=conditions, non_varying=tuple(non_varying),
                      candidate_rewards=tuple(float(r) for r in rewards), measured=True)
        if not ok:
            return _reject(Interface.RUBRIC, _band_reason("delta_c", delta_c, band), direction=direction, **common)
        if non_varying:
            return _reject(Interface.RUBRIC, f"criteria {non_varying} do not vary within the group (all met or all failed)",
                           **common)
        return Measurement(Verdict.ACCEPTED, f"delta_c = {delta_c:.3g} in [{band[0]:g}, {band[1]:g}]; new criteria vary",
                           Interface.RUBRIC, **common)


def _band_reason(name: str, delta: float, band: tuple[float, float]) -> str:
    lo, hi = band
    if not math.isfinite(delta):
        return f"{name} could not be measured (no valid reward)"
    if delta <= 0:
        return f"{name} = {delta:.3g}: wrong sign (must be > 0)"
    if delta < lo:
        return f"{name} = {delta:.3g} < {lo:g}: within null fluctuation"
    return f"{name} = {delta:.3g} > {hi:g}: too strong to be a repair"
