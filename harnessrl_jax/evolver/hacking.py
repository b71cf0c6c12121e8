"""Hacking signals: does meeting a criterion track quality, or only surface form? (HarnessRL, sec. 4.3, the
attributor's third question.)

CPU signals over one group (`hacking_signals`, each with its measurements): length gaming, keyword stuffing by
degenerate responses, isolated satisfaction, judge-directed text on the satisfying side (`JUDGE_DIRECTED`: the
response writes to its grader), and compliance claims / flattery / refusals shared by the satisfying side only;
`generic_evidence` for saturation through generic content; `wording_check` for the phrase of a criterion that lets
surface form pass. `LLMHackingCheck` asks a model through the judge protocol.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any, Sequence

import numpy as np
import regex

from harnessrl_jax.evolver import templates
from harnessrl_jax.evolver.text import (_CACHED, content_words, cut, degenerate, length_auc, readable_pattern,
                                        rule_keywords, schema_of, search, shared_sentences, word_count, word_set)
from harnessrl_jax.rubric import reward as reward_lib
from harnessrl_jax.rubric.judges.llm import render_conversation, render_criterion
from harnessrl_jax.rubric.judges.parse import json_objects, word_verdict

try:  # the parser of `re`'s patterns, where `_required` reads what a match needs; renamed in Python 3.11
    from re import _constants as _sre
    from re._parser import parse as _sre_parse
except ImportError:
    import sre_constants as _sre
    from sre_parse import parse as _sre_parse
from harnessrl_jax.rubric.reward import satisfied

# Wording that a generic response meets whatever the task: disclaimers, referrals, politeness, tone and format.
# Phrases that claim compliance instead of showing it, flatter, or refuse (sec. 4.3: surface compliance,
# sycophantic refusal). Each is searched case-insensitively in the responses.
SURFACE_PATTERNS = {
    "surface_compliance": (
        r"\ball (of )?(the |your )?(requirements|criteria|instructions|constraints|points)( \w+)? (have been|are|were)"
        r" (fully |all )?(met|satisfied|addressed|covered|followed)",
        r"\bI (have|'ve) (addressed|covered|followed|met|satisfied|answered) (all|every|each)\b",
        r"\b(this|my) (response|answer) (fully |completely )?(meets|satisfies|addresses|follows|covers) (all|every)\b",
        r"\b(requirements?|criteria) (met|satisfied)\b",
    ),
    "sycophantic_refusal": (
        r"\b(what a |such a )?(great|excellent|wonderful|fantastic) question\b",
        r"\byou('re| are) (absolutely|completely|totally) right\b",
        r"\bI('m| am) (sorry|afraid),? (but )?I (can(no|')t|am unable to|won't)\b",
        r"\bI can(no|')t (help|assist|provide|answer|do) (with )?(that|this)\b",
        r"\bas an AI( language model)?\b",
    ),
}

# Text written to the judge rather than the user (a policy under RL learns it when it pays): claims about its own
# grade, notes and orders to a grader, instructions to ignore the rubric, verdicts written out, and the judge
# prompt's own delimiters. Searched case-insensitively; `judge_directed` returns the first match.
JUDGE_DIRECTED = (
    r"\b(the|this|my) (response|answer|reply|text|output)( above| below| here)? (fully |completely |clearly )?"
    r"(meets|satisfies|fulfils|fulfills|passes|addresses) (every|all|each|the) (of the )?"
    r"(criteri\w*|requirements?|rubric|checks?)\b",
    r"\b(every|all|each) (of the )?(criteri\w*|rubric items?)( \w+)? (has|have|is|are|was|were) "
    r"(been )?(fully )?(met|satisfied|fulfilled)\b",
    r"\b(every|each) requirement (has|is) (been )?(fully )?(met|satisfied|fulfilled)\b",
    r"\b(ignore|disregard|forget|override) (all |any |the |your |previous |prior |above |grading |these )*"
    r"(rubric|criteri\w*|instructions?|grading|guidelines?)\b",
    r"\b(notes?|messages?|instructions?) (to|for) (the |any )?(grader|judge|evaluator|assessor|rater|reviewer)s?\b",
    r"\b(dear|attention|hey|hello),? (grader|judge|evaluator|assessor|rater)s?\b",
    r"\bas (the|an|a) (grader|judge|evaluator|assessor|rater)\b",
    r"\b(grader|judge|evaluator|assessor|rater)s?,? (must|should|will|needs? to|please)\b",
    r"\bcriteria_met\b",
    r"\b(mark|grade|score|rate|label)( this| the| every| all| each)?( \w+){0,3} as (met|passing|passed|correct|"
    r"satisf\w*|true|fulfilled)\b",
    r"\b(answer|respond|reply|output|return)( with)? [\"']?(true|met)[\"']?\b",
    r"<\s*/?\s*response\s*>",
    r"\[(system|grader|judge|evaluator)\]",
    r"\b(grading|evaluation|scoring|rubric) instructions?\b",
)


def _lowercase_letters(pattern: str) -> str:
    """The pattern with its literal letters lowercased; escapes (a backslash and the character after it) kept."""
    return re.sub(r"\\.|[^\\]+", lambda m: m.group(0) if m.group(0)[0] == "\\" else m.group(0).lower(), pattern)


def _required(items) -> list[frozenset[str]]:
    """Sets of strings of which every match of a parsed pattern (`re._parser.parse`) contains a member, each set:
    its runs of literal characters, and of an alternation the union of one set per branch (none when a branch has
    none); optional parts and character classes add nothing."""
    out, run = [], []
    for op, av in [*items, (None, None)]:
        if op is _sre.LITERAL:
            run.append(chr(av))
            continue
        if run:
            out.append(frozenset(["".join(run)]))
            run = []
        if op is _sre.SUBPATTERN and not av[1] & re.I:  # (?i:...) matches its literals in either case
            out += _required(av[3])
        elif op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT, _sre.POSSESSIVE_REPEAT) and av[0] >= 1:
            out += _required(av[2])
        elif op is _sre.BRANCH:
            branches = [_required(b) for b in av[1]]
            if all(branches):
                out.append(frozenset().union(*(max(b, key=_shortest) for b in branches)))
    return out


def _shortest(strings: frozenset[str]) -> int:
    return min(map(len, strings))


# The characters outside ASCII and \x1c-\x1f: only among them can the fast search (`_Matcher`) differ from re.I.
_UNUSUAL = re.compile(r"[^\x00-\x1b\x20-\x7f]")


@functools.lru_cache(maxsize=1 << 12)
def _regex_like_re(c: str) -> bool:
    """Whether `regex` on c lowercased classes it as `re` with re.I classes c: the same lowercase length, \\s and
    \\w (re.I matches U+0130 and U+0131 with 'i' and U+017F with 's', which lowercasing does not; \\x1c-\\x1f are
    spaces to re only, superscript digits and combining marks word characters to re only)."""
    low = c.lower()
    return c not in "\u0130\u0131\u017f" and len(low) == 1 and all(
        bool(re.match(p, c)) == bool(regex.match(p, low)) for p in (r"\s", r"\w"))


class _Matcher:
    """Case-insensitive search of fixed patterns, as re.search(pattern, text, re.I) finds them.

    Most patterns cannot match most responses: a pattern is searched only where the lowercased text holds a member
    of each of its required sets (`_required`); `in` scans a text ~30x faster than a pattern that is tried at every
    word. The lowercased text is searched with the patterns' letters lowercased by the `regex` engine (~2.5x faster
    than `re` with re.I, launch/bench_scale.py) unless the text holds a character that this would treat differently
    (`_regex_like_re`); then `re` searches the text with re.I, for every pattern where the text holds U+0130, U+0131
    or U+017F (re.I matches them with 'i' or 's', which they do not lowercase to)."""

    def __init__(self, patterns: Sequence[str]):
        lowered = [_lowercase_letters(p) for p in patterns]
        self.lowered = [regex.compile(p) for p in lowered]
        self.exact = [re.compile(p, re.I) for p in patterns]
        parsed = [_sre_parse(p) for p in lowered]
        self.required = [() if t.state.flags & re.I else sorted(_required(t), key=_shortest, reverse=True)
                         for t in parsed]
        self.first = frozenset().union(*(r[0] for r in self.required if r))

    def search(self, text: str):
        """Yields each pattern's first match in `text` as it appears there (None where none), in their order."""
        low = text.lower()  # as long as `text` where it is searched: positions map back
        unusual = [c for c in "\x1c\x1d\x1e\x1f" if c in text] if text.isascii() else set(_UNUSUAL.findall(text))
        fast = all(map(_regex_like_re, unusual))
        filtered = fast or not any(c in text for c in "\u0130\u0131\u017f")
        present = frozenset(s for s in self.first if s in low) if filtered else self.first
        for lowered, exact, required in zip(self.lowered, self.exact, self.required):
            if filtered and required and (present.isdisjoint(required[0])
                                          or not all(any(s in low for s in r) for r in required[1:])):
                yield None
            elif fast:
                m = lowered.search(low)
                yield None if m is None else text[m.start():m.end()]
            else:
                m = exact.search(text)
                yield None if m is None else m.group(0)


