"""The harness evolver E: attributor -> proposer -> just-in-time critic, up to B rounds (HarnessRL, sec. 4.3).

    evolver, _ = stepper.build_evolver(config, method, memory)            # or Evolver() for the paper's defaults
    result = evolver.step(step, groups, H_t, memory=memory, hooks=CriticHooks(regrade=..., resample=...))
    H_next = result.state                                                 # = transitions.apply(H_t, result.accepted)
    for line in result.harness_records(): write to harness.jsonl          # every candidate, noops included
    DrawRecord(..., **result.draw_fields(i))                              # labels, task label, actions of draw i

Per (task, interface) the proposer offers one candidate or a noop; the critic measures a round's candidates together
(`Critic.measure_many`); rejected ones go back to the proposer with their measurement, for at most B rounds. Each is
measured against H_t; the accepted ones touch different interfaces or tasks, so applied in order they give H_{t+1}.
With `EvolverConfig(interfaces=())` the evolver only attributes, so every method's failure shares are comparable.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Sequence

import numpy as np

from harnessrl_jax.evolver.attributor import Attributor, TaskAttribution
from harnessrl_jax.evolver.candidates import Candidate, Rejection
from harnessrl_jax.evolver.context import TaskContext, candidate_changes
from harnessrl_jax.evolver.critic import Critic, CriticHooks, Measurement
from harnessrl_jax.evolver.rule_proposer import RuleProposer
from harnessrl_jax.harness import ops
from harnessrl_jax.harness.state import HarnessState
from harnessrl_jax.harness.transitions import DEFAULT_TRANSITIONS, Transitions
from harnessrl_jax.memory.semantic import MIN_COSINE
from harnessrl_jax.memory.store import ActionRecord
from harnessrl_jax.rubric.schema import Task
from harnessrl_jax.words import INTERFACES, LABELS, Interface, Label, Verdict

APPLY_ORDER = INTERFACES  # accepted candidates of one task apply sampling, guidance, rubric


@dataclasses.dataclass(frozen=True, eq=False)
class Group:
    """One drawn task's group: the task record (its prompt), its J responses and S [K, J] under the
    harness's current rubric of the task, rows in the harness's criterion order."""

    task: Task
    responses: Sequence[str]
    S: Any


@dataclasses.dataclass(frozen=True)
class EvolverConfig:
    """B, the interfaces the evolver may update, the retrieval settings (the paper's: B = 3, top-k 4, cosine >=
    0.82 for bge-base-en-v1.5) and the optional reversal filter (0: off)."""

    rounds: int = 3
    interfaces: tuple[Interface, ...] = INTERFACES
    donors_k: int = 4
    min_cosine: float = MIN_COSINE
    donor_examples: int = 2
    reversal_within: int = 0

    def __post_init__(self):
        if self.rounds < 1:
            raise ValueError(f"rounds must be >= 1, got {self.rounds}")
        unknown = set(self.interfaces) - set(INTERFACES)
        if unknown:
            raise ValueError(f"unknown interfaces {sorted(unknown)}; known: {list(INTERFACES)}")
        object.__setattr__(self, "interfaces", tuple(Interface(i) for i in self.interfaces))


@dataclasses.dataclass(frozen=True)
class LogEntry:
    """One line of harness.jsonl: a measured candidate (or an explicit noop) with its verdict."""

    step: int
    task_id: str
    draw: int  # index of the group among the step's groups
    interface: Interface
    round: int
    label: Label | None
    verdict: Verdict
    reason: str
    candidate: Candidate | None = None
    measurement: Measurement | None = None
    changes: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    action_changes: tuple[Mapping[str, Any], ...] = ()

    @property
    def with_evidence(self) -> bool:
        """Did the candidate cite retrieved memory evidence (a time-index record or a donor)?"""
        return self.candidate is not None and any(e.startswith(("draw:", "donor:"))
                                                  for e in self.candidate.evidence_ids)

    def to_dict(self) -> dict[str, Any]:
        c, m = self.candidate, self.measurement
        return {"step": self.step, "task_id": self.task_id, "draw": self.draw, "interface": self.interface,
                "round": self.round, "label": self.label, "verdict": self.verdict, "reason": self.reason,
                "criterion_ids": list(c.criterion_ids) if c else [],
                "evidence_ids": list(c.evidence_ids) if c else [], "with_evidence": self.with_evidence,
                "candidate": c.to_dict() if c else None,
                "deltas": {k: (v if math.isfinite(v) else None) for k, v in (m.deltas() if m else {}).items()},
                "measurement": m.to_dict() if m else None, "changes": dict(self.changes)}

    def action_records(self) -> list[ActionRecord]:
        """The memory's form: one ActionRecord per action of the candidate (one 'noop' record for a noop)."""
        c, m = self.candidate, self.measurement
        deltas = {k: float(v) for k, v in (m.deltas() if m else {}).items() if math.isfinite(v)}
        common = dict(label=self.label, criterion_ids=tuple(c.criterion_ids) if c else (),
                      evidence_ids=tuple(c.evidence_ids) if c else (), deltas=deltas, round=self.round,
                      reason=self.reason)
        if self.verdict == Verdict.NOOP or c is None or not c.actions:
            return [ActionRecord(self.interface, Verdict.NOOP, Verdict.NOOP, **common)]
        changes = self.action_changes or tuple({} for _ in c.actions)
        return [ActionRecord(a.interface, a.op, self.verdict, changes=dict(ch), payload=a.to_dict(), **common)
                for a, ch in zip(c.actions, changes)]


