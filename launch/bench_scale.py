"""One paper-scale step's host side: everything a HarnessRL step does on the host after judging, against a memory of
0, 64,000 and 256,000 draws (step 0, 125 and 500 of 512 tasks per step).

    python launch/bench_scale.py [--memories=0,64000,256000] [--tasks=10000] [--tasks_per_step=512] [--group=8]
        [--criteria=13] [--response_words=1500] [--repeats=3] [--workdir=DIR]

It runs the real `Stepper.step` of experiments/rubric_mix_4b.py (method harnessrl, the rule proposer, no LLM check)
on stand-ins for what is not the host's: an engine that returns synthetic responses of `--response_words` words
(1,500 words is about the paper's 2,048-token cap), a judge that returns synthetic verdicts (the judge client's own
time is launch/bench_judge.py's) and a train step that does nothing (packing the batch still runs). Their time is
measured and left out of the host side. Each stage's time is exclusive (what it does itself, not the stages it
calls). The step's garbage collection (stages.collection_after) is a row of its own; one full collection after the
step, which Python's automatic collector runs between steps every few steps, is printed for reference. The harness
is the seed harness at every memory size, so only the memory grows.

The memory is built by `Memory.append_step` (one transaction per step) from synthetic draws: latent per-criterion
pass rates (some blind, some saturated), recorded labels and one action record per interface. Criterion texts are
embedded by a cheap deterministic stand-in (hashed bag of words, 384 dimensions), as the real embedder would
dominate the build; the real all-MiniLM-L6-v2 is timed on `--embed_sample` texts and its time for the texts one step
embeds is extrapolated (the paper's bge-base-en-v1.5 is about 5x its size). `--recorded_words` makes the recorded
draws shorter than the timed step's to build a large memory faster (the time index then decodes fewer bytes per
draw than at paper length: scale its row by the bytes); `--workdir` with `--reuse` times memories built before.
Keep other work off the machine: the load average is printed with the tables.
"""

from __future__ import annotations

import concurrent.futures
import gc
import json
import os
import shutil
import sys
import tempfile
import time
import zlib
from collections import defaultdict

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
from absl import flags, logging  # noqa: E402

from harnessrl_jax import cli  # noqa: E402
from synthetic import DOMAINS, ZipfText, synthetic_texts  # noqa: E402

flags.DEFINE_list("memories", ["0", "64000", "256000"], "Memory sizes (draws recorded before the timed step).")
flags.DEFINE_integer("tasks", 10_000, "Training tasks (Rubric-Mix-10k).")
flags.DEFINE_integer("tasks_per_step", 512, "Tasks drawn per step.")
flags.DEFINE_integer("group", 8, "J: responses per task.")
flags.DEFINE_integer("criteria", 13, "Criteria per task (the paper's 12.9).")
flags.DEFINE_integer("response_words", 1500, "Words per synthetic response (1,500: about 2,048 tokens).")
flags.DEFINE_integer("recorded_words", 0, "Words per response of the draws in the memory (0: --response_words).")
flags.DEFINE_string("results", "", "A JSON file the timings are added to; the table shows every size in it.")
flags.DEFINE_bool("reuse", False, "Reuse the memories an earlier run built in --workdir.")
flags.DEFINE_integer("repeats", 3, "Timed steps per memory size, each from the same memory (0: only build).")
flags.DEFINE_integer("embed_sample", 256, "Texts the real embedder is timed on (0: skip).")
flags.DEFINE_float("budget_s", 0.05 * 147, "The host side's target: 5% of the paper's 147 s step.")
flags.DEFINE_string("workdir", None, "Where to build the memory (default: a temporary directory, removed after).")
flags.DEFINE_integer("seed", 0, "Seed of the synthetic tasks, draws and verdicts.")
FLAGS = flags.FLAGS

STAND_INS = ("engine (stand-in)", "judge (stand-in)", "embedder (stand-in)", "train step (stand-in)")
RETRIEVAL = ("time index: history", "time index: updates", "semantic index: query_many")


# ------------------------------------------------------------------------------------------------- stand-ins


