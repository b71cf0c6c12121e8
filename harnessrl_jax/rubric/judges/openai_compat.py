"""A judge behind any OpenAI-compatible `/v1/chat/completions` server: SGLang, vLLM, llama.cpp, OpenAI itself.

Structured output, where the server supports it, makes the model's answer follow the verdict schema:
  'json_schema'  `{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}`: the OpenAI form, served by
                 vLLM, SGLang and llama.cpp's own C++ server;
  'json_object'  `{"type": "json_object", "schema": ...}`: the form llama-cpp-python's server reads (it turns the
                 schema into a grammar);
  'none'         no response_format: the prompt asks for JSON and the parser copes with what comes back.

Several servers (judging at scale: e.g. M SGLang servers of the judge model behind one judge) are given as a list
of base URLs or one comma-separated string. Each call goes to a server chosen by rendezvous hashing of its route
(the task), so a task's calls share one server's prefix cache, and tasks spread evenly; a retry goes to the route's
next server. Calls without a route go to the server with the fewest calls in flight.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, Mapping, Sequence

import httpx

from harnessrl_jax.rubric.judges.base import ERROR, TIMEOUT
from harnessrl_jax.rubric.judges.llm import RETRY_STATUS, CallFailed, LLMJudge

STRUCTURED = ("json_schema", "json_object", "none")


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return float(response.headers.get("retry-after", ""))
    except ValueError:
        return None


def _short(text: str, n: int = 300) -> str:
    return text if len(text) <= n else text[:n] + "..."


def split_base_urls(base_url: str | Sequence[str]) -> list[str]:
    """Base URLs from a list or a comma-separated string, without trailing slashes; at least one."""
    urls = base_url.split(",") if isinstance(base_url, str) else list(base_url)
    urls = [u.strip().rstrip("/") for u in urls if u and u.strip()]
    if not urls:
        raise ValueError("OpenAIJudge: no base_url given")
    return urls


class OpenAIJudge(LLMJudge):
    """Judge over HTTP; `base_url` includes the API prefix (e.g. http://127.0.0.1:30000/v1), as OpenAI clients take
    it, and may name several servers of the same model (a list, or URLs separated by commas).

    `api_key_env` names an environment variable holding a bearer token (none is sent when it is None); the key
    is read once, sent only as the Authorization header, and never logged, cached or shown in repr.
    `extra_body` is merged into every request (e.g. {"chat_template_kwargs": {"enable_thinking": False}}) and is
    part of the cache key.
    """

    api = "openai-chat"

    def __init__(self, base_url: str | Sequence[str], model: str, *, structured_output: str = "json_schema",
                 api_key_env: str | None = None, extra_body: Mapping[str, Any] | None = None, **kwargs):
        super().__init__(model, **kwargs)
        if structured_output not in STRUCTURED:
            raise ValueError(f"structured_output must be one of {STRUCTURED}, got {structured_output!r}")
        self.base_urls = split_base_urls(base_url)
        self.base_url = self.base_urls[0]
        self._inflight = {u: 0 for u in self.base_urls}
        self.structured_output = structured_output
        self.extra_body = dict(extra_body or {})
        headers = {}
        if api_key_env is not None:
            key = os.environ.get(api_key_env)
            if not key:
                raise RuntimeError(f"{type(self).__name__}: environment variable {api_key_env} is not set "
                                   f"(it should hold the server's API key)")
            headers["Authorization"] = f"Bearer {key}"
            self._secrets = (key,)
        # One pooled client for all worker threads (httpx.Client is thread-safe); the read timeout bounds a hang.
        connections = self.max_concurrency * len(self.base_urls)
        self._client = httpx.Client(
            headers=headers, timeout=httpx.Timeout(self.timeout_s, connect=min(self.timeout_s, 10.0)),
            limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections))

    def _server(self) -> str:
        """The base URL for the call this thread is sending (see the module docstring)."""
        if len(self.base_urls) == 1:
            return self.base_url
        route, attempt = self.current_attempt()
        if route is None:
            with self._lock:
                return min(self.base_urls, key=lambda u: (self._inflight[u], self._rng.random()))
        ranked = sorted(self.base_urls, key=lambda u: hashlib.sha256(f"{route}|{u}".encode()).digest())
        return ranked[attempt % len(ranked)]

    def _identity(self) -> dict[str, Any]:
        return {**super()._identity(), "structured_output": self.structured_output, "extra_body": self.extra_body}

    def _response_format(self, schema: dict) -> dict | None:
        if self.structured_output == "json_schema":
            return {"type": "json_schema", "json_schema": {"name": "verdict", "schema": schema, "strict": True}}
        if self.structured_output == "json_object":
            return {"type": "json_object", "schema": schema}
        return None

    def request_body(self, messages: Sequence[dict[str, str]], schema: dict) -> dict[str, Any]:
        """The JSON body of one chat-completions request."""
        body: dict[str, Any] = {"model": self.model, "messages": list(messages), "max_tokens": self.max_tokens,
                                "stream": False}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.top_p is not None:
            body["top_p"] = self.top_p
        if self.seed is not None:
            body["seed"] = self.seed
        fmt = self._response_format(schema)
        if fmt is not None:
            body["response_format"] = fmt
        body.update(self.extra_body)
        return body

    def _post(self, path: str, body: dict) -> httpx.Response:
        """One POST of `body` to `path` on the server this call goes to; a 200 response, else raises CallFailed."""
        url = self._server()
        with self._lock:
            self._inflight[url] += 1
        try:
            r = self._client.post(f"{url}{path}", json=body)
        except httpx.TimeoutException as e:
            raise CallFailed(TIMEOUT, f"no answer within {self.timeout_s:g}s ({type(e).__name__})", True) from None
        except httpx.RequestError as e:  # refused, reset, closed without a response, bad HTTP or encoding
            raise CallFailed(ERROR, f"connection failed: {type(e).__name__}: {e}", True) from None
        finally:
            with self._lock:
                self._inflight[url] -= 1
        if r.status_code != 200:
            raise CallFailed(ERROR, f"HTTP {r.status_code}: {_short(r.text)}", r.status_code in RETRY_STATUS,
                             _retry_after(r))
        return r

    def _send(self, messages: Sequence[dict[str, str]], schema: dict) -> tuple[str, str, dict]:
        r = self._post("/chat/completions", self.request_body(messages, schema))
        try:
            body = r.json()
            choice = body["choices"][0]
            content = choice["message"].get("content")
            finish = choice.get("finish_reason") or ""
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            # A proxy's error page or a half-written body; often transient, so worth another try.
            raise CallFailed(ERROR, f"malformed response body: {_short(r.text)!r}", True) from None
        usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        # content is null when a reasoning model spent its whole budget thinking: an answer with no verdict.
        return content or "", finish, {"input_tokens": usage.get("prompt_tokens"),
                                       "output_tokens": usage.get("completion_tokens")}

    def close(self) -> None:
        self._client.close()
        super().close()
