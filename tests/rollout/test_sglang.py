"""SGLangEngine against the stand-in (rollout/server.py: the JAX engine behind SGLang's native API, in this process)
with a tiny random Qwen3.5 policy, for what the real server (test_sglang_server.py) cannot be made to show: the exact
requests the engine sends, injected faults, a deterministic server, old checkpoints deleted, two jax.distributed
processes. The in-process JaxEngine on the same weights is the reference for every rollout."""

import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from harnessrl_jax.models import init_params, preset_config
from harnessrl_jax.rollout import JaxEngine, SGLangEngine, SGLangError
from harnessrl_jax.rollout.server import NativeServer
from harnessrl_jax.rubric.judges.local_server import free_port

VOCAB, STOP = 256, 255
CONFIG = preset_config("qwen3.5-tiny").replace(vocab_size=VOCAB, chunk_size=16, max_position_embeddings=64)
PROMPTS = [[5, 17, 42, 9], [100, 3, 7, 250, 11, 12, 13], [60]]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _params(seed):
    # Large weights: sharp distributions, so greedy rows differ between prompts and between weight versions.
    return init_params(CONFIG, jax.random.PRNGKey(seed), std=0.5)


def _engine(params):
    return JaxEngine(CONFIG, params, stop_ids=[STOP], pad_id=0, prompt_bucket=16)


def _client(servers, **kw):
    kw = {"stop_ids": [STOP], "pad_id": 0, "backoff_s": 0.01, **kw}
    return SGLangEngine([s.url for s in servers], **kw)


@pytest.fixture(scope="module")
def policy():
    return _params(0)


@pytest.fixture
def servers(policy):
    started = [NativeServer(_engine(policy)).start() for _ in range(2)]
    yield started
    for s in started:
        s.close()


def _generates(server):
    return [body for method, path, body in server.requests if path == "/generate"]


def _assert_same(got, want):
    np.testing.assert_array_equal(got.tokens, want.tokens)
    np.testing.assert_array_equal(got.lengths, want.lengths)
    np.testing.assert_array_equal(got.prompt_index, want.prompt_index)
    assert got.finish_reason == want.finish_reason
    np.testing.assert_allclose(got.logprobs, want.logprobs, atol=1e-5)


# Every engine call below (servers and reference) is a batch of 3-4 rows with 8 new tokens: one compiled sampler.
def _greedy(engine, n=1):
    return engine.generate(PROMPTS, n=n, max_new_tokens=8, temperature=0.0)


def _repeat(rollouts, n):
    """Greedy rollouts of n = 1 as the n-sample rollouts of the same prompts (every sample is the greedy one)."""
    take = lambda x: np.repeat(x, n, axis=0)
    return rollouts.__class__(rollouts.prompt_ids, take(rollouts.prompt_index), take(rollouts.tokens),
                              take(rollouts.logprobs), take(rollouts.lengths),
                              [f for f in rollouts.finish_reason for _ in range(n)],
                              [t for t in rollouts.texts for _ in range(n)])


def test_the_engine_sends_every_sampling_setting_and_spreads_chunks_over_the_servers(policy, servers):
    client = _client(servers, chunk_rows=3)  # 6 rows: two chunks, spread over the two servers
    got = _greedy(client, n=2)
    _assert_same(got, _repeat(_greedy(_engine(policy)), 2))
    assert got.prompt_ids == PROMPTS and len({tuple(got.completion(r)) for r in range(6)}) == 3
    assert all(_generates(s) for s in servers)
    body = _generates(servers[0])[0]
    assert body["return_logprob"] is True and body["logprob_start_len"] == -1
    assert body["sampling_params"] == {"max_new_tokens": 8, "temperature": 0.0, "top_p": 1.0, "top_k": -1,
                                       "stop_token_ids": [STOP], "skip_special_tokens": True, "no_stop_trim": False}
    client.close()


def test_a_deterministic_server_gets_a_seed_per_row(policy):
    with NativeServer(_engine(policy), deterministic=True) as server:
        client = _client([server])
        first = client.generate(PROMPTS[:1], n=3, max_new_tokens=8, temperature=1.0, seed=11)
        again = client.generate(PROMPTS[:1], n=3, max_new_tokens=8, temperature=1.0, seed=11)
        seeds = [p["sampling_seed"] for p in _generates(server)[0]["sampling_params"]]
        assert len(set(seeds)) == 3  # without them SGLang would return three identical rows
        np.testing.assert_array_equal(first.tokens, again.tokens)
        client.close()


