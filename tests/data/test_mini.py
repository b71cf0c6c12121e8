"""The bundled mini task set: it loads and validates, its splits and domains are sound, its rule criteria use
registered checkers with valid kwargs, every reference meets its own rule criteria, and the rubrics tell a good
answer from a trivially bad one."""

import importlib.util
import json
import os
import re
from collections import Counter

import numpy as np
import pytest

from harnessrl_jax.data import DOMAINS, SPLITS, domains, load_split, split_path
from harnessrl_jax.data.profile import format_table, profile, rule_matrix, state
from harnessrl_jax.rubric import rules
from harnessrl_jax.rubric.reward import rubric_reward
from harnessrl_jax.rubric.schema import load_tasks

TRAIN = load_split("mini", "train")
HELDOUT = load_split("mini", "heldout")
ALL = TRAIN + HELDOUT
CRITERIA = [c for t in ALL for c in t.criteria]
ORACLE = [c for t in ALL for c in t.oracle_criteria]


def _rule_verdicts(task, response, criteria):
    return [(c, rules.check(c.rule_id, c.rule_kwargs, response, prompt=task.prompt[-1]["content"]))
            for c in criteria if c.verifier == "rule"]


def test_files_load_with_load_tasks():
    for split in SPLITS:
        tasks = load_tasks(split_path("mini", split))  # validates every record, raises on the first bad one
        assert [t.id for t in tasks] == [t.id for t in load_split("mini", split)]


def test_sizes_ids_and_splits():
    assert len(ALL) >= 100
    ids = [t.id for t in ALL]
    assert len(set(ids)) == len(ids), "task ids must be unique across splits"
    assert not {t.id for t in TRAIN} & {t.id for t in HELDOUT}
    crit_ids = [c.id for c in CRITERIA + ORACLE]
    assert len(set(crit_ids)) == len(crit_ids)
    # Held-out prompts are not train prompts in disguise.
    train_prompts = {t.prompt[-1]["content"] for t in TRAIN}
    assert not any(t.prompt[-1]["content"] in train_prompts for t in HELDOUT)


