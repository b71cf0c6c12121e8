"""harnessrl_jax.eval against independent re-derivations: the scores and taxonomy of evaluate() recomputed from the
same samples with the rule checkers and the reward formula written out in NumPy; bootstrap intervals against the
normal approximation; launch/eval.py end to end on a trained tiny run."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from harnessrl_jax import build
from harnessrl_jax.eval.evaluate import evaluate
from harnessrl_jax.eval.stats import bootstrap_mean, paired_bootstrap
from harnessrl_jax.harness.render import render_prompt
from harnessrl_jax.rubric import rules

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def tiny_run():
    sys.path.insert(0, REPO)
    from experiments import tiny_cpu

    config = tiny_cpu.get_config("method=harnessrl,tasks=harness")  # toy tasks with a varying, a saturated and a blind criterion
    return build.setup(config)


def test_evaluate_matches_a_rescoring_of_the_same_samples():
    run = tiny_run()
    tasks = list(run.tasks)
    J, seed = 6, 3
    result = evaluate(run, tasks, num_samples=J, seed=seed, batch_tasks=len(tasks))
    # the same samples: one batch, so the engine was called once with `seed`
    prompts = [render_prompt(run.tokenizer, t.prompt, (), tokenize=True) for t in tasks]
    out = run.engine.generate(prompts, n=J, max_new_tokens=run.config.max_new_tokens,
                              temperature=run.config.temperature, top_p=run.config.top_p, top_k=run.config.top_k,
                              seed=seed)
    texts = np.asarray(out.texts, dtype=object).reshape(len(tasks), J)
    counts = {"blind": 0, "saturated": 0, "discriminative": 0}

    def reward(task, criteria, responses):
        prompt = task.prompt[-1]["content"]
        S = np.array([[float(rules.check(c.rule_id, c.rule_kwargs, r, prompt=prompt)) for r in responses]
                      for c in criteria])
        points = np.array([c.points for c in criteria])
        return S, 100 * (points @ S) / points[points > 0].sum()

    for i, (task, responses) in enumerate(zip(tasks, texts)):
        S, r = reward(task, task.criteria, responses)
        assert result.seed_rubric[i] == pytest.approx(r.mean())
        assert task.oracle_criteria  # the toy harness tasks carry a rule oracle rubric
        assert result.oracle[i] == pytest.approx(reward(task, task.oracle_criteria, responses)[1].mean())
        for c, row in zip(task.criteria, S):
            good = row if c.points > 0 else 1 - row  # a pitfall is satisfied when avoided
            counts["blind" if good.mean() == 0 else "saturated" if good.mean() == 1 else "discriminative"] += 1
    assert result.taxonomy == counts and sum(counts.values()) == sum(len(t.criteria) for t in tasks)
    s = result.summary(bootstrap=500)
    assert s["seed_rubric"]["mean"] == pytest.approx(float(result.seed_rubric.mean()))
    assert s["oracle"]["mean"] == pytest.approx(float(result.oracle.mean()))
    assert set(s["per_task"]) == {t.id for t in tasks}
    run.close()


def test_bootstrap_interval_agrees_with_the_normal_approximation():
    x = np.random.default_rng(1).normal(40.0, 12.0, 400)
    mean, lo, hi = bootstrap_mean(x, 4000)
    half = 1.96 * x.std(ddof=1) / np.sqrt(x.size)
    assert mean == pytest.approx(x.mean())
    assert lo == pytest.approx(mean - half, abs=0.15 * half) and hi == pytest.approx(mean + half, abs=0.15 * half)
    # NaNs are left out; nothing finite gives NaNs
    assert bootstrap_mean(np.r_[x, np.nan], 4000)[0] == pytest.approx(mean)
    assert all(np.isnan(bootstrap_mean([np.nan, np.inf])))


def test_paired_bootstrap_removes_the_shared_task_effect():
    rng = np.random.default_rng(2)
    task_effect = rng.normal(0, 30, 200)  # large between-task variance, shared by both methods
    a = task_effect + rng.normal(0, 2, 200)
    b = task_effect + 1.0 + rng.normal(0, 2, 200)
    d, lo, hi = paired_bootstrap(a, b, 2000)
    assert lo > 0 and hi < 2 and d == pytest.approx(np.mean(b - a))
    _, ulo, uhi = bootstrap_mean(b, 2000)
    assert (hi - lo) < 0.2 * (uhi - ulo)  # far tighter than an interval on either method alone
    assert paired_bootstrap(a, a) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="not aligned"):
        paired_bootstrap(a, b[:10])


def run_script(name, *args):
    out = subprocess.run([sys.executable, os.path.join(REPO, "launch", name), *args], cwd=REPO, capture_output=True,
                         text=True, timeout=600)
    return out


def test_eval_script_scores_the_trained_policy_above_the_seed_policy(tmp_path, letters_run):
    """launch/eval.py on a tiny GRPO run that learned its toy task: the latest checkpoint scores far above the seed
    policy (step 0) on the same tasks and samples; eval.json has the documented fields; bad steps are errors."""
    workdir = letters_run[0]
    scores = {}
    for step in ("0", ""):
        out = str(tmp_path / f"eval{step}.json")
        ev = run_script("eval.py", "--config=experiments/tiny_cpu.py", f"--workdir={workdir}", f"--out={out}",
                        "--split=train", *([f"--step={step}"] if step else ["--arms=plain,heldout"]))
        assert ev.returncode == 0, ev.stderr[-3000:]
        scores[step or "latest"] = json.load(open(out))
    latest, seed = scores["latest"], scores["0"]
    assert latest["step"] == 30 and seed["step"] == 0 and latest["split"] == "toy/train"
    assert seed["seed_rubric"]["mean"] < 30 < 70 < latest["seed_rubric"]["mean"]
    lo, hi = latest["seed_rubric"]["ci95"]
    assert lo <= latest["seed_rubric"]["mean"] <= hi
    for key in ("tasks", "num_samples", "oracle", "per_domain", "taxonomy", "taxonomy_counts", "per_task",
                "response_tokens_mean", "seconds"):
        assert key in latest, key
    # under harness arms (HarnessBandit's evaluation): 'plain' is the bare prompt with the same seed and J
    arms = latest["arms"]
    assert set(arms) == {"plain", "persona_roleplay"}  # 'heldout' names config.bandit.heldout_arm
    assert arms["plain"]["mean"] == pytest.approx(latest["seed_rubric"]["mean"])
    assert arms["plain"]["threshold"] == 80.0 and arms["plain"]["num_samples"] == latest["num_samples"]
    for block in arms.values():
        assert 0.0 <= block["pass_all_j"] <= block["pass_at_j"] <= 1.0
    bad = run_script("eval.py", "--config=experiments/tiny_cpu.py", f"--workdir={workdir}", "--step=7", "--split=train")
    assert bad.returncode != 0 and "has no checkpoint at step 7; it has [15, 30]" in bad.stderr
    # the toy source has no held-out split: asking for one is an error, not the training tasks in disguise
    held = run_script("eval.py", "--config=experiments/tiny_cpu.py", f"--workdir={workdir}", "--step=0")
    assert held.returncode != 0 and "has no 'heldout' split of its own" in held.stderr
