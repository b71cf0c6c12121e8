"""SGLangEngine, the judge over SGLang's OpenAI-compatible routes and launch/serve.py against the real SGLang server
(`sglang_server`: SGLang 0.5.23 on the CPU serving SmolLM2-135M-Instruct as this project exports it). The JAX model
on the same weights is the reference for every rollout. The in-process stand-in (test_sglang.py) keeps the cases a
real server cannot be made to show: injected faults, a deterministic server, two jax.distributed processes."""

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import threading
import time

import httpx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from harnessrl_jax.models import forward, init_params, load_pretrained
from harnessrl_jax.models.export import export_hf
from harnessrl_jax.rollout import SGLangEngine, SGLangError
from harnessrl_jax.rubric.judges import OK, OpenAIJudge, SGLangJudge
from harnessrl_jax.rubric.judges.local_server import free_port
from harnessrl_jax.rubric.schema import Criterion, Task

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from third_party.sglang import cpu_server  # noqa: E402

TEXTS = ["The capital of France is", "Count to five: one, two,"]
STEPS = 8  # the greedy reference's length
WIDTH = 48  # every reference forward is one [8, 48] batch: one compile


def test_the_sglang_environment_pins_the_release_the_gpu_extra_pins():
    with open(os.path.join(ROOT, "setup.py")) as f:
        extra = re.findall(r'"gpu": \["(sglang==[^"]+)"\]', f.read())
    with open(os.path.join(ROOT, "third_party", "sglang", "requirements-cpu.txt")) as f:
        lock = [line.strip() for line in f if line.startswith("sglang==")]
    assert extra == lock and len(lock) == 1


def test_the_sgl_kernel_stand_ins_write_what_sglangs_cpu_kernels_write():
    spec = importlib.util.spec_from_file_location("sgl_kernel", os.path.join(cpu_server.STAND_INS, "sgl_kernel.py"))
    sgl_kernel = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sgl_kernel)

    table = torch.full((4, 10), -1, dtype=torch.int32)
    want = table.clone()
    sgl_kernel.assign_req_to_token_pool_cpu(torch.tensor([2, 0]), table, torch.tensor([3, 0]), torch.tensor([5, 4]),
                                            torch.arange(100, 106), 10)
    want[2, 3:5] = torch.tensor([100, 101])  # request 0 of the batch takes the first two slots
    want[0, 0:4] = torch.tensor([102, 103, 104, 105])  # request 1 the next four
    assert torch.equal(table, want)

    k = torch.arange(6 * 4, dtype=torch.float32).reshape(6, 4)
    v = torch.arange(6 * 3, dtype=torch.bfloat16).reshape(6, 3)
    old_k, old_v = k.clone(), v.clone()
    tgt, src = torch.tensor([3, 0, 5]), torch.tensor([1, 3, 5])  # row 3 is written, then read: sources first
    sgl_kernel.copy_all_layer_kv_cache_cpu(torch.tensor([k.data_ptr(), v.data_ptr()]),
                                           torch.tensor([k.stride(0) * 4, v.stride(0) * 2]), tgt, src)
    for buf, old in ((k, old_k), (v, old_v)):
        expect = old.clone()
        expect[tgt] = old[src]
        assert torch.equal(buf, expect)
    with pytest.raises(NotImplementedError, match="sgl_kernel.fused_add_rmsnorm_cpu"):
        sgl_kernel.fused_add_rmsnorm_cpu()


