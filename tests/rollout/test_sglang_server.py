"""SGLangEngine, the judge over SGLang's OpenAI-compatible routes and launch/serve.py against the real SGLang server
(`sglang_server`: SGLang 0.5.23 on the CPU serving SmolLM2-135M-Instruct as this project exports it). The JAX model
on the same weights is the reference for every rollout. The in-process stand-in (test_sglang.py) keeps the cases a
real server cannot be made to show: injected faults, a deterministic server, two jax.distributed processes."""

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

from harnessrl_jax.models import forward, load_pretrained
from harnessrl_jax.rollout import SGLangEngine, SGLangError
from harnessrl_jax.rubric.judges import OK, OpenAIJudge
from harnessrl_jax.rubric.schema import Criterion, Task

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from third_party.sglang import cpu_server  # noqa: E402

TEXTS = ["The capital of France is", "Count to five: one, two,"]
STEPS = 8  # the greedy reference's length
WIDTH = 40  # every reference forward is one [8, 40] batch: one compile


@pytest.fixture(scope="module")
def reference(sglang_server):
    """What the server serves, loaded by this project from the same directory: config, params, tokenizer, the
    prompts, their greedy continuations (STEPS tokens), logprobs(params, rows, T) and greedy(params, prompts)."""
    server, model_dir = sglang_server
    config, params, tokenizer = load_pretrained(model_dir)
    apply = jax.jit(lambda p, x, t: jax.nn.log_softmax(forward(config, p, x) / t, axis=-1))

    def log_softmax(p, seqs, temperature=1.0):
        buf = np.zeros((8, WIDTH), np.int32)  # right padding: a causal model's earlier positions do not see it
        for r, seq in enumerate(seqs):
            buf[r, : len(seq)] = seq
        return np.asarray(apply(p, jnp.asarray(buf), jnp.float32(temperature)))[: len(seqs)]

    def logprobs(p, rows, temperature=1.0):
        """log_softmax(logits / T) at each completion token of every (prompt, completion): SGLang's convention."""
        out = log_softmax(p, [q + c for q, c in rows], temperature)
        return [[float(out[r, len(q) - 1 + j, t]) for j, t in enumerate(c)] for r, (q, c) in enumerate(rows)]

    def greedy(p, prompts):
        seqs = [list(q) for q in prompts]
        for _ in range(STEPS):
            out = log_softmax(p, seqs)
            for r, seq in enumerate(seqs):
                seq.append(int(out[r, len(seq) - 1].argmax()))
        return [seq[len(q):] for seq, q in zip(seqs, prompts)]

    prompts = [tokenizer.encode(t) for t in TEXTS]
    return dict(config=config, params=params, tokenizer=tokenizer, prompts=prompts, logprobs=logprobs,
                greedy=greedy, continuations=greedy(params, prompts), model_dir=model_dir)


def _engine(url, ref, **kw):
    return SGLangEngine(url, ref["tokenizer"], model_config=ref["config"], backoff_s=0.05, export_dtype="float32",
                        **kw)


def _assert_logprobs(out, ref, params, temperature=1.0):
    rows = [(out.prompt_ids[out.prompt_index[r]], out.completion(r)) for r in range(out.num_samples)]
    for r, want in enumerate(ref["logprobs"](params, rows, temperature)):
        np.testing.assert_allclose(out.logprobs[r, : out.lengths[r]], want, atol=1e-4)


@pytest.mark.slow
def test_rollouts_are_the_jax_models_greedy_tokens_with_its_logprobs_and_stop_reasons(sglang_server, reference):
    server, _ = sglang_server
    ref, (first, second) = reference, reference["continuations"]
    stop = first[1]  # a token early in prompt 0's greedy continuation and absent from prompt 1's first 8
    assert stop not in second[:8]
    engine = _engine(server.url, ref, stop_ids=[ref["tokenizer"].eos_id, stop])
    out = engine.generate(ref["prompts"], n=2, max_new_tokens=8, temperature=0.0)
    assert out.prompt_index.tolist() == [0, 0, 1, 1] and out.prompt_ids == ref["prompts"]
    assert out.finish_reason == ["stop", "stop", "length", "length"]
    want = [first[: first.index(stop) + 1]] * 2 + [second[:8]] * 2  # a stopped row keeps its stop token
    assert [out.completion(r) for r in range(4)] == want
    assert out.texts == [ref["tokenizer"].decode(w) for w in want]
    _assert_logprobs(out, ref, ref["params"])
    assert (out.tokens[0, out.lengths[0]:] == engine.pad_id).all()
    engine.close()


@pytest.mark.slow
def test_samples_are_grouped_prompt_major_with_the_policys_tempered_logprobs(sglang_server, reference):
    server, _ = sglang_server
    engine = _engine(server.url, reference, chunk_rows=4)  # 6 rows: two requests
    out = engine.generate(reference["prompts"], n=3, max_new_tokens=6, temperature=0.7)
    assert out.prompt_index.tolist() == [0, 0, 0, 1, 1, 1] and engine.metrics["chunks"] == 2
    assert len({tuple(out.completion(r)) for r in range(6)}) > 2  # n samples, not n copies
    _assert_logprobs(out, reference, reference["params"], 0.7)  # each row's own prompt's, at T = 0.7
    engine.close()


def _running(url) -> int:
    return sum(load["num_running_reqs"] for load in httpx.get(f"{url}/v1/loads", timeout=10).json()["loads"])


