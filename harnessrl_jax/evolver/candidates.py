"""Candidates and the search over them: what the proposers hand the critic, and how a rejection picks the next one.

A candidate is a tuple of typed actions (`harness.ops`) on one interface of one task. A proposer describes the ways
it could address a target as `Variant`s of graded strength; `choose` walks them given the critic's feedback: a
stronger variant when the measured effect was too weak, a weaker one when it was too strong (a scalable variant is
rescaled toward the middle of the band, within a cap), another family otherwise.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Sequence

from harnessrl_jax.harness import ops
from harnessrl_jax.words import Interface, Label

TOO_WEAK, TOO_STRONG = "too_weak", "too_strong"


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One proposed update of one interface of one task: its actions, why, and on what evidence. `evidence_ids`
    are the records the label rests on (the attributor's); `used_evidence` those of them, or others retrieved from
    the memory, that the update itself is built from (a donor's example in a field, a quoted earlier response, a
    donor's word in a tightening)."""

    task_id: str
    interface: Interface
    actions: tuple[ops.Action, ...]
    label: Label  # the label that routed it: blind | saturated | spurious (drops: the target's label now)
    criterion_ids: tuple[str, ...] = ()
    evidence_ids: tuple[str, ...] = ()
    rationale: str = ""
    family: str = ""  # kind of update, e.g. "guidance:add", "pitfall:repeat", "tighten:threshold"
    variant: str = ""  # this variant's name (unique within a task and interface)
    scale: float = 1.0  # strength multiplier given by the critic's feedback
    source: str = "rule"  # rule | llm
    invalid: str | None = None  # why the proposal is not a valid update of H_t (then never measured)
    reference_source: str | None = None  # a mounted <reference>'s examples: 'own' (the task's history) or 'donor'
    used_evidence: tuple[str, ...] = ()  # `draw:<id>` / `donor:<row>` the update's text is taken from

    def to_dict(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "interface": self.interface, "actions": [a.to_dict() for a in self.actions],
                "label": self.label, "criterion_ids": list(self.criterion_ids),
                "evidence_ids": list(self.evidence_ids), "rationale": self.rationale, "family": self.family,
                "variant": self.variant, "scale": self.scale, "source": self.source, "invalid": self.invalid,
                "reference_source": self.reference_source, "used_evidence": list(self.used_evidence)}


@dataclasses.dataclass(frozen=True)
class Rejection:
    """A rejected candidate and the critic's measurement of it (anything with `direction`, `delta`, `band`,
    `reason`), handed back to the proposer for the next round."""

    candidate: Candidate
    measurement: Any


@dataclasses.dataclass(frozen=True)
class Variant:
    """A way to address a target: `make(scale)` builds the candidate (None if it does not apply to H_t)."""

    family: str
    strength: float
    name: str
    make: Callable[[float], Candidate | None]
    scalable: bool = False
    default: bool = False  # tried first when the proposer turns to this family


def choose(variants: Sequence[Variant], feedback: Sequence[Rejection] = (), *, max_rescale: float = 2.0
           ) -> Candidate | None:
    """The next candidate given the rejections so far: the first default; after a rejection that was too weak or
    too strong, the same variant rescaled toward the middle of the band (if it scales; its scale stays within
    [1 / max_rescale, max_rescale], so the band keeps its meaning: a pitfall's effect is linear in its weight and
    an unbounded rescale would always land inside) or the next stronger / weaker one of its family, else another
    family; after any other rejection, another family first. Never a variant already tried; None when nothing is
    left."""
    tried = {r.candidate.variant for r in feedback}

    def first(pool):
        for v in pool:
            c = v.make(1.0)
            if c is not None and c.variant not in tried:
                return c
        return None

    if not feedback:
        return first([v for v in variants if v.default] + list(variants))
    last, m = feedback[-1].candidate, feedback[-1].measurement
    direction = getattr(m, "direction", None)
    base = next((v for v in variants if v.name == _base_name(last.variant)), None)
    if direction in (TOO_WEAK, TOO_STRONG) and base is not None:
        delta, band = getattr(m, "delta", None), getattr(m, "band", None)
        if base.scalable and delta is not None and math.isfinite(delta) and delta > 0 and band:
            lo, hi = band
            target = math.sqrt(lo * hi) if lo > 0 else hi / 2  # the middle of the band on a log scale
            scale = min(max(last.scale * target / delta, 1.0 / max_rescale), max_rescale)
            c = base.make(scale)
            if c is not None and c.variant not in tried:
                return c
        family = [v for v in variants if v.family == base.family and v.name != base.name]
        if direction == TOO_WEAK:
            pool = sorted((v for v in family if v.strength > base.strength), key=lambda v: v.strength)
        else:
            pool = sorted((v for v in family if v.strength < base.strength), key=lambda v: -v.strength)
        c = first(pool)
        if c is not None:
            return c
        # Nothing left in the right direction: another family, never a step the wrong way.
        others = [v for v in variants if v.family != base.family]
        return first([v for v in others if v.default] + others)
    fam = last.family
    others = [v for v in variants if v.family != fam]
    return first([v for v in others if v.default] + others + list(variants))


def _base_name(variant: str) -> str:
    return variant.split(" x", 1)[0]


def scaled_name(name: str, scale: float) -> str:
    return name if scale == 1.0 else f"{name} x{scale:.3g}"