@pytest.fixture(scope="module")
def reference(sglang_server):
    """What the server serves, loaded by this project from the same directory: config, params, tokenizer, the
    prompts, and log_softmax(params, sequences, T) -> [rows, WIDTH, vocab] of the JAX model."""
    model_dir = sglang_server.model_dir  # loaded while the server starts
    config, params, tokenizer = load_pretrained(model_dir)
    apply = jax.jit(lambda p, x, t: jax.nn.log_softmax(forward(config, p, x) / t, axis=-1))

    def log_softmax(p, seqs, temperature=1.0):
        buf = np.zeros((8, WIDTH), np.int32)  # right padding: a causal model's earlier positions do not see it
        for r, seq in enumerate(seqs):
            buf[r, : len(seq)] = seq
        return np.asarray(apply(p, jnp.asarray(buf), jnp.float32(temperature)))[: len(seqs)]

    return dict(config=config, params=params, tokenizer=tokenizer, prompts=[tokenizer.encode(t) for t in TEXTS],
                log_softmax=log_softmax, model_dir=model_dir)


def _engine(url, ref, **kw):
    return SGLangEngine(url, ref["tokenizer"], model_config=ref["config"], **{"backoff_s": 0.05,
                                                                              "export_dtype": "float32", **kw})


def _assert_policy(out, ref, params, temperature=1.0, greedy=False):
    """Every row's logprobs are the JAX model's log_softmax(logits / T) at its tokens (SGLang's convention), and
    with `greedy` every token is the model's most likely one (up to float32 rounding): the rows are its greedy
    continuations. One forward over all rows."""
    rows = [out.prompt_ids[out.prompt_index[r]] + out.completion(r) for r in range(out.num_samples)]
    logp = ref["log_softmax"](params, rows, temperature)
    for r in range(out.num_samples):
        start, completion = len(out.prompt_ids[out.prompt_index[r]]) - 1, out.completion(r)
        at = logp[r, start: start + len(completion)]
        chosen = at[np.arange(len(completion)), completion]
        np.testing.assert_allclose(out.logprobs[r, : len(completion)], chosen, atol=1e-4)
        if greedy:
            np.testing.assert_array_less(at.max(axis=-1) - chosen, 1e-4)


@pytest.mark.slow
def test_rollouts_are_the_jax_models_greedy_tokens_with_its_logprobs_and_stop_reasons(sglang_server, reference):
    ref, eos = reference, reference["tokenizer"].eos_id
    engine = _engine(sglang_server.url, ref)
    out = engine.generate(ref["prompts"], max_new_tokens=STEPS, temperature=0.0)
    assert out.finish_reason == ["length", "length"] and out.prompt_ids == ref["prompts"]
    _assert_policy(out, ref, ref["params"], greedy=True)
    first, second = out.completion(0), out.completion(1)
    assert out.texts == [ref["tokenizer"].decode(first), ref["tokenizer"].decode(second)]
    stop = first[1]  # a token early in prompt 0's greedy continuation, absent from prompt 1's
    assert stop not in second
    engine.close()
    engine = _engine(sglang_server.url, ref, stop_ids=[eos, stop])
    stopped = engine.generate(ref["prompts"], n=2, max_new_tokens=STEPS, temperature=0.0)
    assert stopped.prompt_index.tolist() == [0, 0, 1, 1]
    assert stopped.finish_reason == ["stop", "stop", "length", "length"]
    assert [stopped.completion(r) for r in range(4)] == [first[:2]] * 2 + [second] * 2  # the stop token kept
    np.testing.assert_allclose(stopped.logprobs[0, :2], out.logprobs[0, :2], atol=1e-5)
    assert (stopped.tokens[0, 2:] == engine.pad_id).all() and stopped.texts[0] == ref["tokenizer"].decode(first[:2])
    engine.close()


@pytest.mark.slow
def test_samples_are_grouped_prompt_major_with_the_policys_tempered_logprobs(sglang_server, reference):
    engine = _engine(sglang_server.url, reference, chunk_rows=4)  # 6 rows: two requests
    out = engine.generate(reference["prompts"], n=3, max_new_tokens=6, temperature=0.7)
    assert out.prompt_index.tolist() == [0, 0, 0, 1, 1, 1] and engine.metrics["chunks"] == 2
    assert len({tuple(out.completion(r)) for r in range(6)}) > 2  # n samples, not n copies
    _assert_policy(out, reference, reference["params"], 0.7)  # each row's own prompt's, at T = 0.7
    engine.close()


