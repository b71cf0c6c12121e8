"""The agentic config through launch/train.py: HarnessBandit over the six harnesses, evaluated on every harness."""

import json
import os

import pytest

from harnessrl_jax.agentic.harnesses import HELDOUT_HARNESS, TRAIN_HARNESSES
from harnessrl_jax.eval import agentic_tables


@pytest.mark.slow
def test_harnessbandit_runs_on_the_workspace_tasks_and_evaluates_every_harness(tmp_path, train_script):
    """The smoke config: two steps of multi-turn episodes under the bandit's harness, the trainer's logprobs equal
    to the engine's on the policy tokens, and agentic_eval.json with k episodes per held-out task and harness."""
    workdir = str(tmp_path / "run")
    train_script(workdir, "--config=experiments/agentic_cpu.py:method=harnessbandit,smoke")
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        steps = [json.loads(line) for line in f]
    assert len(steps) == 2
    for m in steps:
        assert m["train/engine_gap"] < 1e-4  # recomputed over whole trajectories: the tool tokens sit in between
        assert m["agentic/turns_mean"] >= 1 and m["agentic/harnesses_in_step"] == 1  # harness-pure steps
        assert sum(m[f"bandit/chosen_{h}"] for h in TRAIN_HARNESSES) == 1
    result = agentic_tables.read_eval(workdir)
    assert set(result["rewards"]) == set(TRAIN_HARNESSES) | {HELDOUT_HARNESS}
    assert all(len(r) == 2 and all(len(x) == 3 for x in r) for r in result["rewards"].values())
    table = agentic_tables.table({"harnessbandit": [result, result]}, [HELDOUT_HARNESS])
    assert f"| harnessbandit | {HELDOUT_HARNESS} |" in table
