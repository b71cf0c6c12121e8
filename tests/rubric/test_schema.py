"""Task loading: the three rubric flavours, canonical round trip, and located all-or-nothing errors."""

import json

import pytest

from harnessrl_jax.rubric import schema
from harnessrl_jax.rubric.schema import Criterion, Task, dump_tasks, load_tasks, task_from_record, task_to_record

NATIVE = {
    "id": "ifeval-7",
    "domain": "instruction_following",
    "prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Describe rain."}],
    "rubrics": [
        {"criterion": "Uses the word 'petrichor'.", "points": 3,
         "tags": ["verifier:rule", "rule:keywords:existence", 'rule_kwargs:{"keywords": ["petrichor"]}']},
        {"criterion": "Under 50 words.", "points": 2.5, "tags": ["verifier:llm", "axis:format"]},
        {"id": "no-list", "criterion": "Uses a bulleted list.", "points": -1, "tags": []},
    ],
    "reference": "Petrichor rises as rain meets dry earth.",
    "oracle_rubrics": [{"criterion": "Vivid imagery.", "points": 1, "tags": ["verifier:llm"]}],
}

# Shaped like a HealthBench record: no id/domain keys, physician tags, example_tags, ideal completion.
HEALTHBENCH = {
    "prompt": [{"role": "user", "content": "I have chest pain radiating to my left arm, what do I do?"}],
    "completion": None,
    "rubrics": [
        {"criterion": "Advises calling emergency services immediately.", "points": 10,
         "tags": ["level:example", "axis:accuracy"]},
        {"criterion": "Recommends waiting to see if pain resolves.", "points": -8,
         "tags": ["level:example", "axis:completeness"]},
    ],
    "example_tags": ["theme:emergency_referrals", "physician_agreed_category:emergent"],
    "prompt_id": "hb-0001",
    "ideal_completions_data": {"ideal_completion": "Call emergency services now.", "ideal_completions_group": "G1"},
}

RAR = {
    "id": "rar-med-3",
    "domain": "medical",
    "prompt": "What causes type 1 diabetes?",
    "rubrics": [
        {"title": "Autoimmune cause", "description": "Essential Criteria: States beta-cell destruction.", "weight": 5},
        {"title": "Genetics", "description": "Important Criteria: Mentions HLA risk alleles.", "weight": "Important"},
        {"title": "Diet myth", "description": "Pitfall Criteria: Claims sugar intake causes it.", "weight": "Pitfall"},
        {"title": "Example", "description": "Optional Criteria: Gives an age-of-onset example.", "weight": "optional"},
    ],
}


def write(tmp_path, records, name="tasks.jsonl"):
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def test_native_record_fields_and_tag_properties(tmp_path):
    (t,) = load_tasks(write(tmp_path, [NATIVE]))
    assert t.id == "ifeval-7" and t.domain == "instruction_following" and len(t.prompt) == 2
    c0, c1, c2 = t.criteria
    assert [c.id for c in t.criteria] == ["ifeval-7/c0", "ifeval-7/c1", "no-list"]
    assert c0.verifier == "rule" and c0.rule_id == "keywords:existence"
    assert c0.rule_kwargs == {"keywords": ["petrichor"]}
    assert c1.points == 2.5 and c1.axis == "format" and c1.rule_kwargs == {} and c1.rule_id is None
    assert c2.is_pitfall and not c0.is_pitfall and c2.verifier is None
    assert t.points == (3.0, 2.5, -1.0)
    assert t.reference.startswith("Petrichor")
    assert [c.id for c in t.oracle_criteria] == ["ifeval-7/o0"]


def test_healthbench_record_loads_unchanged(tmp_path):
    (t,) = load_tasks(write(tmp_path, [HEALTHBENCH]))
    assert t.id == "hb-0001" and t.domain == "medical"
    assert t.criteria[1].points == -8 and t.criteria[0].axis == "accuracy"
    assert t.reference == "Call emergency services now."
    assert t.extra["example_tags"][0] == "theme:emergency_referrals"
    assert "prompt_id" not in t.extra and t.extra["completion"] is None


