"""Reading verdicts out of what judge models actually write.

Structured output (a JSON schema the server enforces) makes most answers clean JSON, but not all servers enforce
it and models decorate their answers: code fences, prose before or after the object, Python-style dicts, thinking
blocks, answers cut off by max_tokens, or no JSON at all ("Yes.", "NOT MET - ..."). The parser tries, in order:
a JSON object with a verdict key; `key: value` pairs in broken JSON; a leading yes/no-style word; a labelled
"Verdict: ..." line; MET / NOT MET written in capitals. Anything else, or signals that contradict each other, is
unparsed (None): the caller records it as such and keeps it out of the reward.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
from typing import Any

# Keys a judge might use for the verdict, most specific first.
VERDICT_KEYS = ("criteria_met", "criterion_met", "met", "occurred", "verdict", "answer", "result", "passed", "pass",
                "satisfied", "meets_criterion", "decision", "judgment", "judgement", "label", "value")
EXPLANATION_KEYS = ("explanation", "reasoning", "rationale", "reason", "justification", "analysis")

_TRUE = {"true", "yes", "y", "met", "pass", "passed", "satisfied", "occurred", "1"}
_FALSE = {"false", "no", "n", "not met", "unmet", "fail", "failed", "not satisfied", "did not occur",
          "not occurred", "0"}
_WORDS = sorted(_TRUE | _FALSE, key=len, reverse=True)  # longest first, so 'not met' wins over 'met'
_WORD_RE = "|".join(re.escape(w).replace(r"\ ", r"[\s_-]+") for w in _WORDS if len(w) > 1)

_THINK = re.compile(r"<think>.*?</think>|^.*?</think>", re.S | re.I)
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.S)
_KEY_VALUE = re.compile(r"""["']?\b(%s)\b["']?\s*[:=]\s*["']?\s*(%s|[01])\b"""
                        % ("|".join(VERDICT_KEYS), _WORD_RE), re.I)
_LEADING = re.compile(r"""^[\s*_#>"'`\[(]*(%s)\s*(?:[.,:;!)\]*"'`\-\u2013\u2014]|$)""" % _WORD_RE, re.I)
_LABELLED = re.compile(r"""(?im)^[\s*_#>-]*(?:final\s+)?(?:verdict|answer|judge?ment|decision|result|criteria[_ ]met)"""
                       r"""[\s*_]*[:=\-][\s*_"'`]*(%s)\b""" % _WORD_RE)
_FINAL = re.compile(r"""(?im)\bfinal[\s*_]+(?:verdict|answer|judge?ment|decision)[\s*_]*[:=\-][\s*_"'`]*(%s)\b"""
                    % _WORD_RE)
_CAPS_NOT_MET = re.compile(r"\bNOT[\s_]MET\b")
_CAPS_MET = re.compile(r"(?<![A-Z][\s_])\bMET\b")


@dataclasses.dataclass(frozen=True)
class Parsed:
    """A verdict read from judge output (None: unreadable), its explanation and which rule read it."""

    verdict: bool | None
    explanation: str
    how: str  # 'json' | 'key_value' | 'leading_word' | 'labelled' | 'caps' | 'none'


def word_verdict(value: Any) -> bool | None:
    """True / False for a verdict-like value (bool, 0/1, 'yes', 'NOT MET', 'false', ...), else None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        w = re.sub(r"[\s_-]+", " ", value.strip().strip(" .!*\"'`").lower())
        if w in _TRUE:
            return True
        if w in _FALSE:
            return False
    return None


def strip_thinking(text: str) -> str:
    """Drop <think>...</think> blocks (and a leading unterminated one) that reasoning models emit first."""
    return _THINK.sub("", text)


def json_objects(text: str) -> list[Any]:
    """Every JSON (or Python-literal) object or array in text: fenced blocks first, then in order of appearance."""
    found = []
    sources = _FENCE.findall(text) + [text]
    decoder = json.JSONDecoder()
    for src in sources:
        i = 0
        while i < len(src):
            starts = [p for p in (src.find("{", i), src.find("[", i)) if p >= 0]
            if not starts:
                break
            start = min(starts)
            obj, end = _decode_at(decoder, src, start)
            if obj is None:
                i = start + 1
            else:
                found.append(obj)
                i = end
    return found


def _decode_at(decoder: json.JSONDecoder, s: str, start: int) -> tuple[Any, int]:
    try:
        return decoder.raw_decode(s, start)
    except json.JSONDecodeError:
        pass
    # Python-style dicts ({'met': True}) and single-quoted keys: find the balanced span, then literal_eval it.
    end = _balanced_end(s, start)
    if end is not None:
        try:
            return ast.literal_eval(s[start:end]), end
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            pass
    return None, start


def _balanced_end(s: str, start: int) -> int | None:
    depth, quote, esc = 0, None, False
    for i in range(start, len(s)):
        c = s[i]
        if quote:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def _lookup(d: dict, keys: tuple[str, ...]) -> Any:
    lower = {str(k).strip().lower(): v for k, v in d.items()}
    for k in keys:
        if k in lower:
            return lower[k]
    return None


def verdict_from_object(obj: Any) -> Parsed | None:
    """A verdict from one decoded object: {"criteria_met": true, "explanation": ...} or a bare verdict value."""
    if isinstance(obj, dict):
        explanation = _lookup(obj, EXPLANATION_KEYS)
        explanation = "" if explanation is None else str(explanation)
        value = _lookup(obj, VERDICT_KEYS)
        if value is None:  # one level of nesting: {"result": {"criteria_met": true}}
            for v in obj.values():
                if isinstance(v, dict):
                    inner = verdict_from_object(v)
                    if inner is not None:
                        return inner
            return None
        v = word_verdict(value)
        return None if v is None else Parsed(v, explanation, "json")
    v = word_verdict(obj)
    return None if v is None else Parsed(v, "", "json")


def _agree(matches: list[str]) -> bool | None:
    verdicts = {word_verdict(m) for m in matches}
    verdicts.discard(None)
    return verdicts.pop() if len(verdicts) == 1 else None


def parse_verdict(text: str) -> Parsed:
    """The verdict in one judge answer about one criterion; Parsed(None, ...) when it cannot be read."""
    return _schema_answer(text) or _read_verdict(text)


def _schema_answer(text: str) -> Parsed | None:
    """The answer as the verdict schema shapes it, exactly {"explanation": ..., "criteria_met": true|false} and
    nothing around it, read as `_read_verdict` reads it; None for anything else."""
    t = (text or "").strip()
    # A fence and a thinking block's end both need these literal characters (re.I folds letters only).
    if not (t.startswith("{") and t.endswith("}")) or "```" in t or "</" in t:
        return None
    try:
        obj = json.loads(t)
    except ValueError:
        return None
    if type(obj) is not dict or obj.keys() != {"explanation", "criteria_met"} or type(obj["criteria_met"]) is not bool:
        return None
    explanation = obj["explanation"]
    return Parsed(obj["criteria_met"], "" if explanation is None else str(explanation), "json")


def _read_verdict(text: str) -> Parsed:
    """Every reading `parse_verdict` knows, in the module docstring's order."""
    t = strip_thinking(text or "").strip()
    for obj in json_objects(t):
        p = verdict_from_object(obj)
        if p is not None and not isinstance(obj, list):
            return p
    explanation = t
    kv = [m.group(2) for m in _KEY_VALUE.finditer(t)]
    if kv:  # usually JSON cut off after the verdict, or written loosely
        v = _agree(kv)
        if v is None:  # conflicting pairs: only an explicit final answer settles them
            final = _FINAL.findall(t)
            v = word_verdict(final[-1]) if final else None
        return Parsed(v, explanation, "key_value" if v is not None else "none")
    m = _LEADING.match(t)
    if m:
        return Parsed(word_verdict(m.group(1)), explanation, "leading_word")
    labelled = _LABELLED.findall(t)
    if labelled:
        # The last label is the model's final word when it revises itself.
        return Parsed(word_verdict(labelled[-1]), explanation, "labelled")
    n_not, n_met = len(_CAPS_NOT_MET.findall(t)), len(_CAPS_MET.findall(_CAPS_NOT_MET.sub("", t)))
    if n_not and not n_met:
        return Parsed(False, explanation, "caps")
    if n_met and not n_not:
        return Parsed(True, explanation, "caps")
    return Parsed(None, explanation, "none")


_NUMBERED_KEY = re.compile(r"^\D{0,12}?(\d+)$")
_NUMBERED_LINE = re.compile(r"(?m)^[\s*_#>-]*(?:criterion|item|c)?\s*#?(\d+)\s*[.):\-\]]+\s*(.*)$", re.I)
_ITEM_ID_KEYS = ("id", "number", "index", "criterion_id", "criterion_number", "criterion", "item", "n")
_LIST_KEYS = ("verdicts", "criteria", "results", "items", "rubric", "grades", "evaluations")


def _number(key: Any) -> int | None:
    if isinstance(key, bool):
        return None
    if isinstance(key, int):
        return key
    m = _NUMBERED_KEY.match(str(key).strip())
    return int(m.group(1)) if m else None


def _rubric_from_object(obj: Any, n: int) -> dict[int, Parsed]:
    out: dict[int, Parsed] = {}
    if isinstance(obj, dict):
        lst = _lookup(obj, _LIST_KEYS)
        if isinstance(lst, (list, dict)):
            return _rubric_from_object(lst, n)
        for key, value in obj.items():
            i = _number(key)
            if i is not None and 1 <= i <= n:
                p = verdict_from_object(value)
                if p is not None:
                    out[i] = p
    elif isinstance(obj, list):
        for pos, item in enumerate(obj, start=1):
            i = pos
            if isinstance(item, dict):
                ident = _lookup(item, _ITEM_ID_KEYS)
                if ident is not None and _number(ident) is not None:
                    i = _number(ident)
            p = verdict_from_object(item)
            if p is not None and 1 <= i <= n:
                out.setdefault(i, p)
    return out


def parse_rubric_verdicts(text: str, n: int) -> list[Parsed]:
    """Verdicts for criteria 1..n from one answer about a numbered rubric; unreadable ones are Parsed(None, ...).

    Reads a JSON map {"1": {...}, "2": true, ...}, a list of objects (with an id/number key, else by position), or,
    failing those, numbered lines ("1. MET - ...", "Criterion 2: no").
    """
    t = strip_thinking(text or "").strip()
    found: dict[int, Parsed] = {}
    for obj in json_objects(t):
        found = _rubric_from_object(obj, n)
        if found:
            break
    if not found:
        for m in _NUMBERED_LINE.finditer(t):
            i = int(m.group(1))
            if 1 <= i <= n and i not in found:
                p = parse_verdict(m.group(2))
                if p.verdict is not None:
                    found[i] = Parsed(p.verdict, m.group(2).strip(), "numbered_line")
    return [found.get(i, Parsed(None, t, "none")) for i in range(1, n + 1)]