def test_update_weights_moves_every_server_and_changes_the_outputs(policy, servers, tmp_path):
    client = _client(servers, model_config=CONFIG, weights_dir=str(tmp_path), export_dtype="float32")
    before = _greedy(client)
    new = _params(1)
    client.update_weights(new)
    assert [s.weight_version for s in servers] == ["1", "1"] and os.listdir(tmp_path) == ["v000001"]
    # Generation paused, weights loaded with a cache flush, the version checked, generation resumed.
    control = [(p, b) for _, p, b in servers[0].requests if p != "/generate"]
    assert [p for p, _ in control][-4:] == ["/pause_generation", "/update_weights_from_disk", "/model_info",
                                            "/continue_generation"]
    assert control[-3][1] == {"model_path": str(tmp_path / "v000001"), "weight_version": "1",
                              "flush_cache": True, "abort_all_requests": False}
    after = _greedy(client)
    _assert_same(after, _greedy(_engine(new)))
    assert not np.array_equal(after.tokens, before.tokens)
    client.update_weights(policy)
    client.update_weights(new)  # the previous version stays until every server has confirmed the next
    assert sorted(os.listdir(tmp_path)) == ["v000002", "v000003"]
    servers[1].weight_version = "7"  # a server that moved without this engine
    client.chunk_rows = 1  # every server gets a row
    with pytest.raises(SGLangError, match="weight version '7'"):
        _greedy(client)
    client.close()


def test_transient_failures_are_retried_on_another_server(policy, servers):
    want = _repeat(_greedy(_engine(policy)), 2)
    client = _client(servers, chunk_rows=3, max_retries=4, timeout_s=5.0)
    _greedy(client, n=2)  # compiled: the timeout below is the hang's
    # Two chunks start on the two servers; a failed attempt is retried on the other server.
    servers[0].inject_faults(1, "reset")
    servers[0].inject_faults(1, "503")
    servers[1].inject_faults(1, "hang")
    servers[1].inject_faults(1, "503")
    _assert_same(_greedy(client, n=2), want)
    assert client.metrics["retries"] == 4 and not servers[0]._faults and not servers[1]._faults
    servers[1].close()  # one server down: the other takes every chunk
    _assert_same(_greedy(client, n=2), want)
    # A request the server refuses (400) is a bug, not a hiccup: raised at once with the server's message.
    calls = len(_generates(servers[0]))
    with pytest.raises(SGLangError, match="longer than the model's context length"):
        client.generate([[1] * 70], n=1, max_new_tokens=4)
    assert len(_generates(servers[0])) == calls + 1
    client.close()


def multihost_worker(process_id: int, port: int, url: str, weights_dir: str, out: str) -> None:
    """One of two processes of a jax.distributed run: both export their share of the sharded params, process 0
    moves the server, both get process 0's rollouts."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("launch_train", os.path.join(ROOT, "launch", "train.py"))
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    train.initialize_distributed(f"localhost:{port}", 2, process_id)
    from harnessrl_jax.models.sharding import make_mesh, shard_params

    assert jax.process_count() == 2
    params = shard_params(CONFIG, _params(1), make_mesh(1, 2, 1))  # every weight split across the two processes
    client = SGLangEngine(url, stop_ids=[STOP], pad_id=0, model_config=CONFIG, weights_dir=weights_dir,
                          export_dtype="float32")
    client.update_weights(params)
    np.save(f"{out}.{process_id}.npy", _greedy(client).tokens)
    client.close()
    jax.distributed.shutdown()


def test_two_processes_share_the_export_and_get_the_same_rollouts(policy, tmp_path):
    with NativeServer(_engine(policy)) as server:
        env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=1", "JAX_PLATFORMS": "cpu",
               "PYTHONPATH": ROOT}  # this checkout's package, whatever is installed
        port, out = free_port(), str(tmp_path / "tokens")
        procs = [subprocess.Popen([sys.executable, __file__, str(i), str(port), server.url, str(tmp_path / "w"), out],
                                  cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for i in range(2)]
        try:
            logs = [p.communicate(timeout=300)[0] for p in procs]
        finally:
            for p in procs:
                p.kill()
        for p, log in zip(procs, logs):
            assert p.returncode == 0, log[-4000:]
        assert server.weight_version == "1"
    files = sorted(os.listdir(tmp_path / "w" / "v000001"))
    assert {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
            "model.safetensors.index.json", "config.json"} <= set(files)
    want = _greedy(_engine(_params(1))).tokens
    for i in range(2):
        np.testing.assert_array_equal(np.load(f"{out}.{i}.npy"), want)


if __name__ == "__main__":
    multihost_worker(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5])
