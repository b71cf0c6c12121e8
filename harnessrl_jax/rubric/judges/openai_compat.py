"""A judge behind any OpenAI-compatible `/v1/chat/completions` server: SGLang, vLLM, llama.cpp, OpenAI itself.

Structured output, where the server supports it, makes the model's answer follow the verdict schema:
  'json_schema'  `{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}`: the OpenAI form, served by
                 vLLM, SGLang and llama.cpp's own C++ server;
  'json_object'  `{"type": "json_object", "schema": ...}`: the form llama-cpp-python's server reads (it turns the
                 schema into a grammar);
  'none'         no response_format: the prompt asks for JSON and the parser copes with what comes back.
"""

from __future__ import annotations

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


class OpenAIJudge(LLMJudge):
    """Judge over HTTP; `base_url` includes the API prefix (e.g. http://127.0.0.1:30000/v1), as OpenAI clients take it.

    `api_key_env` names an environment variable holding a bearer token (none is sent when it is None); the key
    is read once, sent only as the Authorization header, and never logged, cached or shown in repr.
    `extra_body` is merged into every request (e.g. {"chat_template_kwargs": {"enable_thinking": False}}) and is
    part of the cache key.
    """

    api = "openai-chat"

    def __init__(self, base_url: str, model: str, *, structured_output: str = "json_schema",
                 api_key_env: str | None = None, extra_body: Mapping[str, Any] | None = None, **kwargs):
        super().__init__(model, **kwargs)
        if structured_output not in STRUCTURED:
            raise ValueError(f"structured_output must be one of {STRUCTURED}, got {structured_output!r}")
        self.base_url = base_url.rstrip("/")
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
        self._client = httpx.Client(
            headers=headers, timeout=httpx.Timeout(self.timeout_s, connect=min(self.timeout_s, 10.0)),
            limits=httpx.Limits(max_connections=self.max_concurrency, max_keepalive_connections=self.max_concurrency))

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

    def _send(self, messages: Sequence[dict[str, str]], schema: dict) -> tuple[str, str, dict]:
        try:
            r = self._client.post(f"{self.base_url}/chat/completions", json=self.request_body(messages, schema))
        except httpx.TimeoutException as e:
            raise CallFailed(TIMEOUT, f"no answer within {self.timeout_s:g}s ({type(e).__name__})", True) from None
        except httpx.RequestError as e:  # refused, reset, closed without a response, bad HTTP or encoding
            raise CallFailed(ERROR, f"connection failed: {type(e).__name__}: {e}", True) from None
        if r.status_code != 200:
            raise CallFailed(ERROR, f"HTTP {r.status_code}: {_short(r.text)}", r.status_code in RETRY_STATUS,
                             _retry_after(r))
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