class HashEmbedder:
    """Unit vectors of a hashed bag of words: texts sharing words are near, as with a sentence embedder."""

    def __init__(self, name: str, dim: int = 384, buckets: int = 8192, seed: int = 0):
        self.name, self.dim, self.batch_size = name, dim, 64
        self.table = np.random.default_rng(seed).standard_normal((buckets, dim)).astype(np.float32)

    def encode(self, texts):
        out = np.zeros((len(texts), self.dim), np.float32)
        for n, t in enumerate(texts):
            ids = [zlib.crc32(w.encode()) % len(self.table) for w in t.lower().split()]
            out[n] = self.table[ids].sum(0) if ids else 0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


class SyntheticJudge:
    """Verdicts drawn from each criterion's latent pass rate (`rates`: criterion id -> rate; 0.5 for a new one)."""

    name = "synthetic"

    def __init__(self, rates, seed: int):
        self.rates, self.rng, self.stats = rates, np.random.default_rng(seed), {}

    def score_batch(self, tasks, responses, criteria=None):
        from harnessrl_jax.rubric.judges.base import OK, ScoreMatrix

        out = []
        for t, rs, cs in zip(tasks, responses, criteria or [t.criteria for t in tasks]):
            p = np.array([self.rates.get(c.id, 0.5) for c in cs])[:, None]
            v = (self.rng.random((len(cs), len(rs))) < p).astype(np.float64)
            shape = v.shape
            out.append(ScoreMatrix(tuple(c.id for c in cs), v, np.full(shape, OK, object), np.full(shape, "", object),
                                   np.zeros(shape), np.zeros(shape, bool), (self.name,) * len(cs)))
        return out

    def close(self):
        pass


class SyntheticEngine:
    """Rollouts of synthetic responses: random token ids of the response's length, its text from `text`."""

    def __init__(self, text: ZipfText, words: int, vocab: int, eos_id: int, seed: int):
        self.text, self.words, self.vocab = text, words, vocab
        self.pad_id, self.eos_id = 0, eos_id
        self.rng = np.random.default_rng(seed)

    def generate(self, prompts, n=1, *, max_new_tokens, temperature=1.0, top_p=1.0, top_k=0, seed=0):
        from harnessrl_jax.rollout import Rollouts

        rows = len(prompts) * n
        length = min(max_new_tokens, int(self.words * 4 / 3))
        tokens = self.rng.integers(1, self.vocab, (rows, length), dtype=np.int32)
        tokens[:, -1] = self.eos_id
        return Rollouts([list(p) for p in prompts], np.repeat(np.arange(len(prompts)), n), tokens,
                        -self.rng.random((rows, length), dtype=np.float32), np.full(rows, length, np.int32),
                        ["stop"] * rows, list(self.text.responses(rows, self.words)))

    def update_weights(self, params):
        pass


class NullTrainer:
    """The device's train step, left out: the batch is packed by the real code and handed to nothing."""

    data_parallel = 1

    def put_batch(self, batch):
        return batch

    def step(self, state, batch, ref_params, **kw):
        return state, {}

    def policy_params(self, state):
        return state.params


# ---------------------------------------------------------------------------------------------------- timing


class Stages:
    """Exclusive wall time per named stage: a wrapped call's time less the wrapped calls it makes."""

    def __init__(self):
        self.seconds, self.calls = defaultdict(float), defaultdict(list)
        self.texts = self.queries = self.donors = 0
        self._stack: list[float] = []

    def wrap(self, name, fn):
        def timed(*args, **kw):
            start = time.perf_counter()
            self._stack.append(0.0)
            try:
                return fn(*args, **kw)
            finally:
                took = time.perf_counter() - start
                self.seconds[name] += took - self._stack.pop()
                self.calls[name].append(took)
                if self._stack:
                    self._stack[-1] += took
        return timed

    def reset(self):
        self.seconds.clear()
        self.calls.clear()
        self.texts = self.queries = self.donors = 0


