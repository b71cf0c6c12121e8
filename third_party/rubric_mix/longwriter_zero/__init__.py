"""LongWriter-Zero's RL prompts (THU-KEG) -> writing tasks, with seed rubrics generated once, offline.

The release has writing prompts and no criteria. `generate_rubrics` asks the configured generator model (an LLM
judge client: OpenAI-compatible or Anthropic) with rubric_writer.txt (RaR's format: 7-15 items, Essential /
Important / Optional / Pitfall with weights 5 / 3 / 1 / -2) and writes a build artefact, one JSONL line per prompt:
{"key", "generator", "prompt_sha", "rubric": [{title, description, weight}]}. `convert` joins the prompts with that
file (a prompt without generated rubrics is skipped and counted) and adds one rule criterion for an explicit length
requirement parsed from the prompt (`length_constraints:number_words`: "at least N words" / "more than N" -> at
least; "under / fewer than / no more than / at most N words" -> less than N (+1 for "at most"); "about / around /
approximately N words" -> at least 0.8 N).

Prompt layout read (verl's RL format, as the release's parquet files use it): `prompt` as chat messages
[{role, content}] or a string; other columns (data_source, ability, reward_model, extra_info) are kept out.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Iterator

from harnessrl_jax.rubric.schema import Task
from third_party.rubric_mix.common import (ConversionError, criterion_record, is_english, key, make_task, messages,
                                           rows, source_files)
from third_party.rubric_mix.rar import _PREFIX

NAME = "longwriter_zero"
DOMAIN = "writing"
RUBRICS_FILE = "generated_rubrics.jsonl"
PROMPT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rubric_writer.txt")

_NUM = r"(\d[\d,]*)"
_LENGTH = [  # tried in order: "no more than" before "more than"
    (re.compile(rf"\b(?:no more than|at most|maximum of|not exceed(?:ing)?|up to|within)\s+{_NUM}\s+words", re.I),
     lambda n: ("less than", n + 1)),
    (re.compile(rf"\b(?:at least|no (?:less|fewer) than|minimum of|more than|over)\s+{_NUM}\s+words", re.I),
     lambda n: ("at least", n)),
    (re.compile(rf"\b(?:under|fewer than|less than|below)\s+{_NUM}\s+words", re.I), lambda n: ("less than", n)),
    (re.compile(rf"\b(?:about|around|approximately|roughly|~)\s*{_NUM}\s+words", re.I),
     lambda n: ("at least", int(0.8 * n))),
    (re.compile(rf"\b{_NUM}\s*-\s*word\b|\b{_NUM}\s+words\b", re.I), lambda n: ("at least", int(0.8 * n))),
]


def length_rule(prompt: str) -> dict | None:
    """{relation, num_words} of an explicit word-count requirement in the prompt, or None."""
    for pattern, make in _LENGTH:
        m = pattern.search(prompt)
        if m:
            n = int(next(g for g in m.groups() if g).replace(",", ""))
            relation, num = make(n)
            return {"relation": relation, "num_words": num}
    return None


def _prompts(folder: str) -> Iterator[tuple[str, int, list[dict], str]]:
    for path in source_files(folder, (".parquet", ".jsonl")):
        if os.path.basename(path) == RUBRICS_FILE:
            continue
        for n, row in rows(path):
            prompt = messages(path, n, row.get("prompt"), "prompt")
            text = "\n".join(m["content"] for m in prompt)
            yield path, n, prompt, text


def prompt_sha() -> str:
    with open(PROMPT_PATH, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def generate_rubrics(folder: str, client, *, english_only: bool = True, max_workers: int = 8) -> dict[str, int]:
    """Writes <folder>/generated_rubrics.jsonl: the generator's rubric for every prompt not yet in it (so an
    interrupted generation resumes); returns counts (generated, failed, kept)."""
    import concurrent.futures

    from harnessrl_jax.rubric.judges import templates
    from harnessrl_jax.rubric.judges.parse import json_objects

    out_path = os.path.join(folder, RUBRICS_FILE)
    done = {json.loads(line)["key"] for line in open(out_path, encoding="utf-8")} if os.path.exists(out_path) else set()
    todo = {}
    for _, _, _, text in _prompts(folder):
        if (not english_only or is_english(text)) and key(text) not in done:
            todo[key(text)] = text
    template = templates.load_template(PROMPT_PATH)
    schema = {"type": "array", "items": {"type": "object", "properties": {
        "title": {"type": "string"}, "description": {"type": "string"}, "weight": {"type": "integer"}},
        "required": ["title", "description", "weight"]}, "minItems": 7, "maxItems": 15}

    def one(item):
        k, text = item
        c = client.complete(({"role": "user", "content": templates.fill(template, prompt=text)},), schema)
        if c.status != "ok":
            return k, None
        for obj in json_objects(c.text or ""):
            if isinstance(obj, list) and all(isinstance(x, dict) and {"title", "description", "weight"} <= set(x)
                                             for x in obj) and 1 <= len(obj) <= 20:
                return k, obj
        return k, None

    counts = {"generated": 0, "failed": 0, "kept": len(done)}
    with concurrent.futures.ThreadPoolExecutor(max_workers) as pool, open(out_path, "a", encoding="utf-8") as f:
        for k, rubric in pool.map(one, todo.items()):
            if rubric is None:
                counts["failed"] += 1
                continue
            f.write(json.dumps({"key": k, "generator": getattr(client, "model", ""), "prompt_sha": prompt_sha(),
                                "rubric": rubric}, ensure_ascii=False) + "\n")
            counts["generated"] += 1
    return counts


def convert(folder: str, stats: dict | None = None) -> Iterator[Task]:
    """The English prompts of `folder` that have generated rubrics, each with its length rule where it states one."""
    stats = stats if stats is not None else {}
    for k in ("non_english", "no_rubric"):
        stats.setdefault(k, 0)
    rubric_path = os.path.join(folder, RUBRICS_FILE)
    generated = {}
    if os.path.exists(rubric_path):
        for n, row in rows(rubric_path):
            if not isinstance(row.get("key"), str) or not isinstance(row.get("rubric"), list):
                raise ConversionError(rubric_path, n, "rubric", "expected {key, generator, prompt_sha, rubric: [...]}")
            generated[row["key"]] = (n, row)
    for path, n, prompt, text in _prompts(folder):
        if not is_english(text):
            stats["non_english"] += 1
            continue
        if key(text) not in generated:
            stats["no_rubric"] += 1
            continue
        line, gen = generated[key(text)]
        rubrics = []
        for i, item in enumerate(gen["rubric"]):
            desc, weight = item.get("description"), item.get("weight")
            if not isinstance(desc, str) or isinstance(weight, bool) or not isinstance(weight, (int, float)):
                raise ConversionError(rubric_path, line, f"rubric[{i}]", "expected {title, description, weight}")
            tags = ["source:longwriter_zero", "verifier:llm", f"title:{item.get('title', '')}"]
            m = _PREFIX.match(desc)
            if m:
                tags.append(f"category:{m.group(1).lower()}")
                desc = desc[m.end():]
            rubrics.append(criterion_record(desc, float(weight), tags))
        rule = length_rule(text)
        if rule:
            rubrics.append(criterion_record(
                f"The response is {'at least' if rule['relation'] == 'at least' else 'under'} {rule['num_words']} "
                f"words long.", 3.0, ["source:longwriter_zero", "verifier:rule",
                                      "rule:length_constraints:number_words", "rule_kwargs:" + json.dumps(rule)]))
        yield make_task(path, n, {"id": f"{NAME}/{key(text)}", "domain": DOMAIN, "prompt": prompt,
                                  "rubrics": rubrics, "extra": {"source": NAME, "generator": gen.get("generator"),
                                                                "prompt_sha": gen.get("prompt_sha")}})