def test_rar_items_and_category_weights(tmp_path):
    (t,) = load_tasks(write(tmp_path, [RAR]))
    assert t.prompt == ({"role": "user", "content": "What causes type 1 diabetes?"},)
    assert t.points == (5.0, schema.RAR_WEIGHTS["important"], schema.RAR_WEIGHTS["pitfall"],
                        schema.RAR_WEIGHTS["optional"])
    assert t.criteria[2].is_pitfall
    assert t.criteria[0].text == "Essential Criteria: States beta-cell destruction."
    assert t.criteria[0].tag("title") == "Autoimmune cause"


def test_all_three_flavours_round_trip_through_dump(tmp_path):
    src = write(tmp_path, [NATIVE, "", HEALTHBENCH, "   ", RAR])  # blank lines are skipped
    tasks = load_tasks(src)
    assert [t.id for t in tasks] == ["ifeval-7", "hb-0001", "rar-med-3"]
    out = tmp_path / "canonical.jsonl"
    dump_tasks(tasks, out)
    again = load_tasks(out)
    assert again == tasks
    dump_tasks(again, tmp_path / "twice.jsonl")
    assert (tmp_path / "twice.jsonl").read_text() == out.read_text()  # canonical form is a fixed point
    for line in out.read_text().splitlines():
        assert set(json.loads(line)) <= {"id", "domain", "prompt", "rubrics", "reference", "oracle_rubrics", "extra"}


def test_record_functions_invert_each_other():
    t = Task("t", "writing", ({"role": "user", "content": "hi"},),
             (Criterion("t/a", "Greets back.", 1.5, ("axis:tone",)),), None, (), {"source": "x"})
    assert task_from_record(task_to_record(t)) == t
    assert task_to_record(t)["rubrics"][0] == {"id": "t/a", "criterion": "Greets back.", "points": 1.5,
                                                "tags": ["axis:tone"]}
    hash(t)  # usable as a dict key despite dict-valued fields


def with_(base, path, value):
    """Deep copy of `base` with the item at `path` (keys and indices) replaced, or deleted when value is DEL."""
    rec = json.loads(json.dumps(base))
    *head, last = path
    node = rec
    for p in head:
        node = node[p]
    if value is DEL:
        del node[last]
    else:
        node[last] = value
    return rec


DEL = object()

BAD = [
    # (record, field named in the message, words in the message)
    (with_(NATIVE, ["rubrics", 2, "points"], "abc"), "rubrics[2].points", "expected a number, got 'abc'"),
    (with_(NATIVE, ["rubrics", 1, "points"], True), "rubrics[1].points", "expected a number"),
    (with_(NATIVE, ["rubrics", 0, "points"], DEL), "rubrics[0].points", "missing"),
    (with_(NATIVE, ["rubrics", 0, "criterion"], ""), "rubrics[0].criterion", "non-empty"),
    (with_(NATIVE, ["rubrics", 1], {"foo": 1}), "rubrics[1]", "criterion"),
    (with_(NATIVE, ["rubrics", 1, "tags", 1], "axisformat"), "rubrics[1].tags[1]", "key:value"),
    (with_(NATIVE, ["rubrics", 1, "tags"], "axis:format"), "rubrics[1].tags", "expected a list"),
    (with_(NATIVE, ["rubrics", 0, "tags", 2], "rule_kwargs:{bad json"), "rubrics[0].tags[2]", "not valid JSON"),
    (with_(NATIVE, ["rubrics", 0, "tags", 2], "rule_kwargs:[1, 2]"), "rubrics[0].tags[2]", "JSON object"),
    (with_(NATIVE, ["rubrics", 0, "tags", 1], "axis:x"), "rubrics[0].tags", "rule:<checker id>"),
    (with_(NATIVE, ["rubrics", 1, "tags", 1], "verifier:rule"), "rubrics[1].tags[1]", "more than once"),
    (with_(NATIVE, ["rubrics", 1, "id"], "no-list"), "rubrics[2].id", "duplicate criterion id"),
    (with_(NATIVE, ["rubrics"], []), "rubrics", "at least one"),
    (with_(NATIVE, ["rubrics"], [{"criterion": "Rambles.", "points": -2, "tags": []}]), "rubrics", "positive"),
    (with_(NATIVE, ["oracle_rubrics", 0, "points"], -1), "oracle_rubrics", "positive"),
    (with_(NATIVE, ["prompt"], []), "prompt", "at least one message"),
    (with_(NATIVE, ["prompt", 1, "role"], DEL), "prompt[1].role", "missing"),
    (with_(NATIVE, ["prompt", 0, "content"], 5), "prompt[0].content", "expected a string"),
    (with_(NATIVE, ["reference"], 3), "reference", "expected a string"),
    (with_(NATIVE, ["domain"], DEL), "domain", "missing"),
    (with_(NATIVE, ["id"], DEL), "id", "missing"),
    (with_(HEALTHBENCH, ["prompt_id"], 17), "prompt_id", "expected a string"),
    (with_(RAR, ["rubrics", 1, "weight"], "Crucial"), "rubrics[1].weight", "'Crucial'"),
    (with_(RAR, ["rubrics", 3, "weight"], DEL), "rubrics[3].weight", "missing"),
    (with_(RAR, ["rubrics", 0, "weight"], float("nan")), "rubrics[0].weight", "finite"),
    ([1, 2], "<record>", "JSON object"),
]


