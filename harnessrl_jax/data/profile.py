"""Step-0 criterion profile of a task set: which rule criteria a policy never meets, always meets, or splits.

    python -m harnessrl_jax.data.profile [--split=all] [--n=8] [--max_new_tokens=96] [--budgets=48,64,96]
        [--samples=PATH.jsonl] [--out=REPORT.json]

Samples n responses per task (SmolLM2-135M-Instruct by default, temperature 1.0, no guidance), scores every
`verifier:rule` criterion and labels it blind (met by none), saturated (met by all) or discriminative; a pitfall
"passes" when the bad behaviour occurs. LLM-only criteria are left out. A response cut at b tokens is a sample under
a b-token budget, so `--budgets` needs no new samples; `--samples` keeps the token ids, which `--rescore` rescores.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from typing import Iterable, Sequence

import numpy as np

from harnessrl_jax.data.loaders import load_split
from harnessrl_jax.rubric import rules
from harnessrl_jax.rubric.schema import Criterion, Task
from harnessrl_jax.models import load_pretrained
from harnessrl_jax.rollout import JaxEngine

STATES = ("blind", "saturated", "discriminative")


def rule_matrix(task: Task, responses: Sequence[str], criteria: Iterable[Criterion] | None = None):
    """(criteria, S) with S[k, j] = 1.0 when rule criterion k holds for response j (LLM-only criteria skipped)."""
    crits = [c for c in (task.criteria if criteria is None else criteria) if c.verifier == "rule"]
    prompt = task.prompt[-1]["content"]
    S = np.array([[float(rules.check(c.rule_id, c.rule_kwargs, r, prompt=prompt)) for r in responses]
                  for c in crits]).reshape(len(crits), len(responses))
    return crits, S

def state(pass_rate: float) -> str:
    """blind (0), saturated (1) or discriminative."""
    if pass_rate <= 0.0:
        return "blind"
    if pass_rate >= 1.0:
        return "saturated"
    return "discriminative"

def profile(tasks: Sequence[Task], responses: Sequence[Sequence[str]]) -> dict:
    """Per-domain and overall counts of criterion states, split into positive criteria and pitfalls."""
    counts = defaultdict(lambda: defaultdict(lambda: dict.fromkeys(STATES, 0)))
    per_criterion = {}
    for task, group in zip(tasks, responses):
        crits, S = rule_matrix(task, group)
        for c, row in zip(crits, S):
            rate = float(row.mean())
            kind = "pitfall" if c.is_pitfall else "positive"
            for dom in (task.domain, "all"):
                counts[dom][kind][state(rate)] += 1
                counts[dom]["any"][state(rate)] += 1
            per_criterion[c.id] = rate
    table = {d: {k: dict(v) for k, v in kinds.items()} for d, kinds in counts.items()}
    return {"counts": table, "pass_rates": per_criterion}

def format_table(counts: dict) -> str:
    """A plain-text table: per domain, the share of rule criteria in each state (all / positive / pitfalls)."""
    lines = [f"{'domain':<22} {'n':>4} {'blind':>7} {'satur.':>7} {'discr.':>7}   pitfalls b/s/d"]
    for dom in sorted(counts, key=lambda d: (d == "all", d)):
        anyc, pit = counts[dom]["any"], counts[dom].get("pitfall", dict.fromkeys(STATES, 0))
        n = sum(anyc.values())
        shares = [100.0 * anyc[s] / n for s in STATES]
        lines.append(f"{dom:<22} {n:>4} {shares[0]:>6.1f}% {shares[1]:>6.1f}% {shares[2]:>6.1f}%   "
                     f"{pit['blind']}/{pit['saturated']}/{pit['discriminative']}")
    return "\n".join(lines)

def sample(tasks: Sequence[Task], n: int, max_new_tokens: int, seed: int, batch: int = 16,
           model: str = "smollm2-135m-instruct") -> list[dict]:
    """Token ids of n samples per task: [{'id', 'tokens': [[...] * n]}], temperature 1.0."""

    config, params, tokenizer = load_pretrained(model)
    engine = JaxEngine(config, params, tokenizer)
    out = []
    for start in range(0, len(tasks), batch):
        chunk = tasks[start:start + batch]
        prompts = [tokenizer.apply_chat_template(list(t.prompt), tokenize=True) for t in chunk]
        t0 = time.perf_counter()
        ro = engine.generate(prompts, n=n, max_new_tokens=max_new_tokens, temperature=1.0, seed=seed + start)
        for i, t in enumerate(chunk):
            rows = [r for r in range(ro.num_samples) if ro.prompt_index[r] == i]
            out.append({"id": t.id, "tokens": [ro.completion(r) for r in rows]})
        print(f"sampled tasks {start}-{start + len(chunk) - 1}: {int(ro.lengths.sum())} tokens in "
              f"{time.perf_counter() - t0:.0f}s", flush=True)
    return out

def decode_at(samples: list[dict], budget: int, tokenizer) -> dict[str, list[str]]:
    """Responses as they would read under a `budget`-token limit."""
    return {s["id"]: [tokenizer.decode(toks[:budget]) for toks in s["tokens"]] for s in samples}

def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--name", default="mini")
    p.add_argument("--split", default="all", choices=("all", "train", "heldout"))
    p.add_argument("--n", type=int, default=8)
    p.add_argument("--max_new_tokens", type=int, default=96)
    p.add_argument("--budgets", default="", help="comma-separated token budgets to report (default: max_new_tokens)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--samples", default="", help="JSONL of sampled token ids: written, or read with --rescore")
    p.add_argument("--rescore", action="store_true")
    p.add_argument("--out", default="", help="write the report as JSON here")
    args = p.parse_args(argv)

    splits = ("train", "heldout") if args.split == "all" else (args.split,)
    tasks = [t for s in splits for t in load_split(args.name, s)]
    if args.rescore:
        with open(args.samples, encoding="utf-8") as f:
            samples = [json.loads(line) for line in f]
    else:
        samples = sample(tasks, args.n, args.max_new_tokens, args.seed)
        if args.samples:
            with open(args.samples, "w", encoding="utf-8") as f:
                for s in samples:
                    f.write(json.dumps(s) + "\n")
    tokenizer = load_pretrained("smollm2-135m-instruct")[2]
    budgets = [int(b) for b in args.budgets.split(",") if b] or [args.max_new_tokens]
    report = {}
    by_id = {t.id: t for t in tasks}
    for b in budgets:
        texts = decode_at(samples, b, tokenizer)
        ids = [i for i in texts if i in by_id]
        prof = profile([by_id[i] for i in ids], [texts[i] for i in ids])
        report[str(b)] = prof
        print(f"\nbudget {b} new tokens, J = {len(samples[0]['tokens'])}:\n{format_table(prof['counts'])}")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
