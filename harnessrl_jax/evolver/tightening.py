"""Rubric updates the rule proposer builds from the evidence: tightened rule thresholds, required keywords taken
from satisfying examples, stricter rewrites of a spurious criterion, and the parts a compound criterion splits
into. Pure functions over criteria and the recorded group; tightenings are measured with the rule checker itself.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping, Sequence

import numpy as np

from harnessrl_jax.evolver.text import content_words, rule_keywords, valid_regex
from harnessrl_jax.harness.state import RubricCriterion
from harnessrl_jax.rubric import rules

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


def stricter_text(text: str, phrase: str | None, pattern: str = "") -> str:
    """A rewrite of a spurious criterion that closes the surface channel at `phrase`."""
    base = text.rstrip().rstrip(".")
    if pattern == "partial_coverage":
        return f"{base}, covering every part it names; covering only some of them does not count."
    what = f'"{phrase}"' if phrase else "it"
    return (f"{base}. Only substantive fulfilment counts: meeting {what} by a bare mention, a list, keywords or a "
            f"claim of compliance does not.")


def replace_number(text: str, old: int, new: int) -> str:
    out, n = re.subn(rf"(?<!\d){old}(?!\d)", str(new), text, count=1)
    return out if n else f"{text.rstrip()} (threshold: {new})"


def tags_with_kwargs(c: RubricCriterion, kwargs: Mapping[str, Any]) -> tuple[str, ...]:
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


def positive_keywords(c: RubricCriterion, positives: Sequence[str], responses: Sequence[str],
                       fail_rates=(0.25, 0.5, 0.75), min_len: int = 5) -> list[tuple[str, float]]:
    """Content words of satisfying examples (`positives`) that part of the group lacks, as (word, fail rate),
    weakest first: the required keywords a tightening of a keyword criterion can add."""
    have = [p for p in rule_keywords(c)]
    cands = []
    for ref in positives:
        for w in sorted(content_words(ref)):
            if len(w) < min_len or not w.isalpha() or any(re.search(p, w, re.I) for p in have if valid_regex(p)):
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


# A list of parts: "A, B and C", "A; B", "A as well as B".
_PARTS = re.compile(r"\s*(?:;|,\s*and\s+|,\s*|\s+and\s+|\s+as well as\s+)\s*")


def split_parts(text: str, max_parts: int = 4) -> list[str] | None:
    """The criteria a compound criterion splits into ("Names the reaction and gives its product." -> "Names the
    reaction.", "Gives its product."), each a full sentence with the shared subject; None when the text does not
    list 2..max_parts parts of at least two words each (a noun list under one verb is one check, not several)."""
    subject_re = re.compile(r"^((?:the |a |an )?(?:response|answer|reply)\s+)", re.I)
    t = " ".join(text.split()).rstrip(".")
    m = subject_re.match(t)
    subject, body = (m.group(1), t[m.end():]) if m else ("", t)
    parts = [subject_re.sub("", p.strip()) for p in _PARTS.split(body) if p and p.strip()]
    if not 2 <= len(parts) <= max_parts or any(len(p.split()) < 2 for p in parts):
        return None
    return [f"{subject}{p}." if subject else f"{p[0].upper()}{p[1:]}." for p in parts]