@pytest.mark.parametrize("bad, field, words", BAD, ids=[b[1] + ":" + b[2] for b in BAD])
def test_bad_record_names_file_line_and_field(tmp_path, bad, field, words):
    good = with_(NATIVE, ["id"], "other")
    path = write(tmp_path, [good, "", RAR, bad, HEALTHBENCH], name="mix.jsonl")
    with pytest.raises(ValueError) as e:
        load_tasks(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}:4: field '{field}': "), msg
    assert words in msg


def test_only_negative_points_rejected_and_nothing_returned(tmp_path):
    only_pitfalls = with_(NATIVE, ["rubrics"], [{"criterion": "Lectures.", "points": -3, "tags": []},
                                                {"criterion": "Zero.", "points": 0, "tags": []}])
    path = write(tmp_path, [RAR, only_pitfalls])
    with pytest.raises(ValueError, match=r"tasks\.jsonl:2: field 'rubrics': no criterion with positive points"):
        load_tasks(path)


def test_malformed_json_names_line(tmp_path):
    path = write(tmp_path, [RAR, '{"id": "x", "domain": ', NATIVE])
    with pytest.raises(ValueError, match=r"tasks\.jsonl:2: invalid JSON"):
        load_tasks(path)


def test_non_utf8_line_names_line(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(json.dumps(RAR).encode() + b"\n" + b'{"id": "\xff"}\n')
    with pytest.raises(ValueError, match=r"tasks\.jsonl:2: not UTF-8"):
        load_tasks(path)


def test_duplicate_task_id_names_both_lines(tmp_path):
    path = write(tmp_path, [RAR, NATIVE, "", with_(HEALTHBENCH, ["prompt_id"], "ifeval-7")])
    want = r"tasks\.jsonl:4: field 'id': duplicate task id 'ifeval-7' \(first on line 2\)"
    with pytest.raises(ValueError, match=want):
        load_tasks(path)


def test_empty_file_loads_no_tasks(tmp_path):
    assert load_tasks(write(tmp_path, ["", ""])) == []


def test_dump_leaves_old_file_when_a_task_cannot_be_written(tmp_path):
    path = write(tmp_path, [RAR])
    before = path.read_text()
    good = load_tasks(path)[0]
    bad = Task("b", "x", ({"role": "user", "content": "q"},), good.criteria, extra={"obj": object()})
    with pytest.raises(TypeError):
        dump_tasks([good, bad], path)
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["tasks.jsonl"]