def _vm(key: str) -> float:
    """VmHWM / VmRSS of this process, GiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 2**20
    return float("nan")


def _reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current resident set
    except OSError:
        pass


def _size(directory: str) -> int:
    return sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory))


# -------------------------------------------------------------------------------------------- synthetic data


def make_tasks(rng):
    """Tasks of Rubric-Mix's domains with --criteria criteria each (~15% pitfalls), and each criterion's latent
    pass rate: 12% never met, 15% always met, the rest split groups."""
    from harnessrl_jax.rubric.schema import Criterion, Task

    texts = synthetic_texts(FLAGS.tasks * FLAGS.criteria, rng)
    names, rates, tasks = list(DOMAINS), {}, []
    for i in range(FLAGS.tasks):
        domain = names[i % len(names)]
        topic = DOMAINS[domain][rng.integers(len(DOMAINS[domain]))]
        tid = f"task-{i:05d}"
        crits = []
        for k in range(FLAGS.criteria):
            cid = f"{tid}/c{k}"
            points = -float(rng.integers(1, 6)) if rng.random() < 0.15 else float(rng.integers(1, 11))
            crits.append(Criterion(cid, texts[i * FLAGS.criteria + k], points))
            u = rng.random()
            rates[cid] = 0.0 if u < 0.12 else 1.0 if u < 0.27 else float(rng.uniform(0.05, 0.95))
        prompt = (f"I have a question about {topic} for {domain} work. Please explain what matters most, what people "
                  f"usually get wrong, and what I should do next, with concrete examples and a short summary.")
        tasks.append(Task(tid, domain, ({"role": "user", "content": prompt},), tuple(crits)))
    return tasks, rates


def synthetic_step(step, tasks, H, rates, text, rng, slices):
    """One recorded step of --tasks_per_step draws, as the stepper writes them."""
    from harnessrl_jax.evolver import task_slice
    from harnessrl_jax.memory import ActionRecord, DrawRecord
    from harnessrl_jax.rubric.reward import rubric_reward

    records = []
    for i in rng.integers(len(tasks), size=FLAGS.tasks_per_step):
        t = tasks[i]
        if t.id not in slices:
            slices[t.id] = task_slice(H, t.id)
        p = np.array([rates[c.id] for c in t.criteria])
        S = (rng.random((len(p), FLAGS.group)) < p[:, None]).astype(np.float64)
        labels = {c.id: "blind" if r == 0 else "saturated" if r == 1 else "agree" for c, r in zip(t.criteria, p)}
        blind = [c for c in t.criteria if rates[c.id] == 0]
        sat = [c for c in t.criteria if rates[c.id] == 1]
        verdict = lambda: "accepted" if rng.random() < 0.2 else "rejected"  # noqa: E731
        actions = [ActionRecord("sampling", "noop", "noop")]
        if blind:
            c = blind[0]
            actions.append(ActionRecord("guidance", "add_field", verdict(), label="blind", criterion_ids=(c.id,),
                                        deltas={"delta_g": float(rng.uniform(0, 30))}, changes={
                                            "fields.criterion": [None, {"text": c.text, "criterion_id": c.id}]}))
        else:
            actions.append(ActionRecord("guidance", "noop", "noop"))
        if sat:
            c = sat[0]
            actions.append(ActionRecord("rubric", "rewrite", verdict(), label="saturated", criterion_ids=(c.id,),
                                        deltas={"delta_c": float(rng.uniform(0, 30))},
                                        changes={f"criteria.{c.id}.text": [c.text, c.text + " (stricter)"]}))
        else:
            actions.append(ActionRecord("rubric", "noop", "noop"))
        records.append(DrawRecord(
            step, t.id, tuple(c.id for c in t.criteria), tuple(c.text for c in t.criteria),
            text.responses(FLAGS.group, FLAGS.recorded_words or FLAGS.response_words), S, rubric_reward(np.array([c.points for c in t.criteria]), S),
            harness=slices[t.id], labels=labels, task_label="saturated" if len(sat) > len(t.criteria) // 2 else None,
            actions=tuple(actions), dynamics={"u": 1.0, "level": 0, "guided": False}))
    return records


# ------------------------------------------------------------------------------------------------------ main


def main(argv):
    del argv
    import jax
    from tqdm import tqdm

    from experiments import rubric_mix_4b
    from harnessrl_jax import methods, stepper as stepper_lib
    from harnessrl_jax.harness import render
    from harnessrl_jax.harness import HarnessState
    from harnessrl_jax.memory import Embedder, Memory
    from harnessrl_jax.memory import semantic
    from harnessrl_jax.models import load_pretrained
    from harnessrl_jax.rl.batch import round_up
    from harnessrl_jax.rl.step import TrainState
    from harnessrl_jax.stages import Run, compute_advantages, step_seed
    from harnessrl_jax.stepper import Stepper

    load0 = os.getloadavg()
    sizes = sorted(int(s) for s in FLAGS.memories)
    per_step = FLAGS.tasks_per_step
    if any(s % per_step for s in sizes):
        raise ValueError(f"--memories must be multiples of --tasks_per_step={per_step}")
    rng = np.random.default_rng(FLAGS.seed)
    workdir = FLAGS.workdir or tempfile.mkdtemp(prefix="bench_scale_")
    if not FLAGS.reuse:
        shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir, exist_ok=True)

    config = rubric_mix_4b.get_config()
    config.tasks_per_step, config.num_generations = per_step, FLAGS.group
    config.harness.proposer, config.harness.llm_check = "rule", False
    # never read or called: the tasks are synthetic and the judge is the stand-in
    config.tasks.path, config.judge.base_url = "synthetic.jsonl", "http://judge.invalid:30000/v1"
    # The semantic index's embedder: the stand-in, under a directory of its own name (the store files vectors by it).
    embedder_dir = os.path.join(workdir, "hash-embedder")
    os.makedirs(embedder_dir, exist_ok=True)
    config.memory.embedder = embedder_dir
    embedder = HashEmbedder(semantic.model_name(embedder_dir), seed=FLAGS.seed)
    stages = Stages()
    embedder.encode = stages.wrap("embedder (stand-in)", _counting(embedder.encode, stages))
    loaded = concurrent.futures.Future()
    loaded.set_result(embedder)
    semantic._EMBEDDERS[semantic.embedder_path(embedder_dir)] = loaded  # what preload_embedder would have left

    logging.info("synthetic tasks: %d x %d criteria", FLAGS.tasks, FLAGS.criteria)
    tasks, rates = make_tasks(rng)
    text = ZipfText(rng)
    _, _, tokenizer = load_pretrained("smollm2-135m-instruct")
    method = methods.describe(config)
    H = method.transitions.advance_schedule(HarnessState.from_tasks(tasks), 0, config.total_steps)
    prompt_limit = config.max_prompt_len + config.harness.max_guidance_tokens
    judge = SyntheticJudge(rates, FLAGS.seed + 1)
    engine = SyntheticEngine(text, FLAGS.response_words, tokenizer.vocab_size, tokenizer.eos_id, FLAGS.seed + 2)
    trainer = NullTrainer()
    judge.score_batch = stages.wrap("judge (stand-in)", judge.score_batch)
    engine.generate = stages.wrap("engine (stand-in)", engine.generate)
    trainer.step = stages.wrap("train step (stand-in)", trainer.step)
    run = Run(config, None, tokenizer, tasks, trainer, engine, None, None,
              round_up(prompt_limit + config.max_new_tokens, 8), per_step * FLAGS.group, prompt_limit, judge)
    state = TrainState(None, None, np.int32(0), jax.random.PRNGKey(FLAGS.seed))
    # Module-level stages the stepper calls by name.
    stepper_lib.oracle_metrics = stages.wrap("reward-oracle metrics", stepper_lib.oracle_metrics)

    # The step's two jitted host functions compile here, not in the first timed step.
    compute_advantages(np.zeros((per_step, FLAGS.group)), config.advantage)
    step_seed(state, 0)
    # The memory of each size is built once (grown in build/, a full copy kept per size) and reused with --reuse.
    results = {}
    snapshots = {size: os.path.join(workdir, f"draws-{size}") for size in sizes}
    if not all(_built(d) for d in snapshots.values()):
        _build(snapshots, tasks, H, rates, text, rng, os.path.join(workdir, "build", "memory"), embedder_dir, Memory, tqdm)
    if not FLAGS.repeats:
        logging.info("memories built in %s; --reuse times them", workdir)
        return
    for size in sizes:
        with open(os.path.join(snapshots[size], "positions.json")) as f:
            positions = json.load(f)
        store_bytes = _size(os.path.join(snapshots[size], "memory"))
        runs = []
        for r in range(FLAGS.repeats):
            st = Stepper(run, method, snapshots[size])  # its memory opens truncated back to the built draws
            st.start({"harness": H.to_dict(), "sampler": {}, "memory": positions, "method": None})
            st.sampler.draw(H, 0, per_step)  # its first call compiles
            st.memory.store.reversals()  # the run total, kept as the previous step of a run leaves it
            _instrument(st, stages)
            render._ids.cache_clear()  # no prompt ids from an earlier repeat of the same step (or from start-up)
            stages.reset()
            _reset_peak()
            start = time.perf_counter()
            _, metrics, _ = st.step(state, size // per_step)
            total = time.perf_counter() - start
            # the step's collection of its young objects, at its end (stages.collection_after): its own row; and
            # a full one, which the automatic collector runs between steps every few steps, for reference
            stages.seconds["rest of the step"] -= metrics["time/gc"]
            stages.seconds["garbage collection (young, end of step)"] = metrics["time/gc"]
            start = time.perf_counter()
            gc.collect()
            runs.append({"total": total, "seconds": dict(stages.seconds), "calls": dict(stages.calls),
                         "texts": stages.texts, "donors": stages.donors / max(stages.queries, 1),
                         "peak_gib": _vm("VmHWM"), "full_gc": time.perf_counter() - start})
            st.close()
            logging.info("memory %d draws, repeat %d: step %.1f s", size, r + 1, total)
        results[size] = {"runs": runs, "store_bytes": store_bytes}

    real_rate = _real_embedder_rate([c.text for t in tasks[:FLAGS.embed_sample] for c in t.criteria][
        :FLAGS.embed_sample], Embedder)
    if FLAGS.results:  # earlier runs' sizes join the table; this run's replace theirs
        earlier = {}
        if os.path.isfile(FLAGS.results):
            with open(FLAGS.results) as f:
                earlier = {int(k): v for k, v in json.load(f).items()}
        for size, res in results.items():
            res["load"] = [load0[0], os.getloadavg()[0]]
        results = {**earlier, **results}
        with open(FLAGS.results, "w") as f:
            json.dump({str(k): v for k, v in results.items()}, f)
        sizes = sorted(results)
    _report(results, sizes, real_rate, load0)
    if not FLAGS.workdir:
        shutil.rmtree(workdir, ignore_errors=True)


def _built(snapshot: str) -> bool:
    return os.path.isfile(os.path.join(snapshot, "positions.json"))


def _build(snapshots, tasks, H, rates, text, rng, memdir, embedder_dir, Memory, tqdm):
    """Grows one memory through the sizes by its real write path, a full copy kept at each size."""
    shutil.rmtree(os.path.dirname(memdir), ignore_errors=True)
    mem = Memory.open(memdir, embedder=embedder_dir)
    # step -1: the seed rubrics stay when a timed step's memory is truncated back to no draw at all
    mem.add_criteria(((t.id, c.id, c.text) for t in tasks for c in t.criteria), step=-1)
    built, slices, per_step = 0, {}, FLAGS.tasks_per_step
    for size, snapshot in snapshots.items():
        start = time.perf_counter()
        for step in tqdm(range(built // per_step, size // per_step), desc=f"build memory to {size:,} draws",
                         unit="step"):
            mem.append_step(step, synthetic_step(step, tasks, H, rates, text, rng, slices))
        logging.info("built %d draws in %.0f s", size - built, time.perf_counter() - start)
        built = size
        positions = mem.save(os.path.join(snapshot, "memory"))
        with open(os.path.join(snapshot, "positions.json"), "w") as f:
            json.dump(positions, f)
    mem.close()
    shutil.rmtree(os.path.dirname(memdir), ignore_errors=True)


def _counting(encode, stages):
    def counted(texts):
        stages.texts += len(texts)
        return encode(texts)
    return counted


def _counting_donors(query_many, stages):
    def counted(texts, *args, **kw):
        found = query_many(texts, *args, **kw)
        stages.queries += len(texts)
        stages.donors += sum(len(d) for d in found)
        return found
    return counted


def _instrument(st, stages: Stages) -> None:
    """Wraps the parts of one step the stepper holds, by stage."""
    memory, evolver, parts = st.memory, st.evolver, st.parts
    memory.history = stages.wrap("time index: history", memory.history)
    memory.updates = stages.wrap("time index: updates", memory.updates)
    memory.query_many = stages.wrap("semantic index: query_many", _counting_donors(memory.query_many, stages))
    memory.append_step = stages.wrap("memory write (append_step)", memory.append_step)
    memory.store.reversals = stages.wrap("reversal count (harness metrics)", memory.store.reversals)
    evolver.attributor = stages.wrap("attributor", evolver.attributor)
    evolver.proposer.propose = stages.wrap("proposer (rule)", evolver.proposer.propose)
    evolver.critic.measure_many = stages.wrap("critic (bookkeeping, guided prompts, regrade rewards)",
                                              evolver.critic.measure_many)
    evolver.step = stages.wrap("evolver loop (changes, transitions)", evolver.step)
    parts.after_judge = stages.wrap("method parts after judging", parts.after_judge)
    parts.scheme.sample = stages.wrap("render prompts", parts.scheme.sample)
    parts.scheme.judge = stages.wrap("rewards", parts.scheme.judge)
    parts.scheme.train = stages.wrap("advantages, batch packing", parts.scheme.train)
    st._harness_metrics = stages.wrap("harness metrics (other)", st._harness_metrics)
    st.step = stages.wrap("rest of the step", st.step)


def _real_embedder_rate(sample, Embedder) -> float | None:
    if not sample:
        return None
    emb = Embedder()
    emb.encode(sample[:emb.batch_size])  # warm-up
    start = time.perf_counter()
    emb.encode(sample)
    return len(sample) / (time.perf_counter() - start)


def _report(results, sizes, real_rate, load0):
    import faiss

    load1 = os.getloadavg()
    names = []
    for size in sizes:
        for run in results[size]["runs"]:
            names += [n for n in run["seconds"] if n not in names]
    host = [n for n in names if n not in STAND_INS]

    def med(size, f):
        return float(np.median([f(r) for r in results[size]["runs"]]))

    def spread(size, f):
        xs = [f(r) for r in results[size]["runs"]]
        return f"{np.median(xs):7.2f} ({min(xs):.2f}-{max(xs):.2f})"

    def host_s(r):
        return sum(v for n, v in r["seconds"].items() if n not in STAND_INS)

    def embed_s(r):
        return r["texts"] / real_rate if real_rate else 0.0

    head = " | ".join(f"{s:>21,}" for s in sizes)
    width = max(len(n) for n in names + ["host side + real embedder (extrapolated)"])
    print(f"\nscale benchmark: one step of {FLAGS.tasks_per_step} tasks x J={FLAGS.group}, {FLAGS.criteria} criteria, "
          f"{FLAGS.response_words}-word responses ({FLAGS.recorded_words or FLAGS.response_words}-word ones in the "
          f"memory), {FLAGS.tasks:,} tasks; {FLAGS.repeats} repeats (median, min-max), "
          f"seconds; {os.cpu_count()} CPUs, faiss {faiss.__version__}; load average {load0[0]:.1f} at start, "
          f"{load1[0]:.1f} at end")
    print(f"{'stage / memory draws':<{width}} | {head} | growth 64k->256k")
    print("-" * (width + 24 * len(sizes) + 20))
    for n in host + [n for n in STAND_INS if n in names]:
        cells = " | ".join(spread(s, lambda r, n=n: r["seconds"].get(n, 0.0)) for s in sizes)
        print(f"{n:<{width}} | {cells} | {_growth(sizes, lambda s: med(s, lambda r: r['seconds'].get(n, 0.0)))}")
    print("-" * (width + 24 * len(sizes) + 20))
    for label, f in (("host side (stand-ins left out)", host_s),
                     ("host side + real embedder (extrapolated)", lambda r: host_s(r) + embed_s(r))):
        cells = " | ".join(spread(s, f) for s in sizes)
        print(f"{label:<{width}} | {cells} | {_growth(sizes, lambda s: med(s, f))}")

    print(f"\n{'memory / memory draws':<{width}} | {head}")
    rows = [("store on disk (sqlite + faiss), MiB", lambda s: f"{results[s]['store_bytes'] / 2**20:21,.0f}"),
            ("peak RSS during the step, GiB", lambda s: f"{med(s, lambda r: r['peak_gib']):21.2f}"),
            ("texts embedded by the step", lambda s: f"{med(s, lambda r: r['texts']):21,.0f}")]
    for n in RETRIEVAL:
        rows.append((f"{n}: calls", lambda s, n=n: f"{med(s, lambda r: len(r['calls'].get(n, []))):21,.0f}"))
        rows.append((f"{n}: p50 / p95 ms", lambda s, n=n: "{:>21}".format(_pcts(results[s]["runs"], n))))
    rows.append(("donors per semantic query (mean)", lambda s: f"{med(s, lambda r: r['donors']):21.2f}"))
    rows.append(("a full garbage collection after the step, s", lambda s: "{:>21}".format(
        "-" if "full_gc" not in results[s]["runs"][0] else f"{med(s, lambda r: r['full_gc']):.2f}")))
    rows.append(("load average at the run's start / end", lambda s: "{:>21}".format(
        "{:.1f} / {:.1f}".format(*results[s].get("load", [load0[0], load1[0]])))))
    for label, f in rows:
        print(f"{label:<{width}} | " + " | ".join(f(s) for s in sizes))
    if real_rate:
        print(f"real embedder: all-MiniLM-L6-v2 on the CPU, {real_rate:,.0f} texts/s on {FLAGS.embed_sample} texts")

    last = sizes[-1]
    hs = med(last, lambda r: host_s(r) + embed_s(r))
    print(f"\nverdict: host side at {last:,} draws {hs:.2f} s = {100 * hs / 147:.1f}% of 147 s "
          f"({'within' if hs <= FLAGS.budget_s else 'over'} the {FLAGS.budget_s:.2f} s target)")
    fast = [n for n in host if _superlinear(sizes, lambda s, n=n: med(s, lambda r: r["seconds"].get(n, 0.0)))]
    print("verdict: no stage grows faster than linearly in the memory's size" if not fast else
          f"verdict: faster than linear in the memory's size: {', '.join(fast)}")


def _pcts(runs, name):
    xs = np.concatenate([np.asarray(r["calls"].get(name, []), float) for r in runs]) * 1e3
    return "-" if not xs.size else f"{np.percentile(xs, 50):.2f} / {np.percentile(xs, 95):.2f}"


def _growth(sizes, f):
    """The increment from the second to the last size over the size ratio: 1.0 is linear in the memory's size."""
    if len(sizes) < 3 or sizes[1] == sizes[0]:
        return ""
    a, b, c = (f(s) for s in (sizes[0], sizes[1], sizes[-1]))
    ratio = (sizes[-1] - sizes[0]) / (sizes[1] - sizes[0])
    if b - a < 0.02:
        return f"{c - a:+.2f} s"
    return f"x{(c - a) / (b - a):.1f} (linear: x{ratio:.0f})"


def _superlinear(sizes, f) -> bool:
    if len(sizes) < 3:
        return False
    a, b, c = (f(s) for s in (sizes[0], sizes[1], sizes[-1]))
    ratio = (sizes[-1] - sizes[0]) / (sizes[1] - sizes[0])
    return c - a > 0.1 and (b - a <= 0.02 or (c - a) / (b - a) > 1.5 * ratio)


if __name__ == "__main__":
    cli.run(main)
