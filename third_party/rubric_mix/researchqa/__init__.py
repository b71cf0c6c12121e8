"""ResearchQA (realliyifei/ResearchQA) -> science tasks.

Release layout: JSON arrays (`full.json`, `test.json`, `valid.json`) of {id, general_domain, subdomain, field,
query, date, rubric: [{rubric_item, type: [...], citation_metadata?}]}. Each rubric item, a yes/no question about
the response, becomes a statement by the rule RuscaRL's converter applies ("Does the response X?" -> "The response
X.", "Does it X?" -> "It X.", "Is there X?" -> "There is X."; otherwise the question mark becomes a full stop),
1 point each (the items carry no weights), tags type:<t> per type and source:researchqa. Records with the
same id in several files (full.json holds test and valid) are converted once.
"""

from __future__ import annotations

import os
from typing import Iterator

from harnessrl_jax.rubric.schema import Task
from third_party.rubric_mix.common import ConversionError, criterion_record, make_task, need, normalize, rows, \
    source_files

NAME = "researchqa"
DOMAIN = "science"


def to_statement(question: str) -> str:
    """A rubric question as the statement a judge checks (module docstring)."""
    q = normalize(question)
    for lead, repl in (("Does the response ", "The response "), ("Does the explanation ", "The explanation "),
                       ("Does it ", "It "), ("Is there ", "There is ")):
        if q.startswith(lead):
            q = repl + q[len(lead):]
            break
    q = q[:-1] if q.endswith("?") else q
    q = q[:1].upper() + q[1:]
    return q if q.endswith(".") else q + "."


def convert(folder: str) -> Iterator[Task]:
    seen = set()
    for path in source_files(folder, (".json",)):
        for n, row in rows(path):
            rid = need(path, n, row, "id")
            if rid in seen:
                continue
            seen.add(rid)
            query = need(path, n, row, "query")
            rubrics = []
            for i, item in enumerate(need(path, n, row, "rubric", list)):
                if not isinstance(item, dict) or not isinstance(item.get("rubric_item"), str):
                    raise ConversionError(path, n, f"rubric[{i}].rubric_item", "missing or not a string")
                types_ = item.get("type") or []
                if isinstance(types_, str):
                    types_ = [types_]
                rubrics.append(criterion_record(to_statement(item["rubric_item"]), 1.0,
                                                ["source:researchqa"] + [f"type:{t}" for t in types_]))
            yield make_task(path, n, {"id": f"{NAME}/{rid}", "domain": DOMAIN,
                                      "prompt": [{"role": "user", "content": normalize(query)}], "rubrics": rubrics,
                                      "extra": {"source": NAME, "field": row.get("field"),
                                                "file": os.path.basename(path)}})
