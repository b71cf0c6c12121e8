"""Memory at Rubric-Mix-10k's size: semantic-index insert and query speed, and bytes on disk.

    python launch/bench_memory.py [--criteria=110606] [--sample=1024] [--queries=500] [--steps=20]

110,606 criteria is the size of Rubric-Mix-10k's seed rubrics. Their texts are synthetic (templates). Embedding all
of them with all-MiniLM-L6-v2 on a small CPU takes many minutes, so the embedder's rate is measured on `--sample`
texts, and the index is filled with precomputed vectors of the right dimension: perturbed copies of the sample's real
MiniLM embeddings, so neighbours and cosines are distributed like real criteria (pass --embed_all to embed every text
instead). Then `--steps` training steps of `--tasks_per_step` draws (J responses each) are recorded, and the memory's
files are measured. Keep other work off the machine while it runs: the load average is printed with the results.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
from absl import flags

from harnessrl_jax import cli  # noqa: E402
from synthetic import synthetic_texts  # noqa: E402

flags.DEFINE_integer("criteria", 110_606, "Criteria in the index (Rubric-Mix-10k's seed rubrics).")
flags.DEFINE_integer("per_task", 11, "Criteria per task (110,606 over ~10k tasks).")
flags.DEFINE_integer("sample", 1024, "Texts embedded with the real model to measure its rate.")
flags.DEFINE_bool("embed_all", False, "Embed every criterion with the real model instead of perturbing the sample.")
flags.DEFINE_integer("queries", 500, "Timed single queries per measurement.")
flags.DEFINE_integer("k", 4, "Top-k.")
flags.DEFINE_float("min_cosine", 0.82, "Query threshold.")
flags.DEFINE_integer("steps", 20, "Training steps recorded for the size measurement.")
flags.DEFINE_integer("tasks_per_step", 512, "Draws per recorded step.")
flags.DEFINE_integer("group", 8, "Responses per draw (J).")
flags.DEFINE_integer("response_words", 200, "Words per synthetic response.")
flags.DEFINE_list("kinds", ["flat", "ivf"], "Index kinds to time (the memory itself uses its default, ivf).")
flags.DEFINE_string("workdir", None, "Where to build the memory (default: a temporary directory, removed after).")
flags.DEFINE_integer("seed", 0, "Seed of the synthetic texts, vectors and records.")
FLAGS = flags.FLAGS

def realistic_vectors(base, n: int, rng, chunk: int = 8192):
    """n unit vectors near random rows of `base` (real embeddings), at cosine ~U(0.80, 0.97) to their row."""
    from tqdm import tqdm

    d = base.shape[1]
    out = np.empty((n, d), np.float32)
    for i in tqdm(range(0, n, chunk), desc="synthetic vectors", unit="chunk"):
        m = min(chunk, n - i)
        c = rng.uniform(0.80, 0.97, m)
        # For unit e and noise N(0, s^2 I_d), cos(e, e + noise) ~ 1 / sqrt(1 + d s^2).
        s = np.sqrt((1 / c**2 - 1) / d)[:, None]
        v = base[rng.integers(len(base), size=m)] + s * rng.standard_normal((m, d)).astype(np.float32)
        out[i:i + m] = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out


class Precomputed:
    """An embedder that looks vectors up: drives the real Memory code paths without running the model."""

    def __init__(self, name, texts, vectors):
        self.name, self.dim, self.table = name, vectors.shape[1], dict(zip(texts, vectors))

    def encode(self, texts):
        return np.stack([self.table[t] for t in texts])


def pct(xs):
    return np.percentile(np.asarray(xs) * 1e3, 50), np.percentile(np.asarray(xs) * 1e3, 95)


def timed(fn, items, desc):
    from tqdm import tqdm

    times = []
    for x in tqdm(items, desc=desc, unit="q"):
        t = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - t)
    return times


def size(path):
    return os.path.getsize(path) if os.path.exists(path) else 0


def main(argv):
    del argv
    import faiss
    from tqdm import tqdm

    from harnessrl_jax.memory import ActionRecord, DrawRecord, Embedder, Memory
    from harnessrl_jax.memory.semantic import TextIndex, unit_rows

    rng = np.random.default_rng(FLAGS.seed)
    rows = []  # (measurement, value, note)
    load0 = os.getloadavg()
    n = FLAGS.criteria
    texts = synthetic_texts(n, rng)

    # 1. The real embedder's rate, on a sample.
    import torch

    embedder = Embedder()
    sample = texts[:FLAGS.sample]
    bs = embedder.batch_size
    embedder.encode(sample[:bs])  # warm-up: the first call pays for lazy initialisation
    rates = {}
    # On a small shared machine torch's OpenMP threads can fight each other: time the default and one thread.
    for t in dict.fromkeys([torch.get_num_threads(), 1]):
        torch.set_num_threads(t)
        start = time.perf_counter()
        sample_vecs = np.concatenate([embedder.encode(sample[i:i + bs]) for i in tqdm(
            range(0, len(sample), bs), desc=f"embed sample (MiniLM, {t} threads)", unit="batch")])
        rates[t] = rate = len(sample) / (time.perf_counter() - start)
        rows.append((f"embedder: all-MiniLM-L6-v2, CPU, torch threads={t}, batch {bs}", f"{rate:,.0f} texts/s",
                     f"measured on {len(sample):,} texts; all {n:,} would take {n / rate / 60:.1f} min"))
    torch.set_num_threads(max(rates, key=rates.get))  # --embed_all runs with the faster setting

    # 2. Vectors for every criterion.
    if FLAGS.embed_all:
        vecs = np.concatenate([sample_vecs] + [embedder.encode(texts[i:i + 4096]) for i in
                                               tqdm(range(len(sample), n, 4096), desc="embed all", unit="chunk")])
        source = "real MiniLM embeddings"
    else:
        vecs = realistic_vectors(sample_vecs, n, rng)
        source = f"perturbed copies of {len(sample):,} real MiniLM embeddings"
    vecs = unit_rows(vecs)  # what the memory stores: float16-rounded unit rows
    dim = vecs.shape[1]

    # 3. Raw faiss: insert rate and single-query latency per index kind. The attributor queries with a criterion's
    # own cached vector, so queries are indexed vectors; k + 11 texts are fetched so the own task can be dropped.
    queries = rng.integers(n, size=FLAGS.queries)
    fetch = FLAGS.k + FLAGS.per_task
    exact = None
    for kind in FLAGS.kinds:
        index = TextIndex(dim, kind)
        start = time.perf_counter()
        if kind == "flat":
            for i in tqdm(range(0, n, 4096), desc="faiss add (flat)", unit="chunk"):
                index.add(np.arange(i, min(i + 4096, n)), vecs[i:i + 4096])
            what = "vectors/s"
        else:  # one add, as the seed rubrics arrive at cold start: k-means on all of them, then the lists
            print(f"faiss add ({kind}): {n:,} vectors in one add (k-means first, above {index.ivf_min:,}) ...",
                  flush=True)
            index.add(np.arange(n), vecs)
            what = (f"vectors/s incl. k-means ({index.index.nlist} lists, nprobe {index.index.nprobe})"
                    if index.is_ivf else f"vectors/s (exact: fewer than ivf_min = {index.ivf_min:,})")
        rows.append((f"faiss {kind}: insert {n:,} x {dim}", f"{n / (time.perf_counter() - start):,.0f} {what}",
                     source))
        index.search(vecs[:1], fetch)
        p50, p95 = pct(timed(lambda q: index.search(vecs[q:q + 1], fetch), queries, f"faiss top-{fetch} ({kind})"))
        rows.append((f"faiss {kind}: one query, top-{FLAGS.k} (+{FLAGS.per_task} own)",
                     f"p50 {p50:.2f} ms, p95 {p95:.2f} ms", "1 OpenMP thread (the memory's setting for < 20 queries)"))
        if kind == "flat":
            faiss.omp_set_num_threads(index.threads)
            p50_all, _ = pct(timed(lambda q: index.index.search(vecs[q:q + 1], fetch), queries[:100],
                                   f"faiss top-{fetch} (flat, {index.threads} threads)"))
            rows.append((f"faiss flat: one query, {index.threads} OpenMP threads", f"p50 {p50_all:.2f} ms",
                         "why single queries run on one thread"))
            exact = index.search(vecs[queries], fetch)
        batch = vecs[rng.integers(n, size=FLAGS.tasks_per_step * FLAGS.per_task)]
        start = time.perf_counter()
        index.search(batch, fetch)
        took = time.perf_counter() - start
        rows.append((f"faiss {kind}: batch of {len(batch):,} queries", f"{took:.2f} s",
                     f"{len(batch) / took:,.0f} queries/s: every criterion of one step ({FLAGS.tasks_per_step} tasks)"))
        if kind != "flat" and exact is not None:
            got = index.search(vecs[queries], fetch)
            want = [{i for s, i in zip(ss, ii) if s >= FLAGS.min_cosine} for ss, ii in zip(*exact)]
            found = sum(len(w & set(g)) for w, g in zip(want, got[1]))
            rows.append((f"faiss {kind}: recall vs exact flat", f"{found / max(1, sum(map(len, want))):.4f}",
                         f"of the {sum(map(len, want)):,} hits >= {FLAGS.min_cosine} in the exact top-{fetch} "
                         f"of {len(queries)} queries"))
        # New wordings arriving during training (rewrites, creates): added to the trained lists, no k-means.
        more = unit_rows(realistic_vectors(sample_vecs, 10_000, rng))
        start = time.perf_counter()
        for i in range(0, len(more), 512):
            index.add(np.arange(n + i, n + min(i + 512, len(more))), more[i:i + 512])
        rows.append((f"faiss {kind}: insert 10,000 more at {n:,}, 512 per add",
                     f"{len(more) / (time.perf_counter() - start):,.0f} vectors/s", "incremental, as during training"))
        index = None  # frees this kind's index before the next is built

    # 4. The real memory: criteria through SQLite + faiss, recorded steps, end-to-end queries, files on disk.
    workdir = FLAGS.workdir or tempfile.mkdtemp(prefix="bench_memory_")
    shutil.rmtree(workdir, ignore_errors=True)
    mem = Memory.open(workdir, embedder=Precomputed("precomputed-minilm", texts, vecs))
    tasks = [f"task-{i // FLAGS.per_task:05d}" for i in range(n)]
    print(f"memory.add_criteria: {n:,} seed criteria in one transaction, then the index ...", flush=True)
    start = time.perf_counter()
    mem.add_criteria([(tasks[j], f"c{j % FLAGS.per_task}", texts[j]) for j in range(n)], step=0)
    rows.append((f"memory: add_criteria, {n:,} seed criteria", f"{n / (time.perf_counter() - start):,.0f} criteria/s",
                 "SQLite rows + float16 vector cache + faiss" + (" (k-means)" if mem.semantic.index.is_ivf else "")))

    mem.save()
    base_bytes = size(os.path.join(workdir, "memory.sqlite"))
    n_tasks = len(set(tasks))
    first = {t: i for i, t in reversed(list(enumerate(tasks)))}
    # Responses: pseudo-words with Zipf frequencies, which zlib compresses about as well as English prose.
    letters = np.array(list("etaoinshrdlucmfwypvbgkjqxz"))
    vocab = ["".join(letters[np.minimum(rng.geometric(0.25, rng.integers(2, 9)) - 1, 25)]) for _ in range(20_000)]
    zipf = 1.0 / np.arange(1, len(vocab) + 1) ** 1.05
    zipf /= zipf.sum()
    step_times = []
    for step in tqdm(range(1, FLAGS.steps + 1), desc="memory.append_step", unit="step"):
        drawn = rng.integers(n_tasks, size=FLAGS.tasks_per_step)
        records = []
        for ti in drawn:
            task = f"task-{ti:05d}"
            lo = first[task]
            k = min(FLAGS.per_task, n - lo)
            s = (rng.random((k, FLAGS.group)) < rng.random((k, 1))).astype(np.float64)
            responses = tuple(" ".join(vocab[w] for w in rng.choice(len(vocab), FLAGS.response_words, p=zipf))
                              for _ in range(FLAGS.group))
            criteria = {f"c{c}": {"text": texts[lo + c], "points": 1.0} for c in range(k)}
            records.append(DrawRecord(
                step, task, tuple(criteria), tuple(texts[lo:lo + k]), responses, s, s.mean(0) * 100,
                harness={"level": 0, "guidance": {}, "criteria": criteria},
                labels={c: "agree" for c in criteria},
                actions=(ActionRecord("guidance", "add_field", "rejected", label="blind", criterion_ids=("c0",),
                                      deltas={"delta_g": 4.2}, changes={"guidance.criterion": [None, "hint"]}),),
                dynamics={"u": 1.0, "level": 0}))
        start = time.perf_counter()
        mem.append_step(step, records)
        step_times.append(time.perf_counter() - start)
    draws = FLAGS.steps * FLAGS.tasks_per_step
    rows.append((f"memory: append_step ({FLAGS.tasks_per_step} draws, J={FLAGS.group})",
                 f"median {np.median(step_times):.2f} s/step",
                 f"{FLAGS.tasks_per_step / np.median(step_times):,.0f} draws/s, one fsync'd transaction per step"))

    for examples in (0, 2):
        p50, p95 = pct(timed(lambda q: mem.query(texts[q], k=FLAGS.k, min_cosine=FLAGS.min_cosine,
                                                 exclude_task=tasks[q], examples=examples),
                             queries, f"memory.query (examples={examples})"))
        rows.append((f"memory.query top-{FLAGS.k}, exclude own task, examples={examples}",
                     f"p50 {p50:.2f} ms, p95 {p95:.2f} ms",
                     "index + SQLite" + (" + donor responses decoded" if examples else "")))
    hits = [len(mem.query(texts[q], exclude_task=tasks[q], examples=0)) for q in queries[:200]]
    rows.append((f"hits per query at cosine >= {FLAGS.min_cosine}", f"mean {np.mean(hits):.2f}",
                 f"{np.mean(np.asarray(hits) > 0):.0%} of queries find a donor"))

    start = time.perf_counter()
    pos = mem.save()
    save_s = time.perf_counter() - start
    mem.close()
    db, fx = os.path.join(workdir, "memory.sqlite"), os.path.join(workdir, mem.semantic.filename())
    rows.append(("memory.save (WAL checkpoint + index file)", f"{save_s:.2f} s", f"positions {pos}"))
    rows.append(("on disk: memory.sqlite", f"{size(db) / 2**20:,.1f} MiB",
                 f"{base_bytes / 2**20:,.1f} MiB for {n:,} criteria (incl. the {n * dim * 2 / 2**20:.0f} MiB float16 "
                 f"vector cache) + {(size(db) - base_bytes) / draws / 1024:.1f} KiB per draw ({draws:,} draws, J="
                 f"{FLAGS.group}, {FLAGS.response_words}-word responses)"))
    rows.append((f"on disk: {os.path.basename(fx)}", f"{size(fx) / 2**20:,.1f} MiB",
                 f"{n:,} x {dim} float32 + ids (+ centroids)"))
    for name, setup in (("reopen (index file loaded)", lambda: None), ("reopen (index file deleted: rebuilt)",
                                                                       lambda: os.remove(fx))):
        setup()
        start = time.perf_counter()
        m = Memory.open(workdir, embedder=Precomputed("precomputed-minilm", [], vecs[:1]))
        rows.append((f"memory: {name}", f"{time.perf_counter() - start:.2f} s", f"sync: {m.semantic.synced}"))
        m.close()
    if not FLAGS.workdir:
        shutil.rmtree(workdir, ignore_errors=True)

    load1 = os.getloadavg()
    width = [max(len(r[i]) for r in rows) for i in range(2)]
    print(f"\nmemory benchmark: {n:,} criteria, dim {dim}, {os.cpu_count()} CPUs, faiss {faiss.__version__}; "
          f"load average {load0[0]:.1f} at start, {load1[0]:.1f} at end")
    print(f"{'measurement':<{width[0]}} | {'value':<{width[1]}} | note")
    print(f"{'-' * width[0]}-+-{'-' * width[1]}-+-----")
    for a, b, c in rows:
        print(f"{a:<{width[0]}} | {b:<{width[1]}} | {c}")


if __name__ == "__main__":
    cli.run(main)