ABORTED_TOKENS = 40  # ~4 s of decoding: still running when /v1/loads first shows it


def _running(url) -> int:
    return sum(load["num_running_reqs"] for load in httpx.get(f"{url}/v1/loads", timeout=10).json()["loads"])


@pytest.mark.slow
def test_a_row_aborted_by_a_pause_is_sampled_again_once_generation_continues(sglang_server, reference):
    """The weight sync's /pause_generation (mode abort) returns the running request with finish_reason abort and
    its partial tokens; the engine retries it, the retry waits while the server is paused, and the rollout is the
    whole greedy continuation."""
    engine = _engine(sglang_server.url, reference)
    result = {}
    worker = threading.Thread(target=lambda: result.update(out=engine.generate(
        reference["prompts"][1:], max_new_tokens=ABORTED_TOKENS, temperature=0.0)))
    worker.start()
    deadline = time.monotonic() + 60
    while not _running(sglang_server.url):  # /v1/loads lags by about a second
        assert time.monotonic() < deadline and worker.is_alive(), "the request never ran"
        time.sleep(0.02)
    paused = httpx.post(f"{sglang_server.url}/pause_generation", json={"mode": "abort"}, timeout=30)
    assert paused.json() == {"message": "Generation paused successfully.", "status": "ok"}
    time.sleep(0.5)
    assert worker.is_alive()  # the retry waits for /continue_generation
    httpx.post(f"{sglang_server.url}/continue_generation", json={}, timeout=30).raise_for_status()
    worker.join(120)
    out = result["out"]
    assert engine.metrics["retries"] == 1
    assert out.finish_reason == ["length"] and out.lengths.tolist() == [ABORTED_TOKENS]
    _assert_policy(out, reference, reference["params"], greedy=True)  # all of it, not the aborted part
    engine.close()


@pytest.mark.slow
def test_the_judge_scores_through_sglangs_openai_routes_with_the_verdict_schema(sglang_server):
    """json_schema structured output (SGLang's xgrammar) makes every answer of SmolLM2, which rambles when left
    free, parse as a verdict."""
    prompt = ({"role": "user", "content": "My child has a fever of 38.5 C. What should I do?"},)
    task = Task("fever", "medical", prompt, (
        Criterion("fever/0", "Advises giving fluids.", 5.0), Criterion("fever/1", "Mentions paracetamol.", 3.0),
        Criterion("fever/2", "Tells the parent to give aspirin to the child.", -5.0)))
    with OpenAIJudge(f"{sglang_server.url}/v1", "smollm2", structured_output="json_schema", max_tokens=40,
                     explanation_max_chars=12, temperature=0.0, timeout_s=120, max_retries=1,
                     max_concurrency=3) as judge:
        m = judge.score(task, ["Give plenty of fluids and paracetamol; see a doctor if it lasts."])
        stats = judge.stats
    assert (m.status == OK).all(), m.records()
    assert np.isin(m.verdicts, (0.0, 1.0)).all()
    assert stats["requests"] == 3 and stats["input_tokens"] > 0 and stats["output_tokens"] > 0
    # The batched judge on the native /generate: the three prompts in one request, rendered here with the served
    # model's chat template, answered word for word as the chat route answered them (greedy, the same grammar).
    kw = dict(structured_output="json_schema", max_tokens=40, explanation_max_chars=12, temperature=0.0,
              timeout_s=120, max_retries=1)
    with OpenAIJudge(f"{sglang_server.url}/v1", "smollm2", **kw) as chat, \
            SGLangJudge(sglang_server.url, "smollm2", tokenizer=sglang_server.model_dir, **kw) as native:
        calls = [(native._key(c.messages, c.schema), c.messages, c.schema, c.route)
                 for c in native._calls(0, task, ["Give plenty of fluids and paracetamol; see a doctor if it lasts."],
                                        task.criteria)]
        batched = native.complete_distinct(calls)
        assert native.stats["requests"] == 1
        one_by_one = [chat.complete(messages, schema) for _, messages, schema, _ in calls]
    assert [c.status for c in batched] == [OK] * 3
    assert [c.text for c in batched] == [c.text for c in one_by_one]
    assert [c.usage for c in batched] == [c.usage for c in one_by_one]


