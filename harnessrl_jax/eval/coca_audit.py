"""CoCA's rewrite audit (the paper's Table 15): an LLM auditor, not the rewriter, answers for each
sampled rewrite of a run's coca.jsonl whether it keeps the evaluation target (IPR, intent preservation rate) and
moves the difficulty in the intended direction with the reward / penalty direction kept (DDA, difficulty
direction accuracy); the rates are the shares of yes among the answered rewrites. Analysis only."""

from __future__ import annotations

import concurrent.futures
import json
import os
import random
from typing import Any, Sequence

from harnessrl_jax.evolver import templates
from harnessrl_jax.methods import llm

PROMPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prompts", "coca_audit.txt")
SCHEMA = {"type": "object", "properties": {"same_target": {"type": "boolean"}, "direction_ok": {"type": "boolean"}},
          "required": ["same_target", "direction_ok"]}

def valid_rewrites(coca_jsonl: str) -> list[dict[str, Any]]:
    """Every valid rewrite of a run (coca.jsonl), with its step and task id."""
    out = []
    with open(coca_jsonl, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                d = json.loads(line)
                out += [{"step": d["step"], "task_id": d["task_id"], **r} for r in d["rewrites"] if r["valid"]]
    return out

def audit_prompt(rewrite: dict[str, Any], template: str) -> str:
    harder = rewrite["direction"] == "strengthen"
    pitfall = rewrite.get("points", 1.0) < 0
    return templates.fill(template, direction="harder" if harder else "easier",
                          polarity="pitfall" if pitfall else "requirement", old=rewrite["old"], new=rewrite["new"],
                          harder_hint=("for a pitfall: committed more often" if harder else
                                       "for a pitfall: committed less often") if pitfall else
                          ("more demanding" if harder else "less demanding"))

def audit(rewrites: Sequence[dict[str, Any]], client, *, sample: int = 0, seed: int = 0, max_workers: int = 8
          ) -> dict[str, Any]:
    """{ipr, dda, answered, asked, per-rewrite answers} over `sample` rewrites drawn with `seed` (0: all)."""

    items = list(rewrites)
    if 0 < sample < len(items):
        items = random.Random(seed).sample(items, sample)
    template = templates.load(PROMPT)

    def one(r):
        obj = llm.ask(client, audit_prompt(r, template), SCHEMA, "same_target")
        if obj is None or not isinstance(obj.get("same_target"), bool) or not isinstance(obj.get("direction_ok"),
                                                                                           bool):
            return None
        return {"same_target": obj["same_target"], "direction_ok": obj["direction_ok"]}

    with concurrent.futures.ThreadPoolExecutor(max(1, min(max_workers, len(items) or 1))) as pool:
        answers = list(pool.map(one, items))
    ok = [a for a in answers if a is not None]
    rate = lambda key: sum(a[key] for a in ok) / len(ok) if ok else float("nan")  # noqa: E731
    return {"ipr": rate("same_target"), "dda": rate("direction_ok"), "answered": len(ok), "asked": len(items),
            "rewrites": [{**r, "audit": a} for r, a in zip(items, answers)]}

__all__ = ["audit", "audit_prompt", "valid_rewrites"]
