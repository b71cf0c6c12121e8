"""The world format (data.world) and the default world: labels kept apart from the tasks, bad records named by
file:line and field, and the planted classes true of the reader corpus they were written against."""

import json

import numpy as np
import pytest

from harnessrl_jax.data import reader_corpus as rc
from harnessrl_jax.data.world import DEFAULT_WORLD, load_world
from harnessrl_jax.rubric import rules
from harnessrl_jax.rubric.schema import load_tasks


def _record(**over):
    rec = {"id": "t", "domain": "testbed", "prompt": "tell me about bees",
           "rubrics": [{"id": "t/a", "criterion": "The response mentions 'honey'.", "points": 2,
                        "tags": ["verifier:rule", "rule:keywords:existence", 'rule_kwargs:{"keywords": ["honey"]}'],
                        "planted": "agree"},
                       {"id": "t/s", "criterion": "Ends with !", "points": 1,
                        "tags": ["verifier:rule", "rule:startend:end_checker", 'rule_kwargs:{"end_phrase": "!"}'],
                        "planted": "spurious", "surface": "exclaim"}],
           "oracle_rubrics": [{"id": "t/o", "criterion": "The response mentions 'honey'.", "points": 1,
                               "tags": ["verifier:rule", "rule:keywords:existence",
                                        'rule_kwargs:{"keywords": ["honey"]}']}]}
    rec.update(over)
    return rec


def _write(tmp_path, *records):
    path = tmp_path / "w.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_labels_are_kept_apart_from_the_tasks(tmp_path):
    # catches: the planted class left on the criterion (a tag the harness could read) or lost
    w = load_world(_write(tmp_path, _record()))
    assert w.planted == {("t", "t/a"): "agree", ("t", "t/s"): "spurious"}
    assert w.surface == {("t", "t/s"): "exclaim"}
    (task,) = w.tasks
    assert all(not any(tag.startswith("planted") for tag in c.tags) for c in task.criteria)
    assert "planted" not in task.extra and [c.id for c in task.oracle_criteria] == ["t/o"]


@pytest.mark.parametrize("change, line, field", [
    (lambda r: r["rubrics"][0].update(planted="blnd"), 2, "rubrics[0].planted"),
    (lambda r: r["rubrics"][1].pop("surface"), 2, "rubrics[1].surface"),
    (lambda r: r["rubrics"][0].update(surface="x"), 2, "rubrics[0].surface"),
    (lambda r: r.pop("oracle_rubrics"), 2, "oracle_rubrics"),
    (lambda r: r["rubrics"][0].update(tags=["verifier:llm"]), 2, "rubrics[0].tags"),
    (lambda r: r["oracle_rubrics"][0].update(tags=["verifier:rule", "rule:keywords:existence",
                                                   'rule_kwargs:{"keyword": "x"}']), 2, "oracle_rubrics[0].tags"),
])
def test_a_bad_record_names_file_line_and_field(tmp_path, change, line, field):
    # catches: an unvalidated world running with a class, surface, oracle or rule it does not have
    bad = _record(id="u")
    change(bad)
    path = _write(tmp_path, _record(), bad)
    with pytest.raises(ValueError) as e:
        load_world(path)
    assert f"{path}:{line}: field '{field}'" in str(e.value)


def test_the_default_world_declares_every_class_and_surface():
    w = load_world()
    assert set(w.planted.values()) == {"blind", "saturated", "spurious", "agree"}
    assert set(w.surface.values()) == {"compliance", "stuffing", "padding", "exclaim"}
    assert w.wholly_saturated() == ["rain", "wolves"]
    # the same file is an ordinary task file for every other tool (the extra keys ignored)
    assert [t.id for t in load_tasks(DEFAULT_WORLD)] == [t.id for t in w.tasks]


def test_planted_classes_hold_for_the_corpus_the_reader_learns():
    # catches: a world criterion whose planted class is false of the unaided answers (a "blind" word the reader
    # writes, a "saturated" one it misses, a spurious or agree one that never splits a group)
    w = load_world()
    rng = np.random.default_rng(0)
    for task in w.tasks:
        topic = task.id
        answers = [rc.answer(rng, topic) for _ in range(400)]
        for c in task.criteria:
            rate = np.mean([rules.check(c.rule_id, c.rule_kwargs, a) for a in answers])
            cls = w.planted[(task.id, c.id)]
            if cls == "blind":
                assert rate == 0.0, (c.id, rate)
            elif cls == "saturated":
                assert rate == 1.0, (c.id, rate)
            else:
                assert 0.15 <= rate <= 0.85, (c.id, rate)
        guided = [rc.answer(rng, topic, targets=rc.quoted(task.criteria[1].text)) for _ in range(100)]
        if w.planted[(task.id, task.criteria[1].id)] == "blind":
            c = task.criteria[1]
            assert np.mean([rules.check(c.rule_id, c.rule_kwargs, a) for a in guided]) > 0.8


def test_the_oracle_penalises_compliance_and_stuffing_and_ignores_padding_and_exclaim():
    # catches: an oracle that rewards a planted surface feature (then it is not spurious)
    from harnessrl_jax.rubric.reward import rubric_reward

    task = load_world().tasks[0]  # bees
    pts = np.array([c.points for c in task.oracle_criteria])

    def oracle(text):
        S = np.array([[rules.check(c.rule_id, c.rule_kwargs, text)] for c in task.oracle_criteria], float)
        return float(rubric_reward(pts, S)[0])

    base = "Bees make honey. They have nectar."
    assert oracle(base) == 100.0
    assert oracle(base + " All requirements are met.") == 60.0
    assert oracle("Bees bees bees. " + base) == 60.0
    assert oracle(base[:-1] + "!") == oracle(base + " They have wax. They need hive. They give flowers.") == 100.0
