"""The testbed's measurements (eval.testbed): what "still failing" means per planted class, the attributor's
precision and recall against the planted labels, and the expectations' verdicts, each against hand counts."""

import json
import math

import numpy as np
import pytest

from harnessrl_jax.data.world import load_world
from harnessrl_jax.eval import testbed
from harnessrl_jax.memory.store import DrawRecord, RecordStore

RECORD = {"id": "bees", "domain": "testbed", "prompt": "tell me about bees",
          "rubrics": [{"id": "b/fact", "criterion": "The response mentions 'honey'.", "points": 3, "planted": "agree",
                       "tags": ["verifier:rule", "rule:keywords:existence", 'rule_kwargs:{"keywords": ["honey"]}']},
                      {"id": "b/extra", "criterion": "The response mentions 'nectar'.", "points": 3,
                       "planted": "blind",
                       "tags": ["verifier:rule", "rule:keywords:existence", 'rule_kwargs:{"keywords": ["nectar"]}']},
                      {"id": "b/topic", "criterion": "The response mentions 'bees'.", "points": 1,
                       "planted": "saturated",
                       "tags": ["verifier:rule", "rule:keywords:existence", 'rule_kwargs:{"keywords": ["bees"]}']},
                      {"id": "b/excl", "criterion": "Ends with !", "points": 2, "planted": "spurious",
                       "surface": "exclaim",
                       "tags": ["verifier:rule", "rule:startend:end_checker", 'rule_kwargs:{"end_phrase": "!"}']}],
          "oracle_rubrics": [{"id": "b/o", "criterion": "The response mentions 'nectar'.", "points": 1,
                              "tags": ["verifier:rule", "rule:keywords:existence",
                                       'rule_kwargs:{"keywords": ["nectar"]}']}]}


@pytest.fixture
def world(tmp_path):
    path = tmp_path / "w.jsonl"
    path.write_text(json.dumps(RECORD) + "\n")
    return load_world(path)


def test_still_failing_reads_each_class_as_documented(world):
    # catches: a class judged by the wrong side (blind by "some met", saturated without the kept check, ...)
    c = {x.id: x for x in world.tasks[0].criteria}
    yes, no = ["Bees have nectar!", "Bees have honey."], ["Bees have honey.", "Bees have wax."]
    assert testbed.still_failing("blind", c["b/extra"], no, kept=False)
    assert not testbed.still_failing("blind", c["b/extra"], yes, kept=True)  # met once: no longer blind
    assert testbed.still_failing("saturated", c["b/topic"], no, kept=True)
    assert not testbed.still_failing("saturated", c["b/topic"], no, kept=False)  # rewritten: fixed
    assert not testbed.still_failing("saturated", c["b/topic"], no + ["They have wax."], kept=True)
    assert testbed.still_failing("spurious", c["b/excl"], yes, kept=True)  # still pays the '!'
    assert not testbed.still_failing("spurious", c["b/excl"], yes, kept=False)  # removed or reworded
    assert not testbed.still_failing("spurious", c["b/excl"], no, kept=True)  # pays no response
    assert testbed.still_failing("agree", c["b/fact"], yes, kept=False)
    assert not testbed.still_failing("agree", c["b/fact"], yes, kept=True)


def _draw(step, ids, texts, responses, labels):
    k, j = len(ids), len(responses)
    return DrawRecord(step=step, task_id="bees", criterion_ids=tuple(ids), criterion_texts=tuple(texts),
                      responses=tuple(responses), scores=np.zeros((k, j)), rewards=np.zeros(j), labels=labels)


