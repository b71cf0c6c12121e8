"""WritingBench: writing requests, each with its own five criteria scored 1-10 by the configured (training) judge in
place of WritingBench's fine-tuned critic.

Published format (X-PLUG/WritingBench, `benchmark_query/benchmark_all.jsonl`): `index`, `domain1`, `domain2`,
`query`, optionally `lang`, and `checklist` (or `criteria`) of `{"name", "criteria_description", "1-2", ..., "9-10"}`.
One judge call per (response, criterion) with prompts/writingbench_critic.txt, answered {"reason", "score"}; a cell
without an integer 1-10 is left out (`unscored`). Item = mean of its cells; benchmark = mean over items x 10.
"""

from __future__ import annotations

import concurrent.futures
import os
import re
from typing import Sequence

import numpy as np

from harnessrl_jax.eval.ood.base import FormatError, Item, check_responses, field, read_jsonl, require_file
from harnessrl_jax.rubric.judges import templates
from harnessrl_jax.rubric.judges.parse import json_objects, strip_thinking

NAME = "writingbench"
BANDS = ("1-2", "3-4", "5-6", "7-8", "9-10")
SCHEMA = {"type": "object", "properties": {"reason": {"type": "string"},
                                           "score": {"type": "integer", "minimum": 1, "maximum": 10}},
          "required": ["reason", "score"], "additionalProperties": False}

def load(path: str, lang: str | None = None) -> list[Item]:
    """The items of a WritingBench query file (only those of language `lang` when given and recorded)."""
    require_file(path, NAME, "benchmark_query/benchmark_all.jsonl")
    items = []
    for n, row in read_jsonl(path):
        key = "checklist" if "checklist" in row else "criteria"
        criteria = field(path, n, row, key, list)
        for i, c in enumerate(criteria):
            where = f"{key}[{i}]"
            if not isinstance(c, dict):
                raise FormatError(f"{path}:{n}: field {where!r}: expected an object")
            for k in ("name", "criteria_description") + BANDS:
                if not isinstance(c.get(k), str) or not c[k].strip():
                    raise FormatError(f"{path}:{n}: field '{where}.{k}': missing or not a string")
        if lang is not None and row.get("lang", lang) != lang:
            continue
        index = row.get("index", n)
        items.append(Item(f"{NAME}/{index}", ({"role": "user", "content": field(path, n, row, "query")},),
                          tuple(criteria), {"index": index, "domain1": row.get("domain1", ""),
                                            "domain2": row.get("domain2", ""), "lang": row.get("lang")}))
    return items

def critic_messages(query: str, response: str, criterion: dict) -> tuple[dict[str, str], ...]:
    """The judge's one message for one (response, criterion) pair."""

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prompts", "writingbench_critic.txt")
    bands = "\n".join(f"- {b}: {criterion[b]}" for b in BANDS)
    text = templates.fill(templates.load_template(path), query=query, response=response, name=criterion["name"],
                          description=criterion["criteria_description"], bands=bands)
    return ({"role": "user", "content": text},)

def parse_score(text: str | None) -> int | None:
    """The integer 1-10 a critic answer gives as "score" (a JSON object, else a `score: N` pair), or None."""

    if not text:
        return None
    text = strip_thinking(text)
    for obj in json_objects(text):
        if isinstance(obj, dict) and "score" in obj:
            v = obj["score"]
            if isinstance(v, str) and re.fullmatch(r"\s*\d+(\s*/\s*10)?\s*", v):
                v = int(v.split("/")[0])
            if isinstance(v, (int, float)) and not isinstance(v, bool) and float(v).is_integer() and 1 <= v <= 10:
                return int(v)
            return None
    m = re.search(r"(?i)\bscore\b[\"']?\s*[:=]\s*(\d+)\b", text)
    return int(m.group(1)) if m and 1 <= int(m.group(1)) <= 10 else None

def score(responses: Sequence[Sequence[str]], items: Sequence[Item], judge=None, max_workers: int = 8) -> dict:
    """Benchmark score (mean item score x 10) with the judge's 1-10 criterion scores; `judge` is an LLM judge
    (rubric.judges.LLMJudge: OpenAI-compatible or Anthropic) whose `complete` makes each call."""
    if judge is None or not hasattr(judge, "complete"):
        raise ValueError("writingbench: scoring needs the configured LLM judge (config.judge.base_url); a rule "
                         "judge cannot score writing")
    check_responses(responses, items)
    jobs = [(i, j, k, critic_messages(item.messages[-1]["content"], r, c))
            for i, (item, rs) in enumerate(zip(items, responses)) for j, r in enumerate(rs)
            for k, c in enumerate(item.target)]
    cells = {}
    with concurrent.futures.ThreadPoolExecutor(max(1, min(max_workers, len(jobs)))) as pool:
        futures = {pool.submit(judge.complete, msgs, SCHEMA): (i, j, k) for i, j, k, msgs in jobs}
        for fut in concurrent.futures.as_completed(futures):
            c = fut.result()
            cells[futures[fut]] = parse_score(c.text) if c.status == "ok" else None
    per_item, item_scores = [], []
    for i, (item, rs) in enumerate(zip(items, responses)):
        grid = np.array([[np.nan if cells[(i, j, k)] is None else cells[(i, j, k)] for k in range(len(item.target))]
                         for j in range(len(rs))], np.float64)
        s = float(np.nanmean(grid)) if np.isfinite(grid).any() else float("nan")
        item_scores.append(s)
        per_item.append({"id": item.id, "criteria_scores": [[None if np.isnan(v) else int(v) for v in row]
                                                            for row in grid], "score": None if np.isnan(s) else 10 * s})
    valid = [s for s in item_scores if np.isfinite(s)]
    return {"score": 10.0 * float(np.mean(valid)) if valid else None, "items": len(items),
            "unscored": sum(v is None for v in cells.values()), "judge_calls": len(jobs), "per_item": per_item}
