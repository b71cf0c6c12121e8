"""The proposer: per failure label, one candidate update per interface, or noop (HarnessRL, sec. 4.3).

Routing (the label picks the interface, the evidence picks the operation):
- blind -> guidance: mount fields for the blind criterion: <criterion> (a paraphrase), <reference> (the task's
  reference, an earlier response of this task that met it, or a donor's from the semantic index), <critique>
  (the last group's shortfall). Fields whose target is no longer blind are dropped.
- saturated -> sampling: down-weight the task (when the task itself is diagnosed saturated); and the rubric:
  tighten (raise a rule's threshold, add a required keyword taken from a reference), merge near-duplicates, delete
  a generic saturated criterion (the second tightening), or reweight.
- spurious -> rubric: rewrite the criterion or add a pitfall that closes the surface channel the attributor found
  (degenerate responses, length, a compliance claim), reweight it down, or delete it.

A candidate is a tuple of typed actions (`harness.ops`) on one interface of one task, e.g. <criterion> + <reference>,
or delete + create. Candidates come in variants of graded strength; when the critic rejects one, the proposer gets
the measurement back (`Rejection`) and tries something different: a stronger variant when the effect was too weak,
a weaker one when it was too strong (pitfall weights are rescaled to land in the band, since a pitfall's effect on
the recorded group is linear in its weight), another family otherwise. Every candidate is validated against H_t
before it leaves the proposer; `LLMProposer` outputs that do not validate come back as candidates marked `invalid`
with the reason, so the critic rejects them without measuring.

`RuleProposer` is the CPU default; `LLMProposer` asks a model through the judge protocol (prompt
`evolver/prompts/proposer.txt`) and falls back to the rule proposer for sampling (its only operation is a
down-weight).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from harnessrl_jax.evolver import templates
from harnessrl_jax.evolver.attributor import (BLIND, SATURATED, SPURIOUS, Attribution, content_words,
                                              readable_pattern, rule_keywords, words)
from harnessrl_jax.evolver.context import TaskContext
from harnessrl_jax.harness import ops
from harnessrl_jax.harness.state import FIELDS, NUM_LEVELS, RubricCriterion
from harnessrl_jax.harness.transitions import DEFAULT_TRANSITIONS, DROP_ORDER, Transitions
from harnessrl_jax.rubric import rules
from harnessrl_jax.rubric.reward import rubric_reward

INTERFACES = ops.INTERFACES
TOO_WEAK, TOO_STRONG = "too_weak", "too_strong"

# Guidance field sets from weakest to strongest: a critique only notes a shortfall, a criterion paraphrase names
# the target, a reference shows a whole answer (the same ranking as transitions.DROP_ORDER, reversed).
_FIELD_STRENGTH = {"critique": 1.0, "criterion": 2.0, "reference": 3.5}
GUIDANCE_SETS = tuple(sorted(
    (s for s in (("critique",), ("criterion",), ("criterion", "critique"), ("reference",), ("reference", "critique"),
                 ("criterion", "reference"), ("criterion", "reference", "critique"))),
    key=lambda s: sum(_FIELD_STRENGTH[f] for f in s)))
# The paper's blind criterion in the cellulose case got <criterion> + <reference> (sec. 4.3, step 55).
FIRST_GUIDANCE = ("criterion", "reference")

# Threshold kwargs of the rule checkers a tightening can raise: rule id -> (count kwarg, relation kwarg or a fixed
# relation). Range rules tighten their upper bound when they have one, else their lower bound.
THRESHOLD_RULES = {
    "length_constraints:number_words": ("num_words", "relation"),
    "length_constraints:number_sentences": ("num_sentences", "relation"),
    "length_constraints:number_characters": ("num_chars", "relation"),
    "keywords:frequency": ("frequency", "relation"),
    "keywords:word_frequency": ("frequency", "relation"),
    "keywords:letter_frequency": ("let_frequency", "let_relation"),
    "change_case:capital_word_frequency": ("capital_frequency", "capital_relation"),
    "detectable_format:bullet_count": ("num_bullets", "relation"),
    "detectable_format:number_headings": ("num_headings", "relation"),
    "detectable_format:numbered_list": ("num_items", "relation"),
    "detectable_format:number_highlighted_sections": ("num_highlights", "=at least"),
    "detectable_format:multiple_sections": ("num_sections", "=at least"),
    "detectable_content:number_placeholders": ("num_placeholders", "=at least"),
}
RANGE_RULES = {
    "length_constraints:word_range": ("min_words", "max_words"),
    "length_constraints:sentence_range": ("min_sentences", "max_sentences"),
    "length_constraints:paragraph_range": ("min_paragraphs", "max_paragraphs"),
}
REPEAT_PATTERN = r"(?i)\b(\w+)(?:\W+\1\b){2,}"


@dataclasses.dataclass(frozen=True)
class ProposerConfig:
    """Knobs of the rule proposer (this project's defaults)."""

    # Drop a field once its target is no longer blind and the group meets it at least this often.
    drop_pass_rate: float = 0.5
    reference_chars: int = 600  # a <reference> field holds at most this many characters of the example
    # Tightened criteria aim at these shares of the recorded group failing, weakest first.
    tighten_fail_rates: tuple[float, ...] = (0.25, 0.5, 0.75)
    keyword_min_len: int = 5  # required keywords added from a reference are content words this long or longer
    duplicate_cosine: float = 0.82  # near-duplicates by embedding (the semantic index's threshold)
    duplicate_jaccard: float = 0.6  # ... by content-word overlap when no embedder is given
    reweight_factor: float = 0.5  # a reweight halves the points (scaled by the critic's feedback)
    max_scan: int = 2000  # thresholds tried per tightening


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One proposed update of one interface of one task: its actions, why, and on what evidence."""

    task_id: str
    interface: str
    actions: tuple[ops.Action, ...]
    label: str  # the label that routed it: blind | saturated | spurious (drops: the target's label now)
    criterion_ids: tuple[str, ...] = ()
    evidence_ids: tuple[str, ...] = ()
    rationale: str = ""
    family: str = ""  # kind of update, e.g. "guidance:add", "pitfall:repeat", "tighten:threshold"
    variant: str = ""  # this variant's name (unique within a task and interface)
    scale: float = 1.0  # strength multiplier given by the critic's feedback
    source: str = "rule"  # rule | llm
    invalid: str | None = None  # why the proposal is not a valid update of H_t (then never measured)

    def to_dict(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "interface": self.interface, "actions": [a.to_dict() for a in self.actions],
                "label": self.label, "criterion_ids": list(self.criterion_ids),
                "evidence_ids": list(self.evidence_ids), "rationale": self.rationale, "family": self.family,
                "variant": self.variant, "scale": self.scale, "source": self.source, "invalid": self.invalid}


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


def choose(variants: Sequence[Variant], feedback: Sequence[Rejection] = ()) -> Candidate | None:
    """The next candidate given the rejections so far: the first default; after a rejection that was too weak or
    too strong, the same variant rescaled (if it scales) or the next stronger / weaker one of its family; after
    any other rejection, another family. Never a variant already tried; None when nothing is left."""
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
            c = base.make(last.scale * target / delta)
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
    fam = last.family
    others = [v for v in variants if v.family != fam]
    return first([v for v in others if v.default] + others + list(variants))


def _base_name(variant: str) -> str:
    return variant.split(" x", 1)[0]


def _scaled_name(name: str, scale: float) -> str:
    return name if scale == 1.0 else f"{name} x{scale:.3g}"


# ------------------------------------------------------------------------------------------------ texts

def _cut(text: str, n: int) -> str:
    text = text.strip()
    return text if len(text) <= n else text[:n].rstrip() + " ..."


def paraphrase(c: RubricCriterion) -> str:
    """The <criterion> field for a blind criterion: the requirement in the second person, keywords spelled out."""
    if c.points < 0:
        return f"Avoid this in your answer: {c.text}"
    text = f"Make sure your answer does this: {c.text}"
    kws = [readable_pattern(p) for p in rule_keywords(c) if c.to_criterion().rule_id != "keywords:regex_match"]
    kws = [k for k in kws if k]
    if kws:
        text += f" (use the word{'s' if len(kws) > 1 else ''}: {', '.join(kws)})"
    return text


def critique(c: RubricCriterion, responses: Sequence[str]) -> str:
    """The <critique> field: the last group's shortfall on the criterion."""
    j = len(responses)
    if c.points < 0:
        text = f"All {j} answers in the last attempt did this, which costs points: {c.text}"
    else:
        text = f"None of the {j} answers in the last attempt met this: {c.text}"
    rid = c.to_criterion().rule_id or ""
    if rid.startswith("length_constraints:") and responses:
        n = [len(words(r)) for r in responses]
        text += f" Their lengths were {min(n)}-{max(n)} words."
    return text


def stricter_text(text: str, phrase: str | None, pattern: str = "") -> str:
    """A rewrite of a spurious criterion that closes the surface channel at `phrase`."""
    base = text.rstrip().rstrip(".")
    if pattern == "partial_coverage":
        return f"{base}, covering every part it names; covering only some of them does not count."
    what = f'"{phrase}"' if phrase else "it"
    return (f"{base}. Only substantive fulfilment counts: meeting {what} by a bare mention, a list, keywords or a "
            f"claim of compliance does not.")


def _replace_number(text: str, old: int, new: int) -> str:
    out, n = re.subn(rf"(?<!\d){old}(?!\d)", str(new), text, count=1)
    return out if n else f"{text.rstrip()} (threshold: {new})"


def _tags_with_kwargs(c: RubricCriterion, kwargs: Mapping[str, Any]) -> tuple[str, ...]:
    kw = "rule_kwargs:" + json.dumps(dict(kwargs), ensure_ascii=False, sort_keys=True)
    return tuple(t for t in c.tags if not t.startswith("rule_kwargs:")) + (kw,)


def rule_tags(rule_id: str, kwargs: Mapping[str, Any], *extra: str) -> tuple[str, ...]:
    """Tags of a rule-verified criterion."""
    return ("verifier:rule", f"rule:{rule_id}",
            "rule_kwargs:" + json.dumps(dict(kwargs), ensure_ascii=False, sort_keys=True), *extra)


# ----------------------------------------------------------------------------------------- rule tightening

def _pass(rule_id: str, kwargs: Mapping[str, Any], responses: Sequence[str], prompt: str | None) -> np.ndarray:
    return np.array([rules.check(rule_id, dict(kwargs), r, prompt=prompt) for r in responses], bool)


def tightened_thresholds(c: RubricCriterion, responses: Sequence[str], fail_rates=(0.25, 0.5, 0.75), *,
                         prompt: str | None = None, max_scan: int = 2000) -> list[tuple[dict, float, int, int]]:
    """Stricter thresholds of a threshold rule under which part of the group fails: [(kwargs, fail rate, old,
    new)], weakest first, one per target fail rate (deduplicated). Measured with the rule checker itself."""
    crit = c.to_criterion()
    rid, kwargs = crit.rule_id, crit.rule_kwargs
    if not responses or rid is None:
        return []
    if rid in THRESHOLD_RULES:
        key, rel = THRESHOLD_RULES[rid]
        relation = rel[1:] if rel.startswith("=") else kwargs.get(rel)
        if key not in kwargs or relation is None:
            return []
        old = int(kwargs[key])
        if relation in ("less than", "at most"):
            stop = 1 if relation == "less than" else 0
            scan = range(old - 1, stop - 1, -1)
        elif relation in ("at least", "more than"):
            scan = range(old + 1, old + 1 + max_scan)
        else:
            return []
    elif rid in RANGE_RULES:
        lo_key, hi_key = RANGE_RULES[rid]
        if kwargs.get(hi_key) is not None:
            key, old = hi_key, int(kwargs[hi_key])
            floor = int(kwargs.get(lo_key) or 0)
            scan = range(old - 1, floor - 1, -1)
        elif kwargs.get(lo_key) is not None:
            key, old = lo_key, int(kwargs[lo_key])
            scan = range(old + 1, old + 1 + max_scan)
        else:
            return []
    else:
        return []
    found: list[tuple[dict, float, int]] = []
    for t in list(scan)[:max_scan]:
        kw = {**kwargs, key: t}
        try:
            rules.validate_kwargs(rid, kw, prompt=prompt)
        except ValueError:
            continue
        fail = 1.0 - float(_pass(rid, kw, responses, prompt).mean())
        if fail >= 1.0:
            break
        if fail > 0.0:
            found.append((kw, fail, t))
    out, seen = [], set()
    for target in fail_rates:
        if not found:
            break
        kw, fail, t = min(found, key=lambda f: (abs(f[1] - target), abs(f[2] - old)))
        if t not in seen:
            seen.add(t)
            out.append((kw, fail, old, t))
    return sorted(out, key=lambda o: o[1])


def reference_keywords(c: RubricCriterion, references: Sequence[str], responses: Sequence[str],
                       fail_rates=(0.25, 0.5, 0.75), min_len: int = 5) -> list[tuple[str, float]]:
    """Content words of the references that part of the group lacks, as (word, fail rate), weakest first: the
    required keywords a tightening of a keyword criterion can add."""
    have = [p for p in rule_keywords(c)]
    cands = []
    for ref in references:
        for w in sorted(content_words(ref)):
            if len(w) < min_len or not w.isalpha() or any(re.search(p, w, re.I) for p in have if _valid(p)):
                continue
            rate = float(np.mean([re.search(rf"\b{re.escape(w)}", r, re.I) is not None for r in responses]))
            if 0.0 < rate < 1.0:
                cands.append((w, 1.0 - rate))
    cands = list(dict.fromkeys(cands))
    out = []
    for target in fail_rates:
        left = [x for x in cands if x not in out]
        if left:
            out.append(min(left, key=lambda x: (abs(x[1] - target), x[0])))
    return sorted(out, key=lambda x: x[1])


def _valid(p: str) -> bool:
    try:
        re.compile(p)
        return True
    except re.error:
        return False


def jaccard(a: str, b: str) -> float:
    x, y = content_words(a), content_words(b)
    return len(x & y) / len(x | y) if x | y else 0.0


# ------------------------------------------------------------------------------------------- the rule proposer

class RuleProposer:
    """The CPU proposer: candidates built from rules over the evidence; `embed(texts) -> unit vectors [n, d]`
    (e.g. the semantic index's `query_vectors`) finds near-duplicate criteria, else content-word overlap does."""

    source = "rule"

    def __init__(self, config: ProposerConfig = ProposerConfig(), *, embed: Callable[[Sequence[str]], Any] | None = None,
                 transitions: Transitions = DEFAULT_TRANSITIONS):
        self.config, self.embed, self.transitions = config, embed, transitions

    def propose(self, ctx: TaskContext, interface: str, feedback: Sequence[Rejection] = ()) -> Candidate | None:
        """The next candidate for `interface` of this task, or None (noop: nothing routed here, or nothing left)."""
        return choose(self.variants(ctx, interface), feedback)

    def variants(self, ctx: TaskContext, interface: str) -> list[Variant]:
        if interface == "sampling":
            return self._sampling(ctx)
        if interface == "guidance":
            return self._guidance(ctx)
        if interface == "rubric":
            return self._rubric(ctx)
        raise ValueError(f"unknown interface {interface!r}")

    # -- helpers --------------------------------------------------------------------------------------------

    def _make(self, ctx: TaskContext, interface: str, actions: Sequence[ops.Action], *, label: str,
              criterion_ids: Sequence[str], evidence_ids: Sequence[str], rationale: str, family: str, name: str,
              scale: float = 1.0) -> Candidate | None:
        actions = tuple(actions)
        have = {(c.text, c.tags) for c in ctx.criteria} | {("", c.tags) for c in ctx.criteria if
                                                            c.to_criterion().verifier == "rule"}
        for a in actions:
            # A check the task already has (same text and tags, or the same rule and kwargs) is not offered again.
            if isinstance(a, (ops.CreateCriterion, ops.RewriteCriterion)) and a.tags is not None and (
                    (a.text, tuple(a.tags)) in have or ("", tuple(a.tags)) in have):
                return None
        try:
            new = self.transitions.apply(ctx.state, actions)
        except (ops.InvalidAction, ValueError):
            return None  # a rule variant that does not fit H_t is simply not offered
        if interface == "rubric" and all(isinstance(a, (ops.ReweightCriterion, ops.DeleteCriterion)) for a in actions):
            # Reweights and deletes change points only, so their effect on the recorded group is arithmetic on S:
            # one that does not lower the reward could never pass the critic's sign test, so it is not offered.
            crits = new.rubric_of(ctx.task_id)
            rows = np.stack([ctx.row(c.id) for c in crits])
            r = rubric_reward(new.points(ctx.task_id), rows)
            r = r[~np.isnan(r)]
            if not r.size or not ctx.rbar - float(r.mean()) > 1e-9:
                return None
        return Candidate(ctx.task_id, interface, actions, label, tuple(dict.fromkeys(criterion_ids)),
                         tuple(dict.fromkeys(evidence_ids)), rationale, family, _scaled_name(name, scale), scale,
                         self.source)

    # -- sampling -------------------------------------------------------------------------------------------

    def _sampling(self, ctx: TaskContext) -> list[Variant]:
        att = ctx.attribution
        i = ctx.state.index(ctx.task_id)
        if att.task_label != SATURATED or int(ctx.state.sampling.level[i]) >= NUM_LEVELS - 1:
            return []
        sat = att.with_label(SATURATED)
        ev = [e for a in sat for e in a.evidence.ids()]
        if ctx.history and ctx.history[0].task_label == SATURATED and ctx.history[0].draw_id is not None:
            ev.append(f"draw:{ctx.history[0].draw_id}")

        def make(scale):
            return self._make(ctx, "sampling", [ops.DownweightTask(ctx.task_id)], label=SATURATED,
                              criterion_ids=[a.criterion_id for a in sat], evidence_ids=ev,
                              rationale=att.task_reason, family="sampling:downweight", name="downweight")
        return [Variant("sampling:downweight", 1.0, "downweight", make, default=True)]

    # -- guidance -------------------------------------------------------------------------------------------

    def reference_for(self, ctx: TaskContext, c: RubricCriterion) -> tuple[str, tuple[str, ...]] | None:
        """A <reference> for criterion c: the task's reference, else an earlier response of this task that met it
        (any wording), else a donor's satisfying example; with its evidence ids."""
        n = self.config.reference_chars
        if ctx.task.reference:
            return _cut(ctx.task.reference, n), ("task:reference",)
        if c.points > 0:
            for r in ctx.history:
                if c.id in r.criterion_ids:
                    row = np.asarray(r.scores, float)[r.criterion_ids.index(c.id)]
                    for j in np.flatnonzero(row == 1):
                        return _cut(r.responses[j], n), (f"draw:{r.draw_id}",)
            for d in ctx.donors.get(c.id, ()):
                for e in d.satisfying:
                    return _cut(e.response, n), (f"donor:{d.row}", f"draw:{e.draw_id}")
        return None

    def _guidance(self, ctx: TaskContext) -> list[Variant]:
        att, state, tid = ctx.attribution, ctx.state, ctx.task_id
        mounted = dict(state.fields(tid))
        blind = sorted(att.with_label(BLIND), key=lambda a: -abs(_points(ctx, a.criterion_id)))
        stale = []
        for name, f in mounted.items():
            if f.criterion_id is not None:
                a = att.get(f.criterion_id)
                if a is None or (a.label != BLIND and a.evidence.pass_rate >= self.config.drop_pass_rate):
                    stale.append(name)
            elif not blind:
                stale.append(name)
        out: list[Variant] = []
        if stale:
            targets = [mounted[n].criterion_id for n in stale if mounted[n].criterion_id]
            label = next((att.get(t).label for t in targets if att.get(t) is not None), "agree")
            ev = [e for t in targets if att.get(t) is not None for e in att.get(t).evidence.ids()]

            def drop(names, strength, default=False):
                names = tuple(names)
                name = "drop " + "+".join(names)

                def make(scale):
                    return self._make(ctx, "guidance", [ops.DropField(tid, n) for n in names], label=label,
                                      criterion_ids=targets, evidence_ids=ev, family="guidance:drop", name=name,
                                      rationale=f"target(s) {targets or 'of the task'} no longer blind: the group "
                                                f"meets them without help")
                return Variant("guidance:drop", strength, name, make, default=default)
            out.append(drop([n for n in DROP_ORDER if n in stale], float(len(stale)), default=True))
            if len(stale) > 1:  # dropping less is weaker: the field that gives away least first
                out += [drop([n], 0.5) for n in reversed(DROP_ORDER) if n in stale]
            return out  # one guidance candidate per round: drops first, adds once the stale fields are gone
        if not blind:
            return []
        cap = int(state.guidance.cap)
        have = len(mounted)
        for a in blind:  # the task's guidance addresses its heaviest blind criterion that can still get a field
            if out:
                break
            c = state.rubric_of(tid)[state.rubric.find(state.index(tid), a.criterion_id)]
            texts = {"criterion": paraphrase(c), "critique": critique(c, ctx.responses)}
            ref = self.reference_for(ctx, c)
            ev = list(a.evidence.ids())
            if ref is not None:
                texts["reference"] = f"An example answer that meets it:\n{ref[0]}"
            for fields in GUIDANCE_SETS:
                if any(f in mounted or f not in texts for f in fields) or have + len(fields) > cap:
                    continue
                strength = sum(_FIELD_STRENGTH[f] for f in fields)
                name = f"add {'+'.join(fields)} for {c.id}"
                field_ev = ev + (list(ref[1]) if ref is not None and "reference" in fields else [])

                def make(scale, fields=fields, name=name, field_ev=field_ev, c=c, a=a, texts=texts):
                    acts = [ops.AddField(tid, f, texts[f], c.id) for f in FIELDS if f in fields]
                    return self._make(ctx, "guidance", acts, label=BLIND, criterion_ids=[c.id],
                                      evidence_ids=field_ev, family="guidance:add", name=name,
                                      rationale=f"{c.id} is blind: {a.reason}")
                out.append(Variant("guidance:add", strength, name, make))
        if out:
            pick = [v for v in out if v.name.startswith(f"add {'+'.join(FIRST_GUIDANCE)} ")]
            first = pick[0] if pick else max((v for v in out if v.strength <= 5.5), key=lambda v: v.strength,
                                             default=out[0])
            out = [dataclasses.replace(v, default=v is first) for v in out]
        return out

    # -- rubric ---------------------------------------------------------------------------------------------

    def _rubric(self, ctx: TaskContext) -> list[Variant]:
        att = ctx.attribution
        spurious = sorted(att.with_label(SPURIOUS), key=lambda a: -abs(_points(ctx, a.criterion_id)))
        saturated = sorted(att.with_label(SATURATED), key=lambda a: (-a.generic, -abs(_points(ctx, a.criterion_id))))
        out: list[Variant] = []
        for a in spurious:
            out += self._spurious(ctx, a)
        for a in saturated:
            out += self._saturated(ctx, a, saturated)
        return out

    def _criterion(self, ctx: TaskContext, cid: str) -> RubricCriterion:
        i = ctx.state.index(ctx.task_id)
        return ctx.state.rubric.criteria[i][ctx.state.rubric.find(i, cid)]

    def _pitfall(self, ctx, a, c, family, name, text, rule_id, kwargs, strength, default=False) -> Variant:
        def make(scale):
            pts = -abs(c.points) * scale
            act = ops.CreateCriterion(ctx.task_id, text, pts, rule_tags(rule_id, kwargs))
            return self._make(ctx, "rubric", [act], label=SPURIOUS, criterion_ids=[c.id],
                              evidence_ids=a.evidence.ids(), family=family, name=name, scale=scale,
                              rationale=f"{c.id} is spurious ({a.reason}); a pitfall of {pts:.3g} points closes the "
                                        f"channel")
        return Variant(family, strength, name, make, scalable=True, default=default)

    def _reweight(self, ctx, a, c, label, family, strength=1.0, default=False) -> Variant:
        name = f"reweight {c.id}"

        def make(scale):
            cut = min(0.95, self.config.reweight_factor * scale)
            pts = c.points * (1.0 - cut)
            return self._make(ctx, "rubric", [ops.ReweightCriterion(ctx.task_id, c.id, pts)], label=label,
                              criterion_ids=[c.id], evidence_ids=a.evidence.ids(), family=family, name=name,
                              scale=scale, rationale=f"{c.id} is {label}: {a.reason}; its weight goes from "
                                                     f"{c.points:g} to {pts:.3g}")
        return Variant(family, strength, name, make, scalable=True, default=default)

    def _single(self, ctx, a, c, label, family, name, actions, rationale, strength=1.0, default=False) -> Variant:
        def make(scale):
            return self._make(ctx, "rubric", actions, label=label, criterion_ids=[c.id],
                              evidence_ids=a.evidence.ids(), family=family, name=name, rationale=rationale)
        return Variant(family, strength, name, make, default=default)

    def _spurious(self, ctx: TaskContext, a: Attribution) -> list[Variant]:
        c = self._criterion(ctx, a.criterion_id)
        sig, out = a.evidence.signals, []
        J = ctx.responses
        if "keyword_stuffing" in sig:
            kinds = set(sig["keyword_stuffing"].get("kinds", ()))
            if kinds & {"repeated tokens", "repetitive"}:
                out.append(self._pitfall(ctx, a, c, "pitfall:repeat", f"pitfall repeat for {c.id}",
                                         "The response repeats the same word three or more times in a row.",
                                         "keywords:regex_match", {"pattern": REPEAT_PATTERN}, 1.0, default=True))
            if "very short" in kinds:
                n = max((len(words(J[j])) for j in sig["keyword_stuffing"].get("responses", ())), default=0) + 1
                out.append(self._pitfall(ctx, a, c, "pitfall:short", f"pitfall short for {c.id}",
                                         f"The response is under {n} words.", "length_constraints:number_words",
                                         {"num_words": n, "relation": "less than"}, 1.0, default=True))
        if "length_gaming" in sig:
            s = sig["length_gaming"]
            mid = max(1, int(round((s["satisfying_median_words"] + s["failing_median_words"]) / 2)))
            if s["direction"] == "longer":
                out.append(self._pitfall(ctx, a, c, "pitfall:long", f"pitfall long for {c.id}",
                                         f"The response runs to {mid} words or more.",
                                         "length_constraints:number_words",
                                         {"num_words": mid, "relation": "at least"}, 1.0, default=True))
            else:
                out.append(self._pitfall(ctx, a, c, "pitfall:short", f"pitfall short for {c.id}",
                                         f"The response is under {mid} words.", "length_constraints:number_words",
                                         {"num_words": mid, "relation": "less than"}, 1.0, default=True))
        for key, what in (("surface_compliance", "Claims to meet the requirements instead of meeting them"),
                          ("sycophantic_refusal", "Flatters the user or refuses instead of answering")):
            if key in sig and sig[key].get("phrase"):
                phrase = sig[key]["phrase"]
                out.append(self._pitfall(ctx, a, c, f"pitfall:{key}", f"pitfall {key} for {c.id}",
                                         f'{what} (e.g. "{phrase}").', "keywords:regex_match",
                                         {"pattern": "(?i)" + re.escape(phrase)}, 1.0, default=True))
        verifier = c.to_criterion().verifier
        if not c.anchor and verifier != "rule":
            pattern = sig.get("llm", {}).get("pattern", "")
            text = stricter_text(c.text, a.evidence.phrase, pattern)
            out.append(self._single(ctx, a, c, SPURIOUS, "rewrite", f"rewrite {c.id}",
                                    [ops.RewriteCriterion(ctx.task_id, c.id, text)],
                                    f"{c.id} is spurious ({a.reason}); the rewrite closes {a.evidence.phrase!r}",
                                    default=True))
        if "isolated" in sig or not out:
            out.append(self._reweight(ctx, a, c, SPURIOUS, "reweight", default=True))
        if not c.anchor:
            out.append(self._single(ctx, a, c, SPURIOUS, "delete", f"delete {c.id}",
                                    [ops.DeleteCriterion(ctx.task_id, c.id)],
                                    f"{c.id} is spurious ({a.reason}) and no rewrite closes it", default=True))
        return out

    def _saturated(self, ctx: TaskContext, a: Attribution, saturated: Sequence[Attribution]) -> list[Variant]:
        c = self._criterion(ctx, a.criterion_id)
        tid, out = ctx.task_id, []
        if c.points < 0:
            return []  # a pitfall nobody commits carries no signal, but there is nothing to tighten
        if a.generic and not c.anchor:
            out.append(self._single(ctx, a, c, SATURATED, "delete-generic", f"delete generic {c.id}",
                                    [ops.DeleteCriterion(tid, c.id)],
                                    f"{c.id} is met by every rollout through generic content "
                                    f"({a.evidence.phrase!r}): second tightening deletes it", default=True))
        prompt = _prompt_text(ctx.task)
        for kw, fail, old, new in tightened_thresholds(c, ctx.responses, self.config.tighten_fail_rates,
                                                        prompt=prompt, max_scan=self.config.max_scan):
            text = _replace_number(c.text, old, new)
            tags = _tags_with_kwargs(c, kw)
            act = (ops.CreateCriterion(tid, text, c.points, tags) if c.anchor
                   else ops.RewriteCriterion(tid, c.id, text, tags))
            out.append(self._single(ctx, a, c, SATURATED, "tighten:threshold", f"tighten {c.id} to {new}", [act],
                                    f"{c.id} is saturated; threshold {old} -> {new} fails {fail:.0%} of the group",
                                    strength=fail))
        refs = [ctx.task.reference] if ctx.task.reference else []
        refs += [e.response for d in ctx.donors.get(c.id, ()) for e in d.satisfying]
        if c.to_criterion().rule_id == "keywords:existence" and refs:
            kws = list(c.to_criterion().rule_kwargs.get("keywords", []))
            for word, fail in reference_keywords(c, refs, ctx.responses, self.config.tighten_fail_rates,
                                                 self.config.keyword_min_len):
                text = f"{c.text.rstrip().rstrip('.')}, and uses the word \"{word}\"."
                kw = {**c.to_criterion().rule_kwargs, "keywords": kws + [rf"\b{word}"]}
                act = (ops.CreateCriterion(tid, text, c.points, _tags_with_kwargs(c, kw)) if c.anchor
                       else ops.RewriteCriterion(tid, c.id, text, _tags_with_kwargs(c, kw)))
                out.append(self._single(ctx, a, c, SATURATED, "tighten:keyword", f"tighten {c.id} with {word}",
                                        [act], f"{c.id} is saturated; requiring \"{word}\" from the reference fails "
                                               f"{fail:.0%} of the group", strength=fail))
        for fam in ("tighten:threshold", "tighten:keyword"):
            # Within a tightening family, the one that fails about half of the group goes first.
            members = [x for x in out if x.family == fam]
            if members:
                first = min(members, key=lambda x: abs(x.strength - 0.5))
                out = [dataclasses.replace(x, default=x is first) if x.family == fam else x for x in out]
        dup = self._duplicate(ctx, c, saturated)
        if dup is not None and not c.anchor:
            keep = max((c, dup), key=lambda x: x.points)
            act = ops.MergeCriteria(tid, (c.id, dup.id), keep.text, max(c.points, dup.points))
            out.append(self._single(ctx, a, c, SATURATED, "merge", f"merge {c.id}+{dup.id}", [act],
                                    f"{c.id} and {dup.id} are saturated near-duplicates: counted once", default=True))
        if not any(v.family == "reweight" for v in out):
            out.append(self._reweight(ctx, a, c, SATURATED, "reweight", default=True))
        return out

    def _duplicate(self, ctx: TaskContext, c: RubricCriterion, saturated: Sequence[Attribution]):
        others = [self._criterion(ctx, a.criterion_id) for a in saturated if a.criterion_id != c.id]
        others = [o for o in others if not o.anchor and (o.points > 0) == (c.points > 0)]
        if not others:
            return None
        if self.embed is not None:
            v = np.asarray(self.embed([c.text] + [o.text for o in others]), np.float32)
            sims = v[1:] @ v[0]
            best = int(np.argmax(sims))
            return others[best] if sims[best] >= self.config.duplicate_cosine else None
        sims = [jaccard(c.text, o.text) for o in others]
        best = int(np.argmax(sims))
        return others[best] if sims[best] >= self.config.duplicate_jaccard else None


def _points(ctx: TaskContext, cid: str) -> float:
    i = ctx.state.index(ctx.task_id)
    k = ctx.state.rubric.find(i, cid)
    return 0.0 if k is None else ctx.state.rubric.criteria[i][k].points


def _prompt_text(task) -> str | None:
    users = [m["content"] for m in task.prompt if m.get("role") == "user"]
    return users[-1] if users else None


# -------------------------------------------------------------------------------------------- the LLM proposer

OPS_DOC = {
    "sampling": '{"op": "downweight_task", "task_id": T}',
    "guidance": ('{"op": "add_field", "task_id": T, "field": "criterion" | "reference" | "critique", "text": "...", '
                 '"criterion_id": C or null}\n{"op": "drop_field", "task_id": T, "field": "..."}'),
    "rubric": ('{"op": "create_criterion", "task_id": T, "text": "...", "points": P, "tags": [...]}\n'
               '{"op": "rewrite_criterion", "task_id": T, "criterion_id": C, "text": "...", "tags": null or [...]}\n'
               '{"op": "delete_criterion", "task_id": T, "criterion_id": C}\n'
               '{"op": "reweight_criterion", "task_id": T, "criterion_id": C, "points": P}\n'
               '{"op": "merge_criteria", "task_id": T, "criterion_ids": [C1, C2, ...], "text": "...", "points": P}\n'
               '{"op": "split_criterion", "task_id": T, "criterion_id": C, "texts": ["...", "..."], '
               '"points": [P1, P2]}'),
}

INTERFACE_OPS = {"sampling": ("downweight_task",), "guidance": ("add_field", "drop_field"),
                 "rubric": ("create_criterion", "rewrite_criterion", "delete_criterion", "reweight_criterion",
                            "merge_criteria", "split_criterion")}


def proposer_schema(interface: str) -> dict:
    """JSON schema of the proposer's answer: a rationale and actions whose `op` is one of the interface's (a
    grammar-constrained server then cannot name another); the rest of each action is checked by `harness.ops`."""
    action = {"type": "object", "properties": {"op": {"type": "string", "enum": list(INTERFACE_OPS[interface])}},
              "required": ["op"]}
    return {"type": "object",
            "properties": {"rationale": {"type": "string"}, "actions": {"type": "array", "items": action}},
            "required": ["rationale", "actions"]}


def routed(ctx: TaskContext, interface: str, drop_pass_rate: float = 0.5) -> list[Attribution]:
    """The attributions routed to `interface` (empty: nothing to do there). Guidance also gets the targets of
    mounted fields, which may be dropped."""
    att = ctx.attribution
    if interface == "sampling":
        return list(att.with_label(SATURATED)) if att.task_label == SATURATED else []
    if interface == "guidance":
        out = list(att.with_label(BLIND))
        for _, f in ctx.state.fields(ctx.task_id):
            a = att.get(f.criterion_id) if f.criterion_id else None
            if a is not None and a not in out:
                out.append(a)
        if not out and ctx.state.fields(ctx.task_id):
            return [a for a in att.criteria][:1]  # untargeted fields on a task with nothing blind: may be dropped
        return out
    if interface == "rubric":
        return list(att.with_label(SPURIOUS)) + list(att.with_label(SATURATED))
    raise ValueError(f"unknown interface {interface!r}")


class LLMProposer:
    """Asks a model for the candidate, through the judge protocol (`client.complete(messages, schema)`, e.g. an
    OpenAIJudge); its JSON is validated into typed actions, and output that does not validate comes back as an
    `invalid` candidate with the reason. Sampling goes to `fallback` (the rule proposer)."""

    source = "llm"

    def __init__(self, client, *, template: str = "proposer", fallback: RuleProposer | None = None,
                 transitions: Transitions = DEFAULT_TRANSITIONS, max_chars: int = 800):
        self.client, self.template = client, templates.load(template)
        self.fallback = fallback or RuleProposer(transitions=transitions)
        self.transitions, self.max_chars = transitions, max_chars

    def propose(self, ctx: TaskContext, interface: str, feedback: Sequence[Rejection] = ()) -> Candidate | None:
        if interface == "sampling":
            return self.fallback.propose(ctx, interface, feedback)
        targets = routed(ctx, interface)
        if not targets:
            return None
        prompt = self.prompt(ctx, interface, targets, feedback)
        out = self.client.complete(({"role": "user", "content": prompt},), proposer_schema(interface))
        label = targets[0].label
        cids = tuple(a.criterion_id for a in targets)
        ev = tuple(e for a in targets for e in a.evidence.ids())
        name = f"llm round {len(feedback)}"
        if getattr(out, "status", "ok") != "ok" or out.text is None:
            return Candidate(ctx.task_id, interface, (), label, cids, ev, "", "llm", name, 1.0, self.source,
                             f"no answer from the proposer model: {getattr(out, 'detail', '')}")
        actions, rationale, invalid = self.parse(ctx, interface, out.text)
        if invalid is None and not actions:
            return None  # the model chose noop
        if actions:
            cids = tuple(dict.fromkeys(cids + tuple(_action_criteria(actions))))
        return Candidate(ctx.task_id, interface, tuple(actions), label, cids, ev, rationale, "llm", name, 1.0,
                         self.source, invalid)

    def parse(self, ctx: TaskContext, interface: str, text: str) -> tuple[list[ops.Action], str, str | None]:
        """(actions, rationale, why invalid or None) from the model's answer, validated against H_t."""
        from harnessrl_jax.rubric.judges.parse import json_objects, strip_thinking

        obj = next((o for o in json_objects(strip_thinking(text)) if isinstance(o, dict) and "actions" in o), None)
        if obj is None:
            return [], "", f"no JSON object with an 'actions' list in the answer: {text[:200]!r}"
        rationale = str(obj.get("rationale", ""))
        raw = obj["actions"]
        if not isinstance(raw, list):
            return [], rationale, f"'actions' must be a list, got {type(raw).__name__}"
        actions = []
        for n, d in enumerate(raw):
            if not isinstance(d, dict):
                return [], rationale, f"actions[{n}] is not an object"
            d = {"task_id": ctx.task_id, **d}
            try:
                a = ops.action_from_dict(d)
            except (ValueError, TypeError) as e:
                return [], rationale, f"actions[{n}]: {e}"
            if isinstance(a, ops.Noop):
                continue
            if a.interface != interface:
                return [], rationale, f"actions[{n}] ({a.op}) is a {a.interface} action, asked for {interface}"
            if getattr(a, "task_id", None) != ctx.task_id:
                return [], rationale, f"actions[{n}] targets task {getattr(a, 'task_id', None)!r}, not {ctx.task_id!r}"
            actions.append(a)
        if actions:
            try:
                self.transitions.apply(ctx.state, actions)
            except ops.InvalidAction as e:
                return actions, rationale, e.reason
            except (ValueError, TypeError) as e:
                return actions, rationale, str(e)
        return actions, rationale, None

    def prompt(self, ctx: TaskContext, interface: str, targets: Sequence[Attribution],
               feedback: Sequence[Rejection]) -> str:
        from harnessrl_jax.rubric.judges.llm import render_conversation

        state, tid = ctx.state, ctx.task_id
        labels = ctx.attribution.labels()
        rubric = "\n".join(
            f"- {c.id} [{c.points:+.3g} points{', ANCHOR: text frozen, reweight only' if c.anchor else ''}; "
            f"label {labels.get(c.id, '?')}] {c.text}  tags={list(c.tags)}" for c in ctx.criteria)
        fields = "\n".join(f"- <{n}> for {f.criterion_id or 'the task'}: {_cut(f.text, 300)}"
                           for n, f in state.fields(tid)) or "(none)"
        evidence = []
        for a in targets:
            evidence.append(f"- {a.criterion_id}: {a.label} ({a.question}): {a.reason}; pass rate "
                            f"{a.evidence.pass_rate:.2f}; phrase {a.evidence.phrase!r}; signals "
                            f"{json.dumps(a.evidence.signals, default=str)[:600]}")
            for d in list(ctx.donors.get(a.criterion_id, ()))[:2]:
                ex = d.satisfying[0].response if d.satisfying else ""
                evidence.append(f"  donor {d.task_id}/{d.criterion_id} (cosine {d.cosine:.2f}): {d.text}"
                                + (f"\n  its satisfying example: {_cut(ex, 300)}" if ex else ""))
        group = "\n".join(f"--- response {j} (reward {ctx.rewards[j]:.1f}) ---\n{_cut(r, 400)}"
                          for j, r in enumerate(ctx.responses[:4]))
        fb = "\n".join(f"- round {n}: {json.dumps([x.to_dict() for x in r.candidate.actions])} -> rejected: "
                       f"{getattr(r.measurement, 'reason', '')}" for n, r in enumerate(feedback)) or "(first round)"
        return templates.fill(
            self.template, task_id=tid, conversation=render_conversation(ctx.task),
            reference=_cut(ctx.task.reference, self.max_chars) if ctx.task.reference else "(none)",
            interface=interface, ops=OPS_DOC[interface], rubric=rubric, fields=fields,
            cap=int(state.guidance.cap), diagnosis=f"task label {ctx.attribution.task_label}; discriminative mass "
                                                  f"{ctx.attribution.mass:.2f}; mean reward {ctx.rbar:.1f}",
            evidence="\n".join(evidence), group=group, feedback=fb)


def _action_criteria(actions: Sequence[ops.Action]) -> list[str]:
    out = []
    for a in actions:
        if getattr(a, "criterion_id", None):
            out.append(a.criterion_id)
        out += list(getattr(a, "criterion_ids", ()) or ())
    return out
