"""Failures that change what the reward means never pass silently (harnessrl_jax.failures, rl.checkpoint, train.py).

Unit level: the judge's outage policy against a stand-in server that drops connections, refuses them or answers
503 (failed cells re-asked, counted, a judge that stays down named with its failure kinds), the evolver model's and
the oracle's, the workdir check. Run level, on the tiny HarnessRL config with an LLM criterion judged by the
stand-in (which requires a planted API key): a straight 4-step run is the reference; a judge that dies mid-run stops
it with a checkpoint and the resume reproduces the reference exactly; so does a run whose newest checkpoint is
damaged, one resumed with --restore_step, and runs killed (SIGKILL) during a checkpoint write and during a memory
write; a damaged memory or log line is named; and the key appears in no output of any run.
"""

from __future__ import annotations

import glob
import io
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from harnessrl_jax import failures
from harnessrl_jax.errors import UserError
from harnessrl_jax.rubric.judges import OpenAIJudge, RoutingJudge
from harnessrl_jax.rubric.judges.standin import StandInServer, standin_verdict
from harnessrl_jax.rubric.schema import Criterion, Task

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEY_ENV = "HARNESSRL_TEST_JUDGE_KEY"
KEY = "sk-test-PLANTED-4f9c2e71d0b84a6b9e3c5d7a1f2e8b60"  # planted: no output of a run may contain it
POLICY = failures.OutagePolicy(max_failed_fraction=0.02, pause_s=0.0, retries=2)

TASK = Task("t", "toy", ({"role": "user", "content": "say q"},),
            (Criterion("t/0", "The letter 'q' appears.", 1.0), Criterion("t/1", "It says \"honey\".", 1.0)))
RESPONSES = ["q honey", "qq", "honey", "zz", "q", "hq"]


def reference(task=TASK, responses=RESPONSES) -> np.ndarray:
    return np.array([[standin_verdict(c.text, r) for r in responses] for c in task.criteria], float)


def guarded(server, **kw) -> failures.GuardedJudge:
    judge = OpenAIJudge(server.base_url, "standin", max_retries=0, timeout_s=5.0, max_concurrency=4, **kw)
    return failures.GuardedJudge(RoutingJudge(judge), POLICY)


@pytest.fixture
def server():
    with StandInServer() as s:
        yield s


# ------------------------------------------------------------------------------------------------ the judge


def test_failed_cells_are_asked_again_after_a_pause_and_only_they(server):
    pauses = []
    judge = guarded(server)
    server.fail_after = 5  # the server dies after 5 of the 12 calls ...

    def recover(s):  # ... and is back when the pause is over
        pauses.append(s)
        server.fail_after = None

    judge.sleep = recover
    m = judge.score(TASK, RESPONSES)
    assert (m.status == "ok").all() and np.array_equal(m.verdicts, reference())
    assert pauses == [0.0] and judge.stats["outage_retries"] == 1
    # the 7 dropped calls were asked once more, the 5 answered ones never again
    assert sorted(server.by_prompt.values()) == [1] * 5 + [2] * 7 and server.requests == 19
    assert judge.stats["cells"] == 12 and judge.stats["error_cells"] == 0


def test_a_judge_that_stays_down_is_named_with_its_failure_kinds(server):
    judge = guarded(server)
    server.stop()  # connection refused
    with pytest.raises(failures.JudgeOutage) as e:
        judge.score(TASK, RESPONSES)
    msg = str(e.value)
    assert server.base_url in msg and "(standin)" in msg and "12 of 12 cells" in msg and "error 12" in msg
    assert "Connection refused" in msg and "after 2 retries" in msg and "--config.judge.outage_retries" in msg
    assert isinstance(e.value, UserError) and "\n" not in msg


def test_a_few_failed_cells_under_the_threshold_are_counted_and_shown_not_retried(server):
    judge = failures.GuardedJudge(guarded(server).judge, failures.OutagePolicy(0.2, 0.0, 2))
    before = judge.stats
    server.fail_after = 10  # 2 of 12 cells fail: 17% <= 20%
    m = judge.score(TASK, RESPONSES)
    metrics = failures.judge_step_metrics(before, judge.stats)
    assert int((m.status == "error").sum()) == 2 and server.requests == 12
    assert metrics["judge/cells"] == 12 and metrics["judge/failed"] == 2 and metrics["judge/failed/error"] == 2
    assert metrics["judge/outage_retries"] == 0 and metrics["judge/failed_fraction"] == pytest.approx(2 / 12)
    assert failures.progress_text(metrics) == " | judge failed 2/12 (error 2), unparsed 0"


