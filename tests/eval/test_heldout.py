"""Held-out honesty: a split asked of a task source without a held-out file is an error naming the fix, never the
training tasks in disguise; an explicit held-out file is what gets evaluated."""

import os
import sys
import types

import pytest

from harnessrl_jax import toy
from harnessrl_jax.data import split_path
from harnessrl_jax.eval.evaluate import eval_tasks, split_label

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)
from experiments import base  # noqa: E402


def _run(source, path="", name="mini"):
    config = base.get_config()
    config.tasks.source, config.tasks.path, config.tasks.name = source, path, name
    config.max_prompt_len = 4096
    return types.SimpleNamespace(config=config, tokenizer=toy.char_tokenizer())


def test_a_task_file_without_a_heldout_file_has_no_heldout_split():
    run = _run("jsonl", split_path("mini", "train"))
    with pytest.raises(ValueError, match=r"has no 'heldout' split of its own: pass the held-out task file"):
        eval_tasks(run, "heldout")
    with pytest.raises(ValueError, match="--heldout=FILE.jsonl"):
        split_label(run.config, "heldout")
    train, over = eval_tasks(run, "train")  # asked for by name, and labelled so
    assert len(train) == 100 and split_label(run.config, "train").endswith("train.jsonl/train")
    held, _ = eval_tasks(run, "heldout", split_path("mini", "heldout"))
    assert over == {} and len(held) == 25 and not {t.id for t in held} & {t.id for t in train}
    assert split_label(run.config, "heldout", "x/heldout.jsonl") == "x/heldout.jsonl"


def test_a_bundled_set_evaluates_its_own_heldout_split():
    run = _run("bundled")
    held, _ = eval_tasks(run, "heldout")
    assert len(held) == 25 and split_label(run.config, "heldout") == "mini/heldout"


def test_held_out_tasks_over_the_prompt_budget_are_counted_per_domain_not_dropped_silently():
    run = _run("bundled")
    everything, _ = eval_tasks(run, "heldout")
    lengths = {t.id: len(run.tokenizer.apply_chat_template(list(t.prompt), add_generation_prompt=True,
                                                           tokenize=True)) for t in everything}
    limit = sorted(lengths.values())[len(lengths) // 2]
    kept, over = eval_tasks(run, "heldout", max_prompt_len=limit)
    assert {t.id for t in kept} == {i for i, n in lengths.items() if n <= limit}
    expected = {}
    for t in everything:
        if lengths[t.id] > limit:
            expected[t.domain] = expected.get(t.domain, 0) + 1
    assert over == expected and sum(over.values()) == len(everything) - len(kept) > 0
