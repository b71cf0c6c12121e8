"""Multiple-choice benchmarks (MedQA, GPQA-Diamond): the question as a prompt, and the option letter a free-form
answer commits to (`extract_choice`). Small chat models rarely answer with a bare letter, so it reads, in order:

1. the last explicit commitment ("answer is", "answer:", "correct option is", "I choose", "I'd go with", \\boxed{},
   "(C) is correct", "option C is the answer"); a commitment to two letters ("A or B") commits to none;
2. a response that is only a letter ("B", "(B).", "**B**") or opens with one as its answer ("B) Warfarin ..."),
   unless it goes on to list other options the same way (a restated option list is no answer);
3. the option text: exactly one option's text appears in the response (when the options are given);
4. the last line's final standalone letter: bracketed or bold and ending it, bare after "is", "so", "therefore",
   ":", or the line's only bracketed or bold letter.
Anything else, including a letter beyond the options, is None: unparseable counts as wrong.
"""

from __future__ import annotations

import os
import re
from typing import Sequence
from harnessrl_jax.rubric.judges import templates
from harnessrl_jax.eval.ood.base import check_responses, mean100

LETTERS = "ABCDEFGHIJ"

_THINK = re.compile(r"<think>.*?</think>|^.*?</think>", re.S | re.I)
# A letter as an answer is written bare, in brackets, bold or italic; a lowercase one only inside brackets.
_L = r"(?:\*\*|\*|__)?[\(\[]?(?P<l>[A-J])[\)\]]?(?:\*\*|\*|__)?(?![\w'-])"
_LB = r"(?:\*\*|\*)?[\(\[](?P<l>[a-j])[\)\]](?:\*\*|\*)?(?![\w'-])"
_CUE = (r"(?i:(?:correct|right|best|final|my)\s+(?:answer|option|choice)(?:\s+(?:is|would\s+be|will\s+be|=))?"
        r"|answer(?:\s+(?:is|would\s+be|will\s+be|=))?|answer\s+choice(?:\s+is)?"
        r"|(?:i\s+(?:would|will|'d|'ll)\s+)?(?:choose|pick|select|go\s+with)|i\s+choose|choice\s+is|option\s+is"
        r"|it(?:'s|\s+is|\s+must\s+be|\s+would\s+be)"
        r"|(?:most\s+)?(?:likely|probable)\s+(?:diagnosis|cause|answer|explanation|mechanism|treatment|option|choice"
        r"|organism|finding|step)\s+is)"
        r"[\s:=*_\-\u2013\u2014]*(?i:(?:option|choice|letter)\s*)?")
_COMMIT = [re.compile(_CUE + p) for p in (_L, _LB)]
_BOXED = re.compile(r"\\boxed\{\s*(?:\\text\{)?\s*\(?(?P<l>[A-Ja-j])\)?\s*\}?\s*\}")
_IS_CORRECT = re.compile(r"(?i:option|choice)?\s*" + r"[\(\[]?(?P<l>[A-J])[\)\]]?" +
                         r"(?i:\s+is\s+(?:the\s+)?(?:correct|right|best)(?:\s+(?:answer|option|choice))?"
                         r"|\s+is\s+the\s+answer)\b")
_ALTERNATIVE = re.compile(r"\s*(?:,|/|&|(?i:or|and|and/or))\s*(?:(?i:option|choice)\s*)?"
                          r"(?:\*\*)?[\(\[]?(?P<l>[A-Ja-j])[\)\]]?(?![\w'-])")
_NEGATED = re.compile(r"(?i:\bnot|n't|\bexcept)\s*$")
_ONLY = re.compile(r"^\s*(?:\*\*|\*)?[\(\[]?(?P<l>[A-J])[\)\]]?(?:\*\*|\*)?\s*[.!:]?\s*$")
_OPENING = re.compile(r"^\s*(?:\*\*|\*)?[\(\[]?(?P<l>[A-J])(?:[\)\]]|\s*[.:])(?:\*\*|\*)?\s+\S")
_LISTED = re.compile(r"(?m)^\s*(?:\*\*|\*|-\s*)?[\(\[]?(?P<l>[A-J])(?:[\)\]]|\s*[.:])\s+\S")
_TRAILING = re.compile(r"(?<![\w'-])(?:\*\*|\*)?[\(\[]?(?P<l>[A-J])[\)\]]?(?:\*\*|\*)?\s*[.!]?\s*$")
_MARKED = re.compile(r"(?:\*\*(?P<b>[A-J])\*\*|[\(\[](?P<p>[A-J])[\)\]])")