@pytest.mark.slow
def test_a_row_aborted_by_a_pause_is_sampled_again_once_generation_continues(sglang_server, reference):
    """The weight sync's /pause_generation (mode abort) returns the running request with finish_reason abort and
    its partial tokens; the engine retries it, the retry waits while the server is paused, and the rollout is the
    whole greedy continuation."""
    server, _ = sglang_server
    engine = _engine(server.url, reference)
    result = {}
    worker = threading.Thread(target=lambda: result.update(out=engine.generate(
        reference["prompts"][1:], max_new_tokens=24, temperature=0.0)))
    worker.start()
    deadline = time.monotonic() + 60
    while not _running(server.url):
        assert time.monotonic() < deadline and worker.is_alive(), "the request never ran"
        time.sleep(0.02)
    paused = httpx.post(f"{server.url}/pause_generation", json={"mode": "abort"}, timeout=30)
    assert paused.json() == {"message": "Generation paused successfully.", "status": "ok"}
    time.sleep(1.0)
    assert worker.is_alive()  # the retry waits for /continue_generation
    httpx.post(f"{server.url}/continue_generation", json={}, timeout=30).raise_for_status()
    worker.join(120)
    out = result["out"]
    assert engine.metrics["retries"] == 1 and out.finish_reason == ["length"] and out.lengths.tolist() == [24]
    assert out.completion(0)[:STEPS] == reference["continuations"][1]
    _assert_logprobs(out, reference, reference["params"])
    engine.close()


@pytest.mark.slow
def test_the_judge_scores_through_sglangs_openai_routes_with_the_verdict_schema(sglang_server):
    """json_schema structured output (SGLang's xgrammar) makes every answer of SmolLM2, which rambles when left
    free, parse as a verdict."""
    server, _ = sglang_server
    task = Task("fever", "medical", ({"role": "user", "content": "My child has a fever of 38.5 C. What should I do?"},),
                (Criterion("fever/0", "Advises giving fluids.", 5.0), Criterion("fever/1", "Mentions paracetamol.", 3.0),
                 Criterion("fever/2", "Tells the parent to give aspirin to the child.", -5.0)))
    with OpenAIJudge(f"{server.url}/v1", "smollm2", structured_output="json_schema", max_tokens=48,
                     explanation_max_chars=40, temperature=0.0, timeout_s=120, max_retries=1,
                     max_concurrency=3) as judge:
        m = judge.score(task, ["Give plenty of fluids and paracetamol; see a doctor if it lasts."])
        stats = judge.stats
    assert (m.status == OK).all(), m.records()
    assert np.isin(m.verdicts, (0.0, 1.0)).all()
    assert stats["requests"] == 3 and stats["input_tokens"] > 0 and stats["output_tokens"] > 0


@pytest.fixture
def restore(sglang_server):
    """Put the session's server back on the exported SmolLM2 after a test that moves it."""
    yield
    server, model_dir = sglang_server
    r = httpx.post(f"{server.url}/update_weights_from_disk", json={"model_path": model_dir}, timeout=300)
    assert r.json()["success"], r.text


@pytest.mark.slow
def test_a_checkpoint_the_real_server_cannot_load_raises_and_the_old_weights_stay(sglang_server, reference,
                                                                                   tmp_path, monkeypatch, restore):
    server, _ = sglang_server
    engine = _engine(server.url, reference, weights_dir=str(tmp_path), stop_ids=[reference["tokenizer"].eos_id])
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
    assert httpx.get(f"{server.url}/model_info", timeout=10).json()["weight_version"] == version
    out = engine.generate(reference["prompts"], max_new_tokens=STEPS, temperature=0.0)  # served, not left paused
    assert [out.completion(r) for r in range(2)] == reference["continuations"]
    engine.close()


@pytest.fixture(scope="module")
def serve_py(sglang_server, tmp_path_factory):
    """launch/serve.py (the JAX engine behind SGLang's native API) serving the same directory, with the real
    server's context length; its URL."""
    _, model_dir = sglang_server
    port = cpu_server.free_port()
    log = open(tmp_path_factory.mktemp("serve_py") / "serve.log", "w+")
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "launch", "serve.py"), f"--model={model_dir}",
                             f"--port={port}", "--context_length=2048", "--prompt_bucket=16"],
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
    r = httpx.post(f"{url}/update_weights_from_disk", json={"model_path": path, "weight_version": version},
                   timeout=300)
    assert r.json()["success"], r.text


@pytest.mark.slow
def test_weight_updates_move_the_real_server_and_serve_py_together_with_version_checks(sglang_server, serve_py,
                                                                                      reference, tmp_path, restore):
    server, model_dir = sglang_server
    for url in (server.url, serve_py):
        _load(url, model_dir, "0")  # both serve version "0", whatever the tests before did
    engine = _engine([server.url, serve_py], reference, weights_dir=str(tmp_path), chunk_rows=1)
    assert engine.expected_version == "0"
    before = engine.generate(reference["prompts"], max_new_tokens=STEPS, temperature=0.0)
    assert [before.completion(r) for r in range(2)] == reference["continuations"]
    new = jax.tree.map(lambda a: a * 1.05, reference["params"])
    engine.update_weights(new)
    for url in (server.url, serve_py):
        assert httpx.get(f"{url}/model_info", timeout=10).json()["weight_version"] == "1"
    assert os.listdir(tmp_path) == ["v000001"]
    after = engine.generate(reference["prompts"], max_new_tokens=STEPS, temperature=0.0)
    assert [after.completion(r) for r in range(2)] == reference["greedy"](new, reference["prompts"])
    assert after.tokens.tolist() != before.tokens.tolist()
    _assert_logprobs(after, reference, new)
    for url in (server.url, serve_py):  # both servers moved by someone else: every row is refused
        _load(url, str(tmp_path / "v000001"), "7")
    with pytest.raises(SGLangError, match="weight version '7', expected '1'"):
        engine.generate(reference["prompts"], max_new_tokens=2, temperature=0.0)
    engine.close()
