"""The HTTP judge under a training step's load: a group of 512 tasks x 8 responses (the papers' step), against a slow
stand-in server and the local llama.cpp server.

    python launch/bench_judge.py [--tasks=512] [--responses=8] [--criteria=2] [--latency_s=0.05]
        [--concurrency=8,32,128] [--llama_responses=32] [--ceiling] [--batch_size=256] [--batched_concurrency=1,4]

The ceiling (first table): every cell judged against a stand-in that answers at once, in its own process, one
call per cell at each concurrency and batched through SGLang's native /generate (SGLangJudge), with cells/s of wall
time and of this process's CPU time (the client's own cost, whatever the stand-in takes), the stand-in's CPU
seconds, and the ratio to the best per-call row of the same run: what the client alone sustains, so that a paper
step (512 x 8 x 12.9 criteria, about 52,800 cells: `--criteria=13`) is bounded by the server, not the client.

Stand-in (harnessrl_jax.rubric.judges.standin, `--latency_s` per answer, like a remote server): for each
concurrency, every cell of the group is scored through OpenAIJudge (one call per criterion and distinct response),
then scored again from the judge's cache. The table gives wall time, calls per second, the most calls the server
saw in flight (never above the bound), and the checks: cells without a verdict, verdicts that differ from the
stand-in's rule, prompts the server was asked more than once, cache hits on the rerun.

llama.cpp (SmolLM2-135M-Instruct on this machine's CPU; `--llama_responses` responses of the group, 0 skips): the
same through the real server at concurrency 1 and 2 (llama-cpp-python serves one request at a time), with the
time the whole group would take at that rate. A CPU-served 135M judge is far slower than the paper's GPU judge;
the row shows the client adds no loss and what one local server sustains.
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
import time

from absl import flags

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from harnessrl_jax import cli  # noqa: E402

flags.DEFINE_integer("tasks", 512, "Tasks in the group.")
flags.DEFINE_integer("responses", 8, "Responses per task (J).")
flags.DEFINE_integer("criteria", 2, "LLM criteria per task.")
flags.DEFINE_float("latency_s", 0.05, "The stand-in's time per answer.")
flags.DEFINE_list("concurrency", ["8", "32", "128"], "Calls in flight (OpenAIJudge max_concurrency) to measure "
                  "against the stand-in (empty: skip it).")
flags.DEFINE_bool("ceiling", True, "Measure the client's ceiling against a stand-in that answers at once: per call "
                  "(at each --concurrency) and batched through SGLang's native /generate.")
flags.DEFINE_integer("batch_size", 256, "Prompts per /generate request of the batched judge.")
flags.DEFINE_list("batched_concurrency", ["1", "4"], "Requests in flight of the batched judge.")
flags.DEFINE_bool("latency_rows", True, "The per-call judge against the --latency_s stand-in, with its cache rerun.")
flags.DEFINE_integer("llama_responses", 32, "Responses of the group scored through llama.cpp (0: skip it).")
flags.DEFINE_integer("seed", 0, "Seed of the synthetic group.")
FLAGS = flags.FLAGS

WORDS = ("river", "stone", "light", "garden", "engine", "harbor", "winter", "signal", "paper", "forest", "copper",
         "market", "window", "silver", "thunder", "meadow")


def synthetic_group(n_tasks: int, n_responses: int, n_criteria: int, seed: int = 0):
    """(tasks, responses): each task asks about a word and has `n_criteria` LLM criteria quoting a word; responses
    are random sentences over the same words (some repeated within a group, as policies repeat themselves)."""
    from harnessrl_jax.rubric.schema import Criterion, Task

    rng = random.Random(seed)
    tasks, responses = [], []
    for i in range(n_tasks):
        crits = tuple(Criterion(f"load-{i}/{k}", f"The response mentions '{rng.choice(WORDS)}'.", 1.0)
                      for k in range(n_criteria))
        tasks.append(Task(f"load-{i}", "load", ({"role": "user", "content": f"Write a line about {WORDS[i % 16]}."},),
                          crits))
        group = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 10))) for _ in range(n_responses)]
        if n_responses > 2:
            group[-1] = group[0]  # a repeated response: judged once
        responses.append(group)
    return tasks, responses


def score(judge, tasks, responses, reference):
    """(seconds, cells, cells without a verdict, verdicts unlike the reference, cache hits, CPU seconds of this
    process) of one pass."""
    import numpy as np

    t0, c0 = time.perf_counter(), time.process_time()
    mats = judge.score_batch(tasks, responses)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    cells = sum(m.verdicts.size for m in mats)
    missing = sum(int((m.status != "ok").sum()) for m in mats)
    wrong = sum(int((np.nan_to_num(m.verdicts, nan=-1) != ref).sum()) for m, ref in zip(mats, reference)) - missing
    hits = sum(int(m.cache_hit.sum()) for m in mats)
    return seconds, cells, missing, wrong, hits, cpu


def reference_of(tasks, responses, verdict):
    import numpy as np

    return [np.array([[float(verdict(c.text, r)) for r in rs] for c in t.criteria]) for t, rs in zip(tasks, responses)]


def stand_in_rows(tasks, responses) -> list[str]:
    from harnessrl_jax.rubric.judges import OpenAIJudge
    from harnessrl_jax.rubric.judges.standin import StandInServer, standin_verdict

    reference = reference_of(tasks, responses, standin_verdict)
    rows = []
    for concurrency in map(int, FLAGS.concurrency):
        with StandInServer(latency_s=FLAGS.latency_s) as server, tempfile.TemporaryDirectory() as tmp:
            cache = os.path.join(tmp, "cache.sqlite")
            with OpenAIJudge(server.base_url, "standin", max_concurrency=concurrency, cache=cache,
                             timeout_s=60.0) as judge:
                s, cells, missing, wrong, *_ = score(judge, tasks, responses, reference)
                calls = judge.stats["calls"]
            first_requests, repeated = server.requests, sum(n > 1 for n in server.by_prompt.values())
            with OpenAIJudge(server.base_url, "standin", max_concurrency=concurrency, cache=cache) as judge:
                s2, _, missing2, wrong2, hits, _ = score(judge, tasks, responses, reference)
            rows.append(f"stand-in {FLAGS.latency_s * 1000:.0f} ms  {concurrency:>5d} {cells:>7d} {calls:>6d} "
                        f"{s:>8.1f} {calls / s:>9.1f} {server.max_inflight:>9d} {missing + missing2:>6d} "
                        f"{wrong + wrong2:>6d} {repeated:>6d} {hits:>6d}/{cells} {s2:>6.1f}"
                        + ("" if server.requests == first_requests else "  (rerun made requests!)"))
    return rows


def ceiling_rows(tasks, responses) -> list[str]:
    """The client's own ceiling: a stand-in that answers at once (in a child process), every cell through the
    per-call judge at each concurrency and through SGLangJudge's batched /generate (SmolLM2's chat template), with
    the ratio of cells/s to the best per-call row of the same run."""
    from harnessrl_jax.models.presets import smollm2_gguf_path
    from harnessrl_jax.models.tokenizer import Tokenizer
    from harnessrl_jax.rubric.judges import OpenAIJudge, SGLangJudge
    from harnessrl_jax.rubric.judges.standin import StandInProcess, standin_verdict

    reference = reference_of(tasks, responses, standin_verdict)
    tokenizer = Tokenizer.from_gguf(smollm2_gguf_path())
    measured = []

    def measure(name, server, judge):
        before = server.cpu_s
        measured.append((name, score(judge, tasks, responses, reference), judge.stats, server.requests,
                         server.cpu_s - before))
        print(f"  {name.strip()}: {measured[-1][1][1] / measured[-1][1][0]:.0f} cells/s", flush=True)

    for concurrency in map(int, FLAGS.concurrency):
        with StandInProcess() as server, OpenAIJudge(server.base_url, "standin", max_concurrency=concurrency) as judge:
            measure(f"per call (chat)    {concurrency:>5d}", server, judge)
    for concurrency in map(int, FLAGS.batched_concurrency):
        with StandInProcess() as server, SGLangJudge(server.root_url, "standin", tokenizer=tokenizer,
                                                     batch_size=FLAGS.batch_size,
                                                     max_concurrency=concurrency) as judge:
            measure(f"batched /generate  {concurrency:>5d}", server, judge)
    best = max((cells / s for name, (s, cells, *_), *_ in measured if name.startswith("per call")), default=None)
    rows = []
    for name, (s, cells, missing, wrong, _, cpu), stats, requests, server_cpu in measured:
        ratio = f"{cells / s / best:.1f}x" if best else "-"
        rows.append(f"{name} {cells:>7d} {stats['calls']:>6d} {requests:>8d} {s:>8.2f} {cells / s:>9.0f} "
                    f"{cpu:>7.2f} {cells / cpu:>11.0f} {server_cpu:>9.2f} {missing:>6d} {wrong:>6d} {ratio:>8s}")
    return rows


def llama_rows(tasks, responses) -> list[str]:
    from harnessrl_jax.rubric.judges import OpenAIJudge
    from harnessrl_jax.rubric.judges.local_server import llama_server

    n = FLAGS.llama_responses
    per_task = FLAGS.responses
    k = max(1, -(-n // per_task))
    sub_tasks, sub_responses = tasks[:k], [rs[:per_task] for rs in responses[:k]]
    rows = []
    with llama_server() as server:
        with OpenAIJudge(server.base_url, server.model, structured_output="json_object", max_tokens=64,
                         explanation_max_chars=60, timeout_s=300.0) as warm:  # the first call loads the model
            warm.score(tasks[-1], responses[-1][:1])
        for concurrency in (1, 2):
            with tempfile.TemporaryDirectory() as tmp:
                cache = os.path.join(tmp, "cache.sqlite")
                kw = dict(structured_output="json_object", max_tokens=64, explanation_max_chars=60,
                          timeout_s=300.0, max_concurrency=concurrency, temperature=0.0)
                with OpenAIJudge(server.base_url, server.model, cache=cache, **kw) as judge:
                    t0 = time.perf_counter()
                    mats = judge.score_batch(sub_tasks, sub_responses)
                    s = time.perf_counter() - t0
                    calls = judge.stats["calls"]
                with OpenAIJudge(server.base_url, server.model, cache=cache, **kw) as judge:
                    t1 = time.perf_counter()
                    again = judge.score_batch(sub_tasks, sub_responses)
                    s2 = time.perf_counter() - t1
                    requests = judge.stats["requests"]
            cells = sum(m.verdicts.size for m in mats)
            missing = sum(int((m.status != "ok").sum()) for m in mats)
            hits = sum(int(m.cache_hit.sum()) for m in again)
            full = FLAGS.tasks * FLAGS.responses * FLAGS.criteria / (calls / s) / 3600
            rows.append(f"llama.cpp SmolLM2   {concurrency:>5d} {cells:>7d} {calls:>6d} {s:>8.1f} {calls / s:>9.2f} "
                        f"{'-':>9s} {missing:>6d} {'-':>6s} {'-':>6s} {hits:>6d}/{cells} {s2:>6.1f}"
                        f"  (whole group: ~{full:.1f} h; rerun requests {requests})")
    return rows


def main(argv):
    del argv
    tasks, responses = synthetic_group(FLAGS.tasks, FLAGS.responses, FLAGS.criteria, FLAGS.seed)
    print(f"group: {FLAGS.tasks} tasks x {FLAGS.responses} responses x {FLAGS.criteria} LLM criteria = "
          f"{FLAGS.tasks * FLAGS.responses * FLAGS.criteria} cells, per_criterion (one call per criterion and distinct "
          f"response)")
    if FLAGS.ceiling:
        print(f"\nthe client's ceiling (a stand-in answering at once; batched: {FLAGS.batch_size} prompts a request; "
              f"ratio: cells/s against the best per-call row)")
        rows = ceiling_rows(tasks, responses)
        print(f"{'path':18s} {'conc':>5s} {'cells':>7s} {'calls':>6s} {'requests':>8s} {'time_s':>8s} "
              f"{'cells/s':>9s} {'cpu_s':>7s} {'cells/cpu_s':>11s} {'server_cpu':>9s} {'lost':>6s} {'wrong':>6s} "
              f"{'ratio':>8s}")
        for row in rows:
            print(row, flush=True)
        print()
    if FLAGS.latency_s >= 0 and FLAGS.concurrency and FLAGS.latency_rows:
        print(f"{'server':19s} {'conc':>5s} {'cells':>7s} {'calls':>6s} {'time_s':>8s} {'calls/s':>9s} "
              f"{'inflight':>9s} {'lost':>6s} {'wrong':>6s} {'dup':>6s} {'cache hits':>11s} {'rerun':>6s}")
        for row in stand_in_rows(tasks, responses):
            print(row, flush=True)
    if FLAGS.llama_responses:
        for row in llama_rows(tasks, responses):
            print(row, flush=True)


if __name__ == "__main__":
    cli.run(main)
