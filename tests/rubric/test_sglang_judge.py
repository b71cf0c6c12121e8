"""SGLangJudge (SGLang's native /generate, many prompts a request) against the per-call OpenAIJudge on the same
stand-in server: the same prompts through the served model's chat template, the same verdicts, the same failure
accounting, in a fraction of the requests. The real server's agreement is checked in tests/rollout."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from harnessrl_jax.models.presets import smollm2_gguf_path
from harnessrl_jax.models.tokenizer import Tokenizer
from harnessrl_jax.rubric.judges import ERROR, OK, CallFailed, OpenAIJudge, SGLangJudge, make_judge
from harnessrl_jax.rubric.judges.llm import rubric_schema, verdict_schema
from harnessrl_jax.rubric.judges.standin import StandInServer
from harnessrl_jax.rubric.schema import Criterion, Task

WORDS = ("river", "stone", "light", "garden", "engine", "harbor")


@pytest.fixture(scope="module")
def tokenizer():
    return Tokenizer.from_gguf(smollm2_gguf_path())


@pytest.fixture
def server():
    s = StandInServer()
    yield s
    s.close()


def group(n_tasks=5, n_responses=4, worded=False):
    """Tasks with two quoting criteria and a pitfall (and, `worded`, one the stand-in answers in words and one it
    answers unreadably); responses over the same words, one repeated per task."""
    rng = np.random.default_rng(0)
    tasks, responses = [], []
    for i in range(n_tasks):
        a, b, c = rng.choice(WORDS, 3, replace=False)
        extra = (Criterion(f"t{i}/3", f"(in words) The response mentions '{b}'.", 1.0),
                 Criterion(f"t{i}/4", "(unreadable) The response is kind.", 1.0)) if worded else ()
        tasks.append(Task(f"t{i}", "load", ({"role": "user", "content": f"Write about {a}."},), (
            Criterion(f"t{i}/0", f"The response mentions '{a}'.", 2.0),
            Criterion(f"t{i}/1", f"The response mentions '{b}'.", 1.0),
            Criterion(f"t{i}/2", f"The response says '{c}'.", -1.0)) + extra))
        rs = [" ".join(rng.choice(WORDS, rng.integers(2, 5))) for _ in range(n_responses - 1)]
        responses.append(rs + rs[:1])
    return tasks, responses


@pytest.mark.parametrize("mode", ["per_criterion", "per_rubric"])
def test_the_batched_judge_sends_the_per_call_prompts_and_gets_the_same_verdicts(server, tokenizer, mode, tmp_path):
    """Fails if the batched path renders other prompts (another template, the response not defused), loses the
    order of a request's answers (verdicts land on the wrong cells), does not judge each distinct prompt once, or
    reads an answer, counts a failure or hits the cache otherwise than the per-call path (answers in JSON, in words
    and unreadable; a second pass from each path's own cache)."""
    tasks, responses = group(worded=mode == "per_criterion")
    with OpenAIJudge(server.base_url, "standin", mode=mode, max_concurrency=4,
                     cache=str(tmp_path / "chat.sqlite")) as per_call:
        expected = per_call.score_batch(tasks, responses)
        expected_again = per_call.score_batch(tasks, responses)
    chat_prompts, calls = dict(server.by_prompt), server.requests
    server.by_prompt.clear()
    with SGLangJudge(server.root_url, "standin", tokenizer=tokenizer, mode=mode, batch_size=7,
                     max_concurrency=2, cache=str(tmp_path / "native.sqlite")) as batched:
        got = batched.score_batch(tasks, responses)
        stats = batched.stats
        got_again = batched.score_batch(tasks, responses)
    for e, g in zip(expected + expected_again, got + got_again):
        np.testing.assert_array_equal(g.verdicts, e.verdicts)
        assert g.status.tolist() == e.status.tolist() and g.explanations.tolist() == e.explanations.tolist()
        assert g.cache_hit.tolist() == e.cache_hit.tolist()
    assert sum(m.failure_counts()["unparsed"] for m in got) == (20 if mode == "per_criterion" else 0)
    assert all(m.cache_hit.all() for m in got_again)
    # every distinct prompt once, as the chat route's user turn rendered with the model's template
    assert dict(server.by_prompt) == {tokenizer.apply_chat_template([{"role": "user", "content": p}]): 1
                                      for p in chat_prompts}
    assert stats["calls"] == calls == len(chat_prompts) and stats["ok"] == calls
    assert server.requests - calls == math.ceil(calls / 7) == stats["requests"]


def test_the_request_carries_the_sampling_settings_and_the_schema_as_sglang_names_them(tokenizer):
    judge = SGLangJudge("http://127.0.0.1:1", "m", tokenizer=tokenizer, temperature=0.0, max_tokens=64, top_p=0.9,
                        seed=3)
    body = judge.request_body([(({"role": "user", "content": "hi"},), verdict_schema()),
                               (({"role": "user", "content": "yo"},), rubric_schema(2))])
    assert body["text"] == [tokenizer.apply_chat_template([{"role": "user", "content": t}]) for t in ("hi", "yo")]
    assert [json.loads(p.pop("json_schema")) for p in body["sampling_params"]] == [verdict_schema(), rubric_schema(2)]
    assert body["sampling_params"] == [{"max_new_tokens": 64, "temperature": 0.0, "top_p": 0.9,
                                        "sampling_seed": 3}] * 2
    shared = judge.request_body([(({"role": "user", "content": t},), verdict_schema()) for t in ("hi", "yo")])
    assert json.loads(shared["sampling_params"].pop("json_schema")) == verdict_schema()  # one for the request
    assert shared["sampling_params"] == {"max_new_tokens": 64, "temperature": 0.0, "top_p": 0.9, "sampling_seed": 3}
    free = SGLangJudge("http://127.0.0.1:1", "m", tokenizer=tokenizer, structured_output="none", temperature=None)
    assert free.request_body([(({"role": "user", "content": "hi"},), verdict_schema())])["sampling_params"] == {
        "max_new_tokens": 512}


def test_prompts_written_into_the_chat_frame_are_the_templates_own_text(tokenizer):
    """The frame rendered once gives what the template renders, for a template that keeps the content as is, one
    that trims it, and one that looks into it (caught by the request's check: every prompt through the template)."""
    import copy

    prompts = [({"role": "user", "content": c},) for c in (" river {x}\n", "stone")]
    prompts.append(({"role": "system", "content": "s"}, {"role": "user", "content": "u"}))
    content = "message['content']"
    for template, frame in ((tokenizer.chat_template, False), (tokenizer.chat_template.replace(
            content, f"{content} | trim"), True), (tokenizer.chat_template.replace(
            content, f"('!' if 'river' in {content} else '') + {content}"), None)):
        tok = copy.copy(tokenizer)
        tok.chat_template = template
        judge = SGLangJudge("http://127.0.0.1:1", "m", tokenizer=tok)
        assert judge.render(prompts) == [tok.apply_chat_template(list(m)) for m in prompts]
        assert (judge._frame and judge._frame[2]) is frame


def test_failures_are_counted_per_call_and_answers_are_cached(server, tokenizer, tmp_path):
    """A request that fails fails each of its calls (NaN cells, 'error'), retried as a whole; the server dying
    after the first request leaves that request's answers; a second pass takes them from the cache."""
    tasks, responses = group(3, 3)
    server.mode = "503"
    with SGLangJudge(server.root_url, "standin", tokenizer=tokenizer, batch_size=10, max_retries=2, backoff_s=0.0,
                     max_concurrency=1) as judge:
        down = judge.score_batch(tasks, responses)
        stats = judge.stats
    n = stats["calls"]
    assert all((m.status == ERROR).all() and np.isnan(m.verdicts).all() for m in down)
    assert stats["error"] == n and stats["requests"] == math.ceil(n / 10) * 3 and stats["retries"] == 2 * n

    server.mode, server.requests, server.fail_after = "up", 0, 1
    cache = str(tmp_path / "judge.sqlite")
    with SGLangJudge(server.root_url, "standin", tokenizer=tokenizer, batch_size=10, max_retries=0,
                     max_concurrency=1, cache=cache) as judge:
        half = judge.score_batch(tasks, responses)
        assert judge.stats["ok"] == 10 and judge.stats["error"] == n - 10
    assert sum(int((m.status == OK).sum()) for m in half) >= 10
    server.fail_after = None
    with SGLangJudge(server.root_url, "standin", tokenizer=tokenizer, batch_size=10, cache=cache) as judge:
        again = judge.score_batch(tasks, responses)
        assert judge.stats["cache_hits"] == 10 and judge.stats["ok"] == n
    assert all((m.status == OK).all() for m in again)


def test_a_prompt_the_server_aborts_is_asked_again_on_its_own(tokenizer):
    """The fault a real server shows only under load: one answer of a request aborted. Only that prompt is sent
    again; the others keep their first answers."""
    sent = []

    class Aborting(SGLangJudge):
        def _send_many(self, prompts):
            sent.append(len(prompts))
            out = [("{\"explanation\": \"x\", \"criteria_met\": true}", "stop", {"input_tokens": 1})] * len(prompts)
            return [CallFailed(ERROR, "aborted", True)] + out[1:] if len(sent) == 1 else out

    judge = Aborting("http://127.0.0.1:1", "m", tokenizer=tokenizer, backoff_s=0.0)
    calls = [(f"k{i}", ({"role": "user", "content": str(i)},), verdict_schema(), "r") for i in range(3)]
    done = judge.complete_distinct(calls)
    assert sent == [3, 1] and [c.status for c in done] == [OK] * 3 and [c.attempts for c in done] == [2, 1, 1]
    assert judge.stats["retries"] == 1 and judge.stats["input_tokens"] == 3


def test_bad_settings_are_refused_with_what_to_give(tokenizer, tmp_path):
    with pytest.raises(ValueError, match="ends in /v1"):
        SGLangJudge("http://127.0.0.1:1/v1", "m", tokenizer=tokenizer)
    with pytest.raises(ValueError, match="json_schema' or 'none'"):
        SGLangJudge("http://127.0.0.1:1", "m", tokenizer=tokenizer, structured_output="json_object")
    with pytest.raises(ValueError, match="no tokenizer with a chat template"):
        SGLangJudge("http://127.0.0.1:1", "m", tokenizer=str(tmp_path))
    with pytest.raises(ValueError, match="batch_size"):
        SGLangJudge("http://127.0.0.1:1", "m", tokenizer=tokenizer, batch_size=0)
    assert isinstance(make_judge({"kind": "sglang", "base_url": "http://127.0.0.1:1", "model": "m",
                                  "tokenizer": tokenizer}), SGLangJudge)


def test_config_judge_kind_sglang_builds_the_batched_judge_behind_the_outage_policy(server, tiny_config):
    """config.judge.kind='sglang' reaches the step's judge with its batch size and tokenizer (a setting dropped on
    the way changes the requests the server sees); a missing server root or tokenizer path is named."""
    from harnessrl_jax import build, checks, settings

    config = tiny_config()
    config.judge.update(kind="sglang", base_url=server.root_url, model="standin", tokenizer=smollm2_gguf_path(),
                        batch_size=5)
    tasks, responses = group(2, 4)
    judge = build.build_judge(config)
    scored = judge.score_batch(tasks, responses)
    assert all((m.status == OK).all() for m in scored)
    assert server.requests == math.ceil(2 * 3 * 3 / 5)  # 3 distinct responses x 3 criteria per task
    assert next(iter(server.by_prompt)).startswith("<|im_start|>")  # SmolLM2's chat template
    assert checks.needs(config, probe=lambda url: None if url == f"{server.root_url}/v1" else url) == []
    config.judge.tokenizer = "/nonexistent/judge"
    assert any("--config.judge.tokenizer='/nonexistent/judge'" in p for p in checks.needs(config))
    with pytest.raises(settings.Problems, match="SGLang server's root"):
        settings.JudgeSection(kind="sglang", model="m")
