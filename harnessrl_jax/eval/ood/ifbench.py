"""IFBench: out-of-distribution verifiable instructions, scored by this codebase's rule checkers under IFBench's own
instruction ids and kwargs.

Published format (allenai/IFBench, `data/IFBench_test.jsonl`, 300 prompts, 58 instruction types; the IFEval layout):
`{"key", "prompt", "instruction_id_list", "kwargs"}`; null kwargs are dropped and integral floats read as integers
(rubric.rules); every record is validated at load. Scores x 100 as IFEval computes them: prompt and instruction
level, strict and loose (rules.loose_variants); the headline is prompt-level loose.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from harnessrl_jax.eval.ood.base import FormatError, Item, check_responses, field, mean100, read_jsonl, require_file
from harnessrl_jax.rubric import rules

NAME = "ifbench"
SCORES = ("prompt_strict", "instruction_strict", "prompt_loose", "instruction_loose")


def load(path: str) -> list[Item]:
    """The items of an IFBench (or IFEval) format file, every instruction's kwargs validated (FormatError naming
    the file, line and instruction otherwise)."""
    require_file(path, NAME, "IFBench_test.jsonl")
    items = []
    for n, row in read_jsonl(path):
        prompt = field(path, n, row, "prompt")
        ids = field(path, n, row, "instruction_id_list", list)
        kwargs = field(path, n, row, "kwargs", list)
        if len(ids) != len(kwargs):
            raise FormatError(f"{path}:{n}: field 'kwargs': {len(kwargs)} kwargs objects for {len(ids)} instructions")
        clean = []
        for i, (rule_id, kw) in enumerate(zip(ids, kwargs)):
            try:
                clean.append(rules.validate_kwargs(rule_id, kw, prompt=prompt))
            except ValueError as e:
                raise FormatError(f"{path}:{n}: field 'instruction_id_list[{i}]': {e}") from None
        key = row.get("key", n)
        for rule_id in ids:
            _can_run(rule_id, path, n)
        items.append(Item(f"{NAME}/{key}", ({"role": "user", "content": prompt},), (tuple(ids), tuple(clean)),
                          {"key": key, "prompt": prompt}))
    return items


_RUNNABLE: set[str] = set()  # checkers probed and found runnable in this process


def _can_run(rule_id: str, path: str, line: int) -> None:
    """A checker that needs data this machine lacks (words:start_verb: NLTK's tagger model) fails at load, before
    any generation, naming the file and line that needs it."""
    if rule_id in _RUNNABLE:
        return
    try:
        rules.get_rule(rule_id).fn("Write a short test response.", **{k: v for k, v in _PROBE.items()
                                                                      if k in rules.get_rule(rule_id).params})
    except LookupError as e:
        raise LookupError(f"{path}:{line}: instruction {rule_id!r} cannot be checked here: {e}") from None
    except Exception:  # noqa: BLE001 - the probe's kwargs are not the item's; only missing data matters here
        pass
    _RUNNABLE.add(rule_id)


_PROBE = {"N": 1, "small_n": 1, "min_words": 1, "max_words": 9, "percentage": 1, "keyword": "test", "word": "test",
          "keyword1": "a", "keyword2": "b", "keyword3": "c", "keyword4": "d", "keyword5": "e", "n": 1, "m": 1,
          "options": "yes/no", "sep": "-", "reference_text": "a test", "prompt_to_repeat": "a test", "n_start": 0,
          "n_end": 1}


def verdicts(response: str, item: Item, *, loose: bool) -> list[bool]:
    """One verdict per instruction of the item."""
    ids, kwargs = item.target
    return rules.follow_instructions(ids, kwargs, response, prompt=item.meta["prompt"], loose=loose)


def score(responses: Sequence[Sequence[str]], items: Sequence[Item]) -> dict:
    """The four IFBench scores and the headline, prompt-level loose. Prompt-level: the mean over items of the share
    of samples following all instructions; instruction-level: followed instructions over all instructions, pooled
    over items as IFEval pools them (each item's count the mean over its samples)."""
    check_responses(responses, items)
    per_item, prompt_level, followed, total = [], {"strict": [], "loose": []}, {"strict": 0.0, "loose": 0.0}, 0
    for item, rs in zip(items, responses):
        row = {}
        for mode in ("strict", "loose"):
            v = [verdicts(r, item, loose=mode == "loose") for r in rs]
            row[f"prompt_{mode}"] = 100.0 * float(np.mean([all(x) for x in v]))
            row[f"instruction_{mode}"] = 100.0 * float(np.mean([np.mean(x) for x in v]))
            prompt_level[mode].append(row[f"prompt_{mode}"] / 100.0)
            followed[mode] += float(np.mean([sum(x) for x in v]))
        total += len(item.target[0])
        per_item.append({"id": item.id, **row, "score": row["prompt_loose"]})
    out = {f"prompt_{m}": mean100(prompt_level[m]) for m in ("strict", "loose")}
    out.update({f"instruction_{m}": 100.0 * followed[m] / total if total else None for m in ("strict", "loose")})
    return {"score": out["prompt_loose"], **{k: out[k] for k in SCORES}, "items": len(items), "per_item": per_item}
