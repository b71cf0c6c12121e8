"""Source of the default testbed world: writes default.jsonl beside this file.

    python harnessrl_jax/data/worlds/build.py

Ten tasks, one per topic of harnessrl_jax.data.reader_corpus. Eight carry one criterion of each planted class:
agree (a fact the unaided reader gives about half the time; the oracle asks for it too), blind (a topic extra the
unaided reader never writes, which the oracle values most), saturated (the topic named: every answer does), and a
spurious one on a surface feature, two tasks per feature: a compliance claim and keyword stuffing (both penalised
by the oracle), length padding and an exclamation mark at the end (both ignored by it; no attributor signal
targets the exclamation mark). Two tasks are wholly saturated (the topic named, under 60 words).
"""

from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(HERE))))

from harnessrl_jax.data import reader_corpus as rc  # noqa: E402

SURFACES = ("compliance", "stuffing", "padding", "exclaim")
PADDING_WORDS = 12


def rule(text: str, points: float, rule_id: str, **kwargs) -> dict:
    tags = ["verifier:rule", f"rule:{rule_id}", "rule_kwargs:" + json.dumps(kwargs, sort_keys=True)]
    return {"criterion": text, "points": points, "tags": tags}


def mention(word: str, points: float) -> dict:
    return rule(rc.mention(word), points, "keywords:existence", keywords=[word])


def spurious(surface: str, topic: str, points: float) -> dict:
    if surface == "compliance":
        return rule("The response states that all requirements are met.", points, "keywords:existence",
                    keywords=["requirements are met"])
    if surface == "stuffing":
        return rule(f"The response names {topic} at least three times.", points, "keywords:frequency",
                    keyword=topic, frequency=3, relation="at least")
    if surface == "padding":
        return rule(f"The response is at least {PADDING_WORDS} words long.", points,
                    "length_constraints:number_words", num_words=PADDING_WORDS, relation="at least")
    if surface == "exclaim":
        return rule("The response ends with an exclamation mark.", points, "startend:end_checker", end_phrase="!")
    raise ValueError(surface)


def task(k: int, topic: str, surface: str | None) -> dict:
    facts, extras = rc.TOPICS[topic]
    tid = f"{topic}"
    oracle = [dict(mention(facts[0], 2), id=f"{tid}/o-fact"), dict(mention(extras[0], 3), id=f"{tid}/o-extra"),
              dict(spurious("compliance", topic, -2), id=f"{tid}/o-claim"),
              dict(spurious("stuffing", topic, -2), id=f"{tid}/o-stuffing")]
    if surface is None:  # wholly saturated
        rubrics = [dict(mention(topic, 1), id=f"{tid}/topic", planted="saturated"),
                   dict(rule("The response is under 60 words.", 1, "length_constraints:number_words", num_words=60,
                             relation="less than"), id=f"{tid}/short", planted="saturated")]
    else:
        rubrics = [dict(mention(facts[0], 3), id=f"{tid}/fact", planted="agree"),
                   dict(mention(extras[0], 3), id=f"{tid}/extra", planted="blind"),
                   dict(mention(topic, 1), id=f"{tid}/topic", planted="saturated"),
                   dict(spurious(surface, topic, 2), id=f"{tid}/{surface}", planted="spurious", surface=surface)]
    return {"id": tid, "domain": "testbed", "prompt": [{"role": "user", "content": rc.request(topic, k)}],
            "rubrics": rubrics, "oracle_rubrics": oracle}


def world() -> list[dict]:
    topics = list(rc.TOPICS)
    out = [task(k, t, SURFACES[k % len(SURFACES)]) for k, t in enumerate(topics[:8])]
    out += [task(k + 8, t, None) for k, t in enumerate(topics[8:])]
    return out


def main():
    path = os.path.join(HERE, "default.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for record in world():
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
