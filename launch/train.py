"""Train a policy with the method a config names.

    python launch/train.py --config=experiments/<name>.py [--config.key=value ...] --workdir=DIR

The config is checked before any model loads (harnessrl_jax.checks: each problem with the flag that fixes it).
Writes under DIR `config.json`, `metrics.jsonl` (one line per step: metrics, time by stage, `process/peak_rss_gb`),
`harness.jsonl` (every candidate the evolver measured), `evals.jsonl` (with config.eval.every > 0: the policy on the
validation and test tasks at step 0, every eval.every steps and the last; harnessrl_jax.eval.cadence),
`tensorboard/` (with config.tensorboard: metrics.jsonl's numbers for TensorBoard), `checkpoints/` (orbax; harness,
sampler and memory positions in `extra`), `memory/`, `startup.json` (seconds from launch to training, by stage:
docs/design.md, Measurements) and at the end `report.html`. Restarted in its workdir it resumes exactly; a damaged newest checkpoint is set aside
(--on_damaged_checkpoint), --restore_step=N resumes from N, and a server that stays down stops the run with a
checkpoint of the last complete step and the command that resumes. Multi-host: one process per host with
--coordinator_address=HOST:PORT --num_processes=N --process_id=i (or JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES,
JAX_PROCESS_ID); the mesh spans every process.
"""

from __future__ import annotations

import json
import logging as std_logging
import os
import shlex
import sys
import time

PROCESS_START = time.perf_counter()  # before jax and the package are imported: startup.json's imports_s
# Configs import `experiments.base`, and a checkout runs without installing the package.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harnessrl_jax import cli  # noqa: E402

cli.reexec_with_malloc_tunables(__name__ == "__main__")  # before jax is imported (harnessrl_jax.cli's docstring)

import jax  # noqa: E402
from absl import app, flags, logging  # noqa: E402
from ml_collections import config_flags  # noqa: E402

from harnessrl_jax import failures, timing  # noqa: E402
from harnessrl_jax.errors import UserError  # noqa: E402

# ------------------------------------------------------------------------------------------------- flags

config_flags.DEFINE_config_file("config", None, "Experiment config file (experiments/*.py[:arg]).", lock_config=True)
flags.DEFINE_string("workdir", None, "Run directory: metrics, checkpoints; resumed from when it has them.")
flags.DEFINE_integer("stop_after", None, "Stop (checkpointing) once this many steps are done, as a preempted "
                     "job would; the schedule still follows config.total_steps.")
flags.DEFINE_integer("restore_step", None, "Resume from this checkpoint step (the newer ones are moved to "
                     "checkpoints_set_aside/); default: the newest intact one.")
flags.DEFINE_enum("on_damaged_checkpoint", "previous", ["previous", "stop"], "A damaged or partial newest "
                  "checkpoint: set it aside and resume from the one before ('previous'), or stop ('stop').")
flags.DEFINE_string("compilation_cache", cli.compilation_cache_dir(),
                    "JAX's persistent compilation cache: a run whose programs were compiled before (same shapes, "
                    "JAX and machine) loads them instead of compiling. '' turns it off.")
flags.DEFINE_string("coordinator_address", os.environ.get("JAX_COORDINATOR_ADDRESS"), "Multi-host: HOST:PORT of "
                    "process 0.")
flags.DEFINE_integer("num_processes", int(os.environ.get("JAX_NUM_PROCESSES", 1)), "Multi-host: process count.")
flags.DEFINE_integer("process_id", int(os.environ.get("JAX_PROCESS_ID", 0)), "Multi-host: this process's index.")
FLAGS = flags.FLAGS


def initialize_distributed(coordinator_address: str | None, num_processes: int, process_id: int) -> None:
    """jax.distributed over the given processes; nothing for a single process."""
    if num_processes <= 1:
        return
    # CPU hosts need a collectives backend to all-reduce across processes; accelerators bring their own.
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address, num_processes, process_id)
    logging.info("process %d of %d, %d local / %d global devices", jax.process_index(), jax.process_count(),
                 jax.local_device_count(), jax.device_count())


# ------------------------------------------------------------------------------------------ logging helpers


