"""HarnessRL through launch/train.py on the tiny config: the evolver proposes, the critic measures, accepts and
rejects; metrics.jsonl carries the harness metrics, harness.jsonl every candidate, and report.html is written."""

import itertools
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from harnessrl_jax import loop
from harnessrl_jax.methods import METHODS, get_method

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

METRIC_KEYS = (
    "attribution/frac_blind", "attribution/frac_saturated", "attribution/frac_spurious", "attribution/frac_agree",
    "attribution/discriminative_mass", "reward/zero_variance_fraction",
    "actions/proposed/guidance", "actions/accepted/rubric", "actions/rejected/guidance", "actions/noop/sampling",
    "critic/acceptance_rate", "critic/acceptance_with_evidence", "critic/acceptance_without_evidence",
    "guidance/fields_per_task", "guidance/cap", "sampling/downweighted_share", "sampling/level_0",
    "harness/reversal_rate", "oracle/agreement", "oracle/score_mean",
    "time/rollout", "time/judge", "time/evolver", "time/critic", "time/train", "time/step",
    "train/engine_gap", "reward/mean",
)


def run_train(workdir, *overrides, timeout=600):
    cmd = [sys.executable, os.path.join(REPO, "launch", "train.py"), f"--workdir={workdir}",
           "--config=experiments/tiny_cpu.py:method=harnessrl,tasks=harness", *overrides]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-4000:]
    return out.stderr


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def test_registry_names_the_methods():
    assert sorted(METHODS) == ["grpo", "harnessrl"]
    assert get_method("harnessrl").name == "harnessrl"
    with pytest.raises(ValueError, match="unknown method"):
        get_method("amaris")


def test_oracle_agreement_counts_pairs_the_oracle_separates():
    rewards = np.array([[10, 20, 20, 5], [1, 1, 1, 1]], float)
    oracle = np.array([[0, 1, 0, 1], [0, 0, 0, 0]], float)
    # brute force: pairs with different oracle scores, agreeing when the reward orders them the same way
    agree = sep = 0
    for r, o in zip(rewards, oracle):
        for i, j in itertools.combinations(range(4), 2):
            if o[i] != o[j]:
                sep += 1
                agree += np.sign(r[i] - r[j]) == np.sign(o[i] - o[j])
    assert loop.oracle_agreement(rewards, oracle) == (agree, sep) == (1, 4)


def test_harnessrl_tiny_run_proposes_measures_accepts_and_rejects(tmp_path):
    workdir = str(tmp_path / "run")
    log = run_train(workdir)
    assert "harness:" in log and "step 6/6" in log

    metrics = read_jsonl(os.path.join(workdir, "metrics.jsonl"))
    assert [m["step"] for m in metrics] == list(range(1, 7))
    for key in METRIC_KEYS:
        assert all(key in m for m in metrics), key

    records = read_jsonl(os.path.join(workdir, "harness.jsonl"))
    for r in records:
        assert {"step", "task_id", "draw", "interface", "round", "label", "verdict", "reason", "criterion_ids",
                "evidence_ids", "with_evidence", "candidate", "deltas", "measurement", "changes"} <= set(r)
        assert r["verdict"] in ("accepted", "rejected", "noop") and r["interface"] in ("sampling", "guidance",
                                                                                        "rubric")
    measured = [r for r in records if r["verdict"] in ("accepted", "rejected") and r["measurement"]["measured"]]
    assert measured and all(any(v is not None for v in r["deltas"].values()) for r in measured)
    verdicts = {r["verdict"] for r in measured}
    assert verdicts == {"accepted", "rejected"}, verdicts
    # The blind word gets guidance; the random policy cannot use it: rejected, measured by a resampled group.
    honey = [r for r in measured if r["task_id"] == "say-honey" and r["interface"] == "guidance"]
    assert honey and honey[0]["verdict"] == "rejected" and honey[0]["label"] == "blind"
    assert any(r["interface"] == "rubric" and r["verdict"] == "accepted" for r in records)
    # Step counts in metrics match the log.
    assert sum(m["critic/accepted"] for m in metrics) == sum(r["verdict"] == "accepted" for r in records)
    assert sum(m["critic/rejected"] for m in metrics) == sum(r["verdict"] == "rejected" for r in records)
    assert os.path.exists(os.path.join(workdir, "memory"))

    report = open(os.path.join(workdir, "report.html")).read()
    assert report.count("<svg") >= 6 and "Accepted and rejected actions" in report
    assert 'class="accepted"' in report and 'class="rejected"' in report


def test_bare_loss_context_and_after_rubric_advantages_run(tmp_path):
    """The two documented switches: the loss on the bare prompt, advantages under the accepted rubric."""
    workdir = str(tmp_path / "run")
    run_train(workdir, "--config.total_steps=3", "--config.harness.loss_context=bare",
              "--config.harness.advantages_rubric=after", "--config.report=False")
    metrics = read_jsonl(os.path.join(workdir, "metrics.jsonl"))
    assert len(metrics) == 3 and all(np.isfinite(m["train/loss"]) for m in metrics)
    assert not os.path.exists(os.path.join(workdir, "report.html"))


def tiny_harness_config(**harness):
    sys.path.insert(0, REPO)
    from experiments import tiny_cpu

    config = tiny_cpu.get_config("method=harnessrl,tasks=harness")
    config.harness.update(harness)
    return config


