"""The in-process JAX engine behind SGLang's native HTTP API: the routes and JSON shapes an SGLang client uses.

It lets `SGLangEngine` be tested against a real HTTP server on a CPU machine, and serves a JAX policy to any
client written for SGLang (`launch/serve.py`). What it reproduces, from SGLang's `http_server.py`, `io_struct.py`
and `sampling_params.py` (see the sglang spec):

  POST /generate             input_ids (one list or a batch) or text (input_ids win when both are sent);
                             sampling_params as one dict or one per prompt; n expanded prompt-major; a single object
                             back for one prompt with n = 1, a list otherwise; a string rid suffixed _i for a batch
                             (ignored, as SGLang does, when n > 1); max_new_tokens 128 when omitted; a prompt
                             whose length plus max_new_tokens exceeds the context is refused; temperature < 1e-6
                             is greedy with T = 1 logprobs; stop on stop_token_ids and the model's EOS unless
                             ignore_eos; output_token_logprobs as [logprob, id, null] triples (the stop token
                             included), input_token_logprobs with entry 0 null when logprob_start_len >= 0 (an
                             empty list otherwise); sampling_seed read only when the server is deterministic
                             (then the rows of a request are sampled from one key derived from all their seeds, so
                             the same request gives the same rows; SGLang seeds each row alone); bad requests are
                             400 {"error": {"message"}},
                             an unknown sampling parameter 400 {"error": "unknown field ..."} and a body that is not
                             JSON 400 in the OpenAI error shape, each as SGLang 0.5.23 answers them.
  POST /update_weights_from_disk   loads an HF directory with this project's loader; on any failure keeps the
                             old weights and answers 400 {"success": false}; sets weight_version (then in every
                             meta_info and /model_info); waits for the request in flight.
  POST /pause_generation, /continue_generation   while paused, /generate requests wait.
  GET|POST /flush_cache      200 text (400 while a request runs); GET /health, /health_generate;
  GET /model_info, /server_info and their older names /get_model_info, /get_server_info.

Not reproduced (tests/rollout/test_sglang_server.py lists every difference from the real server): streaming, stop
strings, grammars, penalties and min_p (a request that sets them is a 400), partial checkpoints and checkpoints of
other shapes (a 400 here), a prefix cache (cached_tokens is 0), aborting a request mid-generation,
/release_memory_occupation and /v1/loads. Token ids outside the vocabulary are a 400 here; they stop a real
SGLang 0.5.23 server's scheduler. `inject_faults` makes the next /generate calls fail (503, a reset connection, or
a hang) for tests of client retries.
"""

from __future__ import annotations

import copy
import dataclasses
import http.server
import json
import logging
import socket
import threading
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from harnessrl_jax.rollout.jax_engine import JaxEngine

log = logging.getLogger(__name__)

VERSION = "harnessrl-jax-stand-in"
DEFAULT_MAX_NEW_TOKENS = 128  # SGLang's SamplingParams default
# Sampling parameters the stand-in honours, and the ones it accepts only at SGLang's default value.
_SUPPORTED = {"max_new_tokens", "temperature", "top_p", "top_k", "n", "stop_token_ids", "ignore_eos",
              "skip_special_tokens", "no_stop_trim", "sampling_seed", "spaces_between_special_tokens",
              "min_new_tokens"}
_DEFAULT_ONLY = {"min_p": 0.0, "frequency_penalty": 0.0, "presence_penalty": 0.0, "repetition_penalty": 1.0,
                 "stop": None, "stop_regex": None, "json_schema": None, "regex": None, "ebnf": None,
                 "structural_tag": None, "logit_bias": None, "custom_params": None, "stream_interval": None}


class BadRequest(ValueError):
    """A request SGLang would refuse with HTTP 400."""


class UnknownField(BadRequest):
    """A sampling parameter SGLang does not know (its 400 carries the message as a plain string)."""


class InvalidBody(BadRequest):
    """A body SGLang's request validation refuses (its 400 is in the OpenAI error shape)."""


def _invalid_body(message: str) -> dict:
    return {"object": "error", "message": message, "type": "Bad Request", "param": None, "code": 400}


@dataclasses.dataclass(frozen=True)
class _Sampling:
    max_new_tokens: int
    temperature: float
    top_p: float
    top_k: int
    stop_ids: tuple[int, ...]
    skip_special_tokens: bool
    no_stop_trim: bool
    seed: int | None