class JsonlLog:
    """A JSONL file that process 0 appends to. On resume, lines whose `step` is past `keep_through` are dropped
    first: they belong to steps that will run again."""

    def __init__(self, path: str, keep_through: int):
        self.path = path
        self.enabled = jax.process_index() == 0
        if not self.enabled:
            return
        kept, damaged = [], []
        if os.path.exists(self.path):
            with open(self.path) as f:
                for n, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        step = json.loads(line)["step"]
                    except (ValueError, KeyError, TypeError):  # a line cut short by a kill, or damaged
                        damaged.append((n, line.rstrip("\n") + "\n"))
                        continue
                    if step <= keep_through:
                        kept.append(line)
        if damaged:  # kept aside, not lost
            with open(self.path + ".damaged", "a") as f:
                f.writelines(line for _, line in damaged)
            logging.warning("%s: %d unreadable line(s) (line %s) moved to %s", self.path, len(damaged),
                            ", ".join(str(n) for n, _ in damaged), self.path + ".damaged")
        with open(self.path, "w") as f:
            f.writelines(kept)

    def write(self, records) -> None:
        if self.enabled and records:
            with open(self.path, "a") as f:
                f.writelines(json.dumps(r) + "\n" for r in records)


class Progress:
    """One log line per step: key metrics, seconds per step (the first, compiling step excluded) and the ETA."""

    def __init__(self, first: int, last: int, harness: bool = True):
        self.first, self.last, self.harness, self.times = first, last, harness, []

    def update(self, step: int, metrics: dict[str, float]) -> None:
        self.times.append(metrics["time/step"])
        recent = self.times[1:][-20:] or self.times
        per_step = sum(recent) / len(recent)
        eta = time.strftime("%H:%M:%S", time.gmtime(per_step * (self.last - step)))
        harness = ""
        if self.harness:
            harness = (f" | harness: {metrics['critic/accepted']:.0f}/{metrics['critic/candidates']:.0f} accepted, "
                       f"guidance {metrics['guidance/fields_per_task']:.2f}/task, down-weighted "
                       f"{metrics['sampling/downweighted_share']:.2f} (evolver {metrics['time/evolver']:.2f}s, "
                       f"critic {metrics['time/critic']:.2f}s)")
        logging.info("step %d/%d | reward %.2f | oracle %.2f | loss %.4f | kl %.2e | entropy %.3f | gap %.2e | "
                     "%.2f s/step (rollout %.2f, judge %.2f, train %.2f)%s%s | ETA %s", step, self.last,
                     metrics["reward/mean"], metrics.get("oracle/score_mean", float("nan")), metrics["train/loss"],
                     metrics["train/kl"], metrics["train/entropy"], metrics.get("train/engine_gap", float("nan")),
                     per_step, metrics["time/rollout"], metrics["time/judge"], metrics["time/train"], harness,
                     failures.progress_text(metrics), eta)


def use_compilation_cache(directory: str) -> None:
    """Turns on JAX's persistent compilation cache in `directory` (nothing for ''): programs that took over
    JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS (default here 0: every program, the eager ops included) to compile
    are kept there."""
    if not directory:
        return
    jax.config.update("jax_compilation_cache_dir", directory)
    # JAX's default (1 s) keeps only the big programs; the ~50 small ones of a first step add up to seconds.
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


class Startup:
    """Seconds from launch to training, by stage, written to `<workdir>/startup.json` once the first step of this
    process is done (docs/design.md, Measurements, lists the keys)."""

    def __init__(self, process_start: float | None):
        self.begun = time.perf_counter()
        self.imports_s = 0.0 if process_start is None else self.begun - process_start
        self.timings: dict[str, float] = {}  # build.setup's weights_s, tokenizer_s, build_s
        self.compiles = timing.CompileTimer().start()
        self.before_loop = self.compile_before_loop = None

    def loop_starts(self) -> None:
        self.before_loop = time.perf_counter() - self.begun
        self.compile_before_loop = self.compiles.seconds

    def record(self, step: int, first_step_s: float | None) -> dict:
        """The startup record (after the first step, or with first_step_s None when the run did no step)."""
        first_compile = self.compiles.seconds - self.compile_before_loop
        weights, tokenizer = self.timings.get("weights_s", 0.0), self.timings.get("tokenizer_s", 0.0)
        return {
            "weights_s": weights, "tokenizer_s": tokenizer,
            "build_s": self.before_loop - weights - tokenizer,
            "total_s": self.imports_s + self.before_loop + (first_compile if first_step_s is not None else 0.0),
            "imports_s": self.imports_s,
            "compile_s": self.compiles.seconds,
            "first_step_compile_s": first_compile if first_step_s is not None else None,
            "first_step_s": first_step_s,
            "compiles": self.compiles.compiles,
            "compile_cache": jax.config.jax_compilation_cache_dir,
            "compile_cache_hits": self.compiles.cache_hits,
            "xla_flags": os.environ.get("XLA_FLAGS", ""),  # what XLA compiled with (harnessrl_jax/cli.py adds some)
            "start_step": step,
        }

    def write(self, workdir: str, step: int, first_step_s: float | None) -> None:
        self.compiles.stop()
        record = self.record(step, first_step_s)
        logging.info("startup %.1f s: imports %.1f, weights %.1f, tokenizer %.1f, build %.1f, compile %.1f (first "
                     "step %s; %d programs, %d from the compilation cache)", record["total_s"], record["imports_s"],
                     record["weights_s"], record["tokenizer_s"], record["build_s"], record["compile_s"],
                     "-" if first_step_s is None else f"{record['first_step_compile_s']:.1f}", record["compiles"],
                     record["compile_cache_hits"])
        if jax.process_index() == 0:
            with open(os.path.join(workdir, "startup.json"), "w") as f:
                json.dump({k: round(v, 3) if isinstance(v, float) else v for k, v in record.items()}, f, indent=1)
                f.write("\n")


