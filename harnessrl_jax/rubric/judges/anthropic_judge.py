"""A judge through Anthropic's Messages API (the `anthropic` package).

The key comes from the environment (ANTHROPIC_API_KEY by default), is handed only to the client, and is never
logged, cached or shown in repr; a missing key is a clear error at construction, before any call.
Structured output: 'tool' forces a `record_verdict` tool whose input schema is the verdict schema, so the answer
arrives as a JSON object (every Claude model with tool use); 'json_schema' asks for native structured output
(`output_config.format`, newer models only); 'none' asks for JSON in the prompt and parses the text.
Recent SDKs take no sampling arguments (newer models fix them), so temperature and top_p are unset by default
and, when set, travel as raw body fields, as does `output_config`: the judge works across SDK versions.
"""

from __future__ import annotations

import json
import os
from typing import Any, Sequence

from harnessrl_jax.rubric.judges.base import ERROR, TIMEOUT
from harnessrl_jax.rubric.judges.llm import RETRY_STATUS, CallFailed, LLMJudge

_TOOL = "record_verdict"
STRUCTURED = ("tool", "json_schema", "none")


class AnthropicJudge(LLMJudge):
    """Judge via `anthropic.Anthropic(...).messages.create`; `base_url` points it elsewhere (a proxy, a test)."""

    api = "anthropic-messages"

    def __init__(self, model: str, *, base_url: str | None = None, structured_output: str = "tool",
                 api_key_env: str = "ANTHROPIC_API_KEY", temperature: float | None = None, **kwargs):
        super().__init__(model, temperature=temperature, **kwargs)
        if structured_output not in STRUCTURED:
            raise ValueError(f"structured_output must be one of {STRUCTURED}, got {structured_output!r}")
        key = os.environ.get(api_key_env)
        if not key:
            raise RuntimeError(f"AnthropicJudge needs an API key: set the environment variable {api_key_env}")
        import anthropic

        self._anthropic = anthropic
        self._secrets = (key,)
        self.structured_output = structured_output
        # The client's own retries are off: ours (with jitter and the failure accounting) wrap every call.
        self._client = anthropic.Anthropic(api_key=key, base_url=base_url, max_retries=0, timeout=self.timeout_s)

    def _identity(self) -> dict[str, Any]:
        return {**super()._identity(), "structured_output": self.structured_output}

    def _send(self, messages: Sequence[dict[str, str]], schema: dict) -> tuple[str, str, dict]:
        a = self._anthropic
        kwargs: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens, "messages": list(messages)}
        extra: dict[str, Any] = {}
        if self.temperature is not None:
            extra["temperature"] = self.temperature
        if self.top_p is not None:
            extra["top_p"] = self.top_p
        if self.structured_output == "tool":
            kwargs["tools"] = [{"name": _TOOL, "description": "Record the grading verdict.", "input_schema": schema}]
            kwargs["tool_choice"] = {"type": "tool", "name": _TOOL}
        elif self.structured_output == "json_schema":
            extra["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
        if extra:
            kwargs["extra_body"] = extra
        try:
            msg = self._client.messages.create(**kwargs)
        except a.APITimeoutError:
            raise CallFailed(TIMEOUT, f"no answer within {self.timeout_s:g}s", True) from None
        except a.APIConnectionError as e:
            raise CallFailed(ERROR, f"connection failed: {type(e).__name__}: {e}", True) from None
        except a.APIStatusError as e:
            try:
                retry_after = float(e.response.headers.get("retry-after", ""))
            except (ValueError, AttributeError):
                retry_after = None
            raise CallFailed(ERROR, f"HTTP {e.status_code}: {str(e)[:300]}", e.status_code in RETRY_STATUS,
                             retry_after) from None
        except a.APIResponseValidationError as e:
            raise CallFailed(ERROR, f"malformed response: {str(e)[:300]}", True) from None
        # Same word as OpenAI's finish_reason, so a cut-off answer is flagged alike.
        finish = "length" if msg.stop_reason == "max_tokens" else (msg.stop_reason or "")
        usage = {"input_tokens": getattr(msg.usage, "input_tokens", None),
                 "output_tokens": getattr(msg.usage, "output_tokens", None)}
        texts = []
        for block in msg.content or []:
            if getattr(block, "type", None) == "tool_use" and getattr(block, "name", None) == _TOOL:
                return json.dumps(block.input, ensure_ascii=False), finish, usage
            if getattr(block, "type", None) == "text":
                texts.append(block.text)
        return "".join(texts), finish, usage

    def close(self) -> None:
        self._client.close()
        super().close()
