"""RoleBench (RoleLLM, English) as ROUGE-L F1 x 100 against its reference responses, as RoleBench's evaluation
scores it (`rouge_score`'s rougeL, no stemming; the best over a record's references).

Published layout (ZenMoore/RoleBench): `profiles-eng/desc.json` (role -> description), and
`rolebench-eng/<split>/{general,role_specific}/test.jsonl` (CUS and SPE; `{"role", "question", "generated"}`), with
<split> `role-generalization` (the default) or `instruction-generalization`. The policy gets the role's system
prompt (prompts/rolebench_system.txt) and the question. The released files lack RAW's references, so the headline
is the mean of the sub-scores present; a `<split>/raw/test.jsonl` in the same format adds RAW.
"""

from __future__ import annotations

import functools
import json
import os
from typing import Sequence

from harnessrl_jax.eval.ood.base import FormatError, Item, check_responses, field, mean100, read_jsonl, require_file
from harnessrl_jax.rubric.judges import templates

NAME = "rolebench"
SUBSETS = {"general": "CUS", "role_specific": "SPE", "raw": "RAW"}
SPLITS = ("role-generalization", "instruction-generalization")


@functools.lru_cache(maxsize=1)
def _scorer():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)

def rouge_l(prediction: str, reference: str | Sequence[str]) -> float:
    """ROUGE-L F-measure in [0, 1] of `prediction` against `reference` (or the best of several references), as
    RoleBench's evaluation computes it (module docstring)."""
    refs = [reference] if isinstance(reference, str) else list(reference)
    if not refs:
        raise ValueError("rouge_l: no reference")
    return float(_scorer().score_multi(refs, prediction)["rougeL"].fmeasure)

def _system_prompt(role: str, description: str) -> str:

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prompts", "rolebench_system.txt")
    return templates.fill(templates.load_template(path), role=role, description=description.strip())

def load(path: str, split: str = "role-generalization") -> list[Item]:
    """The English test items of a RoleBench directory (the dataset's root, holding profiles-eng/ and rolebench-eng/)."""
    if split not in SPLITS:
        raise ValueError(f"rolebench: split must be one of {SPLITS}, got {split!r}")
    desc_path = require_file(os.path.join(path, "profiles-eng", "desc.json"), NAME, "profiles-eng/desc.json")
    try:
        with open(desc_path, encoding="utf-8") as f:
            desc = json.load(f)
    except json.JSONDecodeError as e:
        raise FormatError(f"{desc_path}:{e.lineno}: invalid JSON: {e.msg}") from None
    if not isinstance(desc, dict) or not all(isinstance(v, str) for v in desc.values()):
        raise FormatError(f"{desc_path}:1: expected an object mapping each role name to its description string")
    items = []
    for subset, label in SUBSETS.items():
        test = os.path.join(path, "rolebench-eng", split, subset, "test.jsonl")
        if not os.path.isfile(test):
            if subset == "raw":
                continue
            require_file(test, NAME, f"rolebench-eng/{split}/{subset}/test.jsonl")
        for n, row in read_jsonl(test):
            role = field(test, n, row, "role")
            if role not in desc:
                raise FormatError(f"{test}:{n}: field 'role': {role!r} has no description in {desc_path}")
            refs = field(test, n, row, "generated", list)
            if not all(isinstance(r, str) for r in refs):
                raise FormatError(f"{test}:{n}: field 'generated': expected a list of reference strings")
            messages = ({"role": "system", "content": _system_prompt(role, desc[role])},
                        {"role": "user", "content": field(test, n, row, "question")})
            items.append(Item(f"{NAME}/{split}/{subset}/{n}", messages, tuple(refs), {"subset": label, "role": role}))
    return items

def score(responses: Sequence[Sequence[str]], items: Sequence[Item]) -> dict:
    """ROUGE-L x 100 per sub-score (CUS, SPE, RAW where present; each the mean over its items of the mean over
    samples of the best-reference F-measure) and their mean as the headline."""
    check_responses(responses, items)
    per_item, by_subset = [], {}
    for item, rs in zip(items, responses):
        s = sum(rouge_l(r, item.target) for r in rs) / len(rs)
        by_subset.setdefault(item.meta["subset"], []).append(s)
        per_item.append({"id": item.id, "subset": item.meta["subset"], "score": 100.0 * s})
    subs = {k: mean100(v) for k, v in by_subset.items()}
    present = [v for v in subs.values() if v is not None]
    return {"score": sum(present) / len(present) if present else None, **subs, "items": len(items),
            "per_item": per_item}
