"""The testbed's measurements (eval.testbed): what "still failing" means per planted class, a surface feature's net
pay under a rubric, the final rubric read from the last draw, the attributor's precision and recall against the
planted labels, and the expectations' verdicts, each against hand counts."""

import json
import math

import numpy as np
import pytest

from harnessrl_jax.data.world import load_world
from harnessrl_jax.eval import testbed
from harnessrl_jax.memory.store import ActionRecord, DrawRecord, RecordStore
from harnessrl_jax.rubric.schema import Criterion

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
    # catches: a class judged by the wrong side (blind by "some met", saturated without the kept check, spurious
    # by the criterion's presence instead of its feature's pay)
    c = {x.id: x for x in world.tasks[0].criteria}
    yes, no = ["Bees have nectar!", "Bees have honey."], ["Bees have honey.", "Bees have wax."]
    assert testbed.still_failing("blind", c["b/extra"], no, False, math.nan)
    assert not testbed.still_failing("blind", c["b/extra"], yes, True, math.nan)  # met once: no longer blind
    assert testbed.still_failing("saturated", c["b/topic"], no, True, math.nan)
    assert not testbed.still_failing("saturated", c["b/topic"], no, False, math.nan)  # rewritten: fixed
    assert not testbed.still_failing("saturated", c["b/topic"], no + ["They have wax."], True, math.nan)
    assert testbed.still_failing("spurious", c["b/excl"], yes, True, 22.2)  # the '!' still pays
    assert not testbed.still_failing("spurious", c["b/excl"], yes, True, 0.0)  # kept, but cancelled
    assert not testbed.still_failing("spurious", c["b/excl"], yes, True, -5.0)  # now penalised
    # no edit possible: kept and met by some response, as nothing else is known
    assert testbed.still_failing("spurious", c["b/excl"], yes, True, math.nan)
    assert not testbed.still_failing("spurious", c["b/excl"], no, True, math.nan)
    assert testbed.still_failing("agree", c["b/fact"], yes, False, math.nan)
    assert not testbed.still_failing("agree", c["b/fact"], yes, True, math.nan)


def _rule(cid, points, rule_id, **kwargs):
    return Criterion(cid, cid, points, ("verifier:rule", f"rule:{rule_id}", "rule_kwargs:" + json.dumps(kwargs)))


def test_feature_pair_edits_only_the_surface_feature():
    # catches: an edit that also drops a fact (the '!' sentence removed), a with-side that does not carry the
    # feature, a pair produced where no edit flips the rule
    excl = _rule("excl", 2, "startend:end_checker", end_phrase="!")
    assert testbed.feature_pair(excl, "Bees have honey!", None) == ("Bees have honey.", "Bees have honey!")
    assert testbed.feature_pair(excl, "Bees have honey.", None) == ("Bees have honey.", "Bees have honey!")
    claim = _rule("claim", 2, "keywords:existence", keywords=["requirements are met"])
    pool = ["Bees have wax. All requirements are met.", "Bees have honey.",
            "Bees have honey. All requirements are met."]
    sentence = testbed.feature_sentence(claim, pool)
    assert sentence == "All requirements are met."
    assert testbed.feature_pair(claim, "Bees have honey.", sentence) == \
        ("Bees have honey.", "Bees have honey. All requirements are met.")
    assert testbed.feature_pair(claim, pool[0], sentence) == ("Bees have wax.", pool[0])
    assert testbed.feature_sentence(claim, ["Bees have wax."]) is None  # no sentence carries it
    assert testbed.feature_pair(claim, "Bees have honey.", None) is None
    stuff = _rule("stuff", 2, "keywords:frequency", keyword="bees", frequency=3, relation="at least")
    sentence = testbed.feature_sentence(stuff, ["Bees bees bees. Bees have honey."])
    assert testbed.feature_pair(stuff, "Bees bees bees. Bees have honey.", sentence) == \
        ("Bees have honey.", "Bees have honey. Bees bees bees.")
    pad = _rule("pad", 2, "length_constraints:number_words", num_words=8, relation="at least")
    assert testbed.feature_pair(pad, "Bees have honey.", None) == ("Bees have honey.",
                                                                   "Bees have honey. It is so. It is so.")
    assert testbed.feature_pair(pad, "Bees have honey. They have wax. They make it.", None) is None  # no `without`


