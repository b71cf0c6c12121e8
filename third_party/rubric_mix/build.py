"""Mixing Rubric-Mix-10k: per domain, the held-out split then the training sample, drawn in
turn from each of the domain's sources (equal shares; a source that runs out leaves its share to the others)
in an order fixed by the seed, skipping exact-duplicate prompts and near-duplicates (cosine >= threshold
under the memory's embedder) of anything already taken, so the splits are deduplicated and disjoint by
construction. `statistics` measures the corpus against the paper's numbers."""

from __future__ import annotations

import dataclasses
import random
import re
from typing import Callable, Mapping, Sequence

import numpy as np

from harnessrl_jax.rubric.schema import Task

# The paper's composition and corpus statistics.
TRAIN_SIZES = {"medical": 3000, "science": 2000, "writing": 1200, "roleplay": 1200, "instruction_following": 1200}
HELDOUT_PER_DOMAIN = 250
DOMAIN_SOURCES = {
    "medical": ("healthbench", "rar_medicine", "rubrichub"),
    "science": ("researchqa", "rar_science", "rubrichub"),
    "writing": ("longwriter_zero",),
    "roleplay": ("rubrichub",),
    "instruction_following": ("rubrichub",),
}
PAPER = {"train_tasks": 8600, "heldout_per_domain": 250, "criteria_total": 110606, "criteria_per_task": 12.9,
         "criteria_per_task/roleplay": 26.5, "criteria_per_task/instruction_following": 3.6,
         "negative_share": 0.107, "reference_share": 0.35}


@dataclasses.dataclass
class Selection:
    train: list[Task]
    heldout: list[Task]
    counts: dict[str, int]


def prompt_key(task: Task) -> str:
    """The prompt as compared for exact duplicates: all messages, lowercased, whitespace collapsed."""
    return re.sub(r"\s+", " ", "\n".join(m["content"] for m in task.prompt).lower()).strip()


class _Dedup:
    def __init__(self, embed: Callable[[Sequence[str]], np.ndarray] | None, threshold: float):
        self.embed, self.threshold = embed, threshold
        self.keys: set[str] = set()
        self.vectors = np.zeros((0, 0), np.float32)
        self.counts = {"exact_duplicates": 0, "near_duplicates": 0}

    def take(self, task: Task, vector: np.ndarray | None) -> bool:
        k = prompt_key(task)
        if k in self.keys:
            self.counts["exact_duplicates"] += 1
            return False
        if vector is not None:
            if self.vectors.size and float((self.vectors @ vector).max()) >= self.threshold:
                self.counts["near_duplicates"] += 1
                return False
            self.vectors = vector[None] if not self.vectors.size else np.vstack([self.vectors, vector])
        self.keys.add(k)
        return True


class _Stream:
    """One source's tasks of one domain in seeded order, embedded lazily in chunks."""

    def __init__(self, tasks: list[Task], rng: random.Random, embed, chunk: int = 256):
        self.tasks = list(tasks)
        rng.shuffle(self.tasks)
        self.embed, self.chunk, self.pos, self.vecs = embed, chunk, 0, None

    def next(self):
        if self.pos >= len(self.tasks):
            return None
        if self.embed is not None and (self.vecs is None or self.pos % self.chunk == 0):
            batch = self.tasks[self.pos:self.pos + self.chunk]
            self.vecs = np.asarray(self.embed([prompt_key(t) for t in batch]), np.float32)
        task = self.tasks[self.pos]
        vec = None if self.embed is None else self.vecs[self.pos % self.chunk]
        self.pos += 1
        return task, vec


