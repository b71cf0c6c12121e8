"""MedQA (USMLE, English, 4 options: the US 4-option test file) as multiple-choice accuracy x 100.

Published format (jind11/MedQA, `data_clean/questions/US/4_options/phrases_no_exclude_test.jsonl`, 1,273 items): one
JSON object per line with `question`, `options` {"A": ..., "D": ...}, `answer_idx` (the correct letter), `answer`,
`meta_info`. The policy answers freely; `choice.extract_choice` reads the letter it commits to; unparseable is wrong.
"""

from __future__ import annotations

from typing import Sequence

from harnessrl_jax.eval.ood import choice
from harnessrl_jax.eval.ood.base import FormatError, Item, field, read_jsonl, require_file

NAME = "medqa"


def load(path: str) -> list[Item]:
    """The items of a MedQA US 4-option JSONL file; a record with other than options A-D is a FormatError."""
    require_file(path, NAME, "US 4-option test file (phrases_no_exclude_test.jsonl or test.jsonl)")
    items = []
    for n, row in read_jsonl(path):
        question = field(path, n, row, "question")
        options = field(path, n, row, "options", dict)
        if sorted(options) != list("ABCD") or not all(isinstance(v, str) and v.strip() for v in options.values()):
            raise FormatError(f"{path}:{n}: field 'options': expected the four texts under 'A' to 'D' (the US "
                              f"4-option set), got keys {sorted(options)}")
        answer = field(path, n, row, "answer_idx")
        if answer not in options:
            raise FormatError(f"{path}:{n}: field 'answer_idx': {answer!r} is not one of the options A-D")
        texts = [options[k] for k in "ABCD"]
        items.append(Item(f"{NAME}/{n}", choice.mc_messages(question, texts), answer,
                          {"options": tuple(texts), "meta_info": row.get("meta_info", "")}))
    return items


def score(responses: Sequence[Sequence[str]], items: Sequence[Item]) -> dict:
    """Accuracy x 100 (choice.score_mc)."""
    return choice.score_mc(responses, items)
