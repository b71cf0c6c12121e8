"""Published rules that update the harness after the evolver (EvoRubric, AMARIS, AMARIS++), and how their updates
enter the run exactly as the evolver's do.

    proposal = rule.propose(RuleInput(step, draws, H_t, attributions, memory, hooks))   # candidates per draw
    result, dynamics = apply_rule(proposal, result, H_t, critic=..., gated=..., hooks=...)

`apply_rule` measures a rule's typed candidates with HarnessRL's critic when the method gates the rule, else accepts
the valid ones, and applies the accepted through the method's transitions onto the evolver's H_{t+1}, in draw order.
Each candidate becomes an `evolver.LogEntry` (a harness.jsonl line, ActionRecords in the memory), so reversal rates
count the rules' updates as HarnessRL's; `dynamics` adds per-draw fields to DrawRecord.dynamics.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import numpy as np

from harnessrl_jax.evolver.candidates import Candidate
from harnessrl_jax.evolver.context import TaskContext, candidate_changes
from harnessrl_jax.evolver.critic import Critic, CriticHooks, Measurement
from harnessrl_jax.evolver.evolver import EvolverResult, Group, LogEntry
from harnessrl_jax.harness import ops
from harnessrl_jax.harness.state import HarnessState
from harnessrl_jax.harness.transitions import Transitions
from harnessrl_jax.words import Verdict
from harnessrl_jax.rubric.reward import satisfied


@dataclasses.dataclass(frozen=True)
class RuleInput:
    """What a rule sees of one step: the groups (S under H_t's rubric), H_t, the attributor's labels, the memory
    (None without one) and the critic hooks (the judge: `hooks.regrade_many`)."""

    step: int
    draws: Sequence[Group]
    state: HarnessState
    attributions: Sequence[Any]
    memory: Any = None
    hooks: CriticHooks = CriticHooks()

    def first_draws(self) -> list[int]:
        """The index of each task's first group this step (a task drawn twice is updated once, as the evolver)."""
        seen, out = set(), []
        for n, g in enumerate(self.draws):
            if g.task.id not in seen:
                seen.add(g.task.id)
                out.append(n)
        return out


@dataclasses.dataclass(frozen=True)
class RuleCandidate:
    """A rule's update of one interface of one drawn task: the candidate and the reason the rule gives (its own
    verification, e.g. EvoRubric's checks)."""

    draw: int
    candidate: Candidate
    reason: str = ""


@dataclasses.dataclass
class RuleProposal:
    candidates: list[RuleCandidate] = dataclasses.field(default_factory=list)
    dynamics: dict[int, dict[str, Any]] = dataclasses.field(default_factory=dict)  # draw -> DrawRecord.dynamics
    metrics: dict[str, float] = dataclasses.field(default_factory=dict)


def context(inp: RuleInput, n: int) -> TaskContext:
    """The critic's view of draw n: its group under H_t with the attributor's labels."""
    g = inp.draws[n]
    return TaskContext(inp.step, g.task, inp.state, tuple(g.responses), np.asarray(g.S, np.float64),
                       inp.attributions[n], (), {}, n, ())


def apply_rule(proposal: RuleProposal, inp: RuleInput, result: EvolverResult, *, transitions: Transitions,
               critic: Critic | None = None, gated: bool = False, source: str = "") -> EvolverResult:
    """`result` with the rule's candidates measured (when `gated`) or accepted when valid, applied onto its
    state in draw order, and logged (see the module docstring)."""
    items = proposal.candidates
    measurements: list[Measurement | None] = [None] * len(items)
    if gated and critic is not None and items:
        measured = critic.measure_many([(context(inp, rc.draw), rc.candidate) for rc in items], inp.hooks)
        measurements = list(measured)
    new, accepted, log = result.state, list(result.accepted), list(result.log)
    for rc, m in zip(items, measurements):
        cand = rc.candidate
        changes, per_action = candidate_changes(new, cand.task_id, cand.actions, transitions) \
            if cand.invalid is None and cand.actions else ({}, ())
        if m is None:
            if cand.invalid is not None or not cand.actions:
                m = Measurement(Verdict.REJECTED, f"invalid: {cand.invalid or 'no actions'}", cand.interface,
                                measured=False)
            else:
                m = Measurement(Verdict.ACCEPTED, rc.reason or f"accepted unmeasured ({source} rule)",
                                cand.interface, measured=False)
        verdict, reason = m.verdict, m.reason
        if verdict == Verdict.ACCEPTED:
            try:
                new = transitions.apply(new, cand.actions)
                accepted += list(cand.actions)
            except ops.InvalidAction as e:
                verdict, reason = Verdict.REJECTED, f"conflict: {e.reason}"
        elif gated and rc.reason:
            reason = f"{reason} (the rule's own checks: {rc.reason})"
        log.append(LogEntry(inp.step, cand.task_id, rc.draw, cand.interface, 0, cand.label, verdict, reason, cand,
                            m, changes, per_action))
    return dataclasses.replace(result, state=new, accepted=tuple(accepted), log=tuple(log))


def achieved(S, points) -> np.ndarray:
    """[K, J]: 1 where a response achieves criterion k (met for a requirement, avoided for a pitfall), NaN where
    it has no verdict (rubric.reward.satisfied, row by row)."""
    S = np.asarray(S, np.float64)
    return np.stack([satisfied(S[k], float(p)) for k, p in enumerate(points)]) if len(points) else S[:0]