_JUDGE_DIRECTED = _Matcher(JUDGE_DIRECTED)
_SURFACE = _Matcher([p for patterns in SURFACE_PATTERNS.values() for p in patterns])


@functools.lru_cache(maxsize=_CACHED)
def judge_directed(response: str) -> str | None:
    """The first judge-directed phrase in `response` (JUDGE_DIRECTED), or None."""
    return next((phrase for phrase in _JUDGE_DIRECTED.search(response) if phrase is not None), None)


@functools.lru_cache(maxsize=_CACHED)
def surface_phrases(response: str) -> tuple[str | None, ...]:
    """The first match in `response` of each SURFACE_PATTERNS pattern, in their order (None where none)."""
    return tuple(_SURFACE.search(response))

# Words in a criterion that a bare mention, a list or a claim can satisfy (the wording check's lexicon).
LAX_WORDING = re.compile(
    r"\b(mention(s|ed)?|refer(s|red)? to|use(s|d)?|include(s|d)?|list(s|ed)?|name(s|d)?|note(s|d)?|acknowledge(s|d)?|"
    r"touch(es)? on|discuss(es)?|address(es)?|cover(s|ed)?|state(s|d)?|contain(s)?|specific|relevant|appropriate|some|any|"
    r"detailed|clear(ly)?)\b[^.,;:]{0,60}", re.I)

