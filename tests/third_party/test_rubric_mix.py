"""Rubric-Mix-10k converters (third_party/rubric_mix) and launch/build_rubric_mix.py on fixtures written in each
source's release format (tests/data/rubric_mix): every record's conversion checked field by field, the build's
splits disjoint and deduplicated, its statistics recomputed from the written files, and unknown layouts refused
with file, line and field."""

import json
import os
import shutil
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harnessrl_jax.rubric.judges import Completion
from harnessrl_jax.rubric.schema import load_tasks

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)
FIX = os.path.join(REPO, "tests", "data", "rubric_mix")

from third_party.rubric_mix import SOURCES, ConversionError, build as mix, longwriter_zero, researchqa  # noqa: E402


def _tasks(name, folder=None, **kw):
    return list(SOURCES[name].convert(folder or os.path.join(FIX, name), **kw))


def test_healthbench_loads_unchanged_with_its_tags_and_reference():
    tasks = _tasks("healthbench")
    raw = [json.loads(line) for line in open(os.path.join(FIX, "healthbench", "oss_eval.jsonl"))]
    assert [t.id for t in tasks] == [f"healthbench/{r['prompt_id']}" for r in raw]
    for t, r in zip(tasks, raw):
        assert t.domain == "medical" and [c.points for c in t.criteria] == [x["points"] for x in r["rubrics"]]
        assert [list(c.tags) for c in t.criteria] == [x["tags"] for x in r["rubrics"]]
        assert t.extra["example_tags"] == r["example_tags"]
    assert tasks[0].reference.startswith("Rest it") and tasks[1].reference is None
    assert "  " not in tasks[0].prompt[0]["content"]  # whitespace-normalised


def test_rar_items_move_the_category_prefix_into_a_tag():
    t = _tasks("rar_medicine")[0]
    assert [c.text for c in t.criteria][0] == "Recommends a chest X-ray as the first investigation."
    assert [c.tag("category") for c in t.criteria] == ["essential", "important", "optional", "pitfall"]
    assert [c.points for c in t.criteria] == [5, 4, 2, -2] and t.criteria[0].tag("title") == "Chest imaging"
    assert t.reference.startswith("Chest X-ray") and t.id.startswith("rar_medicine/")
    assert {x.domain for x in _tasks("rar_science")} == {"science"}


def test_researchqa_questions_become_statements_and_repeated_ids_convert_once():
    tasks = _tasks("researchqa")
    assert sorted(t.id for t in tasks) == ["researchqa/rq-0001-s1", "researchqa/rq-0002-s3", "researchqa/rq-0003-s2"]
    t = next(t for t in tasks if t.id.endswith("0001-s1"))
    assert [c.text for c in t.criteria][:3] == [
        "The response explain that a periodic refractive index causes Bragg-like interference.",
        "It mention that the band gap forbids propagation in a frequency range.",
        "There is a comparison with electronic band gaps in semiconductors."]
    assert all(c.points == 1 for c in t.criteria) and t.criteria[3].tag("type") == "Citation"
    assert researchqa.to_statement("Why is it blue?") == "Why is it blue."


def test_rubrichub_english_only_domains_mapped_and_if_rules_where_a_checker_exists():
    stats = {}
    tasks = _tasks("rubrichub", stats=stats)
    assert stats["non_english"] == 1 and stats["not_in_mix"] == 1  # the Chinese prompt; the writing slice
    assert sorted({t.domain for t in tasks}) == ["instruction_following", "medical", "roleplay", "science"]
    bullets = next(t for t in tasks if "water bottle" in t.prompt[0]["content"])
    c = bullets.criteria[0]
    assert (c.verifier, c.rule_id, c.rule_kwargs) == ("rule", "detectable_format:number_bullet_lists",
                                                      {"num_bullets": 3})
    commas = next(t for t in tasks if "commas" in t.prompt[0]["content"])
    assert commas.criteria[0].rule_id == "punctuation:no_comma"  # found by its name part
    assert commas.criteria[2].verifier == "llm" and commas.criteria[2].tag("source_function") == "ends_with_question"
    assert stats["rules_mapped"] == 2 and stats["rules_unmapped"] == 1
    statins = next(t for t in tasks if "statins" in t.prompt[0]["content"])
    assert [c.points for c in statins.criteria] == [5, 4, -3] and statins.reference.startswith("Muscle pain")


class Generator:
    """The generator model's `complete`: a fixed RaR-format rubric per prompt."""
    model = "canned-generator"

    def complete(self, messages, schema):
        text = messages[0]["content"]
        assert "# Writing request" in text and len(schema["items"]["required"]) == 3
        items = [{"title": f"Point {i}", "description": f"Essential Criteria: Covers point {i} of the request.",
                  "weight": 5} for i in range(5)]
        items += [{"title": "Cliche", "description": "Pitfall Criteria: Opens with a cliche.", "weight": -2},
                  {"title": "Voice", "description": "Important Criteria: Keeps one narrative voice.", "weight": 3}]
        return Completion(json.dumps(items), "ok", "stop", 0.0, False, 1)