def test_planted_outcomes_count_labels_and_the_last_draw(tmp_path, world):
    # catches: labels of a reworded criterion counted against its planted class, the first draw taken as the
    # last, an unlabelled criterion left out of the recall denominator
    crits = world.tasks[0].criteria
    ids, texts = [c.id for c in crits], [c.text for c in crits]
    store = RecordStore(str(tmp_path / "memory.sqlite"))
    store.append_step(1, [_draw(1, ids, texts, ["Bees have honey!", "Bees have wax."],
                                {"b/extra": "agree", "b/topic": "saturated", "b/excl": "spurious"})])
    reworded = texts[:3] + ["The response ends with '!' and says why."]
    store.append_step(2, [_draw(2, ids, reworded, ["Bees have nectar!", "Bees have wax."],
                                {"b/extra": "blind", "b/topic": "saturated", "b/excl": "spurious",
                                 "b/fact": "spurious"})])
    out = testbed.planted_outcomes(store, world)
    store.close()
    # the last draw: nectar met (blind fixed), bees in both (saturated, kept), '!' reworded (spurious fixed)
    assert out["failing"] == {"blind": {"b/extra": 0}, "saturated": {"b/topic": 1}, "spurious": {"b/excl": 0},
                              "agree": {"b/fact": 0}}
    # the reworded b/excl of step 2 is not counted; b/fact unlabelled at step 1 counts as agree
    assert out["labels"] == {"blind": {"agree": 1, "blind": 1}, "saturated": {"saturated": 2},
                             "spurious": {"spurious": 1}, "agree": {"agree": 1, "spurious": 1}}
    pr = testbed.precision_recall(out["labels"])
    assert pr["blind"]["precision"] == 1.0 and pr["blind"]["recall"] == 0.5
    assert pr["spurious"]["precision"] == 0.5 and pr["spurious"]["recall"] == 1.0  # b/fact mislabelled spurious
    assert pr["saturated"] == {"precision": 1.0, "recall": 1.0, "labelled": 2, "planted": 2}


def _outcome(reward, oracle, failing, reversal=0.0):
    stats = {"reward_first": reward[0], "reward_last": reward[1], "oracle_first": oracle[0],
             "oracle_last": oracle[1], "reversal_rate": reversal}
    return {"curves": {"step": [1, 2], "reward": list(reward), "oracle": list(oracle)}, "stats": stats,
            "end_classes": {c: 0.0 for c in testbed.CLASSES},
            "failing": {c: {f"{c}{i}": v for i, v in enumerate(failing.get(c, [1, 1]))} for c in testbed.CLASSES},
            "labels": {c: {} for c in testbed.CLASSES}, "final_oracle": {"a": oracle[1], "b": oracle[1]}}


def test_expectations_hold_only_when_the_interval_excludes_zero():
    # catches: a verdict read from the point estimate alone, or with the sign of the expectation flipped
    runs = {"grpo": [_outcome((10, 30 + s), (20, 20 - s), {"blind": [1, 1]}) for s in range(3)],
            "harnessrl": [_outcome((10, 20), (20, 40), {"blind": [0, int(s == 2)], "saturated": [0, 0],
                                                        "spurious": [1, 1]}, 0.05) for s in range(3)],
            "harnessrl_no_critic": [_outcome((10, 20), (20, 40), {}, 0.05 + 0.1 * s) for s in range(3)]}
    table = testbed.compare_outcomes(runs, "grpo", n=2000)
    rows = {r["expectation"].split(" (")[0]: r["verdict"] for r in testbed.expectations(table, n=2000)}
    assert rows["grpo: reward rises"] == "held"
    assert rows["grpo: oracle falls or stalls"] == "held"
    assert rows["grpo: blind criteria stay unmet"] == "held"
    assert rows["harnessrl lowers blind"] == "held"
    assert rows["harnessrl lowers spurious"] == "not held (no difference)"
    assert rows["harnessrl lowers saturated"].startswith("held in every run")  # -100 points in each seed
    # 0.0 at seed 0, then higher: the right direction, but one seed ties, so 3 seeds cannot exclude 0
    assert rows["removing the critic raises reversals"].startswith("not held (right direction")
    assert math.isclose(table["arms"]["harnessrl"]["failing_blind"]["diff"], -5 / 6)
    assert math.isclose(table["arms"]["harnessrl"]["final_oracle"]["diff"], 40 - 19)