# ------------------------------------------------------------------------------------------------- main


def resume_command(workdir: str) -> str:
    """The command that resumes this run: the one that started it, without --restore_step (which would go back)."""
    if os.path.basename(sys.argv[0]) != "train.py":  # called as a function (tests, notebooks)
        return f"python launch/train.py --config=... --workdir={workdir}"
    args, skip = [], False
    for a in sys.argv[1:]:
        if skip or a.startswith("--restore_step"):
            skip = a == "--restore_step"
            continue
        args.append(shlex.quote(a))
    return " ".join(["python", shlex.quote(sys.argv[0]), *args])


def train(config, workdir: str, stop_after: int | None = None, restore_step: int | None = None,
          on_damaged_checkpoint: str = "previous", *, process_start: float | None = None) -> str:
    """Run (or resume) `config` in `workdir` until config.total_steps, or `stop_after` steps; returns workdir.
    `restore_step` resumes from that checkpoint; `on_damaged_checkpoint` 'previous' or 'stop' (the flags);
    `process_start` (perf_counter) is when the process began, for startup.json's imports_s (0 without it)."""
    startup = Startup(process_start)
    try:
        return _train(config, workdir, stop_after, restore_step, on_damaged_checkpoint, startup)
    finally:
        startup.compiles.stop()