def test_unparsed_answers_are_counted_but_not_retried(server, monkeypatch):
    from harnessrl_jax.rubric.judges import standin

    monkeypatch.setattr(standin, "answer", lambda prompt: "lorem ipsum dolor")
    judge = guarded(server)
    before = judge.stats
    m = judge.score(TASK, RESPONSES)
    metrics = failures.judge_step_metrics(before, judge.stats)
    assert (m.status == "unparsed").all() and server.requests == 12
    assert metrics["judge/unparsed"] == 12 and metrics["judge/failed"] == 0


def test_a_server_error_body_never_carries_the_key_into_a_message(server, monkeypatch):
    """A proxy that echoes the request's Authorization header in its 503 page: the failure detail, the cell's
    explanation and the outage message keep the key out."""
    monkeypatch.setenv(KEY_ENV, KEY)
    server.mode = "503"
    server.echo_auth = True
    judge = guarded(server, api_key_env=KEY_ENV)
    with pytest.raises(failures.JudgeOutage) as e:
        judge.score(TASK, RESPONSES)
    assert "HTTP 503" in str(e.value) and KEY not in str(e.value) and "Bearer ***" in str(e.value)
    assert KEY not in repr(judge)


# ------------------------------------------------------------------------------------- evolver model, oracle


def test_the_evolver_model_is_asked_again_then_stops_the_run_naming_it(server):
    from harnessrl_jax.evolver.hacking import LLMHackingCheck

    client = failures.GuardedClient(OpenAIJudge(server.base_url, "standin", max_retries=0, timeout_s=5.0),
                                    failures.OutagePolicy(0.0, 0.0, 2), "evolver model",
                                    sleep=lambda s: setattr(server, "fail_after", None))
    check = LLMHackingCheck(client)
    assert check(TASK, TASK.criteria[0], ["q"], ["z"], []).spurious is False
    server.fail_after = server.requests  # the next call is dropped; the server is back after the pause
    assert check(TASK, TASK.criteria[0], ["q"], ["z"], []).spurious is False
    assert client.stats["outage_retries"] == 1 and client.stats["failed_calls"] == 1
    server.stop()
    client.sleep = lambda s: None
    with pytest.raises(failures.ModelOutage, match=r"the evolver model at .*standin.* 1 of 1 call got no answer"):
        check(TASK, TASK.criteria[0], ["q"], ["z"], [])


def test_a_request_the_evolver_server_refuses_is_returned_not_retried(server):
    server.api_key = KEY  # no key sent: 401, the request's fault, not an outage
    client = failures.GuardedClient(OpenAIJudge(server.base_url, "standin", max_retries=0), POLICY, "evolver model")
    out = client.complete(({"role": "user", "content": "hi"},), {"type": "object"})
    assert out.status == "error" and "HTTP 401" in out.detail and server.requests == 1
    assert client.stats["outage_retries"] == 0


def test_the_oracle_asks_unanswered_pairs_again_and_stops_when_it_stays_down(server, tmp_path):
    from harnessrl_jax.eval.oracle import PairwiseOracle, make_client

    oracle = PairwiseOracle(make_client("openai", "standin", base_url=server.base_url, max_retries=0),
                            tmp_path / "o.sqlite", max_workers=2)
    jobs = PairwiseOracle.pair_jobs(TASK, ["qq", "q", ""])
    server.fail_after = 2
    recovered = oracle.verdicts_until_answered(jobs, POLICY, sleep=lambda s: setattr(server, "fail_after", None))
    assert recovered == ["A", "B", "A", "B", "A", "B"]
    oracle.close()
    again = PairwiseOracle(make_client("openai", "standin", base_url=server.base_url, max_retries=0),
                           tmp_path / "o2.sqlite", max_workers=2)
    server.stop()
    with pytest.raises(failures.ModelOutage, match="the oracle at .* 6 of 6 calls got no answer"):
        again.verdicts_until_answered(jobs, POLICY, sleep=lambda s: None)
    again.close()


# -------------------------------------------------------------------------------------------------- workdir


def test_an_unwritable_or_full_workdir_is_named_before_the_model_loads(tmp_path, monkeypatch):
    from harnessrl_jax import build, settings

    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert failures.check_workdir(str(blocker / "run"), 0) == [
        f"--workdir={blocker / 'run'}: cannot write there (Not a directory: {blocker / 'run'})"]
    (why,) = failures.check_workdir(str(tmp_path / "run"), 1e12)
    assert why.startswith(f"--workdir={tmp_path / 'run'}: only ") and "--config.checkpoint.min_free_mb=1e+12" in why
    assert failures.check_workdir(str(tmp_path / "ok"), 1) == [] and os.listdir(tmp_path / "ok") == []

    train = train_module()
    monkeypatch.setattr(build, "setup", lambda config: pytest.fail("the model loaded"))
    config = settings.load(os.path.join(REPO, "experiments", "tiny_cpu.py"))
    with pytest.raises(UserError, match="cannot write there"):
        train.train(config, str(blocker / "run"))