def wording_check(criterion, responses: Sequence[str] = ()) -> str | None:
    """The exact phrase of the criterion (or its rule) that lets surface form pass, or None.

    A keyword rule passes on the keyword alone: the phrase is where the keyword appears in the criterion's text
    (else the pattern, readable). A length rule passes on length alone. Otherwise the first lax wording in the
    text: 'mentions ...', 'uses specific ...', 'includes ...'.
    """
    c = schema_of(criterion)
    rid = c.rule_id
    for pattern in rule_keywords(criterion):
        present = [r for r in responses if search(pattern, r)]
        if responses and not present:
            continue
        m = search(pattern, c.text)
        return m.group(0) if m else readable_pattern(pattern) or pattern
    if rid and rid.startswith("length_constraints:"):
        m = re.search(r"\b(under|fewer than|less than|at most|at least|more than|over|between)\s+\d+[^.,;]*", c.text,
                      re.I)
        return m.group(0) if m else f"{c.rule_kwargs}"
    m = LAX_WORDING.search(c.text)
    return m.group(0).strip() if m else None

# ---------------------------------------------------------------------------------------------- hacking signals

def hacking_signals(k: int, criteria: Sequence[Any], S: np.ndarray, responses: Sequence[str], *,
                    positives: Sequence[str] = (), config) -> dict[str, dict[str, Any]]:
    """The CPU signals that fire for criterion k of a group that it splits, each with its measurements.

    The satisfying side is the one the reward favours: a requirement met, a pitfall avoided. `positives` are
    responses known to satisfy the criterion (or a related one) elsewhere: earlier satisfying responses of this
    task, donors' satisfying examples (never a dataset reference). Only the satisfying side may share a signal's
    feature. `config`: the AttributorConfig.
    """
    crit = schema_of(criteria[k])
    row = satisfied(S[k], crit.points)
    A = [j for j in range(len(responses)) if row[j] == 1]
    B = [j for j in range(len(responses)) if row[j] == 0]
    out: dict[str, dict[str, Any]] = {}
    if not A or not B:
        return out
    rid = crit.rule_id or ""
    length_rule = rid.startswith("length_constraints:")
    n = np.array([word_count(r) for r in responses], float)

    why = [degenerate(r, config.min_words, config.repeat_run, config.distinct_ratio) for r in responses]
    da, db = _share(why, A), _share(why, B)

    # length gaming: the two sides separate by length, and real positives do not share the satisfying length.
    # With no positive to compare with, a failing side of degenerate answers explains the gap by itself.
    if not length_rule and (positives or db < config.surface_share):
        la, lb = float(np.median(n[A])), float(np.median(n[B]))
        auc = length_auc(n[A], n[B])
        pos_len = [word_count(p) for p in positives if p]
        p_med = float(np.median(pos_len)) if pos_len else None
        ratio = config.length_ratio if p_med is not None else config.length_ratio_unreferenced
        longer = auc >= config.length_auc and la >= ratio * max(lb, 1.0)
        shorter = auc <= 1 - config.length_auc and la * ratio <= lb
        if (longer or shorter) and p_med is not None:
            # Positives of the property sit near the failing length, not the satisfying one.
            longer = longer and la > config.length_ratio * max(p_med, 1.0)
            shorter = shorter and la * config.length_ratio < p_med
        if longer or shorter:
            out["length_gaming"] = {"direction": "longer" if longer else "shorter", "satisfying_median_words": la,
                                    "failing_median_words": lb, "auc": auc, "positives_median_words": p_med}

    # keyword stuffing: met by degenerate responses, the failing side mostly sound.
    if da >= config.surface_share and db <= da / 2:
        kinds = sorted({why[j] for j in A if why[j]})
        out["keyword_stuffing"] = {"degenerate_satisfying": da, "degenerate_failing": db, "kinds": kinds,
                                   "responses": [j for j in A if why[j]]}

    # isolated: met while the task's other requirements and the quality proxies fail.
    if not length_rule:
        others = [i for i, o in enumerate(criteria) if i != k and o.points > 0]
        if len(others) >= 2:
            pts = np.array([criteria[i].points for i in others], float)
            r_other = reward_lib.rubric_reward(pts, np.asarray(S, np.float64)[others])
            oa, ob = float(np.nanmean(r_other[A])), float(np.nanmean(r_other[B]))
            q = np.array([quality_proxy(r, positives, config) for r in responses])
            qa, qb = float(q[A].mean()), float(q[B].mean())
            # Without a positive the proxy can only tell degenerate from sound responses: it must not favour the
            # satisfying side, but it cannot show it worse.
            if oa + config.isolation_margin <= ob and (qa < qb if positives else qa <= qb):
                out["isolated"] = {"other_reward_satisfying": oa, "other_reward_failing": ob,
                                   "quality_proxy_satisfying": qa, "quality_proxy_failing": qb}

    # judge-directed text credited: a satisfying response that writes to the judge (more of them than on the
    # failing side). However few, they show the judge can be talked into the verdict.
    directed = [judge_directed(r) for r in responses]
    sa, sb = _share(directed, A), _share(directed, B)
    if sa > config.judge_directed_share and sa > sb:
        phrase = next(directed[j] for j in A if directed[j] is not None)
        out["judge_directed"] = {"phrase": phrase, "share_satisfying": sa, "share_failing": sb,
                                 "responses": [j for j in A if directed[j] is not None]}

    # compliance claims, flattery, refusals shared by the satisfying side only.
    found, first = [surface_phrases(r) for r in responses], 0
    for name, patterns in SURFACE_PATTERNS.items():
        for i in range(first, first + len(patterns)):
            hits = [f[i] for f in found]
            sa, sb = _share(hits, A), _share(hits, B)
            if sa >= config.surface_share and sb <= sa / 2:
                phrase = next(hits[j] for j in A if hits[j] is not None)
                out[name] = {"phrase": phrase, "share_satisfying": sa, "share_failing": sb}
                break
        first += len(patterns)
    return out