def test_domains_present_in_both_splits_and_balanced():
    assert domains() == DOMAINS
    for split, tasks in (("train", TRAIN), ("heldout", HELDOUT)):
        assert domains("mini", split) == DOMAINS
        assert set(Counter(t.domain for t in tasks).values()) == {len(tasks) // len(DOMAINS)}
    per_domain = Counter(t.domain for t in ALL)
    assert min(per_domain.values()) >= 20
    for d in DOMAINS:  # roughly 80 / 20 per domain
        held = sum(t.domain == d for t in HELDOUT) / per_domain[d]
        assert 0.15 <= held <= 0.25


def test_criterion_mix():
    n = len(CRITERIA)
    rule_share = sum(c.verifier == "rule" for c in CRITERIA) / n
    llm = [c for c in CRITERIA if c.verifier == "llm"]
    pitfalls = [c for c in CRITERIA if c.points < 0]
    assert rule_share >= 0.75, "most criteria must be rule-checkable so the CPU default needs no judge"
    assert llm and all(c.rule_id is None for c in llm), "LLM-only criteria exercise routing and carry no rule"
    assert all(c.verifier in ("rule", "llm") for c in CRITERIA)
    assert 0.05 <= len(pitfalls) / n <= 0.20
    # Every task has an oracle rubric, rule-checkable, and a reference answer.
    for t in ALL:
        assert t.reference and t.oracle_criteria, t.id
        assert all(c.verifier == "rule" for c in t.oracle_criteria), t.id
        assert any(c.points > 0 for c in t.criteria if c.verifier == "rule"), t.id
        # The oracle asks for something the training rubric does not: not the same set of checks.
        train_checks = {(c.rule_id, json.dumps(c.rule_kwargs, sort_keys=True)) for c in t.criteria}
        assert any((c.rule_id, json.dumps(c.rule_kwargs, sort_keys=True)) not in train_checks
                   for c in t.oracle_criteria), t.id


def test_rule_ids_registered_and_kwargs_valid():
    registered = set(rules.registered())
    for t in ALL:
        for c in t.criteria + t.oracle_criteria:
            if c.verifier != "rule":
                continue
            assert c.rule_id in registered, (c.id, c.rule_id)
            rules.validate_kwargs(c.rule_id, c.rule_kwargs, prompt=t.prompt[-1]["content"])
            for tag in ("keywords", "forbidden_words"):
                for pattern in c.rule_kwargs.get(tag, []):
                    re.compile(pattern)  # patterns are meant as regexes, never matched literally by accident
            if "pattern" in c.rule_kwargs:
                re.compile(c.rule_kwargs["pattern"])


def test_prompts_short_and_references_short():
    for t in ALL:
        assert len(re.findall(r"\w+", " ".join(m["content"] for m in t.prompt))) <= 120, t.id
        # A ~64-96 token policy budget must be able to reach every criterion.
        assert len(re.findall(r"\w+", t.reference)) <= 60, t.id


@pytest.mark.parametrize("split", SPLITS)
def test_reference_meets_its_rubric(split):
    for t in load_split("mini", split):
        for c, met in _rule_verdicts(t, t.reference, t.criteria + t.oracle_criteria):
            if c.points > 0:
                assert met, f"{t.id}: reference misses {c.id}: {c.text}"
            else:
                assert not met, f"{t.id}: reference triggers pitfall {c.id}: {c.text}"


def test_trivial_response_fails_most_criteria():
    bad = "OK."
    met_count, total = 0, 0
    for t in ALL:
        verdicts = _rule_verdicts(t, bad, t.criteria)
        pos = [(c, m) for c, m in verdicts if c.points > 0]
        met_count += sum(m for _, m in pos)
        total += len(pos)
        points = np.array([c.points for c, _ in verdicts])
        S_bad = np.array([[float(m)] for _, m in verdicts])
        S_ref = np.array([[float(m)] for _, m in _rule_verdicts(t, t.reference, t.criteria)])
        r_bad, r_ref = rubric_reward(points, S_bad)[0], rubric_reward(points, S_ref)[0]
        assert r_ref == pytest.approx(100.0), t.id
        # Only a few easy bounds (a word limit, no commas) hold for "OK.": under half the positive weight.
        assert r_bad < 50.0, (t.id, r_bad)
    assert met_count / total < 0.25


def test_cellulose_case_task():
    t = {t.id: t for t in ALL}["sci-cellulose-digestion"]
    assert t.domain == "science"
    text = " ".join(c.text.lower() for c in t.criteria + t.oracle_criteria)
    for word in ("cellulase", "microbes", "hydrolysis", "hydroxyl"):
        assert word in text


def test_every_domain_has_pitfalls_and_llm_criteria():
    for d in DOMAINS:
        crits = [c for t in ALL if t.domain == d for c in t.criteria]
        assert any(c.points < 0 for c in crits), d
        assert any(c.verifier == "llm" for c in crits), d


def test_profile_states():
    assert [state(x) for x in (0.0, 0.125, 0.875, 1.0)] == ["blind", "discriminative", "discriminative", "saturated"]
    t = {t.id: t for t in ALL}["med-cold-home-care"]
    crits, S = rule_matrix(t, [t.reference, "OK."])
    assert S.shape == (len(crits), 2) and S[:, 0].sum() > S[:, 1].sum()
    rep = profile([t], [[t.reference, "OK."]])
    assert sum(rep["counts"]["all"]["any"].values()) == len(crits)
    assert "medical" in format_table(rep["counts"])


def test_source_and_files_agree():
    """The JSONL files are what build.py writes (edit build.py, then run it)."""
    src = os.path.join(os.path.dirname(split_path("mini", "train")), "build.py")
    if not os.path.exists(src):
        pytest.skip("build.py is not shipped with installed packages")
    spec = importlib.util.spec_from_file_location("_mini_build", src)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for split, held in (("train", False), ("heldout", True)):
        with open(split_path("mini", split), encoding="utf-8") as f:
            on_disk = [json.loads(line) for line in f]
        assert on_disk == [rec for rec, h in mod.TASKS if h == held], split
