"""Judges: the verdict parser, prompt templates, ScoreMatrix, rule / routing judges, and the HTTP judges against
stdlib fake servers (well-behaved, hanging, dropping, garbage, flaky) and a real llama.cpp server."""

from __future__ import annotations

import dataclasses
import http.server
import json
import re
import socket
import threading
from typing import Any, Callable

import httpx
import numpy as np
import pytest

from harnessrl_jax.rubric import rules
from harnessrl_jax.rubric.judges import (ERROR, OK, TIMEOUT, UNPARSED, Judge, JudgeCache, JudgeProtocol,
                                         OpenAIJudge, RoutingJudge, RuleJudge, ScoreMatrix, make_judge,
                                         parse_rubric_verdicts, parse_verdict, total_failures)
from harnessrl_jax.rubric.judges import parse, templates
from harnessrl_jax.rubric.judges.cache import cache_key, call_keyer
from harnessrl_jax.rubric.judges.llm import render_criterion, rubric_schema, verdict_schema
from harnessrl_jax.rubric.reward import rubric_reward
from harnessrl_jax.rubric.schema import Criterion, Task

ANTHROPIC_KEY = "sk-ant-test-0123456789-not-a-real-key"


# ---------------------------------------------------------------------------------------------------------------
# Fake servers: stdlib http.server on 127.0.0.1

