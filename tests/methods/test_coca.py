"""CoCA's pure parts against their definitions (`diagnose` as docs/design.md states it, the gate): the five
states on their boundaries and in their test order, polarity-aware rates, the frontier gate, the calibration of
rule thresholds and of LLM criteria through the evolver model's protocol with the invariants, and the transition
table."""

import json

import numpy as np
import pytest

from harnessrl_jax.evolver.tightening import rule_tags
from harnessrl_jax.methods.coca import (CoCAConfig, diagnose, rates, select_frontiers, transitions)
from harnessrl_jax.methods.coca.calibration import Calibrator, invariant_problem, moved_rule
from harnessrl_jax.rubric import rules
from harnessrl_jax.rubric.judges.llm import Completion
from harnessrl_jax.rubric.schema import Criterion, Task

NAN = float("nan")


@pytest.mark.parametrize("pn, pg, state", [
    (NAN, 0.5, "unjudged"), (0.5, NAN, "unjudged"), (NAN, NAN, "unjudged"),
    (0.0, 0.0, "too_hard"),
    (0.0, 1 / 6, "learnable"), (0.0, 1.0, "learnable"),
    (0.5, 1 / 3, "regressive"), (1.0, 5 / 6, "regressive"),  # regressive is tested before saturated
    (1.0, 1.0, "saturated"),
    (0.5, 0.5, "discriminative"), (1 / 6, 1.0, "discriminative"), (0.5, 0.0, "regressive"),
])
def test_diagnose_boundaries_and_order(pn, pg, state):
    assert diagnose([pn], [pg]) == [state]


def test_diagnose_partitions_the_square_as_the_contract_orders_it():
    """Every (pN, pG) on a 7 x 7 grid of group rates gets exactly the state the contract's ordered tests give,
    re-derived here as a table of conditions that are mutually exclusive by construction."""
    grid = np.arange(7) / 6
    pn, pg = np.meshgrid(grid, grid, indexing="ij")
    pn, pg = pn.ravel(), pg.ravel()
    got = np.array(diagnose(pn, pg))
    want = np.select([(pn == 0) & (pg == 0), (pn == 0) & (pg > 0), (pn > 0) & (pg < pn),
                      (pn == 1) & (pg >= pn), (pn > 0) & (pn < 1) & (pg >= pn)],
                     ["too_hard", "learnable", "regressive", "saturated", "discriminative"], "none")
    assert (got == want).all() and "none" not in want


def test_diagnose_alternatives_behind_their_settings():
    # 'gap' rule: learnable needs a gap of m_learn; a margin keeps small guided drops out of regressive
    assert diagnose([0.0, 0.25, 0.0], [0.25, 0.75, 0.75], rule="gap") == ["discriminative", "learnable",
                                                                            "learnable"]
    assert diagnose([1.0, 0.5], [0.9, 0.3], regress_margin=0.15) == ["saturated", "regressive"]


def test_rates_are_polarity_aware_and_skip_missing_verdicts():
    S_n = np.array([[1, 1, 0, NAN], [0, 0, 0, 0], [NAN, NAN, NAN, NAN]])
    S_g = np.array([[1, 1, 1, 1], [1, 0, 0, 0], [1, 0, 1, 0]])
    pn, pg = rates(S_n, S_g, [2.0, -1.0, 1.0])
    np.testing.assert_allclose(pn[:2], [2 / 3, 1.0])  # a pitfall nobody commits is achieved by all
    np.testing.assert_allclose(pg, [1.0, 0.75, 0.5])
    assert np.isnan(pn[2])
    assert diagnose(pn, pg) == ["discriminative", "regressive", "unjudged"]


def test_the_gate():
    states = ["learnable", "saturated"]
    A = np.array([[1, 0, 1, 1], [1, 1, 1, 1]], float)
    rN, rG = np.array([40.0, 60.0, 60.0]), np.array([90.0, 95.0, 90.0, 60.0])
    g = select_frontiers(states, A, rN, rG)
    # response 1 has the best reward but misses the learnable criterion; 0 and 2 tie: the lowest index
    assert (g.qualified, g.gf_index, g.cf_index, g.learnable, g.gain) == (True, 0, 1, (0,), 30.0)
    assert not select_frontiers(states, A, rN, rG, margin=30.0).qualified  # strict: 90 > 60 + 30 fails
    assert select_frontiers(states, A, rN, rG, margin=29.9).qualified
    assert not select_frontiers(["saturated", "saturated"], A, rN, rG).qualified  # no learnable: not qualified
    assert not select_frontiers(states, A, rN, np.array([60.0, 95.0, 55.0, 60.0])).qualified  # not > best_N
    nan = select_frontiers(states, A, np.array([NAN, 10.0, NAN]), np.array([NAN, 95.0, 20.0, NAN]))
    assert (nan.qualified, nan.gf_index, nan.cf_index) == (True, 2, 1)  # NaN rewards never win