# ---------------------------------------------------------------------------------------- whole runs


def train_module():
    """launch/train.py as a module, shared through sys.modules with tests/rl/test_checkpoint.py (absl flags)."""
    import importlib.util

    if "launch_train" not in sys.modules:
        spec = importlib.util.spec_from_file_location("launch_train", os.path.join(REPO, "launch", "train.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules["launch_train"] = module
    return sys.modules["launch_train"]


def rule(rule_id, **kwargs):
    return ["verifier:rule", f"rule:{rule_id}", "rule_kwargs:" + json.dumps(kwargs)]


SHORT = {"criterion": "The response is under 50 words.", "points": 1,
         "tags": rule("length_constraints:number_words", num_words=50, relation="less than")}
# toy.harness_tasks (a varying, a saturated and a blind rule criterion, so the evolver acts within 4 steps), each with
# an LLM criterion the stand-in judges.
TASKS = [
    {"id": "say-q", "domain": "toy", "prompt": [{"role": "user", "content": "say q"}],
     "rubrics": [{"criterion": "The letter 'q' appears at least once.", "points": 2,
                  "tags": rule("keywords:letter_frequency", letter="q", let_frequency=1, let_relation="at least")},
                 SHORT, {"criterion": "The response has the letter 'e'.", "points": 1}]},
    {"id": "say-honey", "domain": "toy", "prompt": [{"role": "user", "content": "say honey"}],
     "rubrics": [{"criterion": "The response says honey.", "points": 2, "tags": rule("keywords:existence",
                                                                                    keywords=["honey"])},
                 SHORT, {"criterion": "The response has the letter 'q'.", "points": 1}]},
]


@pytest.fixture(scope="module")
def setting(tmp_path_factory):
    """(stand-in judge that requires the planted key, task file, flag list); the key is in the environment."""
    root = tmp_path_factory.mktemp("failures")
    path = root / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    os.environ[KEY_ENV] = KEY
    server = StandInServer(api_key=KEY)
    flags = ["--config=experiments/tiny_cpu.py:method=harnessrl", "--config.tasks.source=jsonl",
             f"--config.tasks.path={path}", "--config.tasks_per_step=2", "--config.total_steps=4",
             "--config.checkpoint.every=2", "--config.report=False", "--config.judge.kind=openai",
             f"--config.judge.base_url={server.base_url}", "--config.judge.model=standin",
             f"--config.judge.api_key_env={KEY_ENV}", "--config.judge.max_retries=0",
             "--config.judge.outage_pause_s=0", "--config.judge.outage_retries=1"]
    yield server, flags
    server.close()
    os.environ.pop(KEY_ENV, None)


def config_of(flags, **overrides):
    """The ConfigDict the flag list gives launch/train.py (same values, built in-process)."""
    from harnessrl_jax import settings

    spec = flags[0].split("=", 1)[1]
    config = settings.load(os.path.join(REPO, spec))
    for f in flags[1:]:
        key, value = f.removeprefix("--config.").split("=", 1)
        *parents, leaf = key.split(".")
        node = config
        for p in parents:
            node = node[p]
        old = node[leaf]
        node[leaf] = type(old)(value) if not isinstance(old, bool) else value == "True"
    for key, value in overrides.items():
        *parents, leaf = key.split(".")
        node = config
        for p in parents:
            node = node[p]
        node[leaf] = value
    return config


def metrics_of(workdir):
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [json.dumps({k: v for k, v in json.loads(line).items() if not k.startswith(("time/", "process/"))})
                for line in f]


def lines_of(workdir, name="harness.jsonl"):
    with open(os.path.join(workdir, name)) as f:
        return f.read().splitlines()


def final_params(workdir):
    from harnessrl_jax.rl.checkpoint import Checkpointer

    with Checkpointer(os.path.join(workdir, "checkpoints")) as ckpt:
        step = ckpt.latest_step()
        with open(os.path.join(ckpt.directory, str(step), "extra", "metadata")) as f:
            extra = json.load(f)
    return step, extra


def memory_steps(workdir):
    from harnessrl_jax.memory import RecordStore

    store = RecordStore(os.path.join(workdir, "memory", RecordStore.FILE))
    try:
        return store.positions()
    finally:
        store.close()


def assert_same_run(workdir, straight):
    """The run in `workdir` is the reference run: every metric, harness record, memory position, final extra."""
    assert metrics_of(workdir) == metrics_of(straight)
    assert lines_of(workdir) == lines_of(straight)
    assert memory_steps(workdir) == memory_steps(straight)
    assert final_params(workdir) == final_params(straight)
    from harnessrl_jax.rl.checkpoint import Checkpointer

    with Checkpointer(os.path.join(workdir, "checkpoints")) as a, \
            Checkpointer(os.path.join(straight, "checkpoints")) as b:
        step = a.latest_step()
        assert b._integrity(step)["state"] == a._integrity(step)["state"]  # bitwise-equal train state


@pytest.fixture(scope="module")
def straight(setting, tmp_path_factory):
    """(workdir, log) of the reference run: 4 steps, checkpoints at 2 and 4, the judge up throughout."""
    server, flags = setting
    workdir = str(tmp_path_factory.mktemp("straight") / "run")
    stream = io.StringIO()
    handler, root = logging.StreamHandler(stream), logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)  # the progress lines, the judge's warnings
    try:
        train_module().train(config_of(flags, report=True), workdir)
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    return workdir, stream.getvalue()


def copy_run(src, tmp_path):
    dst = str(tmp_path / "run")
    shutil.copytree(src, dst)
    return dst


def test_a_dead_judge_stops_the_run_with_a_checkpoint_and_the_resume_continues_exactly(setting, straight, tmp_path):
    server, flags = setting
    ref, _ = straight
    train = train_module()
    workdir = str(tmp_path / "run")
    calls_step_1 = json.loads(metrics_of(ref)[0])["judge/calls"]
    server.fail_after = server.requests + int(calls_step_1)  # the judge dies right after step 1 is judged
    try:
        with pytest.raises(UserError) as e:
            train.train(config_of(flags, **{"checkpoint.every": 100}), workdir)
    finally:
        server.fail_after = None
    msg = str(e.value)
    assert f"the judge at {server.base_url} (standin) keeps failing" in msg and "error 16" in msg
    assert "Stopped at step 2: the checkpoint of step 1" in msg and "resume with the same command" in msg
    assert KEY not in msg
    # what the stopped run leaves: the checkpoint of step 1, one metrics line, the memory of step 1
    assert sorted(os.listdir(os.path.join(workdir, "checkpoints"))) == ["1"]
    assert len(metrics_of(workdir)) == 1 and memory_steps(workdir)["step"] == 0
    train.train(config_of(flags, **{"checkpoint.every": 100}), workdir)  # the judge is back
    assert metrics_of(workdir) == metrics_of(ref) and lines_of(workdir) == lines_of(ref)
    assert memory_steps(workdir) == memory_steps(ref) and final_params(workdir) == final_params(ref)


def damage(path: str) -> None:
    """Flips one byte in the middle of a file: it still reads, with another value."""
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        data[len(data) // 2] ^= 0x01
        f.seek(0)
        f.write(data)


def largest_array_file(step_dir: str) -> str:
    """The train state's largest array chunk (zarr: chunk files are named by their indices, e.g. 0.0.0)."""
    files = [f for f in glob.glob(os.path.join(step_dir, "state", "**", "*"), recursive=True)
             if re.fullmatch(r"[0-9.]+", os.path.basename(f))]
    return max(files, key=os.path.getsize)


def test_a_damaged_newest_checkpoint_is_named_and_the_run_resumes_from_the_one_before(setting, straight, tmp_path,
                                                                                      caplog):
    _, flags = setting
    ref, _ = straight
    workdir = copy_run(ref, tmp_path)
    damage(largest_array_file(os.path.join(workdir, "checkpoints", "4")))
    train = train_module()
    with pytest.raises(UserError, match=r"checkpoint .*checkpoints/4 is damaged: .*--restore_step=2 "
                                         r".*--on_damaged_checkpoint=previous"):
        train.train(config_of(flags), workdir, on_damaged_checkpoint="stop")
    assert sorted(os.listdir(os.path.join(workdir, "checkpoints"))) == ["2", "4"]  # nothing moved when stopping
    with caplog.at_level(logging.WARNING):
        train.train(config_of(flags), workdir)
    named = [r.getMessage() for r in caplog.records if "is damaged" in r.getMessage()]
    assert len(named) == 1 and "restoring step 2 instead" in named[0] and "\n" not in named[0]
    assert os.listdir(os.path.join(workdir, "checkpoints_damaged")) == ["4"]
    assert_same_run(workdir, ref)


def test_restore_step_resumes_from_an_older_checkpoint_and_a_cut_log_line_is_kept_aside(setting, straight,
                                                                                          tmp_path):
    _, flags = setting
    ref, _ = straight
    workdir = copy_run(ref, tmp_path)
    with open(os.path.join(workdir, "metrics.jsonl"), "a") as f:
        f.write('{"step": 5, "reward/me')  # a line cut short
    train_module().train(config_of(flags), workdir, restore_step=2)
    assert os.listdir(os.path.join(workdir, "checkpoints_set_aside")) == ["4"]
    assert lines_of(workdir, "metrics.jsonl.damaged") == ['{"step": 5, "reward/me']
    assert_same_run(workdir, ref)


def test_a_damaged_memory_is_named_in_one_line(setting, straight, tmp_path):
    _, flags = setting
    ref, _ = straight
    workdir = copy_run(ref, tmp_path)
    from harnessrl_jax.memory import RecordStore

    path = os.path.join(workdir, "memory", RecordStore.FILE)
    assert os.path.exists(path)
    with open(path, "r+b") as f:
        f.write(b"\0" * 4096)  # the header page
    with pytest.raises(UserError, match=r"the memory in .*memory is damaged .* train in a new --workdir"):
        train_module().train(config_of(flags), workdir, restore_step=2)


KILL = textwrap.dedent("""
    import os, runpy, signal, sys
    sys.argv = ["launch/train.py"] + sys.argv[2:]
    sys.path.insert(0, os.getcwd())
    point = {point!r}
    if point == "checkpoint":  # the checkpoint of step 4: written, killed before orbax commits it
        from orbax.checkpoint._src.path import atomicity
        original = atomicity.AtomicRenameTemporaryPath.finalize
        async def killing(self, *a, **k):
            if self._final_path.name == "4":
                os.kill(os.getpid(), signal.SIGKILL)
            return await original(self, *a, **k)
        atomicity.AtomicRenameTemporaryPath.finalize = killing
    else:  # the memory write of step 4 (0-based 3): killed inside its transaction
        from harnessrl_jax.memory import store
        original = store.RecordStore._insert_draw
        def killing(self, record):
            if record.step == 3:
                os.kill(os.getpid(), signal.SIGKILL)
            return original(self, record)
        store.RecordStore._insert_draw = killing
    runpy.run_path("launch/train.py", run_name="__main__")
""")


@pytest.mark.slow
@pytest.mark.parametrize("point", ["checkpoint", "memory"])
def test_a_run_killed_while_writing_resumes_exactly(setting, straight, tmp_path, point):
    _, flags = setting
    ref, _ = straight
    workdir = str(tmp_path / "run")
    # no re-execution for malloc's tunables (cli.reexec_with_malloc_tunables): it would drop the killing patch
    proc = subprocess.run([sys.executable, "-c", KILL.format(point=point), "--", *flags, f"--workdir={workdir}"],
                          cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "HARNESSRL_NO_REEXEC": "1"})
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    ckpts = sorted(os.listdir(os.path.join(workdir, "checkpoints")))
    if point == "checkpoint":
        assert "2" in ckpts and "4" not in ckpts and any(".orbax-checkpoint-tmp" in c for c in ckpts), ckpts
        assert memory_steps(workdir)["step"] == 3 and len(metrics_of(workdir)) == 4
    else:
        assert ckpts == ["2"] and memory_steps(workdir)["step"] == 2 and len(metrics_of(workdir)) == 3
    train_module().train(config_of(flags), workdir)
    assert_same_run(workdir, ref)
    if point == "checkpoint":
        assert any(".orbax-checkpoint-tmp" in d for d in os.listdir(os.path.join(workdir, "checkpoints_damaged")))


def test_a_planted_api_key_appears_in_no_output_of_a_run(setting, straight):
    server, _ = setting
    workdir, log = straight
    metrics = [json.loads(m) for m in metrics_of(workdir)]
    # the key was used: every LLM-judged cell was answered by the server that requires it
    assert all(m["judge/cells"] > 0 and m["judge/failed"] == 0 for m in metrics)
    assert log.count(", unparsed 0") == 4 and "| judge failed 0/16" in log  # every progress line says it
    assert KEY_ENV in open(os.path.join(workdir, "config.json")).read()
    outputs = [p for p in glob.glob(os.path.join(workdir, "**", "*"), recursive=True) if os.path.isfile(p)]
    assert len(outputs) > 10 and log
    for path in outputs:
        with open(path, "rb") as f:
            assert KEY.encode() not in f.read(), path
    assert KEY not in log