def chat_completion(content: str | None, finish_reason: str = "stop") -> dict[str, Any]:
    return {"id": "fake", "object": "chat.completion", "model": "fake",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": finish_reason}]}


def anthropic_message(blocks: list[dict[str, Any]], stop_reason: str = "end_turn") -> dict[str, Any]:
    return {"id": "msg_fake", "type": "message", "role": "assistant", "model": "fake", "content": blocks,
            "stop_reason": stop_reason, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}


class Reply:
    """What a fake server does with one request: answer JSON or raw text, hang, or drop the connection."""

    def __init__(self, kind: str, status: int = 200, body: Any = None, headers: dict | None = None,
                 delay_s: float = 0.0):
        self.kind, self.status, self.body, self.headers, self.delay_s = kind, status, body, headers or {}, delay_s

    @classmethod
    def json(cls, body: Any, status: int = 200, headers: dict | None = None, delay_s: float = 0.0) -> "Reply":
        return cls("json", status, body, headers, delay_s)

    @classmethod
    def chat(cls, content: str | None, **kw) -> "Reply":
        return cls.json(chat_completion(content), **kw)

    @classmethod
    def raw(cls, text: str, status: int = 200) -> "Reply":
        return cls("raw", status, text)


HANG, DROP = Reply("hang"), Reply("drop")


class FakeServer:
    """Threaded HTTP server; `behave(body, headers, n)` gives the Reply to the n-th request (from 0)."""

    def __init__(self, behave: Callable[[dict, dict, int], Reply]):
        self.behave = behave
        self.requests: list[tuple[str, dict, dict]] = []  # (path, lower-cased headers, JSON body)
        self.inflight = self.max_inflight = 0
        self._lock = threading.Lock()
        self._closing = threading.Event()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                body = json.loads(raw or b"{}")
                with server._lock:
                    n = len(server.requests)
                    server.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                    server.inflight += 1
                    server.max_inflight = max(server.max_inflight, server.inflight)
                try:
                    self._reply(server.behave(body, server.requests[n][1], n))
                finally:
                    with server._lock:
                        server.inflight -= 1

            def _reply(self, r: Reply):
                if r.delay_s:
                    server._closing.wait(r.delay_s)
                if r.kind in ("hang", "drop"):
                    if r.kind == "hang":
                        server._closing.wait(30)
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                data = (json.dumps(r.body) if r.kind == "json" else r.body).encode()
                self.send_response(r.status)
                self.send_header("content-type", "application/json" if r.kind == "json" else "text/html")
                self.send_header("content-length", str(len(data)))
                for k, v in r.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def bodies(self) -> list[dict]:
        return [b for _, _, b in self.requests]

    def close(self):
        self._closing.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fake_server():
    servers = []

    def start(behave):
        servers.append(FakeServer(behave))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def prompt_of(body: dict) -> str:
    content = body["messages"][-1]["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


def fast_judge(url: str, **kw) -> OpenAIJudge:
    """An OpenAIJudge with test-sized timeouts and backoff."""
    opts = dict(timeout_s=0.5, max_retries=1, backoff_s=0.01, max_backoff_s=0.05, max_concurrency=4)
    opts.update(kw)
    return OpenAIJudge(f"{url}/v1", "fake-judge", **opts)


# ---------------------------------------------------------------------------------------------------------------
# Tasks

def crit(cid, text, points, *tags):
    return Criterion(cid, text, float(points), tuple(tags))


def rule_crit(cid, rule_id, kwargs, points=1.0):
    return crit(cid, f"rule {rule_id}", points, "verifier:rule", f"rule:{rule_id}",
                f"rule_kwargs:{json.dumps(kwargs)}")


TASK = Task("t1", "medical", ({"role": "user", "content": "I have a headache. What can I take?"},), (
    crit("t1/c0", "Mentions drinking water.", 5),
    crit("t1/c1", "Recommends seeing a doctor if it lasts more than three days.", 3),
    crit("t1/c2", "Promises that the headache will certainly go away.", -4),
))
RESPONSES = ["Drink water and rest.", "It will certainly go away, trust me."]


# ---------------------------------------------------------------------------------------------------------------
# Parser

MESSY = [
    ('{"explanation": "mentions water", "criteria_met": true}', True),
    ('```json\n{"explanation": "no", "criteria_met": false}\n```\nLet me know if you need more.', False),
    ('Here is my grading: {"criteria_met": true} -- hope that helps', True),
    ("{'explanation': 'ok', 'criteria_met': True}", True),  # a Python dict
    ('{"criteria_met": "yes"}', True),
    ('{"verdict": "NOT MET", "reason": "absent"}', False),
    ('{"result": {"criteria_met": false}}', False),
    ('{"criteria_met": true, "explanation": "the response says to drin', True),  # cut off after the verdict
    ("Yes.", True),
    ("no", False),
    ("**No** - the response never mentions water.", False),
    ("MET", True),
    ("NOT MET: the doctor advice is missing", False),
    ("The criterion is NOT MET because the response omits it.", False),
    ("Reasoning first.\nVerdict: yes", True),
    ("Reasoning first.\n**Verdict:** NOT MET", False),
    ('{"explanation": "unterminated, "criteria_met": 1', True),
    ("Answer: no\nOn reflection...\nFinal answer: yes", True),
    ("<think>it says water, so yes</think>\nNo", False),
    ("true", True),
]
UNREADABLE = [
    "", "I cannot grade this.", '{"explanation": "the response mentions wat',  # cut off before the verdict
    "It is MET in part but NOT MET overall", '{"criteria_met": "maybe"}', "No issues found, it meets it",
    '"criteria_met": true, "criteria_met": false',
]


@pytest.mark.parametrize("text, verdict", MESSY)
def test_parse_verdict_reads_messy_judge_output(text, verdict):
    assert parse_verdict(text).verdict is verdict


@pytest.mark.parametrize("text", UNREADABLE)
def test_parse_verdict_leaves_unreadable_or_contradictory_output_unparsed(text):
    assert parse_verdict(text).verdict is None


def test_the_shortcut_for_schema_shaped_answers_reads_them_as_the_full_reader_does():
    """Fails if the fast path for {"explanation", "criteria_met"} accepts, rejects or explains an answer otherwise
    than every reading in turn would: near misses in key case, value type, extra keys, text around, thinking."""
    near = ['  {"explanation": null, "criteria_met": false}\n', '{"explanation": "e", "criteria_met": "true"}',
            '{"Criteria_Met": true, "explanation": "e"}', '{"explanation": "e", "criteria_met": 1}',
            '{"explanation": "e", "criteria_met": true, "met": false}', '{"explanation": "a </think> no",'
            ' "criteria_met": true}', '{"explanation": "e", "criteria_met": true} {"criteria_met": false}',
            '{"explanation": "e", "criteria_met": false, "criteria_met": true}', "{'explanation': 'e', "
            "'criteria_met': False}", '{"explanation": 7, "criteria_met": true}']
    for text in [t for t, _ in MESSY] + UNREADABLE + near:
        assert parse_verdict(text) == parse._read_verdict(text), text
    assert parse._schema_answer(near[0]) == parse.Parsed(False, "", "json")


def test_call_keys_are_the_cache_keys_of_the_whole_call():
    """The keyer's shortcut gives cache_key's digest of {identity, messages, schema} (caches written before stay
    valid), and a change of any message, role or schema changes it."""
    identity = {"api": "x", "model": "m", "temperature": 0.0, "extra_body": {"k": ["\u00e9", None]}}
    calls = [([{"role": "user", "content": 'q "\\ \u00e9\u2028\x01 </response>'}], verdict_schema()),
             ([{"role": "system", "content": "s"}, {"role": "user", "content": "u", "name": None}], verdict_schema()),
             ([{"role": "user", "content": "q"}], rubric_schema(2)), ([], verdict_schema(10)),
             ([{"role": "assistant", "content": "q"}], rubric_schema(2))]
    for ident in (identity, {**identity, "model": "\0messages\0"}):  # the second: the identity holds the marker
        key = call_keyer(ident)
        digests = [key(m, s) for m, s in calls]
        assert digests == [cache_key({**ident, "messages": list(m), "schema": s}) for m, s in calls]
        assert len(set(digests)) == len(digests)


def test_parse_verdict_keeps_the_explanation():
    assert parse_verdict('{"explanation": "says water", "criteria_met": true}').explanation == "says water"


def test_parse_rubric_verdicts_reads_maps_lists_and_numbered_lines():
    got = parse_rubric_verdicts('```json\n{"1": {"criteria_met": true}, "2": false, "3": "NOT MET"}\n```', 4)
    assert [p.verdict for p in got] == [True, False, False, None]  # 4 is missing: unparsed, not 0
    got = parse_rubric_verdicts('[{"id": 2, "met": true}, {"id": 1, "met": false}]', 2)
    assert [p.verdict for p in got] == [False, True]
    got = parse_rubric_verdicts('{"verdicts": [{"criteria_met": true}, {"criteria_met": false}]}', 2)
    assert [p.verdict for p in got] == [True, False]
    got = parse_rubric_verdicts("1. MET - mentions water\n2. NOT MET\nCriterion 3: yes\n", 3)
    assert [p.verdict for p in got] == [True, False, True]
    assert [p.verdict for p in parse_rubric_verdicts("no idea", 2)] == [None, None]


# ---------------------------------------------------------------------------------------------------------------
# Prompt templates

def test_prompt_files_have_named_placeholders():
    assert templates.placeholders(templates.load_template("criterion")) == {"conversation", "response", "criterion"}
    assert templates.placeholders(templates.load_template("rubric")) == {"conversation", "response", "criteria",
                                                                          "n_criteria"}


def test_fill_substitutes_once_and_rejects_missing_or_unused_values():
    t = "A {x} and {y}; JSON stays {\"k\": 1}"
    assert templates.fill(t, x="{y}", y="b") == "A {y} and b; JSON stays {\"k\": 1}"
    with pytest.raises(KeyError, match="missing"):
        templates.fill(t, x="a")
    with pytest.raises(KeyError, match="unused"):
        templates.fill(t, x="a", y="b", z="c")


def test_pitfalls_are_marked_in_the_prompt_and_explained():
    assert render_criterion(TASK.criteria[2]) == \
        "[-4 points, PITFALL] Promises that the headache will certainly go away."
    assert "PITFALL" not in render_criterion(TASK.criteria[0])
    for name in ("criterion", "rubric"):
        assert '"criteria_met": true means the undesirable behaviour is present' in templates.load_template(name)


# ---------------------------------------------------------------------------------------------------------------
# ScoreMatrix

def test_score_matrix_keeps_failures_out_of_the_reward_and_counts_them():
    m = ScoreMatrix.empty(["a", "b", "c"], 2, "j")
    m.set(0, 0, True, OK), m.set(0, 1, False, OK)
    m.set(1, 0, None, UNPARSED, "garbage"), m.set(1, 1, True, OK)
    m.set(2, 0, True, OK), m.set(2, 1, None, TIMEOUT)
    assert np.isnan(m.verdicts[1, 0]) and np.isnan(m.verdicts[2, 1])
    assert m.failure_counts() == {"unparsed": 1, "error": 0, "timeout": 1} and m.n_failed == 2
    points = [5.0, 3.0, -4.0]
    # By hand: response 0 keeps a (5) and c (-4) over positive weight 5; response 1 keeps a (0) and b (3) over 8.
    np.testing.assert_allclose(m.rewards(points), [100 * (5 - 4) / 5, 100 * 3 / 8])
    np.testing.assert_allclose(m.rewards(points), rubric_reward(np.array(points), m.verdicts))
    assert total_failures([m, m]) == {"cells": 12, "failed": 4, "unparsed": 2, "error": 0, "timeout": 2}
    assert m.records()[2] == {"criterion_id": "b", "response": 0, "judge": "j", "verdict": None,
                              "status": "unparsed", "explanation": "garbage", "latency_s": 0.0, "cache_hit": False}


def test_score_matrix_rejects_a_number_where_no_verdict_was_obtained():
    m = ScoreMatrix.empty(["a"], 1, "j")
    with pytest.raises(ValueError, match="NaN"):
        ScoreMatrix(m.criterion_ids, np.zeros((1, 1)), m.status, m.explanations, m.latency_s, m.cache_hit, m.judges)
    with pytest.raises(ValueError, match="needs a verdict"):
        m.set(0, 0, None, OK)


def test_score_matrix_merge_puts_rows_back_in_criterion_order():
    a, b = ScoreMatrix.empty(["x", "z"], 1, "A"), ScoreMatrix.empty(["y"], 1, "B")
    a.set(0, 0, True, OK), a.set(1, 0, False, OK), b.set(0, 0, True, OK)
    m = ScoreMatrix.merge([([0, 2], a), ([1], b)], 3, 1)
    assert m.criterion_ids == ("x", "y", "z") and m.judges == ("A", "B", "A")
    assert m.verdicts[:, 0].tolist() == [1.0, 1.0, 0.0]
    with pytest.raises(ValueError, match="not given"):
        ScoreMatrix.merge([([0, 2], a)], 3, 1)


# ---------------------------------------------------------------------------------------------------------------
# RuleJudge

def test_rule_judge_checks_rules_and_pitfall_verdicts_mean_occurred():
    task = Task("r", "writing", ({"role": "user", "content": "Describe aspirin."},), (
        rule_crit("r/0", "keywords:existence", {"keywords": ["aspirin"]}, 2),
        rule_crit("r/1", "length_constraints:number_words", {"num_words": 5, "relation": "less than"}, 1),
        # Pitfall: the rule detects the bad behaviour (a forbidden promise), so True = it occurred.
        rule_crit("r/2", "keywords:existence", {"keywords": ["guaranteed"]}, -3),
    ))
    responses = ["Aspirin relieves pain.", "Results guaranteed with aspirin, always and forever.", ""]
    m = RuleJudge().score(task, responses)
    # By hand: 'aspirin' (any case) present in 0 and 1; under 5 words only 0; 'guaranteed' only in 1;
    # an empty response follows no rule.
    assert m.verdicts.tolist() == [[1, 1, 0], [1, 0, 0], [0, 1, 0]]
    assert (m.status == OK).all() and m.judges == ("rule",) * 3
    np.testing.assert_allclose(m.rewards(task.points), [100 * 3 / 3, 100 * (2 - 3) / 3, 0.0])


def test_rule_judge_passes_the_task_prompt_to_rules_that_need_it():
    task = Task("p", "if", ({"role": "user", "content": "Say hi twice"},),
                (rule_crit("p/0", "combination:repeat_prompt", {}),))
    m = RuleJudge().score(task, ["say hi twice. hi hi", "hi hi"])
    assert m.verdicts.tolist() == [[1.0, 0.0]]


def test_rule_judge_records_a_rule_that_cannot_run_as_an_error_row():
    task = Task("e", "if", ({"role": "user", "content": "x"},), (
        rule_crit("e/0", "keywords:existence", {"keywords": ["x"]}),
        rule_crit("e/1", "keywords:existance", {"keywords": ["x"]}),  # misspelt id
        crit("e/2", "no rule tag", 1.0, "verifier:rule"),
    ))
    m = RuleJudge().score(task, ["x y", "z"])
    assert m.status.tolist() == [[OK, OK], [ERROR, ERROR], [ERROR, ERROR]]
    assert "did you mean 'keywords:existence'" in m.explanations[1, 0]
    with pytest.raises(ValueError, match="keywords:existance"):
        RuleJudge(strict=True).score(task, ["x"])


def test_rule_judge_records_a_checker_that_raises_as_an_error_cell(monkeypatch):
    real = rules.check

    def flaky(rule_id, kwargs, response, *, prompt=None):
        if "boom" in response:
            raise RuntimeError("checker bug")
        return real(rule_id, kwargs, response, prompt=prompt)

    monkeypatch.setattr(rules, "check", flaky)
    task = Task("b", "if", ({"role": "user", "content": "x"},),
                (rule_crit("b/0", "keywords:existence", {"keywords": ["x"]}),))
    m = RuleJudge().score(task, ["x", "boom x", "y"])
    assert m.status.tolist() == [[OK, ERROR, OK]] and m.verdicts[0, [0, 2]].tolist() == [1.0, 0.0]
    assert "RuntimeError: checker bug" in m.explanations[0, 1]


# ---------------------------------------------------------------------------------------------------------------
# RoutingJudge

class StubJudge(Judge):
    """Verdict = whether the criterion id's last character is even; records what it was asked."""

    def __init__(self, name):
        self.name, self.asked = name, []

    def score_batch(self, tasks, responses, criteria=None):
        out = []
        for t, rs, cs in zip(tasks, responses, criteria):
            self.asked.append([c.id for c in cs])
            m = ScoreMatrix.empty([c.id for c in cs], len(rs), self.name)
            for k, c in enumerate(cs):
                for j in range(len(rs)):
                    m.set(k, j, int(c.id[-1]) % 2 == 0, OK)
            out.append(m)
        return out


def test_routing_judge_sends_each_criterion_to_the_judge_its_tag_names():
    task = Task("x", "science", ({"role": "user", "content": "q"},), (
        crit("x/0", "llm, untagged", 1),
        rule_crit("x/1", "keywords:existence", {"keywords": ["cell"]}),
        crit("x/2", "explicit llm", 1, "verifier:llm"),
        crit("x/3", "the named expert", 1, "verifier:expert"),
        rule_crit("x/4", "keywords:existence", {"keywords": ["wall"]}),
    ))
    default, expert = StubJudge("default"), StubJudge("expert")
    judge = RoutingJudge(default, judges={"expert": expert})
    assert isinstance(judge, JudgeProtocol)
    [m] = judge.score_batch([task], [["a cell", "a cell wall"]])
    assert default.asked == [["x/0", "x/2"]] and expert.asked == [["x/3"]]
    assert m.criterion_ids == tuple(c.id for c in task.criteria)
    assert m.judges == ("default", "rule", "default", "expert", "rule")
    assert m.verdicts.tolist() == [[1, 1], [1, 1], [1, 1], [0, 0], [0, 1]]
    # In a batch, a task with only rule criteria costs the LLM judges nothing.
    only_rules = Task("z", "science", task.prompt, (task.criteria[1],))
    [m1, m2] = judge.score_batch([only_rules, task], [["cell"], ["cell"]])
    assert default.asked[1:] == [["x/0", "x/2"]] and m1.verdicts.tolist() == [[1.0]] and m2.shape == (5, 1)


def test_routing_judge_rejects_unservable_criteria_before_any_call():
    task = Task("y", "science", ({"role": "user", "content": "q"},),
                (crit("y/0", "a", 1, "verifier:llm"), crit("y/1", "b", 1, "verifier:oracle")))
    default = StubJudge("default")
    with pytest.raises(ValueError, match="'oracle'"):
        RoutingJudge(default).score(task, ["r"])
    assert default.asked == []
    with pytest.raises(ValueError, match="no default judge"):
        RoutingJudge().score(task, ["r"], task.criteria[:1])


def test_make_judge_builds_a_routing_judge_from_a_config():
    judge = make_judge({"kind": "routing", "rule": {"kind": "rule", "strict": True},
                        "default": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}})
    assert isinstance(judge.routes["rule"], RuleJudge) and judge.routes["rule"].strict
    assert isinstance(judge.routes["llm"], OpenAIJudge)
    judge.close()
    with pytest.raises(ValueError, match="unknown judge kind"):
        make_judge({"kind": "nope"})


# ---------------------------------------------------------------------------------------------------------------
# OpenAI-compatible judge against fake servers

def answer_by_criterion(body, headers, n):
    """A judge that meets the water criterion and the pitfall, and fails the rest."""
    p = prompt_of(body)
    met = "Mentions drinking water" in p or "PITFALL] Promises" in p
    return Reply.chat(json.dumps({"explanation": "fake", "criteria_met": met}))


def test_openai_judge_sends_chat_completions_with_a_json_schema(fake_server):
    server = fake_server(answer_by_criterion)
    with fast_judge(server.url, temperature=0.0, max_tokens=77, seed=3) as judge:
        m = judge.score(TASK, RESPONSES)
    assert m.verdicts.tolist() == [[1, 1], [0, 0], [1, 1]] and (m.status == OK).all()
    assert len(server.requests) == 6 and {p for p, _, _ in server.requests} == {"/v1/chat/completions"}
    body = server.bodies()[0]
    assert body["model"] == "fake-judge" and body["max_tokens"] == 77 and body["temperature"] == 0.0
    assert body["seed"] == 3 and body["stream"] is False
    assert body["response_format"] == {"type": "json_schema",
                                       "json_schema": {"name": "verdict", "schema": verdict_schema(), "strict": True}}
    prompts = [prompt_of(b) for b in server.bodies()]
    assert all("I have a headache" in p for p in prompts)
    assert sum("[-4 points, PITFALL] Promises" in p for p in prompts) == 2
    assert sum("It will certainly go away, trust me." in p for p in prompts) == 3
    # The pitfall occurred in both responses: the reward subtracts it (positive weight 8).
    np.testing.assert_allclose(m.rewards(TASK.points), [100 * (5 - 4) / 8] * 2)


@pytest.mark.parametrize("structured, expected", [
    ("json_object", {"type": "json_object", "schema": verdict_schema(40)}),
    ("none", None),
])
def test_openai_judge_structured_output_forms(fake_server, structured, expected):
    server = fake_server(answer_by_criterion)
    with fast_judge(server.url, structured_output=structured, explanation_max_chars=40) as judge:
        judge.score(TASK, RESPONSES[:1], TASK.criteria[:1])
    assert server.bodies()[0].get("response_format") == expected


def test_openai_judge_per_rubric_makes_one_call_per_response(fake_server):
    def behave(body, headers, n):
        assert body["response_format"]["json_schema"]["schema"] == rubric_schema(3)
        return Reply.chat('Sure:\n```json\n{"1": {"explanation": "e1", "criteria_met": true}, '
                          '"2": {"explanation": "e2", "criteria_met": false}, "3": "MET"}\n```')

    server = fake_server(behave)
    with fast_judge(server.url, mode="per_rubric") as judge:
        m = judge.score(TASK, RESPONSES)
    assert len(server.requests) == 2
    p = prompt_of(server.bodies()[0])
    assert "3 numbered criteria" in p and "1. [+5 points] Mentions drinking water." in p
    assert "3. [-4 points, PITFALL] Promises" in p
    assert m.verdicts.tolist() == [[1, 1], [0, 0], [1, 1]] and m.explanations[1, 0] == "e2"


def _shared_prefix(texts):
    return texts[0][: next((i for i, cs in enumerate(zip(*texts)) if len(set(cs)) > 1), min(map(len, texts)))]


def test_judge_prompts_put_what_a_task_shares_first_for_the_prefix_cache(fake_server):
    server = fake_server(answer_by_criterion)
    responses = RESPONSES + ["Rest in a dark room."]
    with fast_judge(server.url, mode="per_rubric") as judge:
        judge.score(TASK, responses)
    # Per rubric: the J prompts of a task are one prefix, holding the instructions and the whole rubric, then the
    # response.
    prefix = _shared_prefix([prompt_of(b) for b in server.bodies()])
    assert "How to grade" in prefix and "3. [-4 points, PITFALL] Promises" in prefix
    assert not any(r in prefix for r in responses)
    server.requests.clear()
    with fast_judge(server.url) as judge:
        judge.score(TASK, responses)
    # Per criterion: the K prompts about one response share a prefix that holds the response.
    for response in responses:
        prompts = [prompt_of(b) for b in server.bodies() if response in prompt_of(b)]
        assert len(prompts) == 3 and response in _shared_prefix(prompts)


def test_openai_judge_keeps_a_task_on_one_of_several_servers(fake_server):
    servers = [fake_server(answer_by_criterion) for _ in range(3)]
    # The servers' ports are random, so which server a task hashes to is too: with 12 tasks one of 3 servers got
    # none in ~2% of runs (3 * (2/3)^12); with 48 the odds are ~1e-8.
    n = 48
    tasks = [dataclasses.replace(TASK, id=f"t{i}", prompt=({"role": "user", "content": f"Case {i}: headache."},))
             for i in range(n)]
    urls = ", ".join(f"{s.url}/v1" for s in servers)  # a comma-separated string, as a config holds it
    with OpenAIJudge(urls, "fake-judge", timeout_s=0.5, max_retries=1, backoff_s=0.01) as judge:
        mats = judge.score_batch(tasks, [RESPONSES] * len(tasks))
    assert all((m.status == OK).all() for m in mats)
    where = {}
    for k, s in enumerate(servers):
        for body in s.bodies():
            where.setdefault(re.search(r"Case \d+", prompt_of(body)).group(), set()).add(k)
    assert len(where) == n and all(len(ks) == 1 for ks in where.values())  # each task's calls on one server
    assert all(s.requests for s in servers)  # and the tasks spread over all of them
    assert {p for s in servers for p, _, _ in s.requests} == {"/v1/chat/completions"}


def test_openai_judge_retries_a_failing_server_on_the_next_one(fake_server):
    down = fake_server(lambda b, h, n: Reply.json({"error": "overloaded"}, status=503))
    up = fake_server(answer_by_criterion)
    with OpenAIJudge([f"{down.url}/v1", f"{up.url}/v1"], "fake-judge", timeout_s=0.5, max_retries=1,
                     backoff_s=0.01) as judge:
        # A task's first server follows a hash of its route and the servers' (random) ports: with 24 tasks the
        # chance that none starts on the failing one is 2^-24 (with 6 it was 1 in 64, a flaky test).
        m = judge.score_batch([dataclasses.replace(TASK, id=f"t{i}", prompt=(
            {"role": "user", "content": f"Case {i}"},)) for i in range(24)], [RESPONSES[:1]] * 24)
        stats = judge.stats
    assert all((x.status == OK).all() for x in m) and len(up.requests) == 3 * 24  # 3 criteria per task
    assert stats["retries"] == len(down.requests) > 0  # every call that met the failing server was retried


def test_no_criteria_or_no_responses_make_no_calls(fake_server):
    server = fake_server(answer_by_criterion)
    for mode in ("per_criterion", "per_rubric"):
        with fast_judge(server.url, mode=mode) as judge:
            assert judge.score(TASK, RESPONSES, []).shape == (0, 2)
            assert judge.score(TASK, []).shape == (3, 0)
    assert server.requests == []


def test_openai_judge_per_rubric_marks_missing_entries_unparsed(fake_server):
    server = fake_server(lambda b, h, n: Reply.chat('{"1": true, "3": false}'))
    with fast_judge(server.url, mode="per_rubric") as judge:
        m = judge.score(TASK, RESPONSES[:1])
    assert m.status[:, 0].tolist() == [OK, UNPARSED, OK] and np.isnan(m.verdicts[1, 0])


def test_failures_are_recorded_counted_and_the_batch_goes_on(fake_server):
    """A server that hangs, drops the connection, or answers garbage on some criteria; the rest still score."""
    def behave(body, headers, n):
        p = prompt_of(body)
        if "HANG" in p:
            return HANG
        if "DROP" in p:
            return DROP
        if "GARBAGE BODY" in p:
            return Reply.raw("<html>502 Bad Gateway</html>")
        if "GARBAGE TEXT" in p:
            return Reply.chat("lorem ipsum dolor sit amet")
        if "BAD REQUEST" in p:
            return Reply.json({"error": "context too long"}, status=400)
        return Reply.chat('{"explanation": "fine", "criteria_met": true}')

    task = Task("f", "medical", ({"role": "user", "content": "q"},), tuple(
        crit(f"f/{i}", text, 1) for i, text in
        enumerate(["works", "HANG", "DROP", "GARBAGE BODY", "GARBAGE TEXT", "BAD REQUEST", "works too"])))
    server = fake_server(behave)
    with fast_judge(server.url, timeout_s=0.3, max_retries=1, max_concurrency=8) as judge:
        m = judge.score(task, ["r1", "r2"])
        stats = judge.stats
    assert m.status[:, 0].tolist() == [OK, TIMEOUT, ERROR, ERROR, UNPARSED, ERROR, OK]
    assert (m.status[:, 0] == m.status[:, 1]).all()
    assert m.verdicts[[0, 6]].tolist() == [[1, 1], [1, 1]] and np.isnan(m.verdicts[1:6]).all()
    assert m.failure_counts() == {"unparsed": 2, "error": 6, "timeout": 2}
    assert "connection failed" in m.explanations[2, 0] and "malformed response body" in m.explanations[3, 0]
    assert "lorem ipsum" in m.explanations[4, 0] and "HTTP 400" in m.explanations[5, 0]
    # Timeouts, drops and garbage bodies were retried once; the 400 was not (our request, not their hiccup).
    assert sum("BAD REQUEST" in prompt_of(b) for b in server.bodies()) == 2
    assert sum("HANG" in prompt_of(b) for b in server.bodies()) == 4
    assert stats["timeout"] == 2 and stats["error"] == 6 and stats["retries"] == 6
    # Rewards use only the parsed cells: 2 of 2 valid positive criteria met.
    np.testing.assert_allclose(m.rewards(task.points), [100.0, 100.0])


def test_retries_with_backoff_recover_from_transient_errors(fake_server):
    def behave(body, headers, n):
        if n == 0:
            return Reply.json({"error": "busy"}, status=503)
        if n == 1:
            return Reply.json({"error": "slow down"}, status=429, headers={"retry-after": "0.2"})
        return Reply.chat('{"explanation": "ok", "criteria_met": false}')

    server = fake_server(behave)
    slept = []
    with fast_judge(server.url, max_retries=3, backoff_s=0.01, max_backoff_s=1.0) as judge:
        real = judge._backoff
        judge._backoff = lambda attempt, retry_after: slept.append(real(attempt, retry_after)) or 0.0
        m = judge.score(TASK, RESPONSES[:1], TASK.criteria[:1])
        assert judge.stats["requests"] == 3 and judge.stats["retries"] == 2
    assert m.status.tolist() == [[OK]] and m.verdicts.tolist() == [[0.0]]
    assert len(slept) == 2 and slept[0] <= 0.01 * 2 and slept[1] >= 0.2  # the 429's Retry-After was honoured


def test_backoff_is_exponential_with_jitter_and_capped():
    judge = OpenAIJudge("http://127.0.0.1:9/v1", "m", backoff_s=1.0, max_backoff_s=5.0)
    for attempt, full in [(0, 1.0), (1, 2.0), (2, 4.0), (3, 5.0), (9, 5.0)]:
        delays = [judge._backoff(attempt, None) for _ in range(200)]
        assert min(delays) >= full / 2 and max(delays) <= full
        assert len(set(delays)) > 100  # jittered, so parallel retries spread out
    assert judge._backoff(0, retry_after=3.0) >= 3.0 and judge._backoff(0, retry_after=99.0) == 5.0
    judge.close()


def test_concurrency_is_bounded(fake_server):
    server = fake_server(lambda b, h, n: Reply.chat('{"criteria_met": true}', delay_s=0.1))
    task = Task("c", "x", ({"role": "user", "content": "q"},),
                tuple(crit(f"c/{i}", f"crit {i}", 1) for i in range(6)))
    with fast_judge(server.url, max_concurrency=3, timeout_s=5) as judge:
        m = judge.score(task, ["a", "b"])
    assert (m.status == OK).all() and len(server.requests) == 12
    assert server.max_inflight == 3


def test_identical_calls_are_made_once_per_batch(fake_server):
    server = fake_server(answer_by_criterion)
    with fast_judge(server.url) as judge:
        [m1, m2] = judge.score_batch([TASK, TASK], [["same", "same", "other"], ["same"]])
    assert len(server.requests) == 3 * 2  # 3 criteria x 2 distinct responses
    assert m1.cache_hit.sum() + m2.cache_hit.sum() == 3 * 2
    assert m1.verdicts[:, 0].tolist() == m1.verdicts[:, 1].tolist() == m2.verdicts[:, 0].tolist()


def test_cache_hits_on_repeat_and_misses_when_model_prompt_or_sampling_change(fake_server, tmp_path):
    server = fake_server(answer_by_criterion)
    path = str(tmp_path / "judge_cache.sqlite")
    with fast_judge(server.url, cache=path) as judge:
        first = judge.score(TASK, RESPONSES)
    assert len(server.requests) == 6 and not first.cache_hit.any()
    with fast_judge(server.url, cache=path) as judge:  # a new process would see the same file
        again = judge.score(TASK, RESPONSES)
        assert judge.stats["cache_hits"] == 6 and judge.stats["requests"] == 0
    assert len(server.requests) == 6 and again.cache_hit.all()
    np.testing.assert_array_equal(first.verdicts, again.verdicts)
    assert again.explanations.tolist() == first.explanations.tolist()
    for change in ({"temperature": 0.7}, {"max_tokens": 100}, {"mode": "per_rubric"}):
        with fast_judge(server.url, cache=path, **change) as judge:
            judge.score(TASK, RESPONSES[:1], TASK.criteria[:1])
            assert judge.stats["requests"] == 1, change
    with OpenAIJudge(f"{server.url}/v1", "another-model", cache=path) as judge:
        judge.score(TASK, ["A brand new response"], TASK.criteria[:1])
        judge.score(TASK, ["A brand new response"], TASK.criteria[:1])
        assert judge.stats["requests"] == 1 and judge.stats["cache_hits"] == 1


def test_cut_off_answers_are_flagged_also_from_the_cache(fake_server, tmp_path):
    server = fake_server(lambda b, h, n: Reply.json(chat_completion('{"explanation": "a long', "length")))
    for _ in range(2):
        with fast_judge(server.url, cache=tmp_path / "c.sqlite") as judge:
            m = judge.score(TASK, ["r"], TASK.criteria[:1])
        assert m.status.tolist() == [[UNPARSED]] and m.explanations[0, 0].endswith("[cut off at max_tokens]")
    assert len(server.requests) == 1


def test_an_unforeseen_client_error_costs_one_call_not_the_batch(fake_server, monkeypatch):
    server = fake_server(answer_by_criterion)
    with fast_judge(server.url) as judge:
        send = judge._send

        def broken(messages, schema):
            if "Recommends seeing a doctor" in messages[0]["content"]:
                raise KeyError("bug")
            return send(messages, schema)

        monkeypatch.setattr(judge, "_send", broken)
        m = judge.score(TASK, ["r"])
    assert m.status[:, 0].tolist() == [OK, ERROR, OK] and "unexpected KeyError" in m.explanations[1, 0]


def test_failed_calls_are_not_cached(fake_server, tmp_path):
    state = {"up": False}
    server = fake_server(lambda b, h, n: Reply.chat('{"criteria_met": true}') if state["up"] else DROP)
    cache = JudgeCache(tmp_path / "c.sqlite")
    with fast_judge(server.url, cache=cache, max_retries=0) as judge:
        assert judge.score(TASK, ["r"], TASK.criteria[:1]).status.tolist() == [[ERROR]]
        state["up"] = True
        assert judge.score(TASK, ["r"], TASK.criteria[:1]).status.tolist() == [[OK]]
    assert len(cache) == 1


def test_openai_judge_sends_a_key_from_the_environment_and_never_shows_it(fake_server, monkeypatch, tmp_path):
    server = fake_server(answer_by_criterion)
    monkeypatch.setenv("JUDGE_TEST_KEY", "secret-judge-key")
    with fast_judge(server.url, api_key_env="JUDGE_TEST_KEY", cache=str(tmp_path / "c.sqlite")) as judge:
        judge.score(TASK, ["r"], TASK.criteria[:1])
        assert "secret" not in repr(judge)
    assert server.requests[0][1]["authorization"] == "Bearer secret-judge-key"
    assert b"secret-judge-key" not in (tmp_path / "c.sqlite").read_bytes()
    monkeypatch.delenv("JUDGE_TEST_KEY")
    with pytest.raises(RuntimeError, match="JUDGE_TEST_KEY is not set"):
        fast_judge(server.url, api_key_env="JUDGE_TEST_KEY")


# ---------------------------------------------------------------------------------------------------------------
# Anthropic judge against a fake Messages API

@pytest.fixture
def anthropic_key(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    return ANTHROPIC_KEY


def anthropic_judge(url, **kw):
    from harnessrl_jax.rubric.judges import AnthropicJudge

    opts = dict(timeout_s=2.0, max_retries=2, backoff_s=0.01, max_backoff_s=0.05)
    opts.update(kw)
    return AnthropicJudge("claude-test", base_url=url, **opts)


def test_anthropic_judge_reads_tool_verdicts_over_the_messages_api(fake_server, anthropic_key, tmp_path):
    def behave(body, headers, n):
        if n == 0:
            return Reply.json({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}},
                              status=529)
        met = "Mentions drinking water" in prompt_of(body)
        return Reply.json(anthropic_message([
            {"type": "tool_use", "id": f"tu_{n}", "name": "record_verdict",
             "input": {"explanation": "by tool", "criteria_met": met}}], stop_reason="tool_use"))

    server = fake_server(behave)
    with anthropic_judge(server.url, cache=str(tmp_path / "c.sqlite"), max_concurrency=1) as judge:
        m = judge.score(TASK, RESPONSES[:1], TASK.criteria[:2])
        assert ANTHROPIC_KEY not in repr(judge) and judge.stats["retries"] == 1
    assert m.verdicts.tolist() == [[1.0], [0.0]] and m.explanations[0, 0] == "by tool"
    path, headers, body = server.requests[1]
    assert path == "/v1/messages" and "anthropic-version" in headers
    # SDK versions differ in how they send the key: x-api-key, or a bearer token.
    assert headers.get("x-api-key") == ANTHROPIC_KEY or headers.get("authorization") == f"Bearer {ANTHROPIC_KEY}"
    assert body["model"] == "claude-test" and body["tool_choice"] == {"type": "tool", "name": "record_verdict"}
    assert body["tools"][0]["input_schema"] == verdict_schema()
    assert ANTHROPIC_KEY.encode() not in (tmp_path / "c.sqlite").read_bytes()


def test_anthropic_judge_parses_text_answers_and_counts_failures(fake_server, anthropic_key):
    def behave(body, headers, n):
        if "Recommends seeing a doctor" in prompt_of(body):
            return DROP
        return Reply.json(anthropic_message([{"type": "text", "text": "```json\n{\"criteria_met\": false}\n```"}]))

    server = fake_server(behave)
    with anthropic_judge(server.url, structured_output="none", max_retries=1) as judge:
        m = judge.score(TASK, RESPONSES[:1], TASK.criteria[:2])
    assert "tools" not in server.bodies()[0] and "temperature" not in server.bodies()[0]
    assert m.status[:, 0].tolist() == [OK, ERROR] and m.verdicts[0, 0] == 0.0


def test_anthropic_judge_native_structured_output_and_sampling_fields(fake_server, anthropic_key):
    server = fake_server(lambda b, h, n: Reply.json(anthropic_message([{"type": "text",
                                                                        "text": '{"criteria_met": true}'}])))
    with anthropic_judge(server.url, structured_output="json_schema", temperature=0.0) as judge:
        m = judge.score(TASK, RESPONSES[:1], TASK.criteria[:1])
    body = server.bodies()[0]
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": verdict_schema()}}
    assert body["temperature"] == 0.0 and m.verdicts.tolist() == [[1.0]]


def test_anthropic_judge_without_a_key_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(RuntimeError, match="ANTHROPIC_API_KEY"):
        anthropic_judge("http://127.0.0.1:9")


# ---------------------------------------------------------------------------------------------------------------
# The real thing: llama.cpp's OpenAI-compatible server serving SmolLM2-135M-Instruct

REAL_PROMPT = "My child has a fever of 38.5 C. What should I do?"
REAL_TASK = Task("real", "medical", ({"role": "user", "content": REAL_PROMPT},), (
    crit("real/0", "Advises giving fluids.", 5),
    crit("real/1", "Mentions paracetamol or ibuprofen.", 3),
    crit("real/2", "Tells the parent to give aspirin to the child.", -5),
))
REAL_RESPONSES = ["Give plenty of fluids and paracetamol; see a doctor if it lasts over 3 days.",
                  "Give the child aspirin and wait."]


def llama_judge(server, **kw) -> OpenAIJudge:
    opts = dict(structured_output="json_object", max_tokens=96, explanation_max_chars=60, timeout_s=60,
                max_retries=1, backoff_s=0.05, max_concurrency=2)
    opts.update(kw)
    return OpenAIJudge(server.base_url, server.model, **opts)


def test_llama_server_judge_structured_per_criterion_and_cache(llama_server, tmp_path):
    path = str(tmp_path / "cache.sqlite")
    with llama_judge(llama_server, cache=path) as judge:
        m = judge.score(REAL_TASK, REAL_RESPONSES)
    # The schema became a grammar, so every answer is a JSON object with a boolean: all parse.
    assert (m.status == OK).all(), m.records()
    assert np.isin(m.verdicts, (0.0, 1.0)).all() and all(isinstance(e, str) for e in m.explanations.ravel())
    assert len(JudgeCache(path)) == 6
    with llama_judge(llama_server, cache=path) as judge:
        again = judge.score(REAL_TASK, REAL_RESPONSES)
        assert judge.stats["requests"] == 0
    assert again.cache_hit.all()
    np.testing.assert_array_equal(m.verdicts, again.verdicts)


def test_llama_server_judge_structured_per_rubric(llama_server):
    with llama_judge(llama_server, mode="per_rubric", max_tokens=160, explanation_max_chars=40) as judge:
        m = judge.score(REAL_TASK, REAL_RESPONSES)
        assert judge.stats["requests"] == 2
    assert (m.status == OK).all(), m.records()


def test_llama_server_judge_free_text_is_parsed_or_recorded_unparsed(llama_server, fake_server):
    """Free-text answers of the real server, through a proxy that prefixes a plain verdict to the answers about the
    first response: those cells are read (met), SmolLM2's own rambling is recorded unparsed with its text, never
    guessed."""
    def behave(body, headers, n):
        r = httpx.post(f"{llama_server.base_url}/chat/completions", json=body, timeout=60).json()
        if REAL_RESPONSES[0] in prompt_of(body):
            msg = r["choices"][0]["message"]
            msg["content"] = "Verdict: met.\n" + (msg["content"] or "")
        return Reply.json(r)

    proxy = fake_server(behave)
    with OpenAIJudge(f"{proxy.url}/v1", llama_server.model, structured_output="none", max_tokens=48,
                     max_retries=1, max_concurrency=2) as judge:
        m = judge.score(REAL_TASK, REAL_RESPONSES)
    assert m.status[:, 0].tolist() == [OK] * 3 and m.verdicts[:, 0].tolist() == [1.0] * 3
    assert set(m.status[:, 1]) <= {OK, UNPARSED}
    assert np.array_equal(np.isnan(m.verdicts), m.status == UNPARSED)
    for k, j in zip(*np.nonzero(m.status == UNPARSED)):
        assert m.explanations[k, j]  # the raw answer is kept for inspection


def test_llama_server_judge_retries_through_a_flaky_proxy(llama_server, fake_server):
    """A proxy in front of the real server fails the first request (503) and drops the second; retries recover."""
    def behave(body, headers, n):
        if n == 0:
            return Reply.json({"error": "warming up"}, status=503)
        if n == 1:
            return DROP
        r = httpx.post(f"{llama_server.base_url}/chat/completions", json=body, timeout=60)
        return Reply.json(r.json(), status=r.status_code)

    proxy = fake_server(behave)
    with OpenAIJudge(f"{proxy.url}/v1", llama_server.model, structured_output="json_object", max_tokens=64,
                     explanation_max_chars=60, max_retries=3, backoff_s=0.05, max_concurrency=1) as judge:
        m = judge.score(REAL_TASK, REAL_RESPONSES[:1], REAL_TASK.criteria[:1])
        assert judge.stats["retries"] == 2 and judge.stats["requests"] == 3
    assert m.status.tolist() == [[OK]]


def test_llama_server_judge_routed_with_rules(llama_server):
    task = Task("mix", "writing", ({"role": "user", "content": "Write one sentence about the sea."},), (
        rule_crit("mix/0", "keywords:existence", {"keywords": ["sea"]}, 2),
        crit("mix/1", "The sentence is poetic.", 1, "verifier:llm"),
        rule_crit("mix/2", "length_constraints:number_words", {"num_words": 30, "relation": "less than"}, 1),
    ))
    responses = ["The sea sings softly to the moon.", "Water is wet."]
    with RoutingJudge(llama_judge(llama_server)) as judge:
        m = judge.score(task, responses)
        stats = judge.stats  # the HTTP judge's counters (the rule checkers keep none): what a step's cost logs
    assert stats["calls"] == 2 and stats["input_tokens"] > 0 and stats["output_tokens"] > 0
    assert m.judges == ("rule", "openai-chat:smollm2", "rule")
    assert m.verdicts[0].tolist() == [1, 0] and m.verdicts[2].tolist() == [1, 1]
    assert m.status[1].tolist() == [OK, OK]


def test_free_port_is_bindable_and_below_the_ephemeral_range(monkeypatch):
    """A server's port from `free_port` is out of the range outgoing connections take their local ends from (a port
    from bind(0) was taken that way while SGLang started), and free; with no room below the range, any free port."""
    import builtins

    from harnessrl_jax.rubric.judges import local_server

    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    for _ in range(20):
        port = local_server.free_port()
        assert (1024 <= port < low if low > 2048 else port > 0), (port, low)
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
    real_open = builtins.open
    monkeypatch.setattr(builtins, "open", lambda path, *a, **k: __import__("io").StringIO("1024 65535")
                        if path == "/proc/sys/net/ipv4/ip_local_port_range" else real_open(path, *a, **k))
    port = local_server.free_port()  # no room below the range: any free port, not an empty randrange
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