@pytest.fixture
def restore(sglang_server):
    """Put the session's server back on the exported SmolLM2, at the version it starts with, after a test that
    moves it."""
    yield
    _load(sglang_server.url, sglang_server.model_dir, "default")


@pytest.mark.slow
def test_a_checkpoint_the_real_server_cannot_load_raises_and_the_old_weights_stay(sglang_server, reference,
                                                                                   tmp_path, monkeypatch, restore):
    engine = _engine(sglang_server.url, reference, weights_dir=str(tmp_path), stop_ids=[reference["tokenizer"].eos_id])
    version = engine.expected_version

    def unreadable(config, params, directory, *args, **kwargs):
        # A directory without weights: SGLang cannot open its weight iterator and keeps the old weights. (A shard
        # that exists but does not parse is worse: it stops a real 0.5.23 server's scheduler.)
        os.makedirs(directory)
        for name in ("config.json", "generation_config.json"):
            shutil.copyfile(os.path.join(reference["model_dir"], name), os.path.join(directory, name))
        return directory

    monkeypatch.setattr("harnessrl_jax.models.export.export_hf", unreadable)
    with pytest.raises(SGLangError, match="update_weights_from_disk: HTTP 400: .*Failed"):
        engine.update_weights(reference["params"])
    assert httpx.get(f"{sglang_server.url}/model_info", timeout=10).json()["weight_version"] == version
    out = engine.generate(reference["prompts"], max_new_tokens=STEPS, temperature=0.0)  # served, not left paused
    _assert_policy(out, reference, reference["params"], greedy=True)
    engine.close()


@pytest.fixture(scope="module")
def serve_py(sglang_server, tmp_path_factory):
    """launch/serve.py (the JAX engine behind SGLang's native API) serving the same directory, with the real
    server's context length, padding every call to 4 rows (one compile for every request below); its URL."""
    model_dir = sglang_server.model_dir
    port = free_port()
    log = open(tmp_path_factory.mktemp("serve_py") / "serve.log", "w+")
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "launch", "serve.py"), f"--model={model_dir}",
                             f"--port={port}", "--context_length=2048", "--prompt_bucket=16", "--min_batch=4"],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, f"serve.py did not start:\n{_tail(log)}"
            try:
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.25)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def _tail(log) -> str:
    log.seek(0)
    return log.read()[-3000:]


def _load(url, path, version):
    """Move a server to the checkpoint at `path` (it must succeed)."""
    r = httpx.post(f"{url}/update_weights_from_disk", json={"model_path": path, "weight_version": version},
                   timeout=300)
    assert r.json()["success"], r.text


@pytest.mark.slow
def test_weight_updates_move_the_real_server_and_serve_py_together_with_version_checks(sglang_server, serve_py,
                                                                                      reference, tmp_path, restore):
    # The stop ids of the comparison below: serve.py samples both tests' rows with one compiled program.
    stop_ids = [reference["tokenizer"].eos_id, reference["config"].vocab_size - 1]
    engine = _engine([sglang_server.url, serve_py], reference, weights_dir=str(tmp_path), chunk_rows=1,
                     stop_ids=stop_ids, export_dtype="bfloat16")
    assert engine.expected_version == "default"  # both as started (the tests that move them put them back)
    before = engine.generate(reference["prompts"], max_new_tokens=STEPS, temperature=0.0)
    _assert_policy(before, reference, reference["params"], greedy=True)
    # bfloat16 values, exported as bfloat16 (half the bytes to write): the servers load exactly these weights.
    new = jax.tree.map(lambda a: (a * 1.05).astype(jnp.bfloat16).astype(jnp.float32), reference["params"])
    engine.update_weights(new)
    for url in (sglang_server.url, serve_py):
        assert httpx.get(f"{url}/model_info", timeout=10).json()["weight_version"] == "1"
    assert os.listdir(tmp_path) == ["v000001"]
    after = engine.generate(reference["prompts"], max_new_tokens=STEPS, temperature=0.0)
    _assert_policy(after, reference, new, greedy=True)
    assert after.tokens.tolist() != before.tokens.tolist()
    for url in (sglang_server.url, serve_py):  # both servers moved by someone else: every row is refused
        _load(url, str(tmp_path / "v000001"), "7")
    with pytest.raises(SGLangError, match="weight version '7', expected '1'"):
        engine.generate(reference["prompts"], max_new_tokens=STEPS, temperature=0.0)
    engine.close()
    _load(serve_py, sglang_server.model_dir, "default")


