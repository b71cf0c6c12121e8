"""One HarnessRL step of the CPU default, time by stage and peak memory, against a recorded baseline.

    python launch/bench_step.py [--steps=6] [--repeats=3]
    python launch/bench_step.py --repo=OLD_CHECKOUT --record=launch/bench_step_baseline.json   # (re)record it

Each repeat runs `launch/train.py --config=experiments/smollm2_cpu.py:method=harnessrl` as `make demo` does for
--steps steps in a fresh process and reads its metrics.jsonl: step 1 (the first compiles) apart, the steady step
(the mean of steps 2 on) by stage, start-up, and peak resident memory. The table sets them against the baseline
(launch/bench_step_baseline.json, the code before the performance work of the train step, the sampler and the
harness step, commit b22c96a) with a one-line verdict; a baseline recorded on another machine (CPU, cores, matmul
rate, read bandwidth) is flagged. Keep other work off the machine while it runs.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from absl import flags

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from harnessrl_jax import cli, timing  # noqa: E402

flags.DEFINE_integer("steps", 6, "Training steps per run (step 1 carries the compiles; >= 2).")
flags.DEFINE_integer("repeats", 3, "Runs, each a fresh process (the table gives the median and the spread).")
flags.DEFINE_string("repo", REPO, "Checkout whose launch/train.py runs (an older commit to record a baseline).")
flags.DEFINE_string("baseline", os.path.join(REPO, "launch", "bench_step_baseline.json"),
                    "Recorded baseline to compare against ('' for none).")
flags.DEFINE_string("record", "", "Write this run's figures to this JSON file (e.g. to record a baseline).")
flags.DEFINE_multi_string("override", [], "Extra --config.key=value settings for both the run and the record.")
flags.DEFINE_string("compilation_cache", "", "train.py's --compilation_cache for every run: '' (default) compiles "
                    "from scratch each run, as the baseline did; a directory reuses what the runs before compiled.")
FLAGS = flags.FLAGS

STAGES = ("rollout", "judge", "evolver", "critic", "memory", "train")


def train_command(repo: str, workdir: str, steps: int) -> list[str]:
    train = os.path.join(repo, "launch", "train.py")
    cache = []
    if os.path.exists(train):
        with open(train) as f:  # a checkout from before the flag existed compiles from scratch anyway
            cache = [f"--compilation_cache={FLAGS.compilation_cache}"] if "compilation_cache" in f.read() else []
    return [sys.executable, train, *cache, "--config=experiments/smollm2_cpu.py:method=harnessrl",
            f"--workdir={workdir}", f"--config.total_steps={steps}", "--config.tasks.subset=8",
            "--config.tasks.domain=medical", f"--config.checkpoint.every={steps}",
            *(f"--config.{o.removeprefix('--config.')}" for o in FLAGS.override)]


def one_run(repo: str, steps: int) -> dict:
    """Runs train.py once; its startup, per-step stage times and peak resident memory."""
    workdir = tempfile.mkdtemp(prefix="bench_step_")
    metrics_path = os.path.join(workdir, "metrics.jsonl")
    try:
        with open(os.path.join(workdir, "train.log"), "w") as log:
            start = time.perf_counter()
            pid = subprocess.Popen(train_command(repo, workdir, steps), cwd=repo, stdout=log, stderr=subprocess.STDOUT,
                                   env=cli.user_environment()).pid
            first_line_at = None
            while True:  # reaped with wait4, which also gives the child's own peak resident memory
                done, status, usage = os.wait4(pid, os.WNOHANG)
                if done:
                    break
                if first_line_at is None and os.path.exists(metrics_path) and os.path.getsize(metrics_path):
                    first_line_at = time.perf_counter() - start
                time.sleep(0.1)
            wall = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status):
            with open(os.path.join(workdir, "train.log")) as f:
                tail = f.read()[-3000:]
            raise RuntimeError(f"train.py exited with {os.waitstatus_to_exitcode(status)}:\n{tail}")
        with open(metrics_path) as f:
            lines = [json.loads(line) for line in f if line.strip()]
        startup = {}
        if os.path.exists(os.path.join(workdir, "startup.json")):  # the run's own breakdown (newer checkouts)
            with open(os.path.join(workdir, "startup.json")) as f:
                startup = json.load(f)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    first = lines[0]
    return {"wall_s": wall, "startup_s": (first_line_at or wall) - first["time/step"],
            "first_step_s": first["time/step"],
            "steps": [{k: float(v) for k, v in m.items() if k.startswith("time/")} for m in lines],
            "peak_rss_gb": timing.peak_rss_bytes(usage) / 1e9,
            **{f"startup_{k}": startup.get(k) for k in STARTUP}}


STARTUP = ("weights_s", "tokenizer_s", "build_s", "first_step_compile_s")


def summarise(runs: list[dict]) -> dict:
    """Median and [min, max] over runs of each figure; a steady stage is each run's mean over steps 2.. (the evolver
    acts on some steps and not others); the runs' per-step times are kept as they came."""
    def spread(values):
        values = [v for v in values if v is not None]
        return {"median": statistics.median(values), "min": min(values), "max": max(values)} if values else None

    out = {"runs": len(runs), "steps": len(runs[0]["steps"])}
    for key in ("wall_s", "startup_s", "first_step_s", "peak_rss_gb", *(f"startup_{k}" for k in STARTUP)):
        out[key] = spread([r[key] for r in runs])
    for stage in ("step",) + STAGES:
        out[f"steady_{stage}_s"] = spread([statistics.mean(s.get(f"time/{stage}", 0.0) for s in r["steps"][1:])
                                           for r in runs])
    out["per_run_steps"] = [r["steps"] for r in runs]
    return out


