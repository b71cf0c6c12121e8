"""OOD benchmarks (harnessrl_jax.eval.ood) on fixtures written in each benchmark's released format: loaders, the
letter extraction on realistic answer shapes, ROUGE-L against an LCS re-derivation with RoleBench's tokenisation,
IFBench's four scores against rules.score_ifeval_file + summarize (IFEval's own accounting), WritingBench's
aggregation by hand, and the errors naming file, line and field."""

import csv
import json
import os
import re
import shutil

import numpy as np
import pytest

from harnessrl_jax.eval import ood
from harnessrl_jax.eval.ood import FormatError, extract_choice, rouge_l
from harnessrl_jax.eval.ood import gpqa, ifbench, medqa, rolebench, writingbench
from harnessrl_jax.rubric import rules
from harnessrl_jax.rubric.judges import Completion

FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "ood")
PATHS = {"medqa": os.path.join(FIX, "medqa", "phrases_no_exclude_test.jsonl"),
         "gpqa": os.path.join(FIX, "gpqa", "gpqa_diamond.csv"), "rolebench": os.path.join(FIX, "rolebench"),
         "ifbench": os.path.join(FIX, "ifbench", "IFBench_test.jsonl"),
         "writingbench": os.path.join(FIX, "writingbench", "benchmark_all.jsonl")}
OPTIONS = ["Warfarin", "Heparin", "Aspirin", "Clopidogrel"]

# (free-form answer, the letter it commits to); shapes seen from small chat models
CHOICES = [
    ("The answer is (C).", "C"), ("Answer: B", "B"), ("**Answer: B**", "B"), ("The correct answer is D. Clopidogrel", "D"),
    ("B", "B"), ("(B).", "B"), ("**C**", "C"), ("B) Heparin", "B"), ("B. Heparin because it acts fast.", "B"),
    ("I'd go with option D.", "D"), ("I choose A", "A"), ("Final answer: \\boxed{C}", "C"), ("\\boxed{\\text{B}}", "B"),
    ("Option C is correct.", "C"), ("(A) is the correct answer because it blocks vitamin K.", "A"),
    ("Let's go through them.\nA. Warfarin: no.\nB. Heparin: no.\nC. Aspirin: yes.\nD. Clopidogrel: no.\n"
     "So, the answer is C.", "C"),
    ("I think the best choice is heparin.", "B"), ("Aspirin would be best here.", "C"),
    ("Therefore, the correct option is (d).", "D"), ("answer: (b)", "B"), ("The answer is not A. It is C.", "C"),
    ("<think>maybe A</think>The answer is B", "B"), ("Thus the answer is B, not A.", "B"),
    ("Based on the symptoms, the most likely diagnosis is B) myocardial infarction.", "B"),
    ("The answer is B. Wait, actually the answer is D.", "D"), ("My answer: C", "C"), ("Correct answer: **A**", "A"),
    ("So the answer would be C", "C"), ("It's C.", "C"), ("The correct choice is option B: Heparin.", "B"),
    ("Hmm. Between B and C, I'd pick C.", "C"), ("So the answer is: **(D)**", "D"),
    ("A patient with chest pain needs aspirin first.", "C"),
    # commits to none or to several
    ("The answer is A or B.", None), ("It could be A and C", None), ("The answer is (A) and (C).", None),
    ("A. Warfarin\nB. Heparin\nC. Aspirin\nD. Clopidogrel", None), ("The patient should take aspirin or heparin.", None),
    ("I don't know.", None), ("", None), ("The answer is E.", None), ("Vitamin A deficiency is common.", None),
    ("The patient lacks vitamin B.", None), ("A 45-year-old man presents with fever.", None),
]


@pytest.mark.parametrize("response,letter", CHOICES)
def test_extract_choice_reads_the_committed_letter(response, letter):
    assert extract_choice(response, 4, OPTIONS) == letter


def test_extract_choice_contract_without_options_and_beyond_four_choices():
    assert extract_choice("The answer is E.", num_choices=5) == "E"
    assert extract_choice("I think the best choice is heparin.") is None  # no option texts: no text match
    assert extract_choice("Answer: (B)") == "B"


def _lcs_f(pred: str, ref: str) -> float:
    """ROUGE-L F1 re-derived: RoleBench's rouge_score tokenisation (lowercase, non [a-z0-9] runs split), DP LCS."""
    tok = lambda s: re.sub(r"[^a-z0-9]+", " ", s.lower()).split()  # noqa: E731
    a, b = tok(pred), tok(ref)
    if not a or not b:
        return 0.0
    dp = np.zeros((len(a) + 1, len(b) + 1), int)
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            dp[i + 1, j + 1] = dp[i, j] + 1 if x == y else max(dp[i, j + 1], dp[i + 1, j])
    lcs = dp[-1, -1]
    if lcs == 0:
        return 0.0
    p, r = lcs / len(a), lcs / len(b)
    return 2 * p * r / (p + r)