# Where serve.py (rollout/server.py) and SGLang 0.5.23 answer differently; the test below checks each that can be
# shown without breaking the session's server. Everything else the project's clients send or read agrees.
DIFFERENCES = (
    "sampling parameters serve.py does not implement (min_p, penalties, stop strings, grammars): SGLang serves "
    "them, serve.py answers 400",
    "n = 0: SGLang samples once, serve.py answers 400",
    "a sampling_params list whose length is not the batch's: SGLang answers 500, serve.py 400",
    "a checkpoint of other shapes: SGLang answers success and loads what it can, serve.py refuses it (400) and "
    "keeps its weights",
    "/v1/loads and /release_memory_occupation: SGLang answers 200 (release is a no-op without "
    "--enable-memory-saver), serve.py 404",
    "/server_info version: SGLang's release, serve.py 'harnessrl-jax-stand-in'",
    "cached_tokens: SGLang counts its radix cache's hits, serve.py has no prefix cache (0)",
    "meta_info: SGLang also sends response_sent_to_client_ts",
    # Not shown here, as they would stop or disturb the session's server:
    "token ids outside the vocabulary: they stop SGLang's scheduler (SGLangEngine refuses them first), serve.py "
    "answers 400",
    "a shard that does not parse: it stops SGLang's scheduler; serve.py answers 400 and keeps its weights",
    "a prompt within 6 tokens of the context length: SGLang refuses it (its maximum input is the context minus a "
    "reserve), serve.py serves it",
    "pause modes: SGLang's abort returns running requests with finish_reason abort, and an in_place pause with a "
    "request running makes /update_weights_from_disk answer 400 although the weights were swapped; serve.py "
    "finishes the running request and answers 200",
)

# What the project's clients read from a /generate row's meta_info (SGLangEngine; the spec's recommended fields).
META_READ = ("id", "finish_reason", "prompt_tokens", "completion_tokens", "weight_version", "weight_versions")


