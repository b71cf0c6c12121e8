"""launch/train.py end to end: the tiny model learns the toy rule task; the run directory has what docs/design.md
names; a config that cannot run is reported before any model loads."""

import json
import os
import subprocess
import sys

import pytest

from harnessrl_jax import cli

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LEARNING_STEPS = 30


def run_train(workdir, *overrides, timeout=600):
    cmd = [sys.executable, os.path.join(REPO, "launch", "train.py"), f"--workdir={workdir}", *overrides]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-4000:]
    return out.stderr


def read_metrics(workdir):
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def read_startup(workdir):
    """startup.json, checked for the keys and stages docs/design.md (Measurements) names."""
    with open(os.path.join(workdir, "startup.json")) as f:
        startup = json.load(f)
    for key in ("weights_s", "tokenizer_s", "build_s", "imports_s", "compile_s"):
        assert startup[key] >= 0, (key, startup)
    assert startup["total_s"] >= startup["imports_s"] + startup["weights_s"] + startup["tokenizer_s"] + \
        startup["build_s"] - 1e-2, startup  # each value rounded to 1 ms
    assert 0 <= startup["compile_cache_hits"] <= startup["compiles"]
    # the XLA_FLAGS it compiled with: the ones it inherited from the tests, with the launch scripts' own among them
    recorded = startup["xla_flags"].split()
    assert set(os.environ["XLA_FLAGS"].split()) | set(cli.default_xla_flags().split()) <= set(recorded), startup
    return startup


def test_tiny_model_learns_the_toy_rule_task(letters_run):
    """Reward (share of the rubric's points) rises from below 0.2 to above 0.8 within 30 GRPO steps."""
    workdir, log = letters_run
    metrics = read_metrics(workdir)
    reward = [m["reward/mean"] / 100 for m in metrics]
    assert [m["step"] for m in metrics] == list(range(1, LEARNING_STEPS + 1))
    assert reward[0] < 0.2, reward
    assert max(reward) > 0.8, reward
    assert sum(reward[-5:]) / 5 > 0.8, reward  # and it stays there

    first = metrics[0]
    for key in ("time/rollout", "time/judge", "time/train", "time/step", "train/loss", "train/kl",
                "train/entropy", "train/clip_low", "train/clip_high", "train/engine_gap", "train/grad_norm",
                "train/lr", "advantage/abs_mean", "reward/zero_variance_fraction", "rollout/length_mean"):
        assert key in first, key
    assert first["train/engine_gap"] < 1e-4  # float32 engine and trainer agree
    peaks = [m["process/peak_rss_gb"] for m in metrics]  # the process's peak so far: never falls, and plausible
    assert 0.2 < peaks[0] and peaks == sorted(peaks) and peaks[-1] < 32, peaks
    assert "ETA" in log and f"step {LEARNING_STEPS}/{LEARNING_STEPS}" in log
    assert os.path.getsize(os.path.join(workdir, "harness.jsonl")) == 0  # GRPO: frozen harness
    config = json.load(open(os.path.join(workdir, "config.json")))
    assert config["method"] == "grpo" and config["tasks"]["sampler"] == "harness"  # the same sampler as HarnessRL
    assert config["harness"]["attributor"]["blind_window"] == 2  # every threshold is in the run's config.json
    # The attributor observed the frozen harness too, from the memory every method keeps.
    assert all(sum(m[f"attribution/frac_{k}"] for k in ("blind", "saturated", "spurious", "agree")) == 1.0
               for m in metrics)
    assert os.path.exists(os.path.join(workdir, "memory", "memory.sqlite"))
    assert str(LEARNING_STEPS) in os.listdir(os.path.join(workdir, "checkpoints"))
    startup = read_startup(workdir)
    assert startup["start_step"] == 0 and startup["first_step_s"] > startup["first_step_compile_s"] > 0
    assert "startup " in log

    # Started again, a finished run restores its last checkpoint and has nothing left to do.
    log = run_train(workdir, "--config=experiments/tiny_cpu.py", f"--config.total_steps={LEARNING_STEPS}",
                    "--config.checkpoint.every=15", "--config.report=False")
    assert f"resumed from step {LEARNING_STEPS}" in log
    assert read_metrics(workdir) == metrics
    startup = read_startup(workdir)
    assert startup["start_step"] == LEARNING_STEPS and startup["first_step_s"] is None


def test_a_config_that_cannot_run_is_one_short_message_listing_every_missing_piece(tmp_path):
    """The paper's 4B config on a machine without its model, tasks, judge or embedder: one message naming each
    with its flag, before any model loads; no traceback, nothing written."""
    workdir = tmp_path / "run"
    cmd = [sys.executable, os.path.join(REPO, "launch", "train.py"), "--config=experiments/rubric_mix_4b.py",
           f"--workdir={workdir}", "--config.judge.base_url=http://127.0.0.1:9/v1", "--config.judge.model=judge"]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-3000:]
    message = out.stderr[out.stderr.index("error: the config cannot run"):]
    for flag in ("--config.tasks.path", "--config.model_name=qwen3.5-4b", "--config.memory.embedder",
                 "--config.rollout.base_urls", "--config.rollout.weights_dir",
                 "--config.judge.base_url=http://127.0.0.1:9/v1: the judge server does not answer"):
        assert flag in message, message
    assert len(message.splitlines()) <= 10 and not workdir.exists()


@pytest.mark.slow
def test_smollm2_cpu_config_runs_a_step(tmp_path):
    """The `make demo` config (the real model on the bundled mini set) for one step."""
    workdir = str(tmp_path / "run")
    run_train(workdir, "--config=experiments/smollm2_cpu.py", "--config.total_steps=1", timeout=900)
    (m,) = read_metrics(workdir)
    assert m["train/engine_gap"] < 1e-3 and m["rollout/length_mean"] > 0
    startup = read_startup(workdir)
    assert startup["weights_s"] > 0 and startup["tokenizer_s"] > 0 and startup["first_step_compile_s"] > 0


def test_plan_compiles_the_sharded_step_on_fake_devices():
    """launch/plan.py sizes a config's step per device without running it: the tiny config over 8 devices
    (compiled with LLVM's optimisation off, which leaves XLA's buffer assignment as it is: see tests/test_plan.py)."""
    cmd = [sys.executable, os.path.join(REPO, "launch", "plan.py"), "--config=experiments/tiny_cpu.py",
           "--devices=8", "--device_memory_gb=1"]
    env = {**os.environ, "XLA_FLAGS": "--xla_backend_optimization_level=0"}  # plan.py adds its fake devices
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "{'data': 1, 'fsdp': 8, 'tensor': 1} over 8 devices" in out.stdout
    assert "32 rows x 24 tokens" in out.stdout and "(fits)" in out.stdout
    assert "XLA temporaries" in out.stdout and "TFLOP" in out.stdout


@pytest.mark.parametrize("script, args, words", [
    ("eval.py", ["--config=experiments/tiny_cpu.py", "--workdir={tmp}/none", "--split=train"],
     "no checkpoint under"),
    ("cold_start.py", ["--config=experiments/tiny_cpu.py:method=harnessrl,tasks=harness", "--out={tmp}/no/dir.json"],
     "does not exist"),
    ("report.py", ["--workdir={tmp}/none"], "{tmp}/none"),
])
def test_launch_scripts_report_a_users_mistake_in_one_line(tmp_path, script, args, words):
    cmd = [sys.executable, os.path.join(REPO, "launch", script), *(a.format(tmp=tmp_path) for a in args)]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    errors = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-3000:]
    assert len(errors) == 1 and words.format(tmp=tmp_path) in errors[0], out.stderr[-3000:]