def letters(k, relation="at least", points=1.0):
    return Criterion("r", f"The letter 'q' appears {relation} {k} times.", points,
                     rule_tags("keywords:letter_frequency", dict(letter="q", let_frequency=k, let_relation=relation)))


def test_rule_calibration_moves_the_threshold_to_the_nearest_value_that_splits_the_group():
    responses = ["q", "qq", "qqq", "qqq"]  # at least 1: saturated
    up = moved_rule(letters(1), "strengthen", responses)
    assert up.rule_kwargs["let_frequency"] == 2 and up.text == "The letter 'q' appears at least 2 times."
    assert up.id == "r" and up.points == 1.0 and up.tags[:2] == letters(1).tags[:2]
    assert rules.check(up.rule_id, up.rule_kwargs, "q") is False
    down = moved_rule(letters(5), "weaken", responses)  # nobody has 5: the nearest split is 3
    assert down.rule_kwargs["let_frequency"] == 3
    # a pitfall ('less than 2' is committed by short responses): strengthening widens it (more commit it)
    pit = moved_rule(letters(2, "less than", -1.0), "strengthen", responses)
    assert pit.rule_kwargs["let_frequency"] == 3
    # no threshold that splits: every response has no q, so weakening 'at least 1' can only make it vacuous
    assert moved_rule(letters(1), "weaken", ["abc", "de"]) is None
    assert moved_rule(Criterion("k", "Says honey.", 1.0, rule_tags("keywords:existence", dict(keywords=["honey"]))),
                      "strengthen", responses) is None


def test_invariants():
    old = Criterion("a", "Mentions screening.", 2.0, ("axis:completeness",))
    ok = Criterion("a", "Recommends repeat screening at a stated interval.", 2.0, ("axis:completeness",))
    assert invariant_problem(old, ok) is None
    for bad, why in [(Criterion("b", ok.text, 2.0, old.tags), "id"),
                     (Criterion("a", ok.text, -2.0, old.tags), "points"),
                     (Criterion("a", ok.text, 2.0, ()), "tags"), (Criterion("a", " ", 2.0, old.tags), "empty"),
                     (Criterion("a", "Mentions screening. Also diet.", 2.0, old.tags), "sentence"),
                     (Criterion("a", old.text, 2.0, old.tags), "unchanged"),
                     (Criterion("a", "x" * 100, 2.0, old.tags), "longer"),
                     (Criterion("a", "<the rewritten criterion>", 2.0, old.tags), "in common")]:
        assert why in invariant_problem(old, bad)


class Client:
    """The evolver model through the judge protocol: canned rewrites by the criterion it is asked about."""

    def __init__(self, answers):
        self.answers, self.prompts = answers, []

    def complete(self, messages, schema, key=None):
        text = messages[0]["content"]
        self.prompts.append(text)
        for needle, out in self.answers.items():
            if needle in text:
                return Completion(out if out is None else json.dumps(out), "ok" if out else "error", "stop", 0.0,
                                  False, 1)
        raise AssertionError(text)


def test_llm_criteria_are_rewritten_by_the_evolver_model_and_bad_rewrites_are_discarded():
    crits = (Criterion("a", "Mentions screening.", 2.0), Criterion("b", "Gives the location.", 1.0),
             Criterion("c", "Is rude.", -1.0), Criterion("d", "Is kind.", 1.0), letters(1))
    task = Task("t", "medical", ({"role": "user", "content": "I have a lump."},), crits)
    client = Client({"Mentions screening": {"text": "Recommends repeat screening at a stated interval."},
                     "Gives the location": {"text": "Asks where it is. Also asks when."},  # two sentences
                     "Is rude": None})  # no answer
    states = ["saturated", "too_hard", "saturated", "discriminative", "saturated"]
    (new, rewrites), = Calibrator(client).calibrate_many([(task, crits, states, [1, 0, 1, .5, 1], [1, 0, 1, .5, 1],
                                                           ["q", "qq", "q", "qqq"])])
    assert new[0].text == "Recommends repeat screening at a stated interval." and new[0].points == 2.0
    assert new[1] == crits[1] and new[2] == crits[2] and new[3] == crits[3]
    assert new[4].rule_kwargs["let_frequency"] == 2  # the rule criterion without the model
    outcomes = {r.criterion_id: r.outcome for r in rewrites}
    assert outcomes["a"] == "ok" and outcomes["b"].startswith("invalid") and outcomes["c"] == "failed"
    assert len(client.prompts) == 3  # one call per calibrated LLM criterion
    weaken = next(p for p in client.prompts if "Gives the location" in p)
    assert "TOO HARD" in weaken and "requirement, 1 points" in weaken and "I have a lump." in weaken
    assert "pitfall" in next(p for p in client.prompts if "Is rude" in p)
    # without the model, LLM criteria stay and are counted skipped
    (same, skipped), = Calibrator(None).calibrate_many([(task, crits[:1], ["saturated"], [1], [1], ["q"])])
    assert same == crits[:1] and skipped[0].outcome == "skipped"