@pytest.mark.parametrize("pred,refs", [
    ("The cat sat on the mat", ["the cat sat"]),  # LCS 3: P 1/2, R 1, F 2/3
    ("Steady as she goes! Breathe slow, sailor.", ["Steady as she goes! First, breathe slow like the tide.",
                                                    "Batten down the hatches and breathe deep, sailor."]),
    ("running runs ran", ["run running"]),  # no stemming: only 'running' is shared
    ("Café au lait, s'il vous plaît", ["cafe au lait"]),  # non-ASCII letters are separators
    ("", ["anything"]),
])
def test_rouge_l_is_the_best_reference_lcs_f_measure_without_stemming(pred, refs):
    assert rouge_l(pred, refs) == pytest.approx(max(_lcs_f(pred, r) for r in refs))
    assert rouge_l("The cat sat on the mat", "the cat sat") == pytest.approx(2 / 3)


@pytest.fixture
def fake_tagger(monkeypatch):
    """NLTK's pos_tag stubbed (its tagger model ships in no package): 'Write' is a verb, the rest nouns."""
    import nltk
    monkeypatch.setattr(nltk, "pos_tag", lambda tokens: [(t, "VB" if t == "Write" else "NN") for t in tokens])


def test_loaders_read_each_fixture_in_its_published_format(fake_tagger):
    m = medqa.load(PATHS["medqa"])
    assert len(m) == 6 and [i.target for i in m] == ["A", "C", "B", "C", "C", "B"]
    assert "A. Penicillin V\nB. Ciprofloxacin" in m[0].messages[0]["content"]
    g = gpqa.load(PATHS["gpqa"])
    rows = list(csv.DictReader(open(PATHS["gpqa"], newline="")))
    assert len(g) == len(rows) == 5
    for item, row in zip(g, rows):  # the correct text sits under the answer letter, options are a permutation
        assert item.meta["options"]["ABCD".index(item.target)] == row["Correct Answer"]
        assert sorted(item.meta["options"]) == sorted(row[c] for c in gpqa.COLUMNS[1:])
    assert [i.target for i in g] == [i.target for i in gpqa.load(PATHS["gpqa"])]  # fixed seed
    assert len({i.target for i in g}) > 1 and [i.target for i in gpqa.load(PATHS["gpqa"], seed=7)] != \
        [i.target for i in g]
    r = rolebench.load(PATHS["rolebench"])
    assert [i.meta["subset"] for i in r] == ["CUS"] * 3 + ["SPE"] * 2
    assert r[0].messages[0]["role"] == "system" and "Steady as she goes!" in r[0].messages[0]["content"]
    assert "Captain Mara Vell" in r[0].messages[0]["content"] and len(r[0].target) == 2
    w = writingbench.load(PATHS["writingbench"])
    assert len(w) == 3 and all(len(i.target) == 5 for i in w)
    f = ifbench.load(PATHS["ifbench"])
    ids = {i for it in f for i in it.target[0]}
    assert len(ids) == 58 and not any(rules.get_rule(i).ifeval for i in ids)  # all of IFBench's, none of IFEval's


def test_ifbench_file_with_float_integers_scores_end_to_end(fake_tagger):
    """The fixture stores integers as floats under the union of kwarg names, as IFBench's release does; every
    record of all 58 instruction ids loads and scores, and the checkers get ints."""
    items = ifbench.load(PATHS["ifbench"])
    for it in items:
        for kw in it.target[1]:
            assert not any(isinstance(v, float) for v in kw.values())
    responses = [["Write about the river.\nThe river, the stone and the light meet. SEPARATOR yes SEPARATOR",
                  "yes"] for _ in items]
    out = ifbench.score(responses, items)
    assert set(out) >= set(ifbench.SCORES) and out["score"] == out["prompt_loose"]
    # IFEval's own accounting over the same verdicts, one sample at a time, pooled: rules.score_ifeval_file
    rows = [json.loads(line) for line in open(PATHS["ifbench"])]
    expect = {}
    for mode in ("strict", "loose"):
        per_sample = []
        for j in range(2):
            scored = [{"instruction_id_list": r["instruction_id_list"],
                       "follow_instruction_list": rules.follow_instructions(
                           r["instruction_id_list"], r["kwargs"], responses[k][j], prompt=r["prompt"],
                           loose=mode == "loose")} for k, r in enumerate(rows)]
            per_sample.append(rules.summarize(scored))
        expect[f"prompt_{mode}"] = 100 * np.mean([s["prompt_level"] for s in per_sample])
        expect[f"instruction_{mode}"] = 100 * np.mean([s["instruction_level"] for s in per_sample])
    for k, v in expect.items():
        assert out[k] == pytest.approx(v), k


