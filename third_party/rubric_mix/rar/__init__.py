"""RaR-Medicine and RaR-Science (ScaleAI, "Rubrics as Rewards") -> medical / science tasks.

Release layout (parquet shards, or the same columns as JSONL): `question`, `reference_answer`, `question_source`,
`rubric` (a list of {title, description, weight}), `rubric_list`, `rubric_count`. Each rubric item becomes a
criterion: its description without the "<Category> Criteria:" prefix, which moves to a `category:` tag,
points = weight (Essential 5, Important 3-4, Optional 1-2, Pitfall -1/-2), tags title:, source:rar,
question_source:. The reference answer is kept as the reference (description only).
"""

from __future__ import annotations

import re
import types
from typing import Iterator

from harnessrl_jax.rubric.schema import Task
from third_party.rubric_mix.common import (ConversionError, criterion_record, key, make_task, need, normalize,
                                           rows, source_files)

_PREFIX = re.compile(r"^\s*(Essential|Important|Optional|Pitfall)\s+Criteri(?:a|on)\s*:\s*", re.I)


def _convert(folder: str, name: str, domain: str) -> Iterator[Task]:
    for path in source_files(folder, (".parquet", ".jsonl")):
        for n, row in rows(path):
            question = need(path, n, row, "question")
            items = need(path, n, row, "rubric", list)
            rubrics = []
            for i, item in enumerate(items):
                field = f"rubric[{i}]"
                if not isinstance(item, dict):
                    raise ConversionError(path, n, field, "expected a {title, description, weight} object")
                desc = item.get("description")
                weight = item.get("weight")
                if not isinstance(desc, str) or not desc.strip():
                    raise ConversionError(path, n, f"{field}.description", "missing or empty")
                if isinstance(weight, bool) or not isinstance(weight, (int, float)):
                    raise ConversionError(path, n, f"{field}.weight", f"expected a number, got {weight!r}")
                tags = ["source:rar", f"title:{normalize(str(item.get('title') or ''))}"]
                m = _PREFIX.match(desc)
                if m:
                    tags.append(f"category:{m.group(1).lower()}")
                    desc = desc[m.end():]
                if row.get("question_source"):
                    tags.append(f"question_source:{row['question_source']}")
                rubrics.append(criterion_record(desc, float(weight), tags))
            ref = row.get("reference_answer")
            record = {"id": f"{name}/{key(normalize(question))}", "domain": domain,
                      "prompt": [{"role": "user", "content": normalize(question)}], "rubrics": rubrics,
                      "extra": {"source": name}}
            if isinstance(ref, str) and ref.strip():
                record["reference"] = ref.strip()
            yield make_task(path, n, record)


medicine = types.SimpleNamespace(NAME="rar_medicine", DOMAIN="medical",
                                 convert=lambda folder: _convert(folder, "rar_medicine", "medical"))
science = types.SimpleNamespace(NAME="rar_science", DOMAIN="science",
                                convert=lambda folder: _convert(folder, "rar_science", "science"))