def _share(found: Sequence[Any], idx: Sequence[int]) -> float:
    """The share of the responses `idx` where something was found (not None): a count over a length, the float
    np.mean gives, without building an array for a handful of responses."""
    return sum(found[j] is not None for j in idx) / len(idx)


def quality_proxy(response: str, positives: Sequence[str], config) -> float:
    """An oracle-free quality score in [0, 1]: not degenerate, and (when there is a positive) how much of the first
    positive's content vocabulary it covers."""
    sound = degenerate(response, config.min_words, config.repeat_run, config.distinct_ratio) is None
    target = positives[0] if positives else None
    if not target:
        return float(sound)
    ref = content_words(target)
    recall = len(ref & word_set(response)) / len(ref) if ref else 0.0
    return 0.5 * float(sound) + 0.5 * recall

def generic_evidence(criterion, responses: Sequence[str], share: float) -> str | None:
    """The sentence through which the group meets a saturated requirement when that is generic content, else None:
    decided from the responses, not the criterion's wording. Generic: a sentence (normalised) shared by at least
    `share` of the responses (a disclaimer, a polite closing) that carries the criterion: one of a keyword rule's
    patterns, or a content word of an LLM criterion. Rules on the whole response (length, format) never are."""
    c = schema_of(criterion)
    if c.points <= 0:
        return None
    shared = shared_sentences(responses, share)
    if c.verifier == "rule":
        patterns = rule_keywords(c)
        return next((s for s in shared if any(search(p, s) for p in patterns)), None)
    wanted = set(content_words(c.text))
    return next((s for s in shared if wanted & set(content_words(s))), None)