def test_longwriter_zero_rubrics_generated_once_offline_with_the_length_rule(tmp_path):
    folder = tmp_path / "longwriter_zero"
    shutil.copytree(os.path.join(FIX, "longwriter_zero"), folder)
    assert longwriter_zero.generate_rubrics(str(folder), Generator()) == {"generated": 2, "failed": 0, "kept": 0}
    assert longwriter_zero.generate_rubrics(str(folder), Generator()) == {"generated": 0, "failed": 0, "kept": 2}
    stats = {}
    tasks = list(longwriter_zero.convert(str(folder), stats=stats))
    assert len(tasks) == 2 and stats == {"non_english": 1, "no_rubric": 0}
    essay = next(t for t in tasks if "night train" in t.prompt[0]["content"])
    rule = essay.criteria[-1]
    assert (rule.rule_id, rule.rule_kwargs) == ("length_constraints:number_words",
                                                {"relation": "at least", "num_words": 800})
    assert len(essay.criteria) == 8 and essay.extra["generator"] == "canned-generator"
    assert essay.extra["prompt_sha"] == longwriter_zero.prompt_sha()
    assert longwriter_zero.length_rule("in no more than 300 words") == {"relation": "less than", "num_words": 301}
    assert longwriter_zero.length_rule("a 500-word essay") == {"relation": "at least", "num_words": 400}
    assert longwriter_zero.length_rule("a poem") is None


def test_unknown_layouts_are_refused_with_file_row_and_field(tmp_path):
    bad = tmp_path / "rar_medicine"
    bad.mkdir()
    rows = pq.read_table(os.path.join(FIX, "rar_medicine", "train-00000-of-00001.parquet")).to_pylist()
    rows[2]["rubric"][1]["weight"] = "heavy"  # the release's columns as JSONL (parquet would refuse the type)
    (bad / "x.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ConversionError, match=r"x.jsonl:3: field 'rubric\[1\].weight': expected a number"):
        _tasks("rar_medicine", str(bad))
    sft = tmp_path / "rubrichub"
    sft.mkdir()
    pq.write_table(pa.Table.from_pylist([{"source": "x", "query": "q", "answer": "a", "rubrics": []}]),
                   sft / "sft.parquet")
    with pytest.raises(ConversionError, match=r"sft.parquet:1: field 'ability': missing"):
        _tasks("rubrichub", str(sft))
    hb = tmp_path / "healthbench"
    hb.mkdir()
    (hb / "x.jsonl").write_text(json.dumps({"prompt_id": "p", "prompt": [{"role": "user", "content": "hi"}],
                                            "rubrics": [{"criterion": "c"}]}) + "\n")
    with pytest.raises(ConversionError, match=r"x.jsonl:1: field 'rubrics\[0\].points': missing"):
        _tasks("healthbench", str(hb))


SIZES = "medical=10,science=10,writing=1,roleplay=1,instruction_following=1"  # medical and science exhaust


def test_build_writes_disjoint_deduplicated_splits_and_prints_their_statistics(tmp_path):
    sources = tmp_path / "sources"
    shutil.copytree(FIX, sources)
    longwriter_zero.generate_rubrics(str(sources / "longwriter_zero"), Generator())
    out = tmp_path / "mix"
    proc = subprocess.run([sys.executable, os.path.join(REPO, "launch", "build_rubric_mix.py"),
                           f"--sources_dir={sources}", f"--out={out}", f"--train_sizes={SIZES}",
                           "--heldout_per_domain=1", "--seed=3"], cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    train, held = load_tasks(out / "train.jsonl"), load_tasks(out / "heldout.jsonl")
    ids = [t.id for t in train + held]
    assert len(ids) == len(set(ids))  # disjoint by construction
    prompts = [mix.prompt_key(t) for t in train + held]
    assert len(prompts) == len(set(prompts))
    # "What is the first-line treatment ..." is in HealthBench and RaR-Medicine; the two "ice floats" RaR-Science
    # questions are near-duplicates under MiniLM: one of each pair at most
    assert sum("first-line treatment" in p for p in prompts) <= 1 and sum("ice float" in p for p in prompts) <= 1
    report = json.load(open(out / "stats.json"))
    assert (report["selection"]["exact_duplicates"], report["selection"]["near_duplicates"]) == (1, 1)
    assert {d: sum(t.domain == d for t in held) for d in mix.TRAIN_SIZES} == dict.fromkeys(mix.TRAIN_SIZES, 1)
    # medical: 3 HealthBench + 3 RaR + 2 English RubricHub - 1 duplicate - 1 held out; science: 3 + 3 + 2 - 1 - 1
    assert sum(t.domain == "medical" for t in train) == 6 and sum(t.domain == "science" for t in train) == 6
    crit = [c for t in train for c in t.criteria]
    expect = {"train_tasks": len(train), "criteria_total": len(crit),
              "criteria_per_task": len(crit) / len(train),
              "negative_share": sum(c.points < 0 for c in crit) / len(crit),
              "reference_share": sum(t.reference is not None for t in train) / len(train)}
    for k, v in expect.items():
        assert report["stats"][k] == pytest.approx(v), k
    assert "8,600" in proc.stdout and "12.9" in proc.stdout and "10.7%" in proc.stdout and "35.0%" in proc.stdout
    assert f"{100 * expect['negative_share']:.1f}%" in proc.stdout
    # the same seed gives the same build; a bad source stops it before anything is replaced
    before = (out / "train.jsonl").read_text()
    (sources / "researchqa" / "valid.json").write_text("[{\"id\": \"x\"}]")
    again = subprocess.run([sys.executable, os.path.join(REPO, "launch", "build_rubric_mix.py"),
                            f"--sources_dir={sources}", f"--out={out}", f"--train_sizes={SIZES}",
                            "--heldout_per_domain=1", "--seed=3", "--embedder="], cwd=REPO, capture_output=True,
                           text=True, timeout=600)
    assert again.returncode != 0 and "valid.json:1: field 'query': missing" in again.stderr
    assert (out / "train.jsonl").read_text() == before