@pytest.mark.parametrize("switch, interfaces, critic_on", [
    ({}, ("sampling", "guidance", "rubric"), True),
    ({"no_critic": True}, ("sampling", "guidance", "rubric"), False),
    ({"only_guidance": True}, ("guidance",), True),
    ({"only_rubric": True}, ("rubric",), True),
])
def test_ablation_switches_map_to_the_evolver_knobs(switch, interfaces, critic_on):
    from harnessrl_jax.methods.harnessrl import build_evolver

    evolver, cold = build_evolver(tiny_harness_config(**switch), None)
    assert cold is None and tuple(evolver.config.interfaces) == interfaces and evolver.critic.enabled == critic_on
    assert evolver.critic.bands.guidance == (10.2, 28.0) and evolver.critic.bands.rubric == (3.1, 28.0)


def test_without_an_llm_judge_llm_criteria_leave_the_training_rubric():
    from harnessrl_jax import data
    from harnessrl_jax.methods.harnessrl import training_tasks

    tasks = data.load_split("mini", "train")
    kept, dropped = training_tasks(tiny_harness_config(), tasks)
    n_llm = sum(c.verifier != "rule" for t in tasks for c in t.criteria)
    assert dropped == n_llm > 0 and all(c.verifier == "rule" for t in kept for c in t.criteria)


def test_cold_start_launcher_measures_the_seed_policy_and_training_reads_it(tmp_path):
    """launch/cold_start.py on the tiny config: the bands re-derived with NumPy from its saved score matrices, the
    rule judge's zero grading noise, and a HarnessRL run that starts from the file's anchors and bands."""
    out = tmp_path / "cold_start.json"
    cmd = [sys.executable, os.path.join(REPO, "launch", "cold_start.py"), "--config=experiments/tiny_cpu.py:method=harnessrl,tasks=harness",
           f"--out={out}", "--groups=8", "--regradings=1"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    cs = json.loads(out.read_text())
    records = read_jsonl(tmp_path / "cold_start.groups.jsonl")
    n = len(records)
    assert "guidance band" in proc.stdout and f"cold start: {n}/{n} tasks" in proc.stderr
    assert n == cs["meta"]["tasks"] >= 2 and all(len(r["groups"]) == 8 and len(r["regradings"]) == 1 for r in records)
    means, ranges = [], []
    for r in records:
        points = np.array(r["points"])
        rewards = [100 * points @ np.array(g) / points.clip(0).sum() for g in r["groups"]]
        m = [x.mean() for x in rewards]
        means += [abs(a - b) for a, b in itertools.combinations(m, 2)]
        ranges += [x.max() - x.min() for x in rewards]
        assert r["regradings"][0] == r["groups"][0]  # rule checkers: the same verdicts when graded again
    assert cs["bands"]["guidance"] == pytest.approx([np.percentile(means, 95), np.median(ranges)])
    assert cs["bands"]["rubric"] == pytest.approx([0.0, np.median(ranges)])
    assert cs["band_sources"]["rubric_low"] == "measured" and cs["meta"]["J"] == 8

    from harnessrl_jax.methods.harnessrl import build_evolver

    evolver, cold = build_evolver(tiny_harness_config(cold_start=str(out)), None)
    assert evolver.critic.bands.guidance == pytest.approx(tuple(cs["bands"]["guidance"]))
    workdir = str(tmp_path / "run")
    run_train(workdir, "--config.total_steps=1", "--config.report=False", f"--config.harness.cold_start={out}")
    with open(os.path.join(workdir, "checkpoints", "1", "extra", "metadata")) as f:
        harness = json.load(f)["harness"]
    anchors = {tid: sorted(c["id"] for c in crit if c["anchor"])
               for tid, crit in zip(harness["task_ids"], harness["rubric"]["criteria"])}
    assert anchors == {tid: sorted(ids) for tid, ids in cs["anchors"].items()} and any(anchors.values())


@pytest.mark.slow
def test_llm_proposer_and_hacking_check_run_against_a_real_model_server(tmp_path, llama_server):
    """proposer='llm' and llm_check through launch/train.py, the evolver model being SmolLM2 served by llama.cpp:
    every guidance or rubric candidate comes from the model, sampling ones from the rule fallback, and output that
    does not validate into typed actions is logged as rejected with the reason."""
    workdir = str(tmp_path / "run")
    # One step, one round and short answers: each evolver call is a SmolLM2 generation on the test machine's CPU.
    run_train(workdir, "--config.total_steps=1", "--config.report=False", "--config.harness.proposer=llm",
              "--config.harness.rounds=1", "--config.harness.llm_check=True",
              f"--config.evolver_model.base_url={llama_server.base_url}",
              f"--config.evolver_model.model={llama_server.model}",
              "--config.evolver_model.structured_output=json_object", "--config.evolver_model.max_tokens=48")
    records = read_jsonl(os.path.join(workdir, "harness.jsonl"))
    candidates = [r["candidate"] for r in records if r["candidate"]]
    assert candidates and any(c["interface"] in ("guidance", "rubric") for c in candidates)
    for r in records:
        c = r["candidate"]
        if c is None:
            continue
        assert c["source"] == ("rule" if c["interface"] == "sampling" else "llm")
        if c["invalid"] is not None:
            assert r["verdict"] == "rejected" and r["reason"] and c["actions"] == []
    metrics = read_jsonl(os.path.join(workdir, "metrics.jsonl"))
    assert len(metrics) == 1 and np.isfinite(metrics[0]["train/loss"])


def test_llm_proposer_without_a_server_is_a_clear_error():
    from harnessrl_jax.methods.harnessrl import evolver_client

    with pytest.raises(ValueError, match="evolver_model.base_url"):
        evolver_client(tiny_harness_config(proposer="llm"))
    with pytest.raises(ValueError, match="proposer must be"):
        evolver_client(tiny_harness_config(proposer="gpt"))
    assert evolver_client(tiny_harness_config()) is None
