"""launch/compare.py end to end on the tiny config (2 seeds x GRPO and HarnessRL), its table re-derived from the
per-task scores it saves, the per-run eval.json it writes, and experiments/notebooks/paper_tables.ipynb executed on
its output (code cells run in order, as a kernel would)."""

import contextlib
import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from harnessrl_jax.eval import tables

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_compare_table_notebook_and_eval_files(tmp_path, monkeypatch):
    out = tmp_path / "compare"
    cmd = [sys.executable, os.path.join(REPO, "launch", "compare.py"), "--base_config=experiments/tiny_cpu.py:method=harnessrl,tasks=harness",
           "--base_config.total_steps=4", "--base_config.checkpoint.every=2", "--base_config.report=False",
           "--seeds=0,1", f"--out={out}", "--bootstrap=500", "--eval_split=train"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    compare = json.loads((out / "compare.json").read_text())

    # The table from the saved per-task scores: final = the last checkpoint, best = the highest mean seed rubric.
    for method in ("grpo", "harnessrl"):
        per_seed = compare["per_step"][method]
        assert sorted(per_seed) == ["0", "1"]
        for seed, steps in per_seed.items():
            assert sorted(map(int, steps)) == [0, 2, 4]  # the seed policy and both kept checkpoints
            best = max(steps, key=lambda s: np.nanmean(steps[s]["seed_rubric"]))
            assert compare["steps_to_best"][method][int(seed)] == int(best)
        final = np.nanmean([np.nanmean(per_seed[s]["4"]["seed_rubric"]) for s in per_seed])
        assert compare["final/seed_rubric"][method] == pytest.approx(final)
    diff = np.concatenate([np.subtract(compare["per_step"]["harnessrl"][s]["4"]["oracle"],
                                       compare["per_step"]["grpo"][s]["4"]["oracle"]) for s in ("0", "1")])
    row = compare["final/oracle"]
    assert row["diff"] == pytest.approx(np.nanmean(diff)) and row["ci_low"] <= row["diff"] <= row["ci_high"]
    # both methods start a seed from the same policy (the tiny model's init depends on the seed), evaluated with
    # the same sampling seed
    for s in ("0", "1"):
        assert compare["per_step"]["grpo"][s]["0"] == compare["per_step"]["harnessrl"][s]["0"]

    # each run's final evaluation is its eval.json, as launch/eval.py writes it
    ev = json.loads((out / "harnessrl-s1" / "eval.json").read_text())
    assert ev["step"] == 4 and ev["seed_rubric"]["mean"] == pytest.approx(
        np.nanmean(compare["per_step"]["harnessrl"]["1"]["4"]["seed_rubric"]))

    # the notebook on this directory prints the same numbers
    nb = json.loads(open(os.path.join(REPO, "experiments", "notebooks", "paper_tables.ipynb")).read())
    monkeypatch.setenv("HARNESSRL_RUNS", str(out))
    printed, scope = io.StringIO(), {}
    with contextlib.redirect_stdout(printed):
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                exec("".join(cell["source"]), scope)
    text = printed.getvalue()
    assert "{'grpo': 2, 'harnessrl': 2} runs" in text
    assert tables.markdown(tables.compare_rows(compare)) in text
    stats = {r["statistic"]: r for r in scope["tables"].method_table(scope["runs"])}
    assert stats["heldout"]["harnessrl"]["n"] == 2 and stats["acceptance_rate"]["grpo"] is None
    assert 0.0 <= stats["acceptance_rate"]["harnessrl"]["mean"] <= 1.0
    assert f"| heldout | {tables._cell(stats['heldout']['grpo'])} |" in text


def test_run_stats_from_hand_written_records():
    # Pair counts per step (loop.oracle_metrics logs them): agree, reward tie (blind / saturated), wrong direction,
    # oracle tie; a step with no classified pair adds nothing.
    counts = [dict(agree=2, reward_tie=3, reward_tie_blind=3, reward_tie_saturated=0, wrong_direction=1,
                   oracle_tie=4, separated=3), dict(agree=6, reward_tie=1, reward_tie_blind=0, reward_tie_saturated=1,
                                                   wrong_direction=1, oracle_tie=2, separated=7), {}]
    metrics = [{"step": i + 1, "reward/mean": 10.0 * (i + 1), "oracle/score_mean": 50.0,
                "time/step": 10.0, "time/evolver": 2.0, "harness/reversal_rate": r,
                "guidance/reference_fields_added": f, "guidance/reference_fields_from_donors": d,
                **{f"oracle/count/{k}": v for k, v in c.items()},
                "oracle/count/pairs": sum(c.get(k, 0) for k in ("agree", "reward_tie", "wrong_direction",
                                                                 "oracle_tie"))}
               for i, (c, r, f, d) in enumerate(zip(counts, (0.0, 0.5, 0.25), (2, 0, 2), (1, 0, 2)))]
    records = [{"verdict": "accepted", "interface": "guidance"}, {"verdict": "rejected", "interface": "rubric"},
               {"verdict": "accepted", "interface": "rubric"}, {"verdict": "noop", "interface": "sampling"}]
    s = tables.stats_from_records(metrics, records)
    assert s["k"] == 1 and s["reward_first"] == 10.0 and s["reward_last"] == 30.0
    # Over all 20 pairs, ties in the denominator (the paper's definition): 8 agree.
    assert s["oracle_pairs"] == 20 and s["oracle_agreement"] == pytest.approx(8 / 20)
    assert (s["pair_reward_tie"], s["pair_wrong_direction"], s["pair_oracle_tie"]) == \
        (pytest.approx(4 / 20), pytest.approx(2 / 20), pytest.approx(6 / 20))
    assert s["pair_reward_tie_blind"] == pytest.approx(3 / 20) and s["oracle_agreement_separated"] == 0.8
    assert s["donor_share"] == pytest.approx(3 / 4)
    assert (s["measured"], s["accepted"], s["acceptance_rate"]) == (3, 2, pytest.approx(2 / 3))
    assert (s["accepted_guidance"], s["accepted_rubric"], s["accepted_sampling"]) == (1, 1, 0)
    assert s["reversal_rate"] == 0.25 and s["evolver_share"] == pytest.approx(0.2) and s["step_seconds"] == 30
    assert tables.stats_from_records([], []) == {"steps": 0.0}
