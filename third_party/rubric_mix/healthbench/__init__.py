"""HealthBench (openai/simple-evals) -> medical tasks (README.md beside this file).

The JSONL records load unchanged through rubric.schema (prompt_id, prompt messages, rubrics [{criterion, points,
tags}], example_tags, ideal_completions_data, canary); the converter prefixes the id, sets the domain, keeps every
tag and example tag (nothing is excluded, so a Hard-excluded build is a filter), and takes the ideal completion as the
reference (description only: training and reward never read it).
"""

from __future__ import annotations

import os
from typing import Iterator

from harnessrl_jax.rubric.schema import Task
from third_party.rubric_mix.common import make_task, need, normalize, rows, source_files

NAME = "healthbench"
DOMAIN = "medical"


def convert(folder: str) -> Iterator[Task]:
    """Every record of every .jsonl file in `folder`."""
    for path in source_files(folder, (".jsonl",)):
        for n, row in rows(path):
            pid = need(path, n, row, "prompt_id")
            need(path, n, row, "prompt", list)
            need(path, n, row, "rubrics", list)
            record = dict(row)
            record.pop("prompt_id")
            record.update({"id": f"{NAME}/{pid}", "domain": DOMAIN,
                           "prompt": [{**m, "content": normalize(m["content"])} if isinstance(m, dict)
                                      and isinstance(m.get("content"), str) else m for m in row["prompt"]],
                           "extra": {"source": NAME, "file": os.path.basename(path)}})
            yield make_task(path, n, record)
