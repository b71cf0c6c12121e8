"""The rule proposer: per failure label, candidate updates of one interface built by rules over the evidence
(HarnessRL, sec. 4.3), the CPU default (`LLMProposer` has a model write them instead).

    blind     -> guidance: <criterion>, <reference>, <critique> fields for the heaviest blind criterion (`fields`)
    saturated -> sampling: down-weight a saturated task; rubric: tighten (`tightening`), merge near-duplicates,
                 or reweight; a criterion met through generic content is tightened a second time, and deleted
                 only when nothing stricter is left
    spurious  -> rubric: a pitfall closing the surface channel, a rewrite, a replacement (delete + create), a
                 split of a compound criterion, a lower weight, or a delete

Candidates come in variants of graded strength (`candidates.choose`); the task's update history keeps an update
accepted and later undone from being offered again. A task's dataset reference is never read.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Sequence

import numpy as np

from harnessrl_jax.evolver.attributor import Attribution
from harnessrl_jax.evolver.candidates import Candidate, Rejection, Variant, choose, scaled_name
from harnessrl_jax.evolver.context import TaskContext
from harnessrl_jax.evolver.fields import Example, criterion_field, critique_field, reference_field
from harnessrl_jax.evolver.tightening import (REPEAT_PATTERN, positive_keywords, replace_number, rule_tags,
                                              split_parts, stricter_text, tags_with_kwargs, tightened_thresholds)
from harnessrl_jax.evolver.text import jaccard, words
from harnessrl_jax.harness import ops
from harnessrl_jax.harness.state import FIELDS, NUM_LEVELS, RubricCriterion
from harnessrl_jax.harness.transitions import DEFAULT_TRANSITIONS, DROP_ORDER, Transitions
from harnessrl_jax.memory.semantic import MIN_COSINE
from harnessrl_jax.memory.store import redoes
from harnessrl_jax.rubric.reward import rubric_reward, satisfied
from harnessrl_jax.words import Interface, Label

# Guidance field sets from weakest to strongest: a critique only notes a shortfall, a criterion rewording names
# the target, a reference shows whole answers (the same ranking as transitions.DROP_ORDER, reversed).
FIELD_STRENGTH = {"critique": 1.0, "criterion": 2.0, "reference": 3.5}
GUIDANCE_SETS = tuple(sorted(
    (s for s in (("critique",), ("criterion",), ("criterion", "critique"), ("reference",), ("reference", "critique"),
                 ("criterion", "reference"), ("criterion", "reference", "critique"))),
    key=lambda s: sum(FIELD_STRENGTH[f] for f in s)))
# The paper's blind criterion in the cellulose case got <criterion> + <reference> (sec. 4.3, step 55).
FIRST_GUIDANCE = ("criterion", "reference")


@dataclasses.dataclass(frozen=True)
class ProposerConfig:
    """Knobs of the rule proposer (this project's defaults; `config.harness.rules` sets them)."""

    # Drop a field once its target is no longer blind and the group meets it at least this often.
    drop_pass_rate: float = 0.5
    reference_chars: int = 600  # a <reference> field holds at most this many characters of examples
    criterion_chars: int = 300  # a quoted <criterion> holds at most this many characters
    # Tightened criteria aim at these shares of the recorded group failing, weakest first.
    tighten_fail_rates: tuple[float, ...] = (0.25, 0.5, 0.75)
    keyword_min_len: int = 5  # required keywords added from satisfying examples are content words this long
    duplicate_jaccard: float = 0.6  # near-duplicates by content-word overlap when no embedder is given
    reweight_factor: float = 0.5  # a reweight halves the points (scaled by the critic's feedback)
    max_rescale: float = 2.0  # a rejected variant's strength is rescaled by at most this factor either way
    max_scan: int = 2000  # thresholds tried per tightening

    def __post_init__(self):
        if self.max_rescale < 1.0:
            raise ValueError(f"max_rescale must be >= 1, got {self.max_rescale}")
        object.__setattr__(self, "tighten_fail_rates", tuple(float(x) for x in self.tighten_fail_rates))


class RuleProposer:
    """The CPU proposer; `embed(texts) -> unit vectors [n, d]` (the semantic index's embedder) finds near-duplicate
    criteria at cosine >= `min_cosine` (the semantic index's threshold, calibrated for that embedder), else
    content-word overlap does. `sign_filter` withholds the reweights and deletes the critic's sign test would reject
    (the recorded group's reward must fall); off when the critic is off, which measures nothing."""

    source = "rule"

    def __init__(self, config: ProposerConfig = ProposerConfig(), *, embed: Callable[[Sequence[str]], Any] | None = None,
                 min_cosine: float = MIN_COSINE, transitions: Transitions = DEFAULT_TRANSITIONS,
                 sign_filter: bool = True):
        self.config, self.embed, self.min_cosine, self.transitions = config, embed, min_cosine, transitions
        self.sign_filter = sign_filter

    def propose(self, ctx: TaskContext, interface: Interface, feedback: Sequence[Rejection] = ()) -> Candidate | None:
        """The next candidate for `interface` of this task, or None (noop: nothing routed here, or nothing left)."""
        return choose(self.variants(ctx, interface), feedback, max_rescale=self.config.max_rescale)

    def variants(self, ctx: TaskContext, interface: Interface) -> list[Variant]:
        """Every way this proposer could update `interface` of the task, given the attribution."""
        if interface == Interface.SAMPLING:
            return self._sampling(ctx)
        if interface == Interface.GUIDANCE:
            return self._guidance(ctx)
        if interface == Interface.RUBRIC:
            return self._rubric(ctx)
        raise ValueError(f"unknown interface {interface!r}")

    # -- helpers --------------------------------------------------------------------------------------------

    def _make(self, ctx: TaskContext, interface: Interface, actions: Sequence[ops.Action], *, label: Label,
              criterion_ids: Sequence[str], evidence_ids: Sequence[str], rationale: str, family: str, name: str,
              scale: float = 1.0, reference_source: str | None = None) -> Candidate | None:
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
        if self.sign_filter and interface == Interface.RUBRIC and all(
                isinstance(a, (ops.ReweightCriterion, ops.DeleteCriterion)) for a in actions):
            # Reweights and deletes change points only, so their effect on the recorded group is arithmetic on S:
            # one that does not lower the reward could never pass the critic's sign test, so it is not offered.
            crits = new.rubric_of(ctx.task_id)
            rows = np.stack([ctx.row(c.id) for c in crits])
            r = rubric_reward(new.points(ctx.task_id), rows)
            r = r[~np.isnan(r)]
            if not r.size or not ctx.rbar - float(r.mean()) > 1e-9:
                return None
        if ctx.updates and any(redoes(ctx.changes(actions), u.record) for u in ctx.updates if u.undone):
            return None  # the time index shows this update was accepted once and undone: not proposed again
        return Candidate(ctx.task_id, interface, actions, label, tuple(dict.fromkeys(criterion_ids)),
                         tuple(dict.fromkeys(evidence_ids)), rationale, family, scaled_name(name, scale), scale,
                         self.source, reference_source=reference_source)

    def _criterion(self, ctx: TaskContext, cid: str) -> RubricCriterion:
        i = ctx.state.index(ctx.task_id)
        return ctx.state.rubric.criteria[i][ctx.state.rubric.find(i, cid)]

    def _points(self, ctx: TaskContext, cid: str) -> float:
        i = ctx.state.index(ctx.task_id)
        k = ctx.state.rubric.find(i, cid)
        return 0.0 if k is None else ctx.state.rubric.criteria[i][k].points

    # -- sampling -------------------------------------------------------------------------------------------

    def _sampling(self, ctx: TaskContext) -> list[Variant]:
        att = ctx.attribution
        i = ctx.state.index(ctx.task_id)
        if att.task_label != Label.SATURATED or int(ctx.state.sampling.level[i]) >= NUM_LEVELS - 1:
            return []
        sat = att.with_label(Label.SATURATED)
        ev = [e for a in sat for e in a.evidence.ids()]
        if ctx.history and ctx.history[0].task_label == Label.SATURATED and ctx.history[0].draw_id is not None:
            ev.append(f"draw:{ctx.history[0].draw_id}")

        def make(scale):
            return self._make(ctx, Interface.SAMPLING, [ops.DownweightTask(ctx.task_id)], label=Label.SATURATED,
                              criterion_ids=[a.criterion_id for a in sat], evidence_ids=ev,
                              rationale=att.task_reason, family="sampling:downweight", name="downweight")
        return [Variant("sampling:downweight", 1.0, "downweight", make, default=True)]

    # -- guidance -------------------------------------------------------------------------------------------

    def examples(self, ctx: TaskContext, c: RubricCriterion) -> tuple[Example | None, Example | None]:
        """(an answer that meets criterion c, one that does not): the positive from an earlier draw of this task
        (any wording of c), else the task's dataset reference when the run allows it (off by default), else from a
        donor task; the negative from this step's group, else from the donor."""
        n = self.config.reference_chars
        positive = negative = None
        for r in ctx.history:
            if c.id in r.criterion_ids:
                row = satisfied(np.asarray(r.scores, float)[r.criterion_ids.index(c.id)], c.points)
                hit = np.flatnonzero(row == 1)
                if hit.size:
                    positive = Example(r.responses[hit[0]][: 4 * n], "own", f"draw:{r.draw_id}")
                    break
        if positive is None and ctx.task.reference and c.points > 0:
            # Only present under config.harness.use_dataset_reference (build.training_tasks drops it otherwise).
            positive = Example(ctx.task.reference[: 4 * n], "dataset", "task:reference")
        if positive is None:
            for d in ctx.donors.get(c.id, ()):
                if d.satisfying:
                    e = d.satisfying[0]
                    positive = Example(e.response[: 4 * n], "donor", f"donor:{d.row}")
                    if d.failing:
                        negative = Example(d.failing[0].response[: 4 * n], "donor", f"donor:{d.row}")
                    break
        row = ctx.row(c.id)
        if row is not None:
            miss = np.flatnonzero(satisfied(row, c.points) == 0)
            if miss.size:
                negative = Example(ctx.responses[miss[0]][: 4 * n], "own", "group")
        return positive, negative

    def _guidance(self, ctx: TaskContext) -> list[Variant]:
        att, state, tid = ctx.attribution, ctx.state, ctx.task_id
        mounted = dict(state.fields(tid))
        blind = sorted(att.with_label(Label.BLIND), key=lambda a: -abs(self._points(ctx, a.criterion_id)))
        stale = []
        for name, f in mounted.items():
            if f.criterion_id is not None:
                a = att.get(f.criterion_id)
                if a is None or (a.label != Label.BLIND and a.evidence.pass_rate >= self.config.drop_pass_rate):
                    stale.append(name)
            elif not blind:
                stale.append(name)
        out: list[Variant] = []
        if stale:
            targets = [mounted[n].criterion_id for n in stale if mounted[n].criterion_id]
            label = next((att.get(t).label for t in targets if att.get(t) is not None), Label.AGREE)
            ev = [e for t in targets if att.get(t) is not None for e in att.get(t).evidence.ids()]

            def drop(names, strength, default=False):
                names = tuple(names)
                name = "drop " + "+".join(names)

                def make(scale):
                    return self._make(ctx, Interface.GUIDANCE, [ops.DropField(tid, n) for n in names], label=label,
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
        cfg = self.config
        for a in blind:  # the task's guidance addresses its heaviest blind criterion that can still get a field
            if out:
                break
            c = self._criterion(ctx, a.criterion_id)
            crit = c.to_criterion()
            positive, negative = self.examples(ctx, c)
            texts = {"criterion": criterion_field(c.text, c.points, crit, positive if c.points > 0 else None,
                                                  cfg.criterion_chars),
                     "critique": critique_field(c.text, c.points, crit.rule_id, ctx.responses)}
            quoted = positive is not None and c.points > 0
            if positive is not None:
                texts["reference"] = reference_field(positive, negative, cfg.reference_chars)
            ev = list(a.evidence.ids())
            for fields in GUIDANCE_SETS:
                if any(f in mounted or f not in texts for f in fields) or have + len(fields) > cap:
                    continue
                strength = sum(FIELD_STRENGTH[f] for f in fields)
                name = f"add {'+'.join(fields)} for {c.id}"
                uses = ("reference" in fields) or ("criterion" in fields and quoted)
                field_ev = ev + ([positive.evidence_id] if uses else [])
                if "reference" in fields and negative is not None and negative.source == "donor":
                    field_ev.append(negative.evidence_id)

                def make(scale, fields=fields, name=name, field_ev=field_ev, c=c, a=a, texts=texts):
                    acts = [ops.AddField(tid, f, texts[f], c.id) for f in FIELDS if f in fields]
                    return self._make(ctx, Interface.GUIDANCE, acts, label=Label.BLIND, criterion_ids=[c.id],
                                      evidence_ids=field_ev, family="guidance:add", name=name,
                                      rationale=f"{c.id} is blind: {a.reason}",
                                      reference_source=positive.source if "reference" in fields else None)
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
        spurious = sorted(att.with_label(Label.SPURIOUS), key=lambda a: -abs(self._points(ctx, a.criterion_id)))
        saturated = sorted(att.with_label(Label.SATURATED),
                           key=lambda a: (-a.generic, -abs(self._points(ctx, a.criterion_id))))
        out: list[Variant] = []
        for a in spurious:
            out += self._spurious(ctx, a)
        for a in saturated:
            out += self._saturated(ctx, a, saturated)
        return out

    def _pitfall(self, ctx, a, c, family, name, text, rule_id, kwargs, strength, default=False) -> Variant:
        def make(scale):
            pts = -abs(c.points) * scale
            act = ops.CreateCriterion(ctx.task_id, text, pts, rule_tags(rule_id, kwargs))
            return self._make(ctx, Interface.RUBRIC, [act], label=Label.SPURIOUS, criterion_ids=[c.id],
                              evidence_ids=a.evidence.ids(), family=family, name=name, scale=scale,
                              rationale=f"{c.id} is spurious ({a.reason}); a pitfall of {pts:.3g} points closes the "
                                        f"channel")
        return Variant(family, strength, name, make, scalable=True, default=default)

    def _reweight(self, ctx, a, c, label, family, strength=1.0, default=False) -> Variant:
        name = f"reweight {c.id}"

        def make(scale):
            cut = min(0.95, self.config.reweight_factor * scale)
            pts = c.points * (1.0 - cut)
            return self._make(ctx, Interface.RUBRIC, [ops.ReweightCriterion(ctx.task_id, c.id, pts)], label=label,
                              criterion_ids=[c.id], evidence_ids=a.evidence.ids(), family=family, name=name,
                              scale=scale, rationale=f"{c.id} is {label}: {a.reason}; its weight goes from "
                                                     f"{c.points:g} to {pts:.3g}")
        return Variant(family, strength, name, make, scalable=True, default=default)

    def _single(self, ctx, a, c, label, family, name, actions, rationale, strength=1.0, default=False) -> Variant:
        def make(scale):
            return self._make(ctx, Interface.RUBRIC, actions, label=label, criterion_ids=[c.id],
                              evidence_ids=a.evidence.ids(), family=family, name=name, rationale=rationale)
        return Variant(family, strength, name, make, default=default)

    def _spurious(self, ctx: TaskContext, a: Attribution) -> list[Variant]:
        c = self._criterion(ctx, a.criterion_id)
        sig, out, tid = a.evidence.signals, [], ctx.task_id
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
        crit = c.to_criterion()
        if not c.anchor and crit.verifier != "rule":
            pattern = sig.get("llm", {}).get("pattern", "")
            text = stricter_text(c.text, a.evidence.phrase, pattern)
            out.append(self._single(ctx, a, c, Label.SPURIOUS, "rewrite", f"rewrite {c.id}",
                                    [ops.RewriteCriterion(tid, c.id, text)],
                                    f"{c.id} is spurious ({a.reason}); the rewrite closes {a.evidence.phrase!r}",
                                    default=True))
            # Replace: a new criterion in place of the old one (new id, so its history starts afresh).
            out.append(self._single(ctx, a, c, Label.SPURIOUS, "replace", f"replace {c.id}",
                                    [ops.DeleteCriterion(tid, c.id), ops.CreateCriterion(tid, text, c.points, c.tags)],
                                    f"{c.id} is spurious ({a.reason}): deleted, and a stricter criterion created",
                                    strength=1.5))
            parts = split_parts(c.text)
            if parts:
                each = c.points / len(parts)
                out.append(self._single(ctx, a, c, Label.SPURIOUS, "split", f"split {c.id}",
                                        [ops.SplitCriterion(tid, c.id, tuple(parts), tuple([each] * len(parts)))],
                                        f"{c.id} is spurious ({a.reason}) and names {len(parts)} parts: each is "
                                        f"checked on its own, so meeting one no longer earns all", strength=0.8))
        if not c.anchor and crit.verifier == "rule":
            # A threshold rule met by surface form: replaced by the stricter threshold that fails about half.
            found = tightened_thresholds(c, ctx.responses, (0.5,), prompt=ctx.task.user_text,
                                         max_scan=self.config.max_scan)
            for kw, fail, old, new in found:
                act = ops.CreateCriterion(tid, replace_number(c.text, old, new), c.points, tags_with_kwargs(c, kw))
                out.append(self._single(ctx, a, c, Label.SPURIOUS, "replace", f"replace {c.id} by {new}",
                                        [ops.DeleteCriterion(tid, c.id), act],
                                        f"{c.id} is spurious ({a.reason}): deleted, and a criterion with threshold "
                                        f"{new} (was {old}, fails {fail:.0%} of the group) created", strength=1.5))
        if "isolated" in sig or not out:
            out.append(self._reweight(ctx, a, c, Label.SPURIOUS, "reweight", default=True))
        if not c.anchor:
            out.append(self._single(ctx, a, c, Label.SPURIOUS, "delete", f"delete {c.id}",
                                    [ops.DeleteCriterion(tid, c.id)],
                                    f"{c.id} is spurious ({a.reason}) and no rewrite closes it", default=True))
        return out

    def _saturated(self, ctx: TaskContext, a: Attribution, saturated: Sequence[Attribution]) -> list[Variant]:
        c = self._criterion(ctx, a.criterion_id)
        tid, out = ctx.task_id, []
        if c.points < 0:
            return []  # a pitfall nobody commits carries no signal, but there is nothing to tighten
        for kw, fail, old, new in tightened_thresholds(c, ctx.responses, self.config.tighten_fail_rates,
                                                        prompt=ctx.task.user_text, max_scan=self.config.max_scan):
            text = replace_number(c.text, old, new)
            tags = tags_with_kwargs(c, kw)
            act = (ops.CreateCriterion(tid, text, c.points, tags) if c.anchor
                   else ops.RewriteCriterion(tid, c.id, text, tags))
            out.append(self._single(ctx, a, c, Label.SATURATED, "tighten:threshold", f"tighten {c.id} to {new}",
                                    [act], f"{c.id} is saturated; threshold {old} -> {new} fails {fail:.0%} of the "
                                           f"group", strength=fail))
        positives = [e.response for d in ctx.donors.get(c.id, ()) for e in d.satisfying]
        positives += [ctx.task.reference] if ctx.task.reference else []  # only under use_dataset_reference
        if c.to_criterion().rule_id == "keywords:existence" and positives:
            kws = list(c.to_criterion().rule_kwargs.get("keywords", []))
            for word, fail in positive_keywords(c, positives, ctx.responses, self.config.tighten_fail_rates,
                                                self.config.keyword_min_len):
                text = f"{c.text.rstrip().rstrip('.')}, and uses the word \"{word}\"."
                kw = {**c.to_criterion().rule_kwargs, "keywords": kws + [rf"\b{word}"]}
                act = (ops.CreateCriterion(tid, text, c.points, tags_with_kwargs(c, kw)) if c.anchor
                       else ops.RewriteCriterion(tid, c.id, text, tags_with_kwargs(c, kw)))
                out.append(self._single(ctx, a, c, Label.SATURATED, "tighten:keyword", f"tighten {c.id} with {word}",
                                        [act], f"{c.id} is saturated; requiring \"{word}\" (from satisfying "
                                               f"examples) fails {fail:.0%} of the group", strength=fail))
        for fam in ("tighten:threshold", "tighten:keyword"):
            # Within a tightening family, the one that fails about half of the group goes first.
            members = [x for x in out if x.family == fam]
            if members:
                first = min(members, key=lambda x: abs(x.strength - 0.5))
                out = [dataclasses.replace(x, default=x is first) if x.family == fam else x for x in out]
        if a.generic and not c.anchor:
            # Met through generic content: the second tightening (the stricter variants above) comes first, and
            # deletion only when none is left.
            out.append(self._single(ctx, a, c, Label.SATURATED, "delete-generic", f"delete generic {c.id}",
                                    [ops.DeleteCriterion(tid, c.id)],
                                    f"{c.id} is met by every rollout through generic content "
                                    f"({a.evidence.phrase!r}) and no stricter version is left: deleted",
                                    default=not out))
        dup = self._duplicate(ctx, c, saturated)
        if dup is not None and not c.anchor:
            keep = max((c, dup), key=lambda x: x.points)
            act = ops.MergeCriteria(tid, (c.id, dup.id), keep.text, max(c.points, dup.points))
            out.append(self._single(ctx, a, c, Label.SATURATED, "merge", f"merge {c.id}+{dup.id}", [act],
                                    f"{c.id} and {dup.id} are saturated near-duplicates: counted once", default=True))
        if not any(v.family == "reweight" for v in out):
            out.append(self._reweight(ctx, a, c, Label.SATURATED, "reweight", default=True))
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
            return others[best] if sims[best] >= self.min_cosine else None
        sims = [jaccard(c.text, o.text) for o in others]
        best = int(np.argmax(sims))
        return others[best] if sims[best] >= self.config.duplicate_jaccard else None
