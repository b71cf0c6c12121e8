"""Pure harness transitions: (state, action) -> new state, one function per interface (HarnessRL, sec. 4.1).

`Transitions` bundles the per-interface functions and the guidance schedule; a method or ablation swaps one of them
(`dataclasses.replace(DEFAULT_TRANSITIONS, sampling=my_rule)`); plain GRPO is every interface `unchanged`. Nothing
here mutates its input or calls a model, so a candidate harness for the critic is just `apply(state, action)`.
Anchors' text is copied untouched and their share of positive points kept (`keep_anchor_share` rescales the
non-anchors, so each pitfall's penalty relative to the total stays as it was); a rewrite adds a version, a merge or
split makes version-1 criteria naming their parents; `advance_schedule` lowers the guidance cap by one each quarter
and unmounts what is over it, in `DROP_ORDER`.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import numpy as np

from harnessrl_jax.harness import ops
from harnessrl_jax.harness.state import (FIELDS, NUM_LEVELS, GuidanceState, HarnessState, MountedField,
                                         RubricCriterion, RubricState, SamplingState, guidance_cap, positive_weight)

Transition = Callable[[HarnessState, ops.Action], HarnessState]
# Fields over the cap are unmounted in this order: the one that gives away most of the answer first (a reference
# holds whole example responses; a criterion paraphrase names the target; a critique only notes a shortfall), so
# scaffolding fades from strongest to weakest.
DROP_ORDER = ("reference", "criterion", "critique")


def _frozen(x, dtype) -> np.ndarray:
    a = np.array(x, dtype=dtype)
    a.setflags(write=False)
    return a


def _set_row(rows: tuple, i: int, row) -> tuple:
    return rows[:i] + (row,) + rows[i + 1:]


# ------------------------------------------------------------------------------------------------------ sampling

def apply_sampling(state: HarnessState, action: ops.Action) -> HarnessState:
    """DownweightTask moves the task one level down; RestoreTask puts it back at level 0 (weight 1)."""
    i = state.index(action.task_id)
    level = np.array(state.sampling.level)
    if isinstance(action, ops.DownweightTask):
        level[i] = min(level[i] + 1, NUM_LEVELS - 1)
    elif isinstance(action, ops.RestoreTask):
        level[i] = 0
    else:
        raise TypeError(f"not a sampling action: {action!r}")
    return state.replace(sampling=SamplingState(_frozen(level, np.int32), state.sampling.level_weights))


# ------------------------------------------------------------------------------------------------------ guidance

def apply_guidance(state: HarnessState, action: ops.Action) -> HarnessState:
    """AddField mounts the field with its text; DropField unmounts it."""
    i = state.index(action.task_id)
    row = list(state.guidance.fields[i])
    if isinstance(action, ops.AddField):
        row[FIELDS.index(action.field)] = MountedField(action.text, action.criterion_id)
    elif isinstance(action, ops.DropField):
        row[FIELDS.index(action.field)] = None
    else:
        raise TypeError(f"not a guidance action: {action!r}")
    g = state.guidance
    return state.replace(guidance=GuidanceState(g.cap, g.initial_cap, _set_row(g.fields, i, tuple(row))))


def advance_schedule(state: HarnessState, step: int, total_steps: int) -> HarnessState:
    """Sets the cap for `step` (`guidance_cap`) and unmounts, per task, the fields over it in `DROP_ORDER`."""
    g = state.guidance
    cap = guidance_cap(step, total_steps, g.initial_cap)
    rows = []
    for row in g.fields:
        excess = sum(f is not None for f in row) - cap
        if excess > 0:
            row = list(row)
            for name in DROP_ORDER:
                k = FIELDS.index(name)
                if excess > 0 and row[k] is not None:
                    row[k], excess = None, excess - 1
            row = tuple(row)
        rows.append(row)
    return state.replace(guidance=GuidanceState(_frozen(cap, np.int32), g.initial_cap, tuple(rows)))


# -------------------------------------------------------------------------------------------------------- rubric

def keep_anchor_share(criteria: Sequence[RubricCriterion], share: float) -> tuple[RubricCriterion, ...]:
    """Rescales the positive non-anchor points so the anchors hold `share` of the positive points again.

    With anchor points A, the non-anchors must hold B = A (1 - share) / share. Shares of 0 (no positive anchor)
    and 1 (no positive non-anchor) hold by construction once the ops have checked the action.
    """
    criteria = tuple(criteria)
    if not 0.0 < share < 1.0:
        return criteria
    a, b = positive_weight(criteria, anchor=True), positive_weight(criteria, anchor=False)
    target = a * (1.0 - share) / share
    if b == target:
        return criteria
    if b <= 0.0:  # `validate` rules this out; a swapped-in rule that skips it must not divide by zero
        raise ValueError("no positive non-anchor criterion to carry the non-anchor share of the weight")
    f = target / b
    return tuple(dataclasses.replace(c, points=c.points * f) if c.points > 0 and not c.anchor else c
                 for c in criteria)


def _fresh_ids(task_id: str, taken: set[str], next_id: int, n: int) -> tuple[list[str], int]:
    ids = []
    while len(ids) < n:
        cid = f"{task_id}/h{next_id}"
        next_id += 1
        if cid not in taken:
            ids.append(cid)
    return ids, next_id


def apply_rubric(state: HarnessState, action: ops.Action) -> HarnessState:
    """Applies one rubric operation to the task's criteria, then restores the anchors' share."""
    i = state.index(action.task_id)
    crits = list(state.rubric.criteria[i])
    next_id = int(state.rubric.next_id[i])
    taken = {c.id for c in crits}
    pos = {c.id: k for k, c in enumerate(crits)}

    if isinstance(action, ops.CreateCriterion):
        (cid,), next_id = _fresh_ids(action.task_id, taken, next_id, 1)
        crits.append(RubricCriterion(cid, action.text, float(action.points), tuple(action.tags), False,
                                     action.origin))
    elif isinstance(action, ops.RewriteCriterion):
        c = crits[pos[action.criterion_id]]
        tags = c.tags if action.tags is None else tuple(action.tags)
        crits[pos[action.criterion_id]] = dataclasses.replace(c, text=action.text, tags=tags, version=c.version + 1)
    elif isinstance(action, ops.DeleteCriterion):
        del crits[pos[action.criterion_id]]
    elif isinstance(action, ops.ReweightCriterion):
        k = pos[action.criterion_id]
        crits[k] = dataclasses.replace(crits[k], points=float(action.points))
    elif isinstance(action, ops.MergeCriteria):
        parents = [crits[pos[cid]] for cid in action.criterion_ids]
        tags = ops.merged_tags(parents) if action.tags is None else tuple(action.tags)
        (cid,), next_id = _fresh_ids(action.task_id, taken, next_id, 1)
        merged = RubricCriterion(cid, action.text, float(action.points), tags, False, action.origin, 1,
                                 tuple(action.criterion_ids))
        # The merged criterion takes the place of the first of its parents in rubric order.
        first = min(pos[cid] for cid in action.criterion_ids)
        crits = [merged if k == first else c for k, c in enumerate(crits)
                 if k == first or c.id not in action.criterion_ids]
    elif isinstance(action, ops.SplitCriterion):
        k = pos[action.criterion_id]
        parent = crits[k]
        ids, next_id = _fresh_ids(action.task_id, taken, next_id, len(action.texts))
        tags = [parent.tags] * len(ids) if action.tags is None else [tuple(t) for t in action.tags]
        parts = [RubricCriterion(cid, text, float(p), t, False, action.origin, 1, (parent.id,))
                 for cid, text, p, t in zip(ids, action.texts, action.points, tags)]
        crits[k:k + 1] = parts
    else:
        raise TypeError(f"not a rubric action: {action!r}")

    crits = keep_anchor_share(crits, float(state.rubric.seed_anchor_share[i]))
    r = state.rubric
    next_ids = np.array(r.next_id)
    next_ids[i] = next_id
    return state.replace(rubric=RubricState(r.seed_anchor_share, _frozen(next_ids, np.int64),
                                            _set_row(r.criteria, i, crits)))


def unchanged(state: HarnessState, action: ops.Action) -> HarnessState:
    """A frozen interface: accepts the action and changes nothing (plain GRPO freezes all three)."""
    return state


# ----------------------------------------------------------------------------------------------------- dispatch

@dataclasses.dataclass(frozen=True)
class Transitions:
    """The transition function of each interface, and the guidance schedule; swap one to get an ablation."""

    sampling: Transition = apply_sampling
    guidance: Transition = apply_guidance
    rubric: Transition = apply_rubric
    schedule: Callable[[HarnessState, int, int], HarnessState] = advance_schedule

    def apply(self, state: HarnessState, actions: ops.Action | Sequence[ops.Action]) -> HarnessState:
        """Validates and applies one action, or several in order; raises InvalidAction and applies none."""
        for action in (actions,) if isinstance(actions, ops.Action) else actions:
            action.validate(state)
            if not isinstance(action, ops.Noop):
                state = getattr(self, action.interface)(state, action)
        return state

    def advance_schedule(self, state: HarnessState, step: int, total_steps: int) -> HarnessState:
        """The guidance schedule at `step` of `total_steps`."""
        return self.schedule(state, step, total_steps)


DEFAULT_TRANSITIONS = Transitions()
FROZEN_TRANSITIONS = Transitions(unchanged, unchanged, unchanged)


def apply(state: HarnessState, actions: ops.Action | Sequence[ops.Action],
          transitions: Transitions = DEFAULT_TRANSITIONS) -> HarnessState:
    """H_{t+1} from H_t and the accepted action(s), under `transitions` (default: the paper's)."""
    return transitions.apply(state, actions)
