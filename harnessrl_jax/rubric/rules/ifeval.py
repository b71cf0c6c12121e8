"""Score IFEval-format files with the rule checkers, as IFEval's own evaluation does (strict or loose).

Inputs are IFEval's `input_data.jsonl` rows `{key, prompt, instruction_id_list, kwargs}` (kwargs: one dict per
instruction; null values mean "unset" and are dropped). Responses are IFEval's `input_response_data.jsonl` rows
`{prompt, response}`, matched to inputs by prompt text, or a `response` field on the input rows themselves.

Prompt-dependent instructions: `combination:repeat_prompt` uses the row's `prompt_to_repeat` kwarg, which IFEval
rows carry; a row that leaves it out is checked against the row's whole prompt.
"""

from __future__ import annotations

import collections
import os
from typing import Any, Iterable, Sequence

from harnessrl_jax.jsonl import read_objects
from harnessrl_jax.rubric.rules.registry import check, validate_kwargs


def _field(path, n, row, name, kind):
    if name not in row:
        raise ValueError(f"{path}:{n}: missing field {name!r}")
    if not isinstance(row[name], kind):
        raise ValueError(f"{path}:{n}: field {name!r} must be {kind.__name__}, got {type(row[name]).__name__}")
    return row[name]


def loose_variants(response: str) -> list[str]:
    """IFEval's loose variants: the response and it without its first line, last line or both, each also with
    every '*' removed. An instruction is loosely followed if any variant follows it."""
    lines = response.split("\n")
    cut = [response, "\n".join(lines[1:]).strip(), "\n".join(lines[:-1]).strip(), "\n".join(lines[1:-1]).strip()]
    return cut[:1] + [cut[0].replace("*", "")] + cut[1:] + [c.replace("*", "") for c in cut[1:]]


def follow_instructions(instruction_ids: Sequence[str], kwargs_list: Sequence[dict | None], response: str, *,
                        prompt: str | None = None, loose: bool = False) -> list[bool]:
    """One verdict per instruction: does `response` follow it (strictly, or in any loose variant)?"""
    if len(instruction_ids) != len(kwargs_list):
        raise ValueError(f"{len(instruction_ids)} instruction ids but {len(kwargs_list)} kwargs dicts")
    variants = loose_variants(response) if loose else [response]
    return [any(check(rule_id, kw, r, prompt=prompt) for r in variants)
            for rule_id, kw in zip(instruction_ids, kwargs_list)]


def score_ifeval_file(input_path: str | os.PathLike, response_path: str | os.PathLike | None = None, *,
                      loose: bool = False) -> list[dict[str, Any]]:
    """Verdicts for every input row, in input order: `{key, prompt, response, instruction_id_list,
    follow_instruction_list, follow_all_instructions}` (the fields of IFEval's eval_results_{strict,loose}.jsonl).

    Every row's ids and kwargs are validated, and every prompt must have a response, before anything is scored;
    errors name the file and line.
    """
    inputs = list(read_objects(input_path))
    if response_path is not None:
        responses = {}
        for n, row in read_objects(response_path):
            responses[_field(response_path, n, row, "prompt", str)] = _field(response_path, n, row, "response", str)
    rows = []
    for n, row in inputs:
        ids = _field(input_path, n, row, "instruction_id_list", list)
        kwargs = _field(input_path, n, row, "kwargs", list)
        prompt = _field(input_path, n, row, "prompt", str)
        if len(ids) != len(kwargs):
            raise ValueError(f"{input_path}:{n}: {len(ids)} instruction ids but {len(kwargs)} kwargs dicts")
        for i, (rule_id, kw) in enumerate(zip(ids, kwargs)):
            try:
                validate_kwargs(rule_id, kw, prompt=prompt)
            except ValueError as e:  # UnknownRuleError is a ValueError too
                raise ValueError(f"{input_path}:{n}: instruction_id_list[{i}]: {e}") from None
        if response_path is None:
            response = _field(input_path, n, row, "response", str)
        else:
            response = responses.get(prompt)
        rows.append((row.get("key"), prompt, response, ids, kwargs))
    missing = [key for key, _, response, _, _ in rows if response is None]
    if missing:
        raise ValueError(f"{response_path}: missing responses for input keys {missing}")
    results = []
    for key, prompt, response, ids, kwargs in rows:
        verdicts = follow_instructions(ids, kwargs, response, prompt=prompt, loose=loose)
        results.append({"key": key, "prompt": prompt, "response": response, "instruction_id_list": ids,
                        "follow_instruction_list": verdicts, "follow_all_instructions": all(verdicts)})
    return results


def summarize(results: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """IFEval's report: prompt-level and instruction-level accuracy, and accuracy per instruction id and per group."""
    prompts = followed_prompts = 0
    per_id = collections.defaultdict(lambda: [0, 0])  # id -> [followed, total]
    per_group = collections.defaultdict(lambda: [0, 0])
    for r in results:
        prompts += 1
        followed_prompts += all(r["follow_instruction_list"])
        for rule_id, ok in zip(r["instruction_id_list"], r["follow_instruction_list"]):
            for table, k in ((per_id, rule_id), (per_group, rule_id.split(":")[0])):
                table[k][0] += ok
                table[k][1] += 1
    followed = sum(f for f, _ in per_id.values())
    total = sum(t for _, t in per_id.values())
    return {
        "prompt_level": followed_prompts / prompts if prompts else float("nan"),
        "instruction_level": followed / total if total else float("nan"),
        "by_instruction": {k: f / t for k, (f, t) in sorted(per_id.items())},
        "by_group": {k: f / t for k, (f, t) in sorted(per_group.items())},
    }