def select(pools: Mapping[str, Mapping[str, list[Task]]], *, train_sizes: Mapping[str, int] = TRAIN_SIZES,
           heldout_per_domain: int = HELDOUT_PER_DOMAIN, seed: int = 0,
           embed: Callable[[Sequence[str]], np.ndarray] | None = None, threshold: float = 0.95) -> Selection:
    """The held-out and training tasks from pools[domain][source] (module docstring)."""
    dedup = _Dedup(embed, threshold)
    train, heldout, counts = [], [], {}
    for domain in train_sizes:
        sources = [s for s in DOMAIN_SOURCES.get(domain, ()) if pools.get(domain, {}).get(s)]
        rng = random.Random(f"{seed}:{domain}")
        streams = [_Stream(pools[domain][s], rng, embed) for s in sources]
        for split, want, out in (("heldout", heldout_per_domain, heldout), ("train", train_sizes[domain], train)):
            got = 0
            live = list(range(len(streams)))
            while got < want and live:
                for i in list(live):
                    if got >= want:
                        break
                    while True:
                        nxt = streams[i].next()
                        if nxt is None:
                            live.remove(i)
                            break
                        if dedup.take(*nxt):
                            out.append(nxt[0])
                            got += 1
                            break
            counts[f"{split}/{domain}"] = got
    counts.update(dedup.counts)
    return Selection(train, heldout, counts)


def statistics(train: Sequence[Task], heldout: Sequence[Task]) -> dict[str, float]:
    """The paper's corpus numbers measured on a build (training tasks; held-out counts per domain)."""
    out: dict[str, float] = {"train_tasks": len(train), "heldout_tasks": len(heldout)}
    crit = [c for t in train for c in t.criteria]
    out["criteria_total"] = len(crit)
    out["criteria_per_task"] = len(crit) / len(train) if train else float("nan")
    out["negative_share"] = sum(c.points < 0 for c in crit) / len(crit) if crit else float("nan")
    out["reference_share"] = sum(t.reference is not None for t in train) / len(train) if train else float("nan")
    out["rule_share"] = sum(c.verifier == "rule" for c in crit) / len(crit) if crit else float("nan")
    for domain in sorted({t.domain for t in list(train) + list(heldout)}):
        ts = [t for t in train if t.domain == domain]
        out[f"train/{domain}"] = len(ts)
        out[f"heldout/{domain}"] = sum(t.domain == domain for t in heldout)
        out[f"criteria_per_task/{domain}"] = sum(len(t.criteria) for t in ts) / len(ts) if ts else float("nan")
    return out


def format_statistics(stats: Mapping[str, float], counts: Mapping[str, int] | None = None) -> str:
    """A plain-text table of the build's statistics next to the paper's."""
    rows = [("train tasks", stats["train_tasks"], PAPER["train_tasks"])]
    for d in TRAIN_SIZES:
        rows.append((f"  train {d}", stats.get(f"train/{d}", 0), TRAIN_SIZES[d]))
    for d in TRAIN_SIZES:
        rows.append((f"  held-out {d}", stats.get(f"heldout/{d}", 0), PAPER["heldout_per_domain"]))
    rows += [("seed criteria", stats["criteria_total"], PAPER["criteria_total"]),
             ("criteria per task", stats["criteria_per_task"], PAPER["criteria_per_task"]),
             ("  role-play", stats.get("criteria_per_task/roleplay", float("nan")),
              PAPER["criteria_per_task/roleplay"]),
             ("  instruction following", stats.get("criteria_per_task/instruction_following", float("nan")),
              PAPER["criteria_per_task/instruction_following"]),
             ("negative-weight criteria", stats["negative_share"], PAPER["negative_share"]),
             ("tasks with a reference", stats["reference_share"], PAPER["reference_share"])]

    def fmt(v):
        if isinstance(v, float) and v != v:
            return "n/a"
        if isinstance(v, float) and v < 1:
            return f"{100 * v:.1f}%"
        return f"{v:,.1f}" if isinstance(v, float) and not float(v).is_integer() else f"{int(v):,}"

    lines = [f"{'statistic':<34}{'this build':>12}{'paper':>12}"]
    lines += [f"{name:<34}{fmt(v):>12}{fmt(p):>12}" for name, v, p in rows]
    if counts:
        lines.append("skipped: " + ", ".join(f"{k} {v}" for k, v in counts.items() if v and "/" not in k))
    return "\n".join(lines)
