"""The shipped workspace tasks: the file is the generator's output, every kind is solvable, and the checkers score a
hand-written episode exactly."""

import importlib.util
import json
import os

import numpy as np
import pytest

from harnessrl_jax.agentic.harnesses import HARNESSES
from harnessrl_jax.agentic.rollout import Episode, step_episode
from harnessrl_jax.agentic.tasks import TASKS_PATH, load_agent_tasks, outcome_text, start_files
from harnessrl_jax.agentic.tools import Call, render_call
from harnessrl_jax.rubric import rules
from harnessrl_jax.rubric.reward import rubric_reward

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _generator():
    spec = importlib.util.spec_from_file_location("build_agentic_tasks",
                                                  os.path.join(REPO, "launch", "build_agentic_tasks.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shipped_file_is_what_the_generator_writes():
    """A hand edit of the JSONL, or a generator change without regenerating, fails here."""
    with open(TASKS_PATH) as f:
        shipped = [json.loads(line) for line in f]
    assert shipped == json.loads(json.dumps(_generator().build()))
    train, held = load_agent_tasks(split="train"), load_agent_tasks(split="heldout")
    assert (len(train), len(held)) == (252, 72)
    assert not {t.id for t in train} & {t.id for t in held}
    assert {t.domain for t in held} == {"create", "copy", "append", "replace", "count", "lookup"}


def reward(task, files, answer):
    S = np.array([[rules.check(c.rule_id, c.rule_kwargs, outcome_text(files, answer))] for c in task.criteria],
                 np.float64)
    return float(rubric_reward(np.array([c.points for c in task.criteria]), S)[0])


def solve(task) -> list[Call]:
    """The calls that solve a task, from its checks (what a perfect agent would do)."""
    calls = []
    for c in task.criteria:
        kw = c.rule_kwargs
        if c.rule_id == "workspace:file_equals" and start_files(task).get(kw["path"]) != kw["text"]:
            calls.append(Call("write", (kw["path"], kw["text"])))
        elif c.rule_id == "workspace:file_contains":
            old = task.user_text.split("replace the word ")[1].split(" ")[0]
            calls.append(Call("replace", (kw["path"], old, kw["text"])))
        elif c.rule_id == "workspace:answer_equals":
            calls.append(Call("done", (kw["text"],)))
    return calls + [Call("done", ())]


@pytest.mark.parametrize("kind", ["create", "copy", "append", "replace", "count", "lookup"])
def test_a_hand_written_episode_scores_full_marks_and_doing_nothing_does_not(kind):
    """A checker that reads the wrong file, or the answer from the wrong place, fails here; so does a harness whose
    plan loop runs the plan turn's call."""
    task = next(t for t in load_agent_tasks(split="heldout") if t.domain == kind)
    h = HARNESSES["xml_plan"]
    ep = Episode(h, [([1], None)], start_files(task))
    assert step_episode(ep, render_call(Call("write", ("junk.txt", "x")), h.schema)) == "Plan noted. Now act."
    assert "junk.txt" not in ep.files  # the plan turn runs nothing
    for call in solve(task):
        if step_episode(ep, "ok " + render_call(call, h.schema)) is None:
            break
    assert ep.ended == "done"
    assert reward(task, ep.files, ep.answer) == 100.0
    assert reward(task, start_files(task), None) < 100.0


def test_a_bad_record_names_the_file_line_and_field(tmp_path):
    path = tmp_path / "tasks.jsonl"
    good = json.loads(open(TASKS_PATH).readline())
    bad = dict(good, checks=[{"rule": "workspace:nope", "kwargs": {}, "points": 1, "text": "x"}])
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(ValueError, match=r"tasks.jsonl:2: field 'checks\[0\]'.rule: unknown checker"):
        load_agent_tasks(str(path))
    path.write_text(json.dumps({k: v for k, v in good.items() if k != "files"}) + "\n")
    with pytest.raises(ValueError, match=r"tasks.jsonl:1: field 'files' is missing"):
        load_agent_tasks(str(path))