class NativeServer:
    """An SGLang-shaped HTTP server over one JaxEngine, on a background thread; `url` is its address."""

    def __init__(self, engine: JaxEngine, *, host: str = "127.0.0.1", port: int = 0, model_path: str = "",
                 weight_version: str = "default", deterministic: bool = False, context_length: int | None = None):
        self.engine = engine
        self.model_path = model_path
        self.weight_version = weight_version
        self.deterministic = deterministic
        self.context_length = int(context_length or engine.max_context)
        self._lock = threading.Lock()  # one generation or weight update at a time
        self._state = threading.Condition()
        self._paused = False
        self._running = 0
        self._faults: list[str] = []
        self._closed = False
        self._closing = threading.Event()
        self._seed = 0
        self.requests: list[tuple[str, str, Any]] = []  # (method, path, JSON body) of every request, for tests
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                server._handle(self, "GET")

            def do_POST(self):
                server._handle(self, "POST")

        self._httpd = http.server.ThreadingHTTPServer((host, port), Handler)
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "NativeServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._httpd.serve_forever()

    def close(self) -> None:
        with self._state:
            self._closed = True  # kept-alive connections outlive the listener: they are dropped from now on
            self._closing.set()
            self._faults.clear()
            self._paused = False
            self._state.notify_all()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    def inject_faults(self, count: int, kind: str = "503") -> None:
        """Make the next `count` /generate requests fail: '503' (service unavailable), 'reset' (the connection
        closes without an answer) or 'hang' (no answer until the client gives up)."""
        if kind not in ("503", "reset", "hang"):
            raise ValueError(f"fault kind must be '503', 'reset' or 'hang', got {kind!r}")
        with self._state:
            self._faults.extend([kind] * count)

    # ------------------------------------------------------------------------------------------- routing

    def _handle(self, handler, method: str) -> None:
        path = handler.path.split("?", 1)[0]
        raw = handler.rfile.read(int(handler.headers.get("content-length") or 0))
        if self._closed:
            handler.close_connection = True
            return handler.connection.shutdown(socket.SHUT_RDWR)
        try:
            body = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as e:
            return self._send(handler, 400, _invalid_body(f"JSON decode error: {e}"))
        self.requests.append((method, path, body))
        routes = {
            ("POST", "/generate"): self._generate,
            ("POST", "/update_weights_from_disk"): self._update_weights,
            ("POST", "/pause_generation"): self._pause,
            ("POST", "/continue_generation"): self._continue,
            ("POST", "/abort_request"): lambda b: (200, ""),  # requests run to completion here; nothing waits
        }
        for name in ("/health", "/health_generate"):
            routes[("GET", name)] = lambda b: (200, "")
        for name in ("/model_info", "/get_model_info"):
            routes[("GET", name)] = lambda b: (200, self.model_info())
        for name in ("/server_info", "/get_server_info"):
            routes[("GET", name)] = lambda b: (200, self.server_info())
        for m in ("GET", "POST"):
            routes[(m, "/flush_cache")] = self._flush_cache
        route = routes.get((method, path))
        if route is None:
            return self._send(handler, 404, {"detail": "Not Found"})
        if path == "/generate":
            with self._state:
                fault = self._faults.pop(0) if self._faults else None
            if fault == "503":
                return self._send(handler, 503, {"error": {"message": "injected fault: service unavailable"}})
            if fault is not None:
                if fault == "hang":  # until the client gives up (or the server closes)
                    self._closing.wait(30)
                handler.connection.shutdown(socket.SHUT_RDWR)
                handler.close_connection = True
                return None
        try:
            status, payload = route(body)
        except UnknownField as e:
            status, payload = 400, {"error": str(e)}
        except InvalidBody as e:
            status, payload = 400, _invalid_body(str(e))
        except BadRequest as e:
            status, payload = 400, {"error": {"message": str(e)}}
        except Exception as e:  # noqa: BLE001 - a server bug answers 500, as SGLang's would
            log.exception("stand-in server: %s %s failed", method, path)
            status, payload = 500, {"error": {"message": f"{type(e).__name__}: {e}"}}
        return self._send(handler, status, payload)

    @staticmethod
    def _send(handler, status: int, payload: Any) -> None:
        text = payload if isinstance(payload, str) else json.dumps(payload)
        data = text.encode()
        handler.send_response(status)
        handler.send_header("content-type", "text/plain" if isinstance(payload, str) else "application/json")
        handler.send_header("content-length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    # -------------------------------------------------------------------------------------------- info

    def model_info(self) -> dict[str, Any]:
        config = self.engine.config
        from harnessrl_jax.models.export import hf_config

        return {"model_path": self.model_path, "served_model_name": self.model_path,
                "tokenizer_path": self.model_path, "is_generation": True, "preferred_sampling_params": None,
                "weight_version": self.weight_version, "has_image_understanding": False,
                "has_audio_understanding": False, "model_type": config.model_type,
                "architectures": hf_config(config, config.param_dtype).get("architectures")}

    def server_info(self) -> dict[str, Any]:
        return {"version": VERSION, "model_path": self.model_path, "enable_deterministic_inference":
                self.deterministic, "context_length": self.context_length, "tp_size": 1, "dp_size": 1,
                "weight_version": self.weight_version}

    # ---------------------------------------------------------------------------------------- control

    def _pause(self, body):
        if body.get("mode", "abort") not in ("abort", "retract", "in_place"):
            raise BadRequest(f"pause mode must be abort, retract or in_place, got {body.get('mode')!r}")
        with self._state:
            self._paused = True
        return 200, {"message": "Generation paused successfully.", "status": "ok"}

    def _continue(self, body):
        with self._state:
            self._paused = False
            self._state.notify_all()
        return 200, {"message": "Generation continued successfully.", "status": "ok"}

    def _flush_cache(self, body):
        with self._state:
            if self._running:
                return 400, "Flush cache failed.\n"
        return 200, "Cache flushed.\nPlease check backend logs for more details. (When there are running or " \
                    "waiting requests, the operation will not be performed.)\n"

    def _update_weights(self, body):
        from harnessrl_jax.models import loading, param_shapes

        path = body.get("model_path")
        if not path:
            raise BadRequest("model_path is required")
        with self._lock:  # waits for the generation in flight
            try:
                config, params = loading.load_hf_dir(path)
                if param_shapes(config) != param_shapes(self.engine.config):
                    raise ValueError(f"{path}: the checkpoint's shapes differ from the served model's")
            except (OSError, ValueError, KeyError) as e:
                # SGLang reloads the previous weights after a failed load; here they were never replaced.
                return 400, {"success": False, "message": f"Failed to update weights: {e}. Rolling back to "
                                                          f"original weights.", "num_paused_requests": 0}
            dtype = jnp.dtype(self.engine.config.param_dtype)
            self.engine.update_weights(jax.tree.map(lambda a: jnp.asarray(a, dtype), params))
            self.model_path = path
            message = "Succeeded to update model weights."
            if body.get("weight_version") is not None:
                self.weight_version = str(body["weight_version"])
                message += f" Weight version updated to {self.weight_version}."
        return 200, {"success": True, "message": message, "num_paused_requests": 0}

    # -------------------------------------------------------------------------------------- generation

    def _prompts(self, body) -> tuple[list[list[int]], bool]:
        """(prompts, whether the input was a single prompt)."""
        given = [k for k in ("input_ids", "text", "input_embeds") if body.get(k) is not None]
        if not given:
            raise BadRequest("Either text, input_ids or input_embeds should be provided.")
        if given[0] == "input_embeds":
            raise BadRequest("input_embeds is not supported by this server")
        value = body[given[0]]  # SGLang 0.5.23 serves input_ids when text comes too
        if given[0] == "text":
            tokenizer = self.engine.tokenizer
            if tokenizer is None:
                raise BadRequest("text input needs a tokenizer; this server has none (send input_ids)")
            single = isinstance(value, str)
            prompts = [tokenizer.encode(t) for t in ([value] if single else value)]
        else:
            if isinstance(value, list) and not value:
                raise BadRequest("input_ids cannot be empty.")
            if not isinstance(value, list):
                raise BadRequest("input_ids must be a list of token ids or of lists of token ids")
            single = not isinstance(value[0], list)
            prompts = [value] if single else value
        vocab = self.engine.config.vocab_size
        for i, p in enumerate(prompts):
            if not p or not all(isinstance(t, int) and 0 <= t < vocab for t in p):
                raise BadRequest(f"prompt {i}: expected a non-empty list of token ids in [0, {vocab})")
            if len(p) >= self.context_length:
                raise BadRequest(f"The input ({len(p)} tokens) is longer than the model's context length "
                                 f"({self.context_length} tokens).")
        return prompts, single

    def _sampling(self, params: dict, prompt_len: int) -> _Sampling:
        unknown = sorted(set(params) - _SUPPORTED - set(_DEFAULT_ONLY))
        if unknown:
            known = ", ".join(f"`{k}`" for k in sorted(_SUPPORTED | set(_DEFAULT_ONLY)))
            raise UnknownField(f"unknown field `{unknown[0]}`, expected one of {known}")
        for key, default in _DEFAULT_ONLY.items():
            if params.get(key, default) not in (default, [], ""):
                raise BadRequest(f"sampling parameter {key}={params[key]!r} is not supported by this server")
        max_new = params.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)
        temperature = float(params.get("temperature", 1.0))
        top_p, top_k = float(params.get("top_p", 1.0)), int(params.get("top_k", -1))
        if max_new is None or max_new < 0:
            raise BadRequest(f"max_new_tokens must be at least 0, got {max_new}.")
        if not 0.0 < top_p <= 1.0:
            raise BadRequest(f"top_p must be in (0, 1], got {top_p}.")
        if top_k < 1 and top_k != -1:
            raise BadRequest(f"top_k must be -1 (disable) or at least 1, got {top_k}.")
        if not temperature >= 0.0 or temperature == float("inf"):
            raise BadRequest(f"temperature must be a non-negative finite number, got {params.get('temperature')}.")
        if temperature < 1e-6:  # SGLang: greedy is top-k 1 at T = 1
            temperature, top_k = 0.0, 1
        stop = set(int(t) for t in (params.get("stop_token_ids") or ()))
        if not params.get("ignore_eos", False):
            stop.add(self.engine.eos_id)
        seed = params.get("sampling_seed") if self.deterministic else None
        # The engine's top_k 0 means the whole vocabulary; greedy ignores it.
        engine_top_k = 0 if temperature == 0.0 or top_k == -1 else top_k
        if prompt_len + int(max_new) > self.context_length:
            raise BadRequest(f"Requested token count exceeds the model's maximum context length of "
                             f"{self.context_length} tokens. You requested a total of {prompt_len + int(max_new)} "
                             f"tokens: {prompt_len} tokens from the input messages and {int(max_new)} tokens for the "
                             f"completion. Please reduce the number of tokens in the input messages or the "
                             f"completion to fit within the limit.")
        return _Sampling(int(max_new), temperature, top_p, engine_top_k,
                         tuple(sorted(stop)),
                         bool(params.get("skip_special_tokens", True)), bool(params.get("no_stop_trim", False)),
                         None if seed is None else int(seed))

    def _generate(self, body):
        prompts, single = self._prompts(body)
        params = body.get("sampling_params") or {}
        if not isinstance(params, (dict, list)) or isinstance(params, list) and not all(
                isinstance(p, dict) for p in params):
            raise InvalidBody(f"sampling_params: Input should be a valid dictionary or a list of them, got "
                              f"{params!r}")
        per_prompt = params if isinstance(params, list) else [params] * len(prompts)
        if len(per_prompt) != len(prompts):
            raise BadRequest(f"sampling_params has {len(per_prompt)} entries for {len(prompts)} prompts")
        ns = {int(p.get("n", 1)) for p in per_prompt}
        if len(ns) != 1:
            raise BadRequest("The parallel_sample_num should be the same for all samples in sample params.")
        n = ns.pop()
        if n < 1:
            raise BadRequest(f"n must be at least 1, got {n}")
        for key in ("return_logprob", "logprob_start_len", "top_logprobs_num"):
            if n > 1 and isinstance(body.get(key), list):
                raise BadRequest(f"Cannot use list {key} with parallel_sample_num > 1")
        rows = [(i, j) for i in range(len(prompts)) for j in range(n)]  # prompt-major, as SGLang returns them
        rid = body.get("rid")
        if n > 1 and isinstance(rid, str):
            rid = None  # SGLang 0.5.23 gives every sample a fresh id then
        rids = self._rids(rid, len(rows), single and n == 1)
        want = _per_row(body.get("return_logprob", False), prompts, n)
        start = _per_row(body.get("logprob_start_len", -1), prompts, n)
        samplings = [self._sampling(per_prompt[i], len(prompts[i])) for i, _ in rows]

        with self._state:
            while self._paused:
                self._state.wait()
            self._running += 1
        try:
            with self._lock:
                t0 = time.perf_counter()
                outs = self._run(prompts, rows, samplings)
                latency = time.perf_counter() - t0
                inputs = {r: self._input_logprobs(prompts[i], start[r]) for r, (i, _) in enumerate(rows)
                          if want[r] and start[r] >= 0}
        finally:
            with self._state:
                self._running -= 1
        items = []
        for r, (i, _) in enumerate(rows):
            tokens, logprobs, stopped = outs[r]
            s = samplings[r]
            finish = {"type": "stop", "matched": tokens[-1]} if stopped else \
                {"type": "length", "length": s.max_new_tokens}
            shown = tokens[:-1] if stopped and not s.no_stop_trim else tokens
            tokenizer = self.engine.tokenizer
            meta = {"id": rids[r], "finish_reason": finish, "prompt_tokens": len(prompts[i]),
                    "weight_version": self.weight_version, "num_retractions": 0, "reasoning_tokens": 0,
                    "completion_tokens": len(tokens), "cached_tokens": 0,
                    "weight_versions": [{"version": self.weight_version, "start": 0, "end": len(tokens)}],
                    "cached_tokens_details": None, "dp_rank": None, "e2e_latency": latency}
            if want[r]:
                meta["input_token_logprobs"] = inputs.get(r, [])
                meta["output_token_logprobs"] = [[lp, t, None] for lp, t in zip(logprobs, tokens)]
                meta["output_token_logprobs_length"] = len(tokens)
            items.append({"text": tokenizer.decode(shown, s.skip_special_tokens) if tokenizer is not None else "",
                          "output_ids": tokens, "meta_info": meta})
        return 200, items[0] if single and n == 1 else items

    @staticmethod
    def _rids(rid, count: int, single: bool) -> list[str]:
        if rid is None:
            import uuid

            base = uuid.uuid4().hex
            return [base] if single else [f"{base}_{r}" for r in range(count)]
        if isinstance(rid, list):
            if len(rid) != count:
                raise BadRequest("The specified rids length mismatch with the batch_size for batch processing.")
            if len(set(rid)) != count:
                duplicates = sorted({r for r in rid if rid.count(r) > 1})
                raise BadRequest(f"Duplicate request IDs detected within the request: {duplicates}")
            return [str(r) for r in rid]
        return [str(rid)] if single else [f"{rid}_{r}" for r in range(count)]

    def _run(self, prompts, rows, samplings) -> list[tuple[list[int], list[float], bool]]:
        """(tokens, logprobs, stopped) per row; rows with the same settings are sampled in one engine call."""
        groups: dict[_Sampling, list[int]] = {}
        for r, s in enumerate(samplings):
            groups.setdefault(dataclasses.replace(s, seed=None), []).append(r)
        outs: list[Any] = [None] * len(rows)
        for s, members in groups.items():
            if s.max_new_tokens == 0:  # SGLang allows it (a prefill only)
                for r in members:
                    outs[r] = ([], [], False)
                continue
            engine = copy.copy(self.engine)
            engine.stop_ids = s.stop_ids
            seeds = [samplings[r].seed for r in members]
            if None in seeds:
                self._seed += 1
                seed = self._seed
            else:
                seed = int(np.random.SeedSequence(seeds).generate_state(1)[0])
            ro = engine.generate([prompts[rows[r][0]] for r in members], n=1, max_new_tokens=s.max_new_tokens,
                                 temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, seed=seed)
            for k, r in enumerate(members):
                length = int(ro.lengths[k])
                outs[r] = (ro.tokens[k, :length].tolist(), ro.logprobs[k, :length].tolist(),
                           ro.finish_reason[k] == "stop")
        return outs

    def _input_logprobs(self, prompt: list[int], start: int) -> list[list]:
        from harnessrl_jax.models import forward

        logits = forward(self.engine.config, self.engine.params, jnp.asarray([prompt]))[0]
        logp = np.asarray(jax.nn.log_softmax(logits, axis=-1))
        values = [None] + [float(logp[t - 1, prompt[t]]) for t in range(1, len(prompt))]
        # SGLang: entries line up with ids[start:], and the first is always null.
        return [[None, prompt[start], None]] + [[values[t], prompt[t], None] for t in range(start + 1, len(prompt))]


def _per_row(value, prompts, n) -> list:
    """A per-request field (a scalar or one value per prompt) expanded to the rows."""
    if isinstance(value, list):
        if len(value) != len(prompts):
            raise BadRequest("a list-valued field must have one entry per prompt")
        return [value[i] for i in range(len(prompts)) for _ in range(n)]
    return [value] * (len(prompts) * n)