def _train(config, workdir, stop_after, restore_step, on_damaged_checkpoint, startup: Startup) -> str:
    import sqlite3

    from harnessrl_jax import build, checks, methods, stages
    from harnessrl_jax.eval import cadence
    from harnessrl_jax.memory import semantic
    from harnessrl_jax.rl.checkpoint import Checkpointer
    from harnessrl_jax.rl.step import to_host
    from harnessrl_jax.settings import section
    from harnessrl_jax.stepper import Stepper

    # --- set-up
    checks.validate(config)
    method = methods.describe(config)
    checkpoint, embedder = section(config, "checkpoint"), section(config, "memory").embedder_name()
    problems = failures.check_workdir(workdir, checkpoint.min_free_mb)
    if problems:
        raise UserError(problems[0])
    ckpt = Checkpointer(os.path.join(workdir, "checkpoints"), max_to_keep=checkpoint.max_to_keep,
                        save_every=checkpoint.every, async_save=checkpoint.async_save)
    if restore_step is not None and restore_step not in ckpt.all_steps():  # before a model loads for nothing
        raise UserError(f"--restore_step={restore_step}: no checkpoint {restore_step} under {ckpt.directory} "
                        f"(there are: {', '.join(map(str, ckpt.all_steps())) or 'none'})")
    run = build.setup(config, startup.timings)
    if method.memory and embedder:  # the semantic index's model loads while the train state is built
        semantic.preload_embedder(embedder)
    stepper = Stepper(run, method, workdir)
    # A damaged checkpoint is named in one line (rl.checkpoint.DamagedCheckpoint is a UserError).
    restored = ckpt.restore_intact(run.trainer.abstract_state(), restore_step,
                                   fallback=on_damaged_checkpoint == "previous")
    if restored is None:
        state, start = build.initial_state(run), 0
        stepper.start(None)
    else:
        state, extra, _, _ = restored
        state = run.trainer.with_base(state, run.initial_params)  # LoRA: the adapters on the config's weights
        start = int(to_host(state.step))
        try:
            stepper.start(extra)
        except sqlite3.DatabaseError as e:
            raise UserError(f"the memory in {os.path.join(workdir, 'memory')} is damaged ({e}): it cannot be cut "
                            f"back to checkpoint {start}; train in a new --workdir") from None
        except ValueError as e:  # a memory or harness that is not this checkpoint's
            raise UserError(f"cannot resume from checkpoint {start} in {workdir}: {e}") from None
        stages.push_weights(run, run.trainer.policy_params(state))
        logging.info("resumed from step %d (%s)", start, ckpt.directory)
    run.initial_params = None  # the state holds the policy now: the host copy of the weights is freed
    end = config.total_steps if stop_after is None else min(stop_after, config.total_steps)
    # metrics.jsonl numbers a step by the updates done after it (1-based); harness.jsonl by the step that proposed
    # its candidates (0-based).
    metrics_log = JsonlLog(os.path.join(workdir, "metrics.jsonl"), keep_through=start)
    board = None  # TensorBoard's view of metrics.jsonl, rebuilt from its kept lines (harnessrl_jax.tensorboard_log)
    if config.tensorboard and jax.process_index() == 0:
        from harnessrl_jax.tensorboard_log import TensorBoardLog

        board = TensorBoardLog(workdir)
    harness_log = JsonlLog(os.path.join(workdir, "harness.jsonl"), keep_through=start - 1)
    if jax.process_index() == 0:
        with open(os.path.join(workdir, "config.json"), "w") as f:
            f.write(config.to_json_best_effort(indent=2))
    progress = Progress(start, config.total_steps, harness=not method.frozen)
    evaluation = section(config, "eval")
    if evaluation.every:  # the validation and test tasks, once; the policy the loop starts from (step 0: the seed
        # policy; a resumed run's checkpoint, evaluated again in case the stopped run had not)
        eval_sets, eval_judge = cadence.eval_sets(run), cadence.ood_judge(config)
        eval_log = cadence.EvalLog(workdir, keep_through=start - 1) if jax.process_index() == 0 else None

        def evaluate(step: int) -> None:
            lines = cadence.evaluate_step(run, eval_sets, step, judge=eval_judge, progress=logging.info)
            if eval_log is not None:
                eval_log.write(lines)

        if cadence.due(start, evaluation.every, config.total_steps):
            evaluate(start)
    startup.loop_starts()
    if start >= end:
        startup.write(workdir, start, None)

    # --- the loop
    saved = start
    for step in range(start, end):
        start_time = time.perf_counter()
        try:
            state, metrics, records = stepper.step(state, step)
        except failures.Outage as e:  # a server stayed down: keep what is done, say how to go on
            if step not in ckpt.all_steps():
                ckpt.save(step, state, stepper.extra_before_step(), force=True)
            ckpt.wait()
            ckpt.close()
            stepper.close()
            run.close()
            if board is not None:
                board.close()
            raise UserError(failures.stopped_message(e, step, ckpt.directory, resume_command(workdir))) from None
        metrics["time/step"] = time.perf_counter() - start_time
        metrics["process/peak_rss_gb"] = timing.peak_rss_bytes() / 1e9
        if step == start:
            startup.write(workdir, start, metrics["time/step"])

        # --- logging
        metrics_log.write([{"step": step + 1, **metrics}])
        if board is not None:
            board.write({"step": step + 1, **metrics})
        harness_log.write(records)
        progress.update(step + 1, metrics)

        # --- checkpointing (the interval is the checkpointer's; the last step is always saved)
        if (step + 1) % ckpt.save_every == 0 or step + 1 == end:
            ckpt.save(step + 1, state, stepper.extra(), force=True)
            saved = step + 1

        # --- evaluation (the engine holds the weights of step + 1; its time is not the step's)
        if cadence.due(step + 1, evaluation.every, config.total_steps):
            evaluate(step + 1)
    if saved != end:
        ckpt.save(end, state, stepper.extra(), force=True)
    ckpt.wait()
    ckpt.close()
    stepper.close()
    run.close()
    if evaluation.every and eval_judge is not None:
        eval_judge.close()
    if board is not None:
        board.close()
    if jax.process_index() == 0 and config.report:
        from launch import report  # matplotlib is imported only here

        report.write_report(workdir)
    logging.info("done: %d steps in %s", end, workdir)
    return workdir



def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    # orbax logs every file it writes at INFO; keep its warnings, drop the rest from the console.
    logging.get_absl_handler().python_handler.addFilter(
        lambda r: r.levelno >= std_logging.WARNING or f"{os.sep}orbax{os.sep}" not in r.pathname)
    initialize_distributed(FLAGS.coordinator_address, FLAGS.num_processes, FLAGS.process_id)
    use_compilation_cache(FLAGS.compilation_cache)
    train(FLAGS.config, FLAGS.workdir, stop_after=FLAGS.stop_after, restore_step=FLAGS.restore_step,
          on_damaged_checkpoint=FLAGS.on_damaged_checkpoint, process_start=PROCESS_START)


if __name__ == "__main__":
    flags.mark_flags_as_required(["config", "workdir"])
    cli.run(main)
