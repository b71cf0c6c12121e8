"""CoCA's capability-aware rubric calibration, for one visit only: saturated criteria are made harder, too-hard ones
easier, with the same id, polarity, points and intent; the adapted rubric C~ is discarded after the step.

- LLM criteria: the evolver model rewrites the text (prompts/coca_strengthen.txt, coca_weaken.txt; JSON {"text"}).
- Rule criteria (`verifier:rule`): the rule's threshold moves to the nearest value at which the Normal group's
  verdicts change, harder or easier, provided the group is then split; otherwise the rule stays (`skipped`).

A rewrite that breaks an invariant (same id, sign, points and tags, one sentence, changed, at most `length_factor`
times as long, a content word in common) is discarded and counted `invalid`; a call without an answer `failed`.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import re
from typing import Sequence

import numpy as np

from harnessrl_jax.evolver import templates
from harnessrl_jax.evolver.text import content_words
from harnessrl_jax.evolver.tightening import RANGE_RULES, THRESHOLD_RULES, replace_number, tags_with_kwargs
from harnessrl_jax.methods.coca.states import SATURATED, TOO_HARD
from harnessrl_jax.methods import llm
from harnessrl_jax.methods.guidance import load_template
from harnessrl_jax.rubric import rules
from harnessrl_jax.rubric.schema import Criterion

STRENGTHEN, WEAKEN = "strengthen", "weaken"
REWRITE_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


@dataclasses.dataclass(frozen=True)
class Rewrite:
    """One calibration attempt: the criterion, the direction, the old and new text, and its outcome ('ok',
    'invalid: why', 'failed', 'skipped')."""

    index: int
    criterion_id: str
    direction: str
    old: str
    new: str
    outcome: str
    points: float = 0.0  # the criterion's (unchanged) points: its polarity

    @property
    def valid(self) -> bool:
        return self.outcome == "ok"

    def to_dict(self) -> dict:
        return {"id": self.criterion_id, "direction": self.direction, "old": self.old, "new": self.new,
                "valid": self.valid, "outcome": self.outcome, "points": self.points}


def direction_of(state: str) -> str | None:
    return {SATURATED: STRENGTHEN, TOO_HARD: WEAKEN}.get(state)


# ------------------------------------------------------------------------------------------------- rules


def _scan(kwargs: dict, rule_id: str, harder_check: bool, max_scan: int):
    """(kwarg, old value, values in order) of the threshold move that makes the rule check harder or easier to
    pass, or None for a rule with no threshold."""
    if rule_id in THRESHOLD_RULES:
        key, rel = THRESHOLD_RULES[rule_id]
        relation = rel[1:] if rel.startswith("=") else kwargs.get(rel)
        if key not in kwargs or relation is None:
            return None
        old = int(kwargs[key])
        up = relation in ("at least", "more than")
        if relation not in ("at least", "more than", "less than", "at most"):
            return None
        rising = up == harder_check  # 'at least n': harder is a larger n; 'less than n': harder is a smaller n
    elif rule_id in RANGE_RULES:
        lo_key, hi_key = RANGE_RULES[rule_id]
        if kwargs.get(hi_key) is not None:
            key, rising = hi_key, not harder_check
        elif kwargs.get(lo_key) is not None:
            key, rising = lo_key, harder_check
        else:
            return None
        old = int(kwargs[key])
    else:
        return None
    values = range(old + 1, old + 1 + max_scan) if rising else range(old - 1, max(old - 1 - max_scan, -1), -1)
    return key, old, values


def moved_rule(c: Criterion, direction: str, responses: Sequence[str], *, prompt: str | None = None,
               max_scan: int = 2000) -> Criterion | None:
    """The rule criterion with its threshold moved to the nearest value where some of `responses` (the task's
    earlier ones, not those it is then scored on) change verdict, making the criterion harder (strengthen) or easier
    (weaken) to achieve; None when the rule has no threshold, or the nearest change flips every verdict."""
    rid, kwargs = c.rule_id, c.rule_kwargs
    if rid is None or not responses:
        return None
    harder_check = (direction == STRENGTHEN) == (c.points > 0)  # a pitfall is achieved by NOT passing its check
    scan = _scan(kwargs, rid, harder_check, max_scan)
    if scan is None:
        return None
    key, old, values = scan

    def passes(kw):
        return np.array([rules.check(rid, dict(kw), r, prompt=prompt) for r in responses], bool)

    now = passes(kwargs)
    for t in values:
        kw = {**kwargs, key: t}
        try:
            rules.validate_kwargs(rid, kw, prompt=prompt)
        except ValueError:
            continue
        moved = passes(kw)
        if (moved != now).any():
            if moved.all() or not moved.any():  # jumped to the other extreme: no threshold splits the group
                return None
            return dataclasses.replace(c, text=replace_number(c.text, old, t), tags=tags_with_kwargs(c, kw))
    return None


# ------------------------------------------------------------------------------------------------ checks


def invariant_problem(old: Criterion, new: Criterion, *, length_factor: float = 3.0) -> str | None:
    """Why `new` is not a valid calibration of `old`, or None."""
    if new.id != old.id:
        return "id changed"
    if new.points != old.points:
        return "points or sign changed"
    strip = lambda tags: tuple(t for t in tags if not t.startswith("rule_kwargs:"))  # noqa: E731
    if (strip(new.tags) != strip(old.tags)) or (old.verifier != "rule" and new.tags != old.tags):
        return "tags changed"
    text = new.text.strip()
    if not text:
        return "empty text"
    if "\n" in text or len(re.findall(r"[.!?](?:\s+|$)", text)) > 1:
        return "more than one sentence"
    if text == old.text.strip() and new.tags == old.tags:
        return "unchanged"
    if len(text) > length_factor * max(len(old.text), 1):
        return f"longer than {length_factor:g} x the original"
    if content_words(old.text) and not content_words(text) & content_words(old.text):
        return "no content word in common with the original (another target?)"
    return None


# -------------------------------------------------------------------------------------------- calibration


class Calibrator:
    """Builds C~ for a visit: rule moves here, LLM rewrites through the evolver model (`client`, or None: LLM
    criteria are left as they are and counted skipped)."""

    def __init__(self, client=None, *, length_factor: float = 3.0, max_workers: int = 8):
        self.client, self.length_factor, self.max_workers = client, length_factor, max_workers
        self.templates = {STRENGTHEN: load_template("coca_strengthen"), WEAKEN: load_template("coca_weaken")}

    def calibrate_many(self, items: Sequence[tuple]) -> list[tuple[tuple[Criterion, ...], list[Rewrite]]]:
        """For each (task, criteria, states, pN, pG, responses a rule threshold is moved on): (C~, its rewrites);
        LLM calls pooled. A rule criterion with no responses to move its threshold on is skipped."""
        jobs, out = [], []
        for n, (task, criteria, states, pn, pg, responses) in enumerate(items):
            new, rewrites = list(criteria), []
            for k, (c, s) in enumerate(zip(criteria, states)):
                d = direction_of(s)
                if d is None:
                    continue
                if c.verifier == "rule":
                    moved = moved_rule(c, d, responses, prompt=task.user_text)
                    rewrites.append(self._checked(k, c, d, moved, new))
                elif self.client is None:
                    rewrites.append(Rewrite(k, c.id, d, c.text, c.text, "skipped", points=c.points))
                else:
                    rewrites.append(None)
                    jobs.append((n, len(rewrites) - 1, k, task, c, d, pn[k], pg[k]))
            out.append((new, rewrites))
        if jobs:
            with concurrent.futures.ThreadPoolExecutor(max(1, min(self.max_workers, len(jobs)))) as pool:
                texts = list(pool.map(lambda j: self._ask(*j[3:]), jobs))
            for (n, slot, k, task, c, d, _, _), text in zip(jobs, texts):
                new, rewrites = out[n]
                if text is None:
                    rewrites[slot] = Rewrite(k, c.id, d, c.text, c.text, "failed", points=c.points)
                else:
                    rewrites[slot] = self._checked(k, c, d, dataclasses.replace(c, text=text), new)
        return [(tuple(new), rewrites) for new, rewrites in out]

    def _checked(self, k: int, c: Criterion, d: str, candidate: Criterion | None, new: list) -> Rewrite:
        if candidate is None:
            return Rewrite(k, c.id, d, c.text, c.text, "skipped", points=c.points)
        why = invariant_problem(c, candidate, length_factor=self.length_factor)
        if why is not None:
            return Rewrite(k, c.id, d, c.text, candidate.text, f"invalid: {why}", points=c.points)
        new[k] = candidate
        return Rewrite(k, c.id, d, c.text, candidate.text, "ok", points=c.points)

    def _ask(self, task, c: Criterion, d: str, pn: float, pg: float) -> str | None:
        prompt = templates.fill(self.templates[d], task_prompt=task.user_text, criterion=c.text,
                                points=f"{c.points:g}", polarity="pitfall" if c.points < 0 else "requirement",
                                pass_rate_normal=f"{pn:.2f}", pass_rate_guided=f"{pg:.2f}")
        obj = llm.ask(self.client, prompt, REWRITE_SCHEMA, "text")
        text = obj.get("text") if obj else None
        return text.strip() if isinstance(text, str) else None


__all__ = ["Calibrator", "REWRITE_SCHEMA", "Rewrite", "STRENGTHEN", "WEAKEN", "invariant_problem", "moved_rule"]