def test_multiple_choice_and_rolebench_scores_by_hand():
    items = medqa.load(PATHS["medqa"])
    responses = [["The answer is A.", "B"], ["Answer: C", "C"], ["I don't know", "no idea"],
                 ["Apixaban is best.", "The answer is A or C"], ["(C)", "(C)"], ["Answer: B", "Answer: D"]]
    out = medqa.score(responses, items)
    assert out["score"] == pytest.approx(100 * np.mean([0.5, 1, 0, 0.5, 1, 0.5]))
    assert out["unparsed_share"] == pytest.approx(3 / 12)
    r = rolebench.load(PATHS["rolebench"])
    resp = [["Steady as she goes! Breathe slow like the tide."]] * 5
    s = rolebench.score(resp, r)
    cus = [100 * rouge_l(resp[0][0], it.target) for it in r[:3]]
    spe = [100 * rouge_l(resp[0][0], it.target) for it in r[3:]]
    assert s["CUS"] == pytest.approx(np.mean(cus)) and s["SPE"] == pytest.approx(np.mean(spe))
    assert s["score"] == pytest.approx((np.mean(cus) + np.mean(spe)) / 2)


class CannedJudge:
    """An LLM judge's `complete`: the score is the number of words 'good' in the scored response (1-10), or junk."""

    def complete(self, messages, schema):
        text = messages[0]["content"]
        response = text.split("# Response to score\n", 1)[1].split("\n\n# Criterion", 1)[0]
        if "junk" in response:
            return Completion("I cannot decide.", "ok", "", 0.0, False, 1)
        n = min(10, max(1, response.count("good")))
        return Completion(json.dumps({"reason": "counted", "score": n}), "ok", "", 0.0, False, 1)


def test_writingbench_item_is_the_mean_of_its_criteria_times_ten():
    items = writingbench.load(PATHS["writingbench"])
    responses = [["good good", "good " * 8], ["junk"], ["good " * 10]]
    out = writingbench.score(responses, items, CannedJudge())
    assert out["judge_calls"] == 5 * 4 and out["unscored"] == 5
    assert out["score"] == pytest.approx(10 * np.mean([np.mean([2, 8]), 10]))
    assert out["per_item"][1]["score"] is None
    with pytest.raises(ValueError, match="configured LLM judge"):
        writingbench.score(responses, items, None)
    assert writingbench.parse_score('```json\n{"score": 7, "reason": "x"}\n```') == 7
    assert writingbench.parse_score('{"reason": "x", "score": "8/10"}') == 8
    assert writingbench.parse_score('{"score": 11}') is None and writingbench.parse_score("Score: 4") == 4


def test_bad_files_are_refused_with_file_line_and_field(tmp_path, fake_tagger):
    bad = tmp_path / "medqa.jsonl"
    rows = [json.loads(line) for line in open(PATHS["medqa"])]
    rows[1]["options"]["E"] = "Another"
    bad.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(FormatError, match=rf"{re.escape(str(bad))}:2: field 'options'"):
        medqa.load(str(bad))
    bad_if = tmp_path / "ifbench.jsonl"
    row = json.loads(open(PATHS["ifbench"]).readline())
    row["kwargs"][0]["small_n"] = 2.5
    bad_if.write_text(json.dumps(row) + "\n")
    with pytest.raises(FormatError, match=r":1: field 'instruction_id_list\[0\]': rule 'count:conjunctions': kwarg "
                                          r"'small_n' must be an integer, got 2.5"):
        ifbench.load(str(bad_if))
    rb = tmp_path / "rb"
    shutil.copytree(PATHS["rolebench"], rb)
    with open(rb / "rolebench-eng" / "role-generalization" / "role_specific" / "test.jsonl", "a") as f:
        f.write(json.dumps({"role": "Nobody", "question": "hi", "generated": ["x"]}) + "\n")
    with pytest.raises(FormatError, match=r"role_specific/test.jsonl:3: field 'role'"):
        rolebench.load(str(rb))
    with pytest.raises(FileNotFoundError, match="gpqa_diamond.csv"):
        gpqa.load(str(tmp_path / "missing.csv"))
    with pytest.raises(ValueError, match="NAME=PATH"):
        ood.parse_specs("mmlu=x")


def test_an_instruction_this_machine_cannot_check_fails_at_load_naming_the_line(monkeypatch, tmp_path):
    import nltk

    def missing(tokens):
        raise LookupError("Resource averaged_perceptron_tagger_eng not found.")

    monkeypatch.setattr(nltk, "pos_tag", missing)
    monkeypatch.setattr(ifbench, "_RUNNABLE", set())
    line = next(n for n, row in enumerate(open(PATHS["ifbench"]), 1) if "words:start_verb" in row)
    with pytest.raises(LookupError, match=rf"IFBench_test.jsonl:{line}: instruction 'words:start_verb' cannot be "
                                          r"checked here: .*averaged perceptron tagger"):
        ifbench.load(PATHS["ifbench"])
