"""`SGLangEngine`: rollouts from SGLang servers over their native API, weights pushed through disk.

generate: prompts (token ids) are expanded to rows prompt-major (row i*n + j is sample j of prompt i) and sent in
chunks of `chunk_rows` rows to POST /generate, each row its own prompt with n = 1 (SGLang's radix cache shares the
prompt prefix; this avoids its serial warm-up of n > 1 batches and allows a seed per row). Every request says
everything that decides a sample (max_new_tokens, which SGLang otherwise caps at 128, temperature, top_p, top_k,
the stop ids) and asks for the sampled tokens' logprobs, read from meta_info.output_token_logprobs. Chunks go to
the least busy server; connection failures, timeouts, 408/429/5xx answers and aborted rows are retried with
exponential backoff on another server where there is one; any other error is raised with the server's message.
Every row's meta_info.weight_version must be the version this engine last moved the servers to.

update_weights: writes a versioned HF checkpoint `weights_dir/v000012` (models/export.py: a temporary directory
renamed into place; on several processes each writes its share), then moves every server to it in parallel:
/pause_generation, /update_weights_from_disk with the version and a cache flush, a check of /model_info's
weight_version, /continue_generation. Older checkpoints are deleted once every server has confirmed, keeping the
previous one (SGLang reloads it if a load fails). `"success": false` raises.

Multi-host: process 0 talks to the servers and broadcasts the rollouts, so every process gets the same rows.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import random
import re
import shutil
import threading
import time
import uuid
from typing import Sequence

import httpx
import numpy as np

from harnessrl_jax.rollout.base import Rollouts, checked_prompts

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_VERSION_DIR = re.compile(r"^v(\d{6,})$")


class SGLangError(RuntimeError):
    """A server refused a request, or answered something this engine cannot use."""


class _Transient(Exception):
    """One attempt failed in a way worth retrying elsewhere."""


def split_urls(base_url: str | Sequence[str]) -> list[str]:
    """Server URLs from a list or a comma-separated string, without trailing slashes."""
    urls = base_url.split(",") if isinstance(base_url, str) else list(base_url)
    urls = [u.strip().rstrip("/") for u in urls if u and u.strip()]
    if not urls:
        raise ValueError("no server URL given")
    return urls


class SGLangEngine:
    """A `RolloutEngine` over one or more SGLang servers (see the module docstring).

    base_url: one URL, a list, or a comma-separated string (each server's root, e.g. http://node7:30000).
    tokenizer: decodes texts locally (skip special tokens) and encodes text prompts; stop_ids default to its EOS.
    model_config, weights_dir: needed by update_weights (what to export, and where); base_model_dir: the HF
    snapshot the policy came from, whose other towers and config a multimodal Qwen3.5 export copies.
    """

    def __init__(self, base_url: str | Sequence[str], tokenizer=None, *, stop_ids: Sequence[int] | None = None,
                 model_config=None, weights_dir: str | None = None, base_model_dir: str | None = None,
                 pad_id: int | None = None, export_dtype: str = "bfloat16", chunk_rows: int = 64,
                 max_inflight_per_server: int = 4, timeout_s: float = 3600.0, max_retries: int = 5,
                 backoff_s: float = 1.0, max_backoff_s: float = 60.0, startup_timeout_s: float = 600.0):
        if tokenizer is None and not stop_ids:
            raise ValueError("SGLangEngine needs a tokenizer or explicit stop_ids")
        self.urls = split_urls(base_url)
        self.tokenizer = tokenizer
        self.stop_ids = tuple(int(s) for s in (stop_ids if stop_ids else (tokenizer.eos_id,)))
        self.eos_id = int(tokenizer.eos_id if tokenizer is not None else self.stop_ids[0])
        self.pad_id = int(pad_id if pad_id is not None else
                          (tokenizer.pad_id if tokenizer is not None and tokenizer.pad_id is not None else self.eos_id))
        self.model_config = model_config
        self.weights_dir = weights_dir
        self.base_model_dir = base_model_dir
        self.export_dtype = export_dtype
        self.chunk_rows = int(chunk_rows)
        self.max_retries, self.backoff_s, self.max_backoff_s = max_retries, backoff_s, max_backoff_s
        self.metrics: dict[str, float] = {}
        self._inflight = {u: 0 for u in self.urls}
        self._lock = threading.Lock()
        self._rng = random.Random()
        self._warned_seed = False
        self._leader = _process_index() == 0
        self._client = httpx.Client(timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0)),
                                    limits=httpx.Limits(max_connections=len(self.urls) * max_inflight_per_server))
        self._workers = len(self.urls) * max_inflight_per_server
        self.deterministic = False
        self.expected_version = ""
        if self._leader:
            self._probe(startup_timeout_s)
        self._version = int(self.expected_version) if self.expected_version.isdigit() else 0
        if _process_count() > 1:  # every process names the next checkpoint directory the same
            from jax.experimental import multihost_utils

            self._version = int(multihost_utils.broadcast_one_to_all(np.int64(self._version)))

    def close(self) -> None:
        self._client.close()

    # ------------------------------------------------------------------------------------------ servers

    def _get_json(self, url: str, *paths: str) -> dict:
        """GET the first of `paths` the server knows (SGLang renamed several routes)."""
        for path in paths:
            r = self._client.get(url + path)
            if r.status_code != 404:
                _raise_for(r, url + path)
                return r.json()
        raise SGLangError(f"{url}: none of {', '.join(paths)} exists")

    def _probe(self, startup_timeout_s: float) -> None:
        """Wait for every server, read its weight version and deterministic mode; they must agree."""
        versions, deterministic = {}, set()
        for url in self.urls:
            deadline = time.monotonic() + startup_timeout_s
            while True:
                try:
                    if self._client.get(url + "/health", timeout=5.0).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise SGLangError(f"{url}: not healthy after {startup_timeout_s:g}s (is the server started?)")
                time.sleep(1.0)
            info = self._get_json(url, "/model_info", "/get_model_info")
            server = self._get_json(url, "/server_info", "/get_server_info")
            versions[url] = str(info.get("weight_version", "default"))
            deterministic.add(bool(server.get("enable_deterministic_inference", False)))
            want = getattr(self.model_config, "model_type", None)
            if want and info.get("model_type") and info["model_type"] != want:
                raise SGLangEngine._mismatch(url, info["model_type"], want)
        if len(set(versions.values())) > 1:
            raise SGLangError(f"servers serve different weight versions: {versions}")
        self.expected_version = next(iter(versions.values()))
        self.deterministic = deterministic == {True}

    @staticmethod
    def _mismatch(url, served, want):
        return SGLangError(f"{url} serves model_type {served!r}, the trainer's model is {want!r}")

    def _pick(self, avoid: str | None) -> str:
        with self._lock:
            candidates = [u for u in self.urls if u != avoid] or self.urls
            url = min(candidates, key=lambda u: (self._inflight[u], self._rng.random()))
            self._inflight[url] += 1
            return url

    def _release(self, url: str) -> None:
        with self._lock:
            self._inflight[url] -= 1

    def _backoff(self, attempt: int) -> float:
        d = min(self.max_backoff_s, self.backoff_s * 2 ** attempt)
        return d / 2 + self._rng.uniform(0, d / 2)

    def _post_chunk(self, payload: dict, rows: int) -> list[dict]:
        """POST one chunk to /generate with retries; the answer's rows."""
        failed, last = None, None
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(self._backoff(attempt - 1))
            url = self._pick(avoid=failed)
            try:
                try:
                    r = self._client.post(url + "/generate", json=payload)
                except httpx.TransportError as e:  # refused, reset, timed out
                    raise _Transient(f"{url}: {type(e).__name__}: {e}") from None
                if r.status_code in RETRY_STATUS:
                    raise _Transient(f"{url}: HTTP {r.status_code}: {r.text[:300]}")
                _raise_for(r, url + "/generate")
                items = r.json()
                items = items if isinstance(items, list) else [items]
                if len(items) != rows:
                    raise SGLangError(f"{url}: /generate answered {len(items)} rows for {rows}")
                aborted = [it["meta_info"].get("finish_reason", {}).get("message", "") for it in items
                           if (it["meta_info"].get("finish_reason") or {}).get("type") == "abort"]
                if aborted:
                    raise _Transient(f"{url}: {len(aborted)} rows aborted ({aborted[0]})")
                return items
            except _Transient as e:
                failed, last = url, e
                self.metrics["retries"] = self.metrics.get("retries", 0) + 1
                log.warning("SGLang chunk attempt %d failed: %s", attempt + 1, e)
            finally:
                self._release(url)
        raise SGLangError(f"/generate failed after {self.max_retries + 1} attempts; last: {last}")

    # ------------------------------------------------------------------------------------------ generate

    def generate(self, prompts, n: int = 1, *, max_new_tokens: int, temperature: float = 1.0, top_p: float = 1.0,
                 top_k: int = 0, seed: int = 0) -> Rollouts:
        """n samples of every prompt from the servers; see `Rollouts` and the module docstring."""
        # Ids outside the vocabulary are refused here: they stop a real SGLang 0.5.23 server's scheduler.
        prompt_ids = checked_prompts(prompts, self.tokenizer, n=n, max_new_tokens=max_new_tokens, top_p=top_p,
                                     vocab_size=getattr(self.model_config, "vocab_size", None))
        if _process_count() > 1:
            return _broadcast(self._generate(prompt_ids, n, max_new_tokens, temperature, top_p, top_k, seed)
                              if self._leader else None)
        return self._generate(prompt_ids, n, max_new_tokens, temperature, top_p, top_k, seed)

    def _generate(self, prompt_ids, n, max_new_tokens, temperature, top_p, top_k, seed) -> Rollouts:
        params = {"max_new_tokens": int(max_new_tokens), "temperature": float(temperature), "top_p": float(top_p),
                  "top_k": int(top_k) if top_k and top_k > 0 else -1, "stop_token_ids": list(self.stop_ids),
                  "skip_special_tokens": True, "no_stop_trim": False}
        rows = [(i, j) for i in range(len(prompt_ids)) for j in range(n)]
        if not self.deterministic and not self._warned_seed and temperature > 0:
            log.warning("SGLang servers are not in deterministic mode: the seed cannot be honoured")
            self._warned_seed = True
        request = uuid.uuid4().hex[:12]
        chunks = []
        for c, start in enumerate(range(0, len(rows), self.chunk_rows)):
            part = rows[start:start + self.chunk_rows]
            payload = {"input_ids": [prompt_ids[i] for i, _ in part], "return_logprob": True,
                       "logprob_start_len": -1, "rid": [f"{request}-{c}-{k}" for k in range(len(part))]}
            if self.deterministic:  # a seed per row, or rows of one prompt would be identical
                payload["sampling_params"] = [dict(params, sampling_seed=_row_seed(seed, i, j)) for i, j in part]
            else:
                payload["sampling_params"] = params
            chunks.append((payload, len(part)))
        t0 = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(min(self._workers, len(chunks))) as pool:
            answers = list(pool.map(lambda c: self._post_chunk(*c), chunks))
        items = [it for answer in answers for it in answer]

        tokens = np.full((len(rows), max_new_tokens), self.pad_id, np.int32)
        logprobs = np.zeros((len(rows), max_new_tokens), np.float32)
        lengths = np.zeros(len(rows), np.int32)
        finish, texts, latency, cached = [], [], [], 0
        for r, item in enumerate(items):
            meta = item["meta_info"]
            version = str(meta.get("weight_version"))
            if version != self.expected_version:
                raise SGLangError(f"row {r} was sampled with weight version {version!r}, expected "
                                  f"{self.expected_version!r} (a server missed a weight update)")
            triples = meta.get("output_token_logprobs")
            if triples is None:
                raise SGLangError(f"row {r}: meta_info has no output_token_logprobs")
            ids = [int(t) for _, t, _ in triples]
            if "output_ids" in item and list(item["output_ids"]) != ids:
                raise SGLangError(f"row {r}: output_ids and output_token_logprobs disagree")
            if len(ids) > max_new_tokens:
                raise SGLangError(f"row {r}: {len(ids)} tokens for max_new_tokens={max_new_tokens}")
            reason = (meta.get("finish_reason") or {}).get("type")
            if reason not in ("stop", "length"):
                raise SGLangError(f"row {r}: unexpected finish_reason {meta.get('finish_reason')!r}")
            tokens[r, : len(ids)] = ids
            logprobs[r, : len(ids)] = [float(lp) for lp, _, _ in triples]
            lengths[r] = len(ids)
            finish.append(reason)
            texts.append(self.tokenizer.decode(ids, skip_special_tokens=True) if self.tokenizer is not None
                         else item.get("text", ""))
            latency.append(float(meta.get("e2e_latency", 0.0)))
            cached += int(meta.get("cached_tokens", 0))
        self.metrics.update({"rows": len(rows), "chunks": len(chunks), "cached_tokens": cached,
                             "e2e_latency_mean": float(np.mean(latency)), "time": time.perf_counter() - t0})
        return Rollouts(prompt_ids=prompt_ids, prompt_index=np.repeat(np.arange(len(prompt_ids)), n),
                        tokens=tokens, logprobs=logprobs, lengths=lengths, finish_reason=finish, texts=texts)

    # ------------------------------------------------------------------------------------- weight sync

    def update_weights(self, params) -> None:
        """Export `params` as the next version and move every server to it (see the module docstring)."""
        if self.model_config is None or not self.weights_dir:
            raise ValueError("SGLangEngine.update_weights needs model_config and weights_dir")
        from harnessrl_jax.models.export import export_hf

        version = self._version + 1
        final = os.path.join(self.weights_dir, f"v{version:06d}")
        tmp = os.path.join(self.weights_dir, f".v{version:06d}.tmp")
        if self._leader:
            for stale in (tmp, final):  # left by an interrupted run
                shutil.rmtree(stale, ignore_errors=True)
        _barrier("sglang_export_start")
        t0 = time.perf_counter()
        export_hf(self.model_config, params, tmp, self.tokenizer, dtype=self.export_dtype,
                  base_dir=self.base_model_dir)
        _barrier("sglang_export_written")
        write_s = time.perf_counter() - t0
        failures = []
        if self._leader:
            os.replace(tmp, final)
            t0 = time.perf_counter()
            with concurrent.futures.ThreadPoolExecutor(len(self.urls)) as pool:
                failures = [msg for msg in pool.map(lambda u: self._move(u, final, str(version)), self.urls) if msg]
            self.metrics.update({"sync/write_s": write_s, "sync/reload_s": time.perf_counter() - t0})
        _barrier("sglang_update_done")
        if failures:  # servers that did move now serve `version`; their rows fail the version check until fixed
            raise SGLangError(f"weight update to {final} failed: " + "; ".join(failures))
        self._version = version
        self.expected_version = str(version)
        if self._leader:
            self._delete_before(version - 1)

    def _post(self, url: str, path: str, body: dict) -> httpx.Response:
        """POST with retries on transient failures (the answer of the last attempt)."""
        for attempt in range(self.max_retries + 1):
            try:
                r = self._client.post(url + path, json=body)
                if r.status_code not in RETRY_STATUS or attempt == self.max_retries:
                    return r
            except httpx.TransportError:
                if attempt == self.max_retries:
                    raise
            time.sleep(self._backoff(attempt))
        raise AssertionError("unreachable")

    def _move(self, url: str, path: str, version: str) -> str | None:
        """Move one server to the checkpoint at `path`; None on success, else what went wrong."""
        try:
            r = self._post(url, "/pause_generation", {"mode": "abort"})
            if r.status_code not in (200, 404):  # 404: an SGLang without pause; the update then waits itself
                return f"{url}: /pause_generation: HTTP {r.status_code}: {r.text[:300]}"
            try:
                r = self._post(url, "/update_weights_from_disk",
                               {"model_path": path, "weight_version": version, "flush_cache": True,
                                "abort_all_requests": False})
                body = _json_or_none(r)
                if r.status_code != 200 or not isinstance(body, dict) or body.get("success") is not True:
                    message = body.get("message") if isinstance(body, dict) else r.text[:300]
                    return f"{url}: /update_weights_from_disk: HTTP {r.status_code}: {message}"
                served = str(self._get_json(url, "/model_info", "/get_model_info").get("weight_version"))
                if served != version:
                    return f"{url}: reports weight version {served!r} after the update to {version!r}"
            finally:
                self._post(url, "/continue_generation", {})
        except (httpx.HTTPError, SGLangError) as e:
            return f"{url}: {type(e).__name__}: {e}"
        return None

    def _delete_before(self, keep_from: int) -> None:
        """Delete version directories older than `keep_from`."""
        for name in os.listdir(self.weights_dir):
            m = _VERSION_DIR.match(name)
            if m and int(m.group(1)) < keep_from:
                shutil.rmtree(os.path.join(self.weights_dir, name), ignore_errors=True)


def _raise_for(r: httpx.Response, where: str) -> None:
    if r.status_code == 200:
        return
    body = _json_or_none(r)
    message = body.get("error", {}).get("message") if isinstance(body, dict) and isinstance(
        body.get("error"), dict) else r.text[:500]
    raise SGLangError(f"{where}: HTTP {r.status_code}: {message}")


def _json_or_none(r: httpx.Response):
    try:
        return r.json()
    except ValueError:
        return None


def _row_seed(seed: int, i: int, j: int) -> int:
    # Distinct, reproducible and within SGLang's int range for every (step seed, prompt, sample).
    return (seed * 1_000_003 + i * 9_176 + j) % (2**31 - 1)


def _process_index() -> int:
    import jax

    return jax.process_index()


def _process_count() -> int:
    import jax

    return jax.process_count()


def _barrier(name: str) -> None:
    if _process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


def _broadcast(rollouts: Rollouts | None) -> Rollouts:
    """Process 0's rollouts on every process (pickled bytes: the length first, then the payload)."""
    import pickle

    from jax.experimental import multihost_utils

    data = np.frombuffer(pickle.dumps(rollouts), np.uint8) if rollouts is not None else np.zeros(0, np.uint8)
    size = int(multihost_utils.broadcast_one_to_all(np.int64(data.size)))
    buf = np.zeros(size, np.uint8)
    buf[: data.size] = data
    return pickle.loads(np.asarray(multihost_utils.broadcast_one_to_all(buf)).tobytes())