@dataclasses.dataclass(frozen=True)
class EvolverResult:
    """H_{t+1}, the accepted actions, every candidate's log entry and each group's attribution."""

    step: int
    state: HarnessState
    accepted: tuple[ops.Action, ...]
    log: tuple[LogEntry, ...]
    attributions: tuple[TaskAttribution, ...]

    def harness_records(self) -> list[dict[str, Any]]:
        """harness.jsonl lines: every candidate with label, evidence ids, actions, deltas, verdict, round."""
        return [e.to_dict() for e in self.log]

    def draw_fields(self, i: int) -> dict[str, Any]:
        """`labels`, `task_label` and `actions` of the i-th group's DrawRecord."""
        att = self.attributions[i]
        actions = tuple(r for e in self.log if e.draw == i for r in e.action_records())
        return {"labels": att.labels(), "task_label": att.task_label, "actions": actions}

    def summary(self) -> dict[str, Any]:
        """Counts for metrics.jsonl: label fractions, candidates by verdict, acceptance with/without evidence,
        accepted actions by interface and op."""
        labels = [a.label for att in self.attributions for a in att.criteria]
        n = max(len(labels), 1)
        out: dict[str, Any] = {f"frac_{l}": labels.count(l) / n for l in LABELS}
        out["criteria"] = len(labels)
        out["saturated_tasks"] = sum(att.task_label == "saturated" for att in self.attributions)
        measured = [e for e in self.log if e.verdict in (Verdict.ACCEPTED, Verdict.REJECTED)]
        out["candidates"] = len(measured)
        out["accepted"] = sum(e.verdict == Verdict.ACCEPTED for e in measured)
        out["rejected"] = sum(e.verdict == Verdict.REJECTED for e in measured)
        out["noops"] = sum(e.verdict == Verdict.NOOP for e in self.log)
        out["over_budget"] = sum(e.measurement is not None and e.measurement.conditions.get("fits") is False
                                 for e in self.log)
        for name, sel in (("with_evidence", True), ("without_evidence", False)):
            sub = [e for e in measured if e.with_evidence == sel]
            out[f"acceptance_{name}"] = (sum(e.verdict == Verdict.ACCEPTED for e in sub) / len(sub)) if sub else math.nan
            out[f"candidates_{name}"] = len(sub)
        out["acceptance_rate"] = out["accepted"] / len(measured) if measured else math.nan
        for a in self.accepted:
            key = f"accepted_{a.interface}_{a.op}"
            out[key] = out.get(key, 0) + 1
        return out


