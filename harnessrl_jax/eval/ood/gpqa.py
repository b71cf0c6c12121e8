"""GPQA-Diamond as multiple-choice accuracy x 100, scored as MedQA (`choice.extract_choice`).

Published format (Idavidrein/gpqa, `gpqa_diamond.csv`, 198 rows): a CSV with `Question`, `Correct Answer`,
`Incorrect Answer 1..3` and `Record ID` (other columns kept out). Each item's four options are shuffled by
random.Random seeded with `seed` and its record id, so the correct position is uniform and the same on every run.
"""

from __future__ import annotations

import random
from typing import Sequence

from harnessrl_jax.eval.ood import choice
from harnessrl_jax.eval.ood.base import FormatError, Item, read_csv, require_file

NAME = "gpqa"
COLUMNS = ("Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")


def load(path: str, seed: int = 0) -> list[Item]:
    """The items of gpqa_diamond.csv with their options shuffled (module docstring)."""
    require_file(path, NAME, "gpqa_diamond.csv")
    items = []
    for n, row in read_csv(path):
        for col in COLUMNS:
            if not (row.get(col) or "").strip():
                raise FormatError(f"{path}:{n}: field {col!r}: missing or empty (GPQA's CSV has the columns "
                                  f"{', '.join(COLUMNS)})")
        rid = (row.get("Record ID") or "").strip() or f"row{n}"
        texts = [row[c].strip() for c in COLUMNS[1:]]
        order = list(range(4))
        random.Random(f"{seed}:{rid}").shuffle(order)
        options = [texts[i] for i in order]
        answer = choice.LETTERS[order.index(0)]
        items.append(Item(f"{NAME}/{rid}", choice.mc_messages(row["Question"].strip(), options), answer,
                          {"options": tuple(options), "domain": row.get("High-level domain", "")}))
    return items


def score(responses: Sequence[Sequence[str]], items: Sequence[Item]) -> dict:
    """Accuracy x 100 (choice.score_mc)."""
    return choice.score_mc(responses, items)
