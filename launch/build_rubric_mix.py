"""Builds Rubric-Mix-10k from local copies of its public sources: train.jsonl and heldout.jsonl.

    python launch/build_rubric_mix.py --sources_dir=DATA/rubric_mix_sources --out=rubric_mix_10k
    python launch/build_rubric_mix.py --sources_dir=... --generate_rubrics --generator_base_url=http://HOST/v1 \
        --generator_model=gemma-4-31b-it          # once, before the build: LongWriter-Zero's seed rubrics

--sources_dir holds one folder per source (healthbench, rar_medicine, rar_science, researchqa, rubrichub,
longwriter_zero), each with that source's released files (third_party/rubric_mix/<source>/README.md says which).
Every record is converted (an unknown layout stops the build naming the file, line and field), tasks without a
positive criterion are dropped, and third_party.rubric_mix.build draws per domain the held-out split and then the
training sample, deduplicated (exact prompts, and near-duplicates at cosine >= --dedup_threshold under
--embedder; '' for exact only). Writes OUT/train.jsonl, OUT/heldout.jsonl and OUT/stats.json only once all of it
succeeded, and prints the corpus statistics against the paper's (8,600 train tasks, 250 held-out per domain, 12.9
criteria per task, 10.7% negative weights, 35% with a reference).
"""

from __future__ import annotations

import json
import os
import sys

from absl import app, flags

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from harnessrl_jax import cli  # noqa: E402
from harnessrl_jax.errors import UserError  # noqa: E402

flags.DEFINE_string("sources_dir", None, "Folder with one sub-folder of released files per source.")
flags.DEFINE_string("out", "rubric_mix_10k", "Output folder of train.jsonl, heldout.jsonl and stats.json.")
flags.DEFINE_list("sources", [], "Sources to read (default: all six).")
flags.DEFINE_list("train_sizes", [], "DOMAIN=N overrides of the training sizes (default: the paper's).")
flags.DEFINE_integer("heldout_per_domain", 250, "Held-out tasks per domain.")
flags.DEFINE_integer("seed", 0, "Seed of the draw.")
flags.DEFINE_string("embedder", "default", "Near-duplicate embedder: the memory's ('default'), a local "
                    "sentence-transformers path, or '' (exact duplicates only).")
flags.DEFINE_float("dedup_threshold", 0.95, "Cosine at or above which two prompts are near-duplicates.")
flags.DEFINE_bool("generate_rubrics", False, "Generate LongWriter-Zero's seed rubrics (then exit).")
flags.DEFINE_enum("generator_kind", "openai", ["openai", "anthropic"], "The generator model's API.")
flags.DEFINE_string("generator_base_url", "", "The generator's server (OpenAI-compatible: with /v1).")
flags.DEFINE_string("generator_model", "", "The generator model (the evolver/judge model).")
flags.mark_flags_as_required(["sources_dir"])
FLAGS = flags.FLAGS


def convert_all(sources_dir: str, names) -> tuple[dict, dict]:
    """pools[domain][source] of converted tasks with a positive criterion, and per-source counts."""
    from third_party.rubric_mix import SOURCES

    pools, counts = {}, {}
    for name in names:
        module = SOURCES[name]
        folder = os.path.join(sources_dir, name)
        stats: dict = {}
        kwargs = {"stats": stats} if name in ("rubrichub", "longwriter_zero") else {}
        n = dropped = 0
        for task in module.convert(folder, **kwargs):
            n += 1
            if not any(c.points > 0 for c in task.criteria):
                dropped += 1
                continue
            pools.setdefault(task.domain, {}).setdefault(name, []).append(task)
        counts[name] = {"converted": n, "no_positive_criterion": dropped, **stats}
    return pools, counts


def build(sources_dir: str, out: str, *, names=None, train_sizes=None, heldout_per_domain: int = 250, seed: int = 0,
          embedder: str = "default", threshold: float = 0.95) -> dict:
    """Converts, selects and writes the build; returns {stats, counts}."""
    from harnessrl_jax.rubric.schema import dump_tasks
    from third_party.rubric_mix import SOURCES
    from third_party.rubric_mix import build as mix

    names = list(names or SOURCES)
    unknown = sorted(set(names) - set(SOURCES))
    if unknown:
        raise UserError(f"--sources: unknown sources {unknown}; known: {sorted(SOURCES)}")
    pools, counts = convert_all(sources_dir, names)
    embed = None
    if embedder:
        from harnessrl_jax.memory import Embedder

        embed = Embedder(embedder if embedder != "default" else "all-MiniLM-L6-v2").encode
    sel = mix.select(pools, train_sizes=train_sizes or mix.TRAIN_SIZES, heldout_per_domain=heldout_per_domain,
                     seed=seed, embed=embed, threshold=threshold)
    stats = mix.statistics(sel.train, sel.heldout)
    os.makedirs(out, exist_ok=True)
    tmp = {name: os.path.join(out, f".{name}.building") for name in ("train.jsonl", "heldout.jsonl")}
    dump_tasks(sel.train, tmp["train.jsonl"])
    dump_tasks(sel.heldout, tmp["heldout.jsonl"])
    for name, path in tmp.items():
        os.replace(path, os.path.join(out, name))
    report = {"stats": stats, "paper": mix.PAPER, "selection": sel.counts, "sources": counts, "seed": seed,
              "embedder": embedder, "dedup_threshold": threshold}
    with open(os.path.join(out, "stats.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    return report


def main(argv):
    del argv
    from third_party.rubric_mix import build as mix

    if FLAGS.generate_rubrics:
        from harnessrl_jax.eval.oracle import make_client
        from third_party.rubric_mix import longwriter_zero

        client = make_client(FLAGS.generator_kind, FLAGS.generator_model, base_url=FLAGS.generator_base_url or None,
                             max_tokens=2048)
        try:
            print(longwriter_zero.generate_rubrics(os.path.join(FLAGS.sources_dir, "longwriter_zero"), client))
        finally:
            client.close()
        return
    sizes = dict(mix.TRAIN_SIZES)
    for part in FLAGS.train_sizes:
        domain, _, n = part.partition("=")
        if domain not in sizes:
            raise app.UsageError(f"--train_sizes: unknown domain {domain!r}; known: {sorted(sizes)}")
        sizes[domain] = int(n)
    report = build(FLAGS.sources_dir, FLAGS.out, names=FLAGS.sources or None, train_sizes=sizes,
                   heldout_per_domain=FLAGS.heldout_per_domain, seed=FLAGS.seed, embedder=FLAGS.embedder,
                   threshold=FLAGS.dedup_threshold)
    print(mix.format_statistics(report["stats"], report["selection"]))
    for name, c in report["sources"].items():
        print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in c.items()))
    print(f"written: {os.path.join(FLAGS.out, 'train.jsonl')}, {os.path.join(FLAGS.out, 'heldout.jsonl')}")


if __name__ == "__main__":
    cli.run(main)