def test_transition_table_counts_revisits_and_conditions_on_the_source():
    lines = [{"step": 0, "task_id": "t", "states": {"a": "learnable", "b": "too_hard"}},
             {"step": 0, "task_id": "u", "states": {"a": "learnable"}},
             {"step": 1, "task_id": "t", "states": {"a": "saturated", "b": "unjudged"}},
             {"step": 2, "task_id": "t", "states": {"a": "saturated", "b": "too_hard"}},
             {"step": 3, "task_id": "u", "states": {"a": "too_hard"}}]
    joint, cond = transitions(lines)
    assert joint == {("learnable", "saturated"): 1, ("saturated", "saturated"): 1, ("learnable", "too_hard"): 1}
    assert cond["learnable"]["saturated"] == 0.5 and cond["learnable"]["too_hard"] == 0.5
    assert cond["saturated"]["saturated"] == 1.0 and "too_hard" not in cond


@pytest.mark.parametrize("kw, match", [({"groups": (0, 6)}, "groups"), ({"distill_on": "x"}, "distill_on"),
                                       ({"guided_gate": "sometimes"}, "guided_gate"),
                                       ({"distill_on": "guided_frontier", "guided_gate": "always"}, "choose one")])
def test_config_rejects_bad_settings(kw, match):
    with pytest.raises(ValueError, match=match):
        CoCAConfig(**kw)


def test_every_variant_is_a_valid_config_and_bad_values_name_their_key():
    import os
    import sys

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from experiments import coca as coca_config
    from harnessrl_jax import checks, methods
    from harnessrl_jax.methods.coca import CoCAScheme
    from harnessrl_jax.methods.parts import part_class

    for name in coca_config.VARIANTS:
        for tiny in (False, True):
            config = coca_config.get_config(f"variant={name}" + (",tiny" if tiny else ""))
            assert checks.check(config) == [], (name, tiny)
            assert sum(config.coca.groups) == config.num_generations
    c = coca_config.get_config("variant=gspo")
    assert (c.loss.name, part_class(methods.describe(c).scheme)) == ("gspo", CoCAScheme)
    bad = coca_config.get_config("tiny")
    bad.coca.groups = (6, 6)
    assert any(p.startswith("--config.coca.groups=(6, 6)") and "num_generations=8" in p for p in checks.check(bad))
    bad = coca_config.get_config("tiny")
    bad.coca.distill_on = "teacher"
    assert any(p.startswith("--config.coca") and "distill_on" in p for p in checks.check(bad))
    bad = coca_config.get_config("tiny")
    bad.loss.name = "ppo"
    assert any(p.startswith("--config.loss.name") for p in checks.check(bad))
    with pytest.raises(ValueError, match="known variants"):
        coca_config.get_config("variant=nope")


@pytest.mark.slow
def test_the_rewriter_runs_against_a_real_model_server(llama_server, tiny_config):
    """LLM criteria calibrated by the evolver model (SmolLM2 served by llama.cpp, built as a run builds it): one
    call per criterion, and every outcome is a checked rewrite, a discarded one with its reason, or a failed call."""
    from harnessrl_jax import build

    config = tiny_config("method=coca,tasks=harness")
    config.harness.proposer = "llm"
    config.evolver_model.update(base_url=llama_server.base_url, model=llama_server.model,
                                structured_output="json_object", max_tokens=48)
    client = build.build_evolver_client(config)
    crits = (Criterion("a", "Mentions that the lump should be examined by a doctor.", 2.0),
             Criterion("b", "Gives the exact size of the lump in millimetres.", 1.0))
    task = Task("t", "medical", ({"role": "user", "content": "I found a lump on my neck."},), crits)
    try:
        (new, rewrites), = Calibrator(client).calibrate_many([(task, crits, ["saturated", "too_hard"], [1, 0], [1, 0],
                                                               ["See a doctor."] * 4)])
        assert client.stats["calls"] == 2
    finally:
        client.close()
    assert [r.direction for r in rewrites] == ["strengthen", "weaken"]
    for r, old, c in zip(rewrites, crits, new):
        assert r.outcome == "ok" or r.outcome == "failed" or r.outcome.startswith("invalid: ")
        if r.valid:
            assert invariant_problem(old, c) is None and c.text == r.new
        else:
            assert c == old