def _letter(m: re.Match, valid: str) -> str | None:
    letter = m.group("l").upper()
    return letter if letter in valid else None

def _commitments(text: str, valid: str) -> list[tuple[int, str | None]]:
    """(position, letter or None for a commitment to several) of every explicit commitment in the text."""
    found = []
    for pattern in _COMMIT + [_BOXED, _IS_CORRECT]:
        for m in pattern.finditer(text):
            if _NEGATED.search(text[max(0, m.start("l") - 12):m.start("l")]) and pattern is not _IS_CORRECT:
                continue
            letter = _letter(m, valid)
            if letter is None:
                continue
            alt = _ALTERNATIVE.match(text, m.end())
            if alt and alt.group("l").upper() != letter:
                letter = None  # "A or B": commits to several
            found.append((m.start(), letter))
    return sorted(found)

def _option_text_match(text: str, options: Sequence[str], valid: str) -> str | None:
    low = " ".join(text.lower().split())
    hits = {valid[i] for i, o in enumerate(options[:len(valid)])
            if len(o.strip()) >= 3 and re.search(r"(?<!\w)" + re.escape(" ".join(o.lower().split())) + r"(?!\w)", low)}
    return hits.pop() if len(hits) == 1 else None

def extract_choice(response: str, num_choices: int = 4, options: Sequence[str] | None = None) -> str | None:
    """The option letter (A, B, ...) a free-form answer commits to as its final answer, or None when it commits to
    none or to several (the order of reading is the module's). `options`, the option texts, enable the text match."""
    if not isinstance(response, str) or not 1 <= num_choices <= len(LETTERS):
        raise ValueError(f"extract_choice: need a string and 1 <= num_choices <= {len(LETTERS)}")
    valid = LETTERS[:num_choices]
    text = _THINK.sub("", response).strip()
    if not text:
        return None
    commits = _commitments(text, valid)
    if commits:
        return commits[-1][1]
    m = _ONLY.match(text)
    if m:
        return _letter(m, valid)
    m = _OPENING.match(text)
    if m:
        listed = {x.group("l") for x in _LISTED.finditer(text)}
        if listed <= {m.group("l")}:
            return _letter(m, valid)
        return None  # the options restated as a list
    if options:
        by_text = _option_text_match(text, options, valid)
        if by_text:
            return by_text
    last_line = text.splitlines()[-1]
    m = _TRAILING.search(last_line)
    if m and (re.search(r"[\(\[*]", m.group(0)) or not last_line[:m.start()].strip()
              or re.search(r"(?i:\b(?:is|so|thus|hence|therefore|then)\b|[:=\u2192])[\s,]*$", last_line[:m.start()])):
        return _letter(m, valid)
    marked = [x.group("b") or x.group("p") for x in _MARKED.finditer(last_line)]
    if marked and len(set(marked)) == 1:
        return marked[0] if marked[0] in valid else None
    return None

def mc_messages(question: str, options: Sequence[str]) -> tuple[dict[str, str], ...]:
    """The user message of a multiple-choice item (prompts/multiple_choice.txt): the question and lettered options."""

    listing = "\n".join(f"{LETTERS[i]}. {o}" for i, o in enumerate(options))
    return ({"role": "user", "content": templates.fill(_template(), question=question.strip(), options=listing)},)

def _template() -> str:

    return templates.load_template(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prompts",
                                                "multiple_choice.txt"))

def score_mc(responses, items) -> dict:
    """Accuracy x 100 over items (each item: the share of its samples whose extracted letter is its answer), the
    share of unparseable samples, and per item the letters read."""

    check_responses(responses, items)
    per_item, correct, unparsed = [], [], 0
    for item, rs in zip(items, responses):
        options = item.meta.get("options") or ()
        letters = [extract_choice(r, len(options) or 4, options) for r in rs]
        unparsed += sum(x is None for x in letters)
        acc = sum(x == item.target for x in letters) / len(letters)
        correct.append(acc)
        per_item.append({"id": item.id, "answer": item.target, "chosen": letters, "score": 100.0 * acc})
    n = sum(len(rs) for rs in responses)
    return {"score": mean100(correct), "accuracy": mean100(correct), "unparsed_share": unparsed / n if n else None,
            "items": len(items), "per_item": per_item}
