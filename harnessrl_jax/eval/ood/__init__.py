"""Out-of-distribution benchmarks, one per domain, each read from the benchmark's own released file format at a
local path (nothing downloads) and scored by the benchmark's own rule, 0-100; the aggregate is their macro mean.

    medqa         MedQA US 4-option JSONL              multiple-choice accuracy (extract_choice)
    gpqa          GPQA-Diamond CSV                     multiple-choice accuracy, options shuffled with a fixed seed
    rolebench     RoleBench directory (English)        ROUGE-L F1 (rouge_l), CUS / SPE (/ RAW) and their mean
    ifbench       IFBench JSONL (the IFEval layout)    prompt / instruction level, strict / loose (rule checkers)
    writingbench  WritingBench query JSONL             its own criteria scored 1-10 by the configured judge

    items = load("medqa", "data/medqa/test.jsonl")
    out = evaluate_ood(run, {"medqa": path, ...}, num_samples=4, seed=0, judge=None)   # eval.json's "ood" block
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from harnessrl_jax.eval.ood import gpqa, ifbench, medqa, rolebench, writingbench
from harnessrl_jax.eval.ood.base import FormatError, Item
from harnessrl_jax.eval.ood.choice import extract_choice
from harnessrl_jax.eval.ood.rolebench import rouge_l
from harnessrl_jax.rubric.judges import OpenAIJudge

BENCHMARKS = {m.NAME: m for m in (medqa, gpqa, rolebench, ifbench, writingbench)}
# The OOD benchmark of each Rubric-Mix domain.
DOMAIN_BENCHMARK = {"medical": "medqa", "science": "gpqa", "writing": "writingbench", "roleplay": "rolebench",
                    "instruction_following": "ifbench"}

def parse_specs(text: str | Sequence[str]) -> dict[str, str]:
    """'medqa=PATH,gpqa=PATH' (or a list of NAME=PATH) -> {name: path}; unknown names are a ValueError."""
    parts = text.split(",") if isinstance(text, str) else list(text)
    out = {}
    for part in filter(None, (p.strip() for p in parts)):
        name, eq, path = part.partition("=")
        if not eq or not path or name not in BENCHMARKS:
            raise ValueError(f"--ood entry {part!r}: expected NAME=PATH with NAME one of {sorted(BENCHMARKS)}")
        out[name] = path
    return out

def load(name: str, path: str, **options) -> list[Item]:
    """The items of benchmark `name` from its released file(s) at `path`."""
    if name not in BENCHMARKS:
        raise ValueError(f"unknown OOD benchmark {name!r}; known: {sorted(BENCHMARKS)}")
    return BENCHMARKS[name].load(path, **options)

def score(name: str, responses: Sequence[Sequence[str]], items: Sequence[Item], judge=None) -> dict[str, Any]:
    """Benchmark `name`'s scores of `responses` (samples per item); WritingBench needs the LLM `judge`."""
    if name == "writingbench":
        return writingbench.score(responses, items, judge)
    return BENCHMARKS[name].score(responses, items)

def generate(run, items: Sequence[Item], *, num_samples: int, seed: int, max_new_tokens: int | None = None,
             batch_items: int = 16) -> list[list[str]]:
    """`num_samples` responses per item from the run's engine: the item's messages under the policy's chat
    template, the config's sampling settings (evaluation temperature = training temperature)."""
    config = run.config
    out = []
    for b in range(0, len(items), batch_items):
        batch = items[b:b + batch_items]
        prompts = [run.tokenizer.apply_chat_template(list(it.messages), add_generation_prompt=True, tokenize=True)
                   for it in batch]
        ro = run.engine.generate(prompts, n=num_samples, max_new_tokens=max_new_tokens or config.max_new_tokens,
                                 temperature=config.temperature, top_p=config.top_p, top_k=config.top_k,
                                 seed=(seed + 7919 * b) % (2**31 - 1))
        texts = np.asarray(ro.texts, dtype=object).reshape(len(batch), num_samples)
        out += [list(row) for row in texts]
    return out

def evaluate_ood(run, specs: Mapping[str, str], *, num_samples: int, seed: int, judge=None,
                 max_new_tokens: int | None = None, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Every benchmark of `specs` ({name: path}) loaded, answered by the run's policy and scored: eval.json's `ood`
    block, {name: {score, sub-scores, items, path, num_samples, seconds, per_item}, "aggregate": macro mean}.
    All files are read and validated before any generation."""
    loaded = {name: load(name, path) for name, path in specs.items()}
    if "writingbench" in loaded and (judge is None or not hasattr(judge, "complete")):
        raise ValueError("--ood=writingbench=... needs the configured LLM judge: set --config.judge.base_url "
                         "(WritingBench's criteria are scored 1-10 by the training judge)")
    out: dict[str, Any] = {}
    for name, items in loaded.items():
        start = time.perf_counter()
        responses = generate(run, items, num_samples=num_samples, seed=seed, max_new_tokens=max_new_tokens)
        result = score(name, responses, items, judge)
        for row, rs in zip(result["per_item"], responses):
            row["responses"] = rs
        out[name] = {**result, "path": specs[name], "num_samples": num_samples,
                     "seconds": time.perf_counter() - start}
        if progress is not None:
            progress(f"ood {name}: {result['score'] if result['score'] is None else round(result['score'], 2)} "
                     f"({len(items)} items x {num_samples}, {out[name]['seconds']:.0f} s)")
    present = [v["score"] for v in out.values() if v["score"] is not None]
    out["aggregate"] = float(np.mean(present)) if present else None
    return out

def judge_from_config(config):
    """The configured training judge as an LLM judge (OpenAI-compatible server at config.judge.base_url), or None
    when the config has none (WritingBench then cannot be scored)."""
    j = config.judge
    if not j.base_url:
        return None

    return OpenAIJudge(j.base_url, j.model, structured_output=j.structured_output, api_key_env=j.api_key_env or None,
                       name="writingbench-critic")

__all__ = ["BENCHMARKS", "DOMAIN_BENCHMARK", "FormatError", "Item", "evaluate_ood", "extract_choice", "generate",
           "judge_from_config", "load", "parse_specs", "rouge_l", "score"]
