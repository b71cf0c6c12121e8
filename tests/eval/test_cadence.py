"""Evaluation during training (eval.cadence) without a model: which steps are evaluated, the validation split
(disjoint from the reported tasks, the same for every run), the log a resumed run cuts back, and a bad line named."""

import json
import os
import sys
import types

import pytest

from harnessrl_jax import toy
from harnessrl_jax.eval import cadence
from harnessrl_jax.rubric.schema import Task

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)
from experiments import base  # noqa: E402


def _task(i, domain):
    return Task(f"{domain}/{i}", domain, ({"role": "user", "content": f"q{i}"},), ())


def test_the_steps_evaluated_are_step_0_every_kth_and_the_last():
    assert [s for s in range(0, 11) if cadence.due(s, 4, 10)] == [0, 4, 8, 10]
    assert not any(cadence.due(s, 0, 10) for s in range(11))  # every=0: none during training


def test_the_validation_split_is_a_fixed_share_of_each_domain_disjoint_from_the_test_tasks():
    tasks = [_task(i, "med") for i in range(10)] + [_task(i, "sci") for i in range(5)] + [_task(0, "solo")]
    val, test = cadence.split_validation(tasks, 0.2)
    assert sorted((t.domain for t in val)) == ["med", "med", "sci"]  # round(0.2 n), at least 1; a lone task stays
    assert not {t.id for t in val} & {t.id for t in test} and len(val) + len(test) == len(tasks)
    # chosen by task id alone: another order (another run, another arm) gives the same split
    again, _ = cadence.split_validation(list(reversed(tasks)), 0.2)
    assert {t.id for t in again} == {t.id for t in val}


def test_eval_sets_from_a_bundled_heldout_split_and_from_a_validation_file(tmp_path):
    config = base.get_config()
    config.tasks.source, config.tasks.name, config.max_prompt_len = "bundled", "mini", 4096
    run = types.SimpleNamespace(config=config, tokenizer=toy.char_tokenizer())
    sets = cadence.eval_sets(run)
    assert len(sets.validation) + len(sets.test) == 25 and sets.validation
    assert not {t.id for t in sets.validation} & {t.id for t in sets.test}
    # a validation file of its own: the whole held-out split is reported; one that shares tasks with it is refused
    path = tmp_path / "validation.jsonl"
    written = [t.id + "-v" for t in sets.test[:3]]
    path.write_text("".join(json.dumps({"id": t.id + "-v", "domain": t.domain, "prompt": list(t.prompt),
                                        "rubrics": [{"criterion": "Says hi.", "points": 1}]}) + "\n"
                            for t in sets.test[:3]))
    config.eval.validation = str(path)
    sets = cadence.eval_sets(run)
    assert len(sets.test) == 25 and [t.id for t in sets.validation] == written
    path.write_text(path.read_text().replace("-v\"", "\""))
    with pytest.raises(ValueError, match="shares 3 tasks with the reported held-out tasks"):
        cadence.eval_sets(run)


def test_a_resumed_run_cuts_the_log_back_to_its_checkpoint_and_a_bad_line_is_named(tmp_path):
    log = cadence.EvalLog(str(tmp_path), keep_through=-1)
    log.write([{"step": s, "split": sp, "seed_rubric": [1.0, None]} for s in (0, 2, 4) for sp in ("validation",
                                                                                                   "test")])
    assert sorted(cadence.read_evals(str(tmp_path))) == [0, 2, 4]
    cadence.EvalLog(str(tmp_path), keep_through=2)  # resumed from checkpoint 2: step 4 is evaluated again
    evals = cadence.read_evals(str(tmp_path))
    assert sorted(evals) == [0, 2] and set(evals[2]) == {"validation", "test"}
    assert evals[0]["test"]["seed_rubric"][0] == 1.0 and str(evals[0]["test"]["seed_rubric"][1]) == "nan"
    with open(tmp_path / cadence.EVALS_FILE, "a") as f:
        f.write("{not json\n")
    with pytest.raises(ValueError, match=r"evals.jsonl:5: invalid JSON"):
        cadence.read_evals(str(tmp_path))