def test_surface_pay_sees_every_kind_of_fix():
    # catches the old reading's miss: a counter-criterion that cancels the feature's pay while the spurious
    # criterion is kept; and a reweight, a deletion, a sign flip
    fact = _rule("fact", 3, "keywords:existence", keywords=["honey"])
    excl = _rule("excl", 2, "startend:end_checker", end_phrase="!")
    counter = _rule("counter", -2, "keywords:regex_match", pattern="!$")
    responses = ["Bees have honey!", "Bees have wax."]
    assert testbed.surface_pay(excl, [fact, excl], responses) == pytest.approx(100 * 2 / 5)
    assert testbed.surface_pay(excl, [fact, excl, counter], responses) == pytest.approx(0.0)
    reweighted = Criterion("excl", "excl", 0.5, excl.tags)
    assert testbed.surface_pay(excl, [fact, reweighted], responses) == pytest.approx(100 * 0.5 / 3.5)
    assert testbed.surface_pay(excl, [fact], responses) == pytest.approx(0.0)
    assert testbed.surface_pay(excl, [fact, Criterion("excl", "excl", -2, excl.tags)], responses) == \
        pytest.approx(-100 * 2 / 3)


def test_final_rubric_applies_the_last_draws_accepted_updates():
    # catches: the last draw's own accepted update missed (seen only at a later draw), a rejected one applied
    tags = ["verifier:rule", "rule:keywords:existence", 'rule_kwargs:{"keywords": ["honey"]}']
    slice_ = {"criteria": {"b/fact": {"text": "honey", "points": 3, "tags": tags, "anchor": True},
                           "b/excl": {"text": "excl", "points": 2, "tags": tags, "anchor": False}}}
    new = {"text": "counter", "points": -2, "tags": tags, "anchor": False}
    actions = (ActionRecord("rubric", "create_criterion", "accepted", changes={"criteria.b/h0": [None, new]}),
               ActionRecord("rubric", "reweight_criterion", "accepted", changes={"criteria.b/fact.points": [3, 4]}),
               ActionRecord("rubric", "delete_criterion", "rejected", changes={"criteria.b/excl": [{}, None]}))
    record = DrawRecord(step=3, task_id="bees", criterion_ids=("b/fact", "b/excl"), criterion_texts=("honey", "excl"),
                        responses=("a",), scores=np.zeros((2, 1)), rewards=np.zeros(1), harness=slice_,
                        actions=actions)
    got = {c.id: (c.text, c.points) for c in testbed.final_rubric(record)}
    assert got == {"b/fact": ("honey", 4.0), "b/excl": ("excl", 2.0), "b/h0": ("counter", -2.0)}


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
    assert out["surface_labels"] == {"exclaim": {"spurious": 1}}
    pr = testbed.precision_recall(out["labels"])
    assert pr["blind"]["precision"] == 1.0 and pr["blind"]["recall"] == 0.5
    assert pr["spurious"]["precision"] == 0.5 and pr["spurious"]["recall"] == 1.0  # b/fact mislabelled spurious
    assert pr["saturated"] == {"precision": 1.0, "recall": 1.0, "labelled": 2, "planted": 2}


def _outcome(reward, oracle, failing, reversal=0.0):
    stats = {"reward_first": reward[0], "reward_last": reward[1], "oracle_first": oracle[0],
             "oracle_last": oracle[1], "reversal_rate": reversal, "accepted": 0.0,
             **{k: 0.0 for k in ("oracle_agreement", "pair_agree", "pair_reward_tie_blind",
                                 "pair_reward_tie_saturated", "pair_wrong_direction", "pair_oracle_tie")}}
    return {"curves": {"step": [1, 2], "reward": list(reward), "oracle": list(oracle)}, "stats": stats,
            "end_classes": {c: 0.0 for c in testbed.CLASSES},
            "failing": {c: {f"{c}{i}": v for i, v in enumerate(failing.get(c, [1, 1]))} for c in testbed.CLASSES},
            "labels": {c: {} for c in testbed.CLASSES}, "final_oracle": {"a": oracle[1], "b": oracle[1]},
            "pay": {"s0": 22.2, "s1": 0.0}, "surface_labels": {"exclaim": {"spurious": 1, "agree": 3}}}


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
    # per surface feature, pooled over the seeds: 3 of 12 draws labelled spurious
    assert table["arms"]["grpo"]["attributor_by_surface"]["exclaim"]["recall"] == 0.25
    assert "R 25 (n 12; agree 9, spurious 3)" in testbed.render(table)
