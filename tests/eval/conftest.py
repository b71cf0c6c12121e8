"""Fixtures of the evaluation tests: the local stand-in of Anthropic's API, and one tiny HarnessRL run (trained,
evaluated on the OOD fixtures, judged by the oracle) shared by the notebook tests."""

import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from anthropic_standin import StandIn  # noqa: E402

FIX = os.path.join(REPO, "tests", "eval", "fixtures", "ood")


def ood_flag(ifbench_path: str) -> str:
    return (f"--ood=medqa={FIX}/medqa/phrases_no_exclude_test.jsonl,gpqa={FIX}/gpqa/gpqa_diamond.csv,"
            f"rolebench={FIX}/rolebench,ifbench={ifbench_path}")


def ifbench_without_start_verb(directory) -> str:
    """The IFBench fixture less its words:start_verb record: that checker needs NLTK's tagger model, which no
    package ships (tests/eval/test_ood.py scores the whole file with the tagger stubbed)."""
    path = os.path.join(directory, "IFBench_test.jsonl")
    with open(os.path.join(FIX, "ifbench", "IFBench_test.jsonl")) as src, open(path, "w") as out:
        out.writelines(line for line in src if "words:start_verb" not in line)
    return path


@pytest.fixture
def standin():
    servers = []

    def make(**kw):
        servers.append(StandIn(**kw))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def _run(*args, env=None):
    out = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=600,
                         env={**os.environ, **(env or {})})
    assert out.returncode == 0, out.stderr[-4000:]
    return out


@pytest.fixture(scope="session")
def analysed_runs(harnessrl_run, tmp_path_factory):
    """A compare-style directory with the session's tiny HarnessRL run (`harnessrl-s0`, tiny_cpu.py:
    method=harnessrl,tasks=harness, 6 steps): its seed policy evaluated on the IFBench/MedQA/GPQA/RoleBench
    fixtures (launch/eval.py --ood), and every recorded group judged by the oracle through the Anthropic stand-in
    (launch/oracle.py, seed-policy anchors)."""
    run = harnessrl_run[0]
    root = os.path.dirname(run)
    _run(os.path.join(REPO, "launch", "eval.py"), "--config=experiments/tiny_cpu.py:method=harnessrl,tasks=harness",
         f"--workdir={run}", "--split=train", ood_flag(ifbench_without_start_verb(tmp_path_factory.mktemp("ifb"))),
         "--ood_samples=2",
         "--ood_max_new_tokens=8")
    server = StandIn()
    try:
        _run(os.path.join(REPO, "launch", "oracle.py"), f"--workdir={run}", f"--base_url={server.url}",
             "--model=standin", "--timeout_s=5", env={"ANTHROPIC_API_KEY": "test-key-standin"})
    finally:
        server.close()
    return str(root)