def _shape(value):
    """The JSON structure of a body: key names and value kinds, not values."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value[:1]]
    return type(value).__name__


def _same_row(real, ours):
    """Two /generate rows agree in every field a client reads (logprobs to 1e-4, float32 on both sides); True."""
    assert set(real) == set(ours) == {"text", "output_ids", "meta_info"}
    assert real["output_ids"] == ours["output_ids"] and real["text"] == ours["text"]
    a, b = real["meta_info"], ours["meta_info"]
    assert set(a) - set(b) == {"response_sent_to_client_ts"} and set(b) <= set(a)
    assert {k: a[k] for k in META_READ} == {k: b[k] for k in META_READ}
    for key in ("output_token_logprobs", "input_token_logprobs"):
        assert (key in a) == (key in b)
        if key in a:
            assert [(t, x) for _, t, x in a[key]] == [(t, x) for _, t, x in b[key]]
            np.testing.assert_allclose(np.array([lp for lp, _, _ in a[key]], float),
                                       np.array([lp for lp, _, _ in b[key]], float), atol=1e-4)
    for key in ("e2e_latency", "cached_tokens"):
        assert isinstance(a[key], (int, float)) and isinstance(b[key], (int, float))
    return True


@pytest.mark.slow
def test_serve_py_answers_the_projects_requests_as_the_real_server_does(sglang_server, serve_py, reference, tmp_path,
                                                                       restore):
    model_dir = sglang_server.model_dir
    urls = (sglang_server.url, serve_py)

    def both(method, path, **kw):
        return [httpx.request(method, url + path, timeout=300, **kw) for url in urls]

    def same(method, path, status=200, compare=lambda a, b: _shape(a) == _shape(b), **kw):
        real, ours = both(method, path, **kw)
        assert real.status_code == ours.status_code == status, (path, kw, real.text[:300], ours.text[:300])
        a, b = (r.json() if r.content and "json" in r.headers.get("content-type", "") else r.text
                for r in (real, ours))
        assert compare(a, b), (path, kw, a, b)
        return a, b

    # Control routes, in the order a weight sync sends them.
    same("POST", "/update_weights_from_disk", json={"model_path": model_dir, "weight_version": "cmp"},
         compare=lambda a, b: a == b == {"success": True, "num_paused_requests": 0, "message":
                                         "Succeeded to update model weights. Weight version updated to cmp."})
    same("POST", "/pause_generation", json={"mode": "abort"}, compare=lambda a, b: a == b)
    same("POST", "/continue_generation", json={}, compare=lambda a, b: a == b)
    a, _ = same("POST", "/update_weights_from_disk", 400, json={"model_path": str(tmp_path / "none"),
                                                                "weight_version": "x"},
                compare=lambda a, b: _shape(a) == _shape(b) and a["success"] is b["success"] is False)
    for path in ("/model_info", "/get_model_info"):
        same("GET", path, compare=lambda a, b: all(a[k] == b[k] for k in (
            "model_path", "served_model_name", "weight_version", "model_type", "architectures", "is_generation")))
    for path in ("/server_info", "/get_server_info"):
        same("GET", path, compare=lambda a, b: all(a[k] == b[k] for k in (
            "enable_deterministic_inference", "context_length", "tp_size", "dp_size", "model_path")))
    for path in ("/health", "/health_generate"):
        same("GET", path, compare=lambda a, b: a == b == "")
    for method in ("GET", "POST"):
        same(method, "/flush_cache", compare=lambda a, b: a.startswith("Cache flushed.") and a == b)
    same("POST", "/abort_request", json={"rid": "", "abort_all": True}, compare=lambda a, b: a == b == "")
    for path in ("/get_weight_version", "/get_load", "/no_such_route"):
        same("GET", path, 404, compare=lambda a, b: a == b == {"detail": "Not Found"})

    # /generate as SGLangEngine and the spec's clients send it: every row agrees. Every request generates STEPS
    # tokens with two stop ids (the EOS and one more): one compiled sampler in serve.py.
    p0, p1 = reference["prompts"]
    greedy = {"temperature": 0, "max_new_tokens": STEPS, "stop_token_ids": [reference["config"].vocab_size - 1]}
    real, _ = same("POST", "/generate", json={"input_ids": p0, "rid": "one", "return_logprob": True,
                                              "sampling_params": greedy}, compare=_same_row)
    stop = real["output_ids"][1]
    answers = []
    for body in [
        {"input_ids": [p0, p1], "rid": ["a", "b"], "return_logprob": True, "logprob_start_len": 0,
         "sampling_params": dict(greedy, stop_token_ids=[stop])},
        {"text": TEXTS[0], "rid": "t", "sampling_params": dict(greedy, stop_token_ids=[stop], no_stop_trim=True)},
        {"input_ids": [p0, p1], "text": ["input_ids", "win"], "rid": "r", "sampling_params": [greedy, greedy]},
        {"input_ids": p0 + real["output_ids"][:2], "rid": "score", "return_logprob": True,
         "logprob_start_len": len(p0) - 1, "sampling_params": {"max_new_tokens": 0}},
    ]:
        answers.append(same("POST", "/generate", json=body, compare=lambda a, b: type(a) is type(b)))
        for a, b in zip(*(x if isinstance(x, list) else [x] for x in answers[-1])):
            _same_row(a, b)
    assert [row["meta_info"]["id"] for row in answers[2][1]] == ["r_0", "r_1"]
    rows, _ = same("POST", "/generate", json={"input_ids": [p0, p1], "rid": "s", "sampling_params": dict(
        greedy, temperature=1.0, n=2)}, compare=lambda a, b: len(a) == len(b))
    assert [r["meta_info"]["prompt_tokens"] for r in rows] == [len(p0), len(p0), len(p1), len(p1)]
    assert not any(r["meta_info"]["id"].startswith("s") for r in rows)  # a string rid with n > 1 is not used

    # Requests SGLang refuses: the same status and body shape.
    bad = [{"input_ids": p0, "sampling_params": {"top_p": 0}}, {"input_ids": p0, "sampling_params": {"top_k": 0}},
           {"input_ids": p0, "sampling_params": {"max_new_tokens": -1}},
           {"input_ids": p0, "sampling_params": {"temperature": -1}},
           {"input_ids": [p0, p1], "sampling_params": [{"n": 1}, {"n": 2}]},
           {"input_ids": [p0, p1], "return_logprob": [True, False], "sampling_params": {"n": 2}},
           {"input_ids": [p0, p1], "rid": ["x", "x"]}, {"input_ids": []}, {"sampling_params": {}},
           {"input_ids": [1] * 2048}, {"input_ids": [1] * 2040, "sampling_params": {"max_new_tokens": 20}},
           {"input_ids": p0, "sampling_params": {"no_such_parameter": 1}},
           {"input_ids": p0, "sampling_params": "not a dict"}]
    for body in bad:
        same("POST", "/generate", 400, json=body)
    same("POST", "/generate", 400, content=b"{not json", headers={"content-type": "application/json"})

    # The differences listed above, each still there.
    real, ours = both("POST", "/generate", json={"input_ids": p0, "sampling_params": {"max_new_tokens": 1,
                                                                                       "min_p": 0.1}})
    assert (real.status_code, ours.status_code) == (200, 400) and "min_p" in ours.json()["error"]["message"]
    real, ours = both("POST", "/generate", json={"input_ids": p0, "sampling_params": {"max_new_tokens": 1, "n": 0}})
    assert (real.status_code, ours.status_code) == (200, 400)
    real, ours = both("POST", "/generate", json={"input_ids": [p0, p1], "sampling_params": [greedy]})
    assert (real.status_code, ours.status_code) == (500, 400)
    real, ours = answers[1]  # p0 again (as text): SGLang found it in its radix cache
    assert real["meta_info"]["cached_tokens"] > 0 == ours["meta_info"]["cached_tokens"]
    for method, path in (("GET", "/v1/loads"), ("POST", "/release_memory_occupation")):
        real, ours = both(method, path, json={})
        assert (real.status_code, ours.status_code) == (200, 404)
    real, ours = both("GET", "/server_info")
    assert (real.json()["version"], ours.json()["version"]) == ("0.5.23", "harnessrl-jax-stand-in")
    other = reference["config"].replace(num_layers=2, intermediate_size=64)
    export_hf(other, init_params(other, jax.random.PRNGKey(0)), str(tmp_path / "other"))
    real, ours = both("POST", "/update_weights_from_disk", json={"model_path": str(tmp_path / "other")})
    assert (real.status_code, real.json()["success"], ours.status_code, ours.json()["success"]) == \
        (200, True, 400, False)
    _load(serve_py, model_dir, "default")
    with pytest.raises(ValueError, match="outside the vocabulary"):  # never sent to a real server
        _engine(sglang_server.url, reference).generate([[reference["config"].vocab_size]], max_new_tokens=1)
