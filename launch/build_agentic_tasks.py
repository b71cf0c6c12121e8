"""Writes the shipped workspace tasks (harnessrl_jax/data/agentic/tasks.jsonl), deterministically.

    python launch/build_agentic_tasks.py [--out=FILE]

Six kinds (create, copy, append, replace, count, lookup), 54 tasks each from a fixed seed: 324 tasks, 42 per kind
for training and 12 held out (252 / 72). Each task checks the final workspace or the answer given with `done`.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags, logging  # noqa: E402

from harnessrl_jax.agentic.tasks import TASKS_PATH, record_task  # noqa: E402

flags.DEFINE_string("out", TASKS_PATH, "Where to write the JSONL file.")
FLAGS = flags.FLAGS

WORDS = ("apple", "river", "stone", "cloud", "maple", "tiger", "piano", "lemon", "ocean", "candle", "forest",
         "silver", "garden", "rocket", "violet", "harbor", "meadow", "pepper", "falcon", "marble", "winter", "copper",
         "orange", "island", "planet", "shadow", "thunder", "willow", "breeze", "castle")
DIRS = ("notes", "docs", "data", "logs", "src")
KINDS = ("create", "copy", "append", "replace", "count", "lookup")
PER_KIND, HELDOUT_PER_KIND = 54, 12


def check(rule: str, says: str, points: float = 1.0, **kwargs) -> dict:
    return {"rule": rule, "kwargs": kwargs, "points": points, "text": says}


def make(kind: str, n: int, rng: np.random.Generator) -> dict:
    """Task n of `kind`."""
    w = [str(x) for x in rng.choice(WORDS, 4, replace=False)]
    d = str(rng.choice(DIRS))
    path = f"{d}/{w[0]}.txt"
    if kind == "create":
        files = {f"{d}/readme.txt": w[2]}
        return dict(instruction=f"Create the file {path} containing the word {w[1]}.", files=files,
                    checks=[check("workspace:file_equals", f"{path} holds {w[1]}", path=path, text=w[1])])
    if kind == "copy":
        dst = f"{d}/{w[1]}.txt"
        return dict(instruction=f"Copy the text of {path} into a new file {dst}.", files={path: f"{w[2]} {w[3]}"},
                    checks=[check("workspace:file_equals", f"{dst} holds the text of {path}", path=dst,
                                  text=f"{w[2]} {w[3]}"),
                            check("workspace:file_equals", f"{path} is unchanged", 0.5, path=path,
                                  text=f"{w[2]} {w[3]}")])
    if kind == "append":
        return dict(instruction=f"Append the line {w[1]} to {path}.", files={path: f"{w[2]}\n{w[3]}"},
                    checks=[check("workspace:file_equals", f"{path} ends with {w[1]}", path=path,
                                  text=f"{w[2]}\n{w[3]}\n{w[1]}")])
    if kind == "replace":
        return dict(instruction=f"In {path}, replace the word {w[1]} with {w[2]}.", files={path: f"{w[3]} {w[1]}"},
                    checks=[check("workspace:file_contains", f"{path} says {w[2]}", path=path, text=w[2]),
                            check("workspace:file_absent_text", f"{path} no longer says {w[1]}", path=path, text=w[1])])
    if kind == "count":
        k = int(rng.integers(1, 5))
        files = {f"{d}/{x}.txt": "" for x in rng.choice(WORDS, k, replace=False)}
        other = str(rng.choice([x for x in DIRS if x != d]))
        files[f"{other}/{w[0]}.txt"] = w[1]
        return dict(instruction=f"How many files are in {d}? Answer with done and the number.", files=files,
                    checks=[check("workspace:answer_equals", f"the answer is {k}", text=str(k))])
    if kind == "lookup":
        keys = [str(x) for x in rng.choice(WORDS, 3, replace=False)]
        vals = [str(int(x)) for x in rng.integers(10, 99, 3)]
        i = int(rng.integers(0, 3))
        files = {f"{d}/config.txt": "\n".join(f"{k}: {v}" for k, v in zip(keys, vals))}
        return dict(instruction=f"What is the value of {keys[i]} in {d}/config.txt? Answer with done and the value.",
                    files=files, checks=[check("workspace:answer_equals", f"the answer is {vals[i]}", text=vals[i])])
    raise ValueError(kind)


def build() -> list[dict]:
    """Every record, in a fixed order (the same file on every run)."""
    out = []
    for k, kind in enumerate(KINDS):
        rng = np.random.default_rng((2026, k))
        for n in range(PER_KIND):
            record = {"id": f"{kind}-{n:02d}", "kind": kind,
                      "split": "heldout" if n >= PER_KIND - HELDOUT_PER_KIND else "train", **make(kind, n, rng)}
            record_task(record, record["id"])  # every record loads
            out.append(record)
    return out


def main(argv):
    del argv
    records = build()
    os.makedirs(os.path.dirname(FLAGS.out), exist_ok=True)
    with open(FLAGS.out, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r, sort_keys=True) + "\n" for r in records)
    logging.info("wrote %d tasks (%d held out) to %s", len(records),
                 sum(r["split"] == "heldout" for r in records), FLAGS.out)


if __name__ == "__main__":
    app.run(main)