def fmt(x) -> str:
    if x is None:
        return "-"
    return f"{x['median']:.2f} [{x['min']:.2f}, {x['max']:.2f}]"


def main(argv):
    del argv
    if FLAGS.steps < 2:
        raise ValueError("--steps must be >= 2 (step 1 carries the compiles)")
    runs = []
    start = time.perf_counter()
    for i in range(FLAGS.repeats):
        runs.append(one_run(FLAGS.repo, FLAGS.steps))
        done = time.perf_counter() - start
        print(f"run {i + 1}/{FLAGS.repeats}: {runs[-1]['wall_s']:.0f}s, peak {runs[-1]['peak_rss_gb']:.2f} GB "
              f"(ETA {done / (i + 1) * (FLAGS.repeats - i - 1):.0f}s)", flush=True)
    now = summarise(runs)
    now["command"] = " ".join(train_command("<repo>", "<workdir>", FLAGS.steps)[1:])
    now["machine"] = timing.machine()  # after the runs: this process holds nothing while they run
    if FLAGS.record:
        with open(FLAGS.record, "w") as f:
            json.dump(now, f, indent=1)
        print(f"recorded {FLAGS.record}")
    base = None
    if FLAGS.baseline and os.path.exists(FLAGS.baseline) and os.path.abspath(FLAGS.baseline) != \
            os.path.abspath(FLAGS.record or "-"):
        with open(FLAGS.baseline) as f:
            base = json.load(f)

    rows = [("startup (to step 1)", "startup_s"), ("  of which weights", "startup_weights_s"),
            ("  of which tokenizer", "startup_tokenizer_s"), ("  of which the rest of the build", "startup_build_s"),
            ("step 1 (with the first compiles)", "first_step_s"),
            ("  of which XLA compiles", "startup_first_step_compile_s")] + \
        [(f"steady step: {s}", f"steady_{s}_s") for s in ("step",) + STAGES] + \
        [("whole run", "wall_s"), ("peak resident memory (GB)", "peak_rss_gb")]
    print(f"\nOne HarnessRL step of the CPU default (smollm2_cpu.py:method=harnessrl, 8 medical tasks, {FLAGS.steps} "
          f"steps per run, {FLAGS.repeats} runs; median [min, max]; seconds unless marked) on {os.cpu_count()} "
          "cores; baseline: " + (f"{FLAGS.baseline}" if base else "none"))
    differences = timing.machine_differences(base.get("machine"), now["machine"]) if base else []
    for label, record in (("baseline's machine", (base or {}).get("machine")), ("this machine", now["machine"])):
        if record:
            print(f"{label}: {record['cpu']}, {record['cores']} cores, float32 matmul {record['matmul_gflops']} "
                  f"GFLOP/s, memory read {record['read_gbs']} GB/s")
    print("| figure | baseline | now | now / baseline |")
    print("|---|---|---|---|")
    for name, key in rows:
        b, n = (base or {}).get(key), now.get(key)
        ratio = f"{n['median'] / b['median']:.2f}" if b and n and b["median"] else "-"
        print(f"| {name} | {fmt(b)} | {fmt(n)} | {ratio} |")
    steady = now["steady_step_s"]["median"]
    share = now["steady_evolver_s"]["median"] / steady if steady else float("nan")
    peak = now["peak_rss_gb"]["median"] if now["peak_rss_gb"] else float("nan")
    verdict = f"evolver share of the steady step {share:.1%} (target <= 12%); peak memory {peak:.2f} GB (target <= 5)"
    if base:
        verdict = (f"steady step {base['steady_step_s']['median'] / steady:.2f}x the baseline's speed, startup "
                   f"{base['startup_s']['median'] / now['startup_s']['median']:.2f}x, peak memory "
                   f"{peak / base['peak_rss_gb']['median']:.2f}x the baseline's; " + verdict)
        if differences:
            verdict = ("the baseline was recorded on another machine (" + "; ".join(differences) + "), so its ratios "
                       "do not compare like with like: re-record it here (--repo at its commit, --record); " + verdict)
    print("\nverdict: " + verdict)


if __name__ == "__main__":
    cli.run(main)