class Evolver:
    """Runs attributor -> proposer -> critic over one step's groups; see the module docstring."""

    def __init__(self, attributor: Attributor | None = None, proposer=None, critic: Critic | None = None,
                 config: EvolverConfig = EvolverConfig(), transitions: Transitions = DEFAULT_TRANSITIONS):
        self.attributor = attributor or Attributor()
        self.proposer = proposer or RuleProposer(transitions=transitions)
        self.critic = critic or Critic(transitions=transitions)
        self.config, self.transitions = config, transitions

    # -------------------------------------------------------------------------------------------------- step

    def attribute(self, step: int, groups: Sequence[Group], state: HarnessState, memory=None
                  ) -> list[TaskContext]:
        """One context per group: the attribution with the evidence it used."""
        out = []
        for n, g in enumerate(groups):
            tid = g.task.id
            criteria = state.rubric_of(tid)
            S = np.asarray(g.S, np.float64)
            if S.shape != (len(criteria), len(g.responses)):
                raise ValueError(f"group {n} (task {tid!r}): S has shape {S.shape}, expected "
                                 f"{(len(criteria), len(g.responses))} for the harness's current rubric")
            history = tuple(memory.history(tid, before_step=step)) if memory is not None else None
            donors: dict[str, Any] = {}
            lookup = self._donor_lookup(memory, tid, donors)
            att = self.attributor(g.task, criteria, S, tuple(g.responses), history=history, donor_lookup=lookup)
            updates = tuple(memory.updates(tid, before_step=step)) if memory is not None and self.config.interfaces \
                else ()
            out.append(TaskContext(step, g.task, state, tuple(g.responses), S, att, history or (), donors, n,
                                   updates))
        return out

    def _donor_lookup(self, memory, task_id: str, cache: dict):
        if memory is None or getattr(memory, "semantic", None) is None:
            return None
        cfg = self.config

        def lookup(criteria):
            criteria = [c for c in criteria if c.id not in cache]
            if criteria:
                found = memory.query_many([c.text for c in criteria], [task_id] * len(criteria), k=cfg.donors_k,
                                          min_cosine=cfg.min_cosine, examples=cfg.donor_examples)
                cache.update({c.id: tuple(d) for c, d in zip(criteria, found)})
            return cache
        return lookup

    def step(self, step: int, groups: Sequence[Group], state: HarnessState, memory=None,
             hooks: CriticHooks = CriticHooks()) -> EvolverResult:
        """Attribute, propose and measure for one step's groups; returns H_{t+1} and the full log."""
        contexts = self.attribute(step, groups, state, memory)
        first: dict[str, TaskContext] = {}
        for ctx in contexts:
            first.setdefault(ctx.task_id, ctx)
        keys = [(ctx.draw, iface) for ctx in first.values() for iface in self.config.interfaces]
        by_draw = {ctx.draw: ctx for ctx in contexts}
        feedback: dict[tuple[int, str], list[Rejection]] = {k: [] for k in keys}
        pending = list(keys)
        log: list[LogEntry] = []
        winners: dict[tuple[int, str], int] = {}  # key -> index of its accepted entry in `log`

        for r in range(self.config.rounds):
            batch: list[tuple[tuple[int, str], Candidate, dict, tuple]] = []
            for key in list(pending):
                ctx = by_draw[key[0]]
                cand = self.proposer.propose(ctx, key[1], tuple(feedback[key]))
                if cand is None:
                    pending.remove(key)
                    if feedback[key]:
                        log.append(self._noop(ctx, key[1], r, feedback[key],
                                              f"no further variant after {len(feedback[key])} rejected round(s)"))
                    continue
                changes, per_action = self._changes(ctx.state, cand)
                reversed_ = self._reverses(memory, ctx, cand, changes)
                if reversed_ is not None:
                    m = Measurement(Verdict.REJECTED, reversed_, cand.interface, measured=False)
                    log.append(LogEntry(step, ctx.task_id, ctx.draw, key[1], r, cand.label, Verdict.REJECTED, m.reason, cand,
                                        m, changes, per_action))
                    feedback[key].append(Rejection(cand, m))
                    continue
                batch.append((key, cand, changes, per_action))
            measurements = self.critic.measure_many([(by_draw[k[0]], c) for k, c, _, _ in batch], hooks)
            for (key, cand, changes, per_action), m in zip(batch, measurements):
                ctx = by_draw[key[0]]
                log.append(LogEntry(step, ctx.task_id, ctx.draw, key[1], r, cand.label, m.verdict, m.reason, cand, m,
                                    changes, per_action))
                if m.accepted:
                    winners[key] = len(log) - 1
                    pending.remove(key)
                else:
                    feedback[key].append(Rejection(cand, m))
            if not pending:
                break
        for key in pending:
            if feedback[key]:
                log.append(self._noop(by_draw[key[0]], key[1], self.config.rounds, feedback[key],
                                      f"all {len(feedback[key])} round(s) rejected (B = {self.config.rounds})"))

        # H_{t+1}: accepted candidates in task order, sampling, guidance, rubric within a task.
        new, accepted = state, []
        order = sorted(winners, key=lambda k: (k[0], APPLY_ORDER.index(k[1])))
        for key in order:
            n = winners[key]
            cand = log[n].candidate
            try:
                new = self.transitions.apply(new, cand.actions)
            except ops.InvalidAction as e:
                log[n] = dataclasses.replace(log[n], verdict=Verdict.REJECTED, reason=f"conflict: {e.reason}")
                continue
            accepted += list(cand.actions)
        return EvolverResult(step, new, tuple(accepted), tuple(log), tuple(ctx.attribution for ctx in contexts))

    # ---------------------------------------------------------------------------------------------- helpers

    def _noop(self, ctx: TaskContext, interface: str, r: int, feedback: Sequence[Rejection], reason: str) -> LogEntry:
        last = feedback[-1].candidate if feedback else None
        return LogEntry(ctx.step, ctx.task_id, ctx.draw, interface, r, last.label if last else None, Verdict.NOOP, reason)

    def _changes(self, state: HarnessState, cand: Candidate) -> tuple[dict, tuple[dict, ...]]:
        if cand.invalid is not None or not cand.actions:
            return {}, ()
        return candidate_changes(state, cand.task_id, cand.actions, self.transitions)

    def _reverses(self, memory, ctx: TaskContext, cand: Candidate, changes: Mapping[str, Any]) -> str | None:
        within = self.config.reversal_within
        store = getattr(memory, "store", None)
        if not within or store is None or not changes:
            return None
        record = ActionRecord(cand.interface, cand.actions[0].op if cand.actions else Verdict.NOOP, Verdict.REJECTED,
                              changes=dict(changes))
        hit = store.would_reverse(ctx.task_id, record, before_step=ctx.step, within=within)
        if hit is None:
            return None
        step, earlier = hit
        return f"would reverse the {earlier.op} accepted at step {step} (within {within} draws of the task)"