# ------------------------------------------------------------------------------------------------- LLM check

@dataclasses.dataclass(frozen=True)
class HackingVerdict:
    """The LLM check's answer: spurious (None when unreadable), the pattern, the phrase, why."""

    spurious: bool | None
    pattern: str = ""
    phrase: str | None = None
    explanation: str = ""

HACKING_SCHEMA = {
    "type": "object",
    "properties": {"explanation": {"type": "string"},
                   "pattern": {"type": "string", "enum": ["surface_compliance", "length_gaming", "partial_coverage",
                                                          "sycophantic_refusal", "other", "none"]},
                   "phrase": {"type": "string"}, "spurious": {"type": "boolean"}},
    "required": ["explanation", "pattern", "phrase", "spurious"], "additionalProperties": False}

class LLMHackingCheck:
    """Asks a model, through the judge protocol (`client.complete(messages, schema)`, e.g. an OpenAIJudge), whether
    a criterion separates the group by surface form; prompt `evolver/prompts/hacking_check.txt`."""

    def __init__(self, client, template: str = "hacking_check", max_examples: int = 3, max_chars: int = 1500):
        self.client, self.template = client, templates.load(template)
        self.max_examples, self.max_chars = max_examples, max_chars

    def __call__(self, task, criterion, satisfying: Sequence[str], failing: Sequence[str],
                 positives: Sequence[str]) -> HackingVerdict:

        def block(texts):
            texts = list(texts)[: self.max_examples]
            if not texts:
                return "(none)"
            return "\n\n".join(f"--- example {i + 1} ---\n{cut(t, self.max_chars)}" for i, t in enumerate(texts))

        text = templates.fill(self.template, conversation=render_conversation(task),
                            criterion=render_criterion(schema_of(criterion)), satisfying=block(satisfying),
                            failing=block(failing), positives=block(positives))
        out = self.client.complete(({"role": "user", "content": text},), HACKING_SCHEMA)
        if getattr(out, "status", "ok") != "ok" or not out.text:
            return HackingVerdict(None, explanation=f"no answer: {getattr(out, 'detail', '')}")
        for obj in json_objects(out.text):
            if isinstance(obj, dict) and "spurious" in obj:
                v = word_verdict(obj["spurious"])
                phrase = obj.get("phrase") or None
                crit_text = schema_of(criterion).text
                if phrase and phrase not in crit_text:  # the phrase must be quoted from the criterion
                    phrase = None
                return HackingVerdict(v, str(obj.get("pattern", "")), phrase, str(obj.get("explanation", "")))
        return HackingVerdict(None, explanation=f"unparsed: {out.text[:200]}")
