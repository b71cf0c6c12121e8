"""The texts of the guidance fields the rule proposer mounts for a blind criterion (HarnessRL, sec. 4.1):

- <criterion>: a rewording of the target criterion addressed to the policy ("Recommends rest." -> "Recommend
  rest."), or, when an earlier response of this task or a donor task met it, a quote of that satisfying behaviour;
  never the criterion repeated verbatim;
- <reference>: example responses, one that meets the criterion and, when there is one, one that does not, taken
  from the task's own history or from donor tasks found by the semantic index (the dataset's reference response
  describes the corpus only and is used only when a run opts in, config.harness.use_dataset_reference);
- <critique>: the last group's shortfall.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Sequence

from harnessrl_jax.evolver.text import cut, readable_pattern, rule_keywords, search, words

# A criterion about "the response" in the third person: subject, optional modal, verb, rest.
_SUBJECT = re.compile(r"^(?:the |a |an )?(?:response|answer|reply|output|assistant|model)\s+(?:(should|must)\s+)?",
                      re.I)
_IRREGULAR = {"is": "be", "has": "have", "does": "do", "goes": "go", "says": "say"}


def base_form(verb: str) -> str | None:
    """A third-person-singular verb in its base form ('recommends' -> 'recommend', 'applies' -> 'apply'), or None
    when `verb` is not one."""
    v = verb.lower()
    if v in _IRREGULAR:
        return _IRREGULAR[v]
    if len(v) < 4 or not v.endswith("s") or v.endswith("ss") or v.endswith("us") or v.endswith("is"):
        return None
    if v.endswith("ies"):
        return v[:-3] + "y"
    if re.search(r"(ss|sh|ch|x|z|o)es$", v):
        return v[:-2]
    return v[:-1]


def second_person(text: str, pitfall: bool = False) -> str | None:
    """The criterion as an instruction to the policy ("The response recommends rest." -> "Recommend rest."; a
    pitfall: "Do not recommend ..."), or None when its wording has no third-person verb to turn."""
    t = " ".join(text.split()).rstrip(".")
    m = _SUBJECT.match(t)
    modal = bool(m and m.group(1))
    rest = t[m.end():] if m else t
    first, _, tail = rest.partition(" ")
    verb = first.lower() if modal else base_form(first)
    if not verb or not first.isalpha():
        return None
    instruction = f"{verb} {tail}".strip()
    if pitfall:
        return f"Do not {instruction}."
    return instruction[0].upper() + instruction[1:] + "."


@dataclasses.dataclass(frozen=True)
class Example:
    """A response used as guidance evidence: its text and where it came from (`own`: an earlier draw of this task
    or this step's group; `donor`: a related criterion of another task) with the evidence id to cite."""

    text: str
    source: str  # own | donor | dataset
    evidence_id: str


def criterion_field(text: str, points: float, rule_criterion=None, positive: Example | None = None,
                    max_chars: int = 300) -> str:
    """The <criterion> field for a blind criterion: a quote of earlier satisfying behaviour when there is one (the
    sentence that meets a keyword rule, else the opening of the response), else the criterion reworded as an
    instruction; a keyword rule's words are spelled out."""
    kws = [readable_pattern(p) for p in rule_keywords(rule_criterion)] if rule_criterion is not None else []
    kws = [k for k in kws if k]
    if positive is not None and points > 0:
        quote = _satisfying_sentence(positive.text, rule_keywords(rule_criterion) if rule_criterion else [])
        return f'An earlier answer that got this right said: "{cut(quote, max_chars)}"'
    head = second_person(text, pitfall=points < 0)
    if head is None:
        head = f"Avoid this: {text}" if points < 0 else f"Your answer should satisfy this: {text}"
    if kws and points > 0:
        head += f" (for example with the word{'s' if len(kws) > 1 else ''}: {', '.join(kws)})"
    return head


def _satisfying_sentence(response: str, patterns: Sequence[str]) -> str:
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", response) if s.strip()]
    for p in patterns:
        for s in sentences:
            if search(p, s):
                return s
    return " ".join(sentences[:2]) if sentences else response


def reference_field(positive: Example, negative: Example | None = None, max_chars: int = 600) -> str:
    """The <reference> field: an answer that meets the criterion and, when given, one that does not (each cut so
    both fit in `max_chars`)."""
    each = max_chars // 2 if negative is not None else max_chars
    text = f"An answer that meets it:\n{cut(positive.text, each)}"
    if negative is not None:
        text += f"\nAn answer that does not:\n{cut(negative.text, each)}"
    return text


def critique_field(text: str, points: float, rule_id: str | None, responses: Sequence[str]) -> str:
    """The <critique> field: the last group's shortfall on the criterion."""
    j = len(responses)
    if points < 0:
        out = f"All {j} answers in the last attempt did this, which costs points: {text}"
    else:
        out = f"None of the {j} answers in the last attempt met this: {text}"
    if (rule_id or "").startswith("length_constraints:") and responses:
        n = [len(words(r)) for r in responses]
        out += f" Their lengths were {min(n)}-{max(n)} words."
    return out
