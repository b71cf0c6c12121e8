"""RubricHub_v1 (sojuL/RubricHub_v1, the RuRL files) -> medical, science, role-play and instruction-following
tasks (the writing slice is not in the mix: writing comes from LongWriter-Zero).

Release layout: one parquet file per domain, `RuRL/rurbichub_v1_<Domain>.parquet` (the upstream spelling), with
columns `prompt` (chat messages), `Rubrics` (list of {criterion, points}), `reward_model` ({rubrics, ground_truth,
...}: the same rubrics, possibly with `tags`), `ability` and `data_source` (the domain: chat, Instruction_Following,
Medical, Science, Writing). English records only (a record whose prompt has Chinese, Japanese or Korean
characters is skipped). Points are the items' points (negative ones are penalties). In the instruction-following
slice an item whose reward_model tags name a rule verifier with a function that is a registered checker id (or its
`group:name` suffix) and parameters that rules.validate_kwargs accepts becomes `verifier:rule`; every other item
is LLM-judged. A non-empty ground truth is kept as the reference (description only).
"""

from __future__ import annotations

import os
from typing import Any, Iterator

from harnessrl_jax.rubric import rules
from harnessrl_jax.rubric.schema import Task
from third_party.rubric_mix.common import (ConversionError, criterion_record, is_english, key, make_task, messages,
                                           need, rows, source_files)

NAME = "rubrichub"
DOMAINS = {"medical": "medical", "science": "science", "chat": "roleplay",
           "instruction_following": "instruction_following", "writing": None}  # None: not in the mix


def _rule_id(function: str) -> str | None:
    if function in rules.registered():
        return function
    matches = [r for r in rules.registered() if r.split(":", 1)[1] == function]
    return matches[0] if len(matches) == 1 else None


def _as_dict(v: Any) -> dict:
    return v if isinstance(v, dict) else {}


def _criterion(path, n, i, item, if_slice: bool, prompt_text: str, stats: dict) -> dict:
    field = f"Rubrics[{i}]"
    if not isinstance(item, dict) or not isinstance(item.get("criterion"), str) or not item["criterion"].strip():
        raise ConversionError(path, n, f"{field}.criterion", "missing or not a string")
    points = item.get("points")
    if isinstance(points, bool) or not isinstance(points, (int, float)):
        raise ConversionError(path, n, f"{field}.points", f"expected a number, got {points!r}")
    tags = ["source:rubrichub"]
    meta = _as_dict(item.get("tags"))
    function = meta.get("function")
    if if_slice and isinstance(function, str) and meta.get("verifier") == "rule":
        rule_id = _rule_id(function)
        kwargs = {k: v for k, v in _as_dict(meta.get("parameters")).items() if v is not None}
        try:
            if rule_id is None:
                raise ValueError(f"no checker {function!r}")
            kwargs = rules.validate_kwargs(rule_id, kwargs, prompt=prompt_text)
        except ValueError:
            stats["rules_unmapped"] += 1
            tags.append(f"source_function:{function}")
        else:
            import json
            stats["rules_mapped"] += 1
            tags += ["verifier:rule", f"rule:{rule_id}", "rule_kwargs:" + json.dumps(kwargs)]
            return criterion_record(item["criterion"], float(points), tags)
    return criterion_record(item["criterion"], float(points), tags + ["verifier:llm"])


def convert(folder: str, stats: dict | None = None) -> Iterator[Task]:
    """Every English record of the RuRL parquet files in `folder` whose domain is in the mix; `stats` (optional)
    collects skipped records and the rule mapping counts."""
    stats = stats if stats is not None else {}
    for k in ("non_english", "not_in_mix", "rules_mapped", "rules_unmapped"):
        stats.setdefault(k, 0)
    for path in source_files(folder, (".parquet", ".jsonl")):
        for n, row in rows(path):
            ability = need(path, n, row, "ability")
            if ability.lower() not in DOMAINS:
                raise ConversionError(path, n, "ability", f"unknown domain {ability!r}; known: "
                                                          f"{sorted(DOMAINS)} (case ignored)")
            domain = DOMAINS[ability.lower()]
            if domain is None:
                stats["not_in_mix"] += 1
                continue
            prompt = messages(path, n, row.get("prompt"), "prompt")
            text = "\n".join(m["content"] for m in prompt)
            if not is_english(text):
                stats["non_english"] += 1
                continue
            reward_model = _as_dict(row.get("reward_model"))
            items = row.get("Rubrics")
            tagged = reward_model.get("rubrics")
            if not isinstance(items, list) or not items:
                if not isinstance(tagged, list) or not tagged:
                    raise ConversionError(path, n, "Rubrics", "missing (nor is there reward_model.rubrics)")
                items = tagged
            if isinstance(tagged, list) and len(tagged) == len(items):  # the tags live in reward_model's copy
                items = [{**a, "tags": _as_dict(b).get("tags")} if isinstance(a, dict) else a
                         for a, b in zip(items, tagged)]
            user = next((m["content"] for m in reversed(prompt) if m["role"] == "user"), text)
            rubrics = [_criterion(path, n, i, item, domain == "instruction_following", user, stats)
                       for i, item in enumerate(items)]
            record = {"id": f"{NAME}/{domain}/{key(text)}", "domain": domain, "prompt": prompt, "rubrics": rubrics,
                      "extra": {"source": NAME, "ability": ability, "file": os.path.basename(path)}}
            truth = reward_model.get("ground_truth")
            if isinstance(truth, str) and truth.strip():
                record["reference"] = truth.strip()
            yield make_task(path, n, record)
