"""A judge on SGLang's native `POST /generate`, which takes a list of prompts: a batch's distinct calls go
`batch_size` to a request, so the client sends hundreds of times fewer requests than one call per cell.

The prompts, the verdict schema, the parsing, the cache and the failure accounting are the per-call judge's
(`LLMJudge`); what differs is the transport. The messages are rendered here with the judge model's own chat template
(the tokenizer files of the directory SGLang serves, or a GGUF), as SGLang's chat route would render them, and the
verdict schema goes as `sampling_params.json_schema` (a JSON string); a one-user-message prompt is written into
the template's frame, rendered once (`chat_frame`). Calls are ordered by route (the task) so a request carries one
task's prompts together, for the server's prefix cache; a request goes to the server its first route hashes to, a
retry to that route's next server. A request that fails fails each of its calls; a prompt the
server aborts is asked again on its own schedule; what still fails is a NaN cell, as with the per-call judge.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import logging
import os
import time
from typing import Any, Sequence

from harnessrl_jax.models.tokenizer import load_tokenizer
from harnessrl_jax.rubric.judges.base import ERROR, OK
from harnessrl_jax.rubric.judges.llm import CallFailed, Completion
from harnessrl_jax.rubric.judges.openai_compat import OpenAIJudge, _short

log = logging.getLogger(__name__)

Call = tuple[str, Sequence[dict[str, str]], dict, str]  # (cache key, messages, schema, route)
# Probe contents: markup, quotes, braces and a newline inside; the second with whitespace at both ends.
_PROBES = ("\x00probe<b>&'\"{x}\nend\x00", " \n\x00probe2 {{y}} </s>\x00\n ")


def _load_tokenizer(tokenizer):
    """A Tokenizer with a chat template from a Tokenizer, an HF directory or a .gguf file."""
    if not isinstance(tokenizer, (str, os.PathLike)):
        return tokenizer
    tok = load_tokenizer(tokenizer)
    if tok is None or not tok.chat_template:
        raise ValueError(f"SGLangJudge: {tokenizer} has no tokenizer with a chat template (the judge renders the "
                         f"prompts with the served model's template: give the directory SGLang serves)")
    return tok


def chat_frame(tokenizer) -> tuple[str, str, bool] | None:
    """(prefix, suffix, strip) when the chat template renders one user message of content c as prefix + c + suffix
    (c.strip() when strip: a template that trims), found with two probe contents; None when it does anything else."""
    def render(content):
        return tokenizer.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True)

    first, second = render(_PROBES[0]), render(_PROBES[1])
    if first.count(_PROBES[0]) != 1:
        return None
    prefix, suffix = first.split(_PROBES[0])
    for strip in (False, True):
        if second == prefix + (_PROBES[1].strip() if strip else _PROBES[1]) + suffix:
            return prefix, suffix, strip
    return None


class SGLangJudge(OpenAIJudge):
    """`base_url`: the SGLang server's root (http://HOST:PORT, no /v1), or several; `tokenizer`: the served model's
    (a Tokenizer, its HF directory or a .gguf file); `batch_size`: prompts per /generate request;
    `max_concurrency`: requests in flight. `structured_output` is 'json_schema' or 'none'."""

    api = "sglang-generate"

    def __init__(self, base_url: str | Sequence[str], model: str, *, tokenizer, batch_size: int = 256,
                 structured_output: str = "json_schema", **kwargs):
        if structured_output not in ("json_schema", "none"):
            raise ValueError(f"SGLangJudge: structured_output must be 'json_schema' or 'none', got "
                             f"{structured_output!r} (/generate takes a schema as sampling_params.json_schema)")
        if batch_size < 1:
            raise ValueError(f"SGLangJudge: batch_size={batch_size}: must be >= 1")
        super().__init__(base_url, model, structured_output=structured_output, **kwargs)
        if any(u.endswith("/v1") for u in self.base_urls):
            raise ValueError(f"SGLangJudge: base_url {self.base_urls} ends in /v1; /generate is at the server's "
                             f"root (http://HOST:PORT)")
        self.tokenizer = _load_tokenizer(tokenizer)
        self._template_digest = hashlib.sha256(self.tokenizer.chat_template.encode()).hexdigest()
        self._frame = chat_frame(self.tokenizer)
        self.batch_size = batch_size

    def _identity(self) -> dict[str, Any]:
        # The template by digest: every call's cache key serialises the identity.
        return {**super()._identity(), "chat_template": self._template_digest}

    # -- the request --------------------------------------------------------------------------------------------

    def sampling_params(self, schema: dict) -> dict[str, Any]:
        """One prompt's sampling_params: the per-call judge's sampling settings in SGLang's names."""
        params: dict[str, Any] = {"max_new_tokens": self.max_tokens}
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if self.top_p is not None:
            params["top_p"] = self.top_p
        if self.seed is not None:
            params["sampling_seed"] = self.seed
        if self.structured_output == "json_schema":
            params["json_schema"] = json.dumps(schema)
        return params

    def request_body(self, prompts: Sequence[tuple[Sequence[dict[str, str]], dict]]) -> dict[str, Any]:
        """The JSON body of one /generate request over (messages, schema) pairs: one sampling_params for all when
        they share the schema (as per-criterion calls do), else one per prompt."""
        schemas = [s for _, s in prompts]
        same = all(s is schemas[0] or s == schemas[0] for s in schemas[1:])
        return {"text": self.render([m for m, _ in prompts]),
                "sampling_params": self.sampling_params(schemas[0]) if same else [self.sampling_params(s)
                                                                                  for s in schemas],
                "stream": False, **self.extra_body}

    def render(self, prompts: Sequence[Sequence[dict[str, str]]]) -> list[str]:
        """The prompts' texts as the served model's chat template renders them (with the generation prompt)."""
        def full(messages):
            return self.tokenizer.apply_chat_template(list(messages), add_generation_prompt=True)

        frame = self._frame
        if frame is None or not prompts:
            return [full(m) for m in prompts]
        prefix, suffix, strip = frame
        out = [prefix + (m[0]["content"].strip() if strip else m[0]["content"]) + suffix
               if len(m) == 1 and m[0].keys() == {"role", "content"} and m[0]["role"] == "user"
               and type(m[0]["content"]) is str else full(m) for m in prompts]
        # The probes cannot show a template that looks into the content: each request checks its first prompt.
        if out[0] != full(prompts[0]):
            log.warning("%s: the chat template renders this prompt otherwise than its frame; rendering every prompt "
                        "through the template from now on", self.name)
            self._frame = None
            return [full(m) for m in prompts]
        return out

    def _send_many(self, prompts: Sequence[tuple[Sequence[dict[str, str]], dict]]) -> list[tuple | CallFailed]:
        """One attempt at a request: per prompt (text, finish reason, usage), or a CallFailed for a prompt the
        server aborted; raises CallFailed when the request itself fails."""
        r = self._post("/generate", self.request_body(prompts))
        try:
            body = r.json()
            if isinstance(body, dict):
                body = [body]
            if not isinstance(body, list) or len(body) != len(prompts):
                raise ValueError("not one answer per prompt")
            out: list[tuple | CallFailed] = []
            for item in body:
                meta = item.get("meta_info") or {}
                finish = meta.get("finish_reason") or {}
                kind = finish.get("type", "") if isinstance(finish, dict) else str(finish)
                if kind == "abort":
                    out.append(CallFailed(ERROR, f"aborted by the server: {_short(str(finish.get('message')))}",
                                          True))
                    continue
                out.append((item["text"], kind, {"input_tokens": meta.get("prompt_tokens"),
                                                 "output_tokens": meta.get("completion_tokens")}))
        except (ValueError, KeyError, TypeError, AttributeError):
            raise CallFailed(ERROR, f"malformed response body: {_short(r.text)!r}", True) from None
        return out

    def _send(self, messages: Sequence[dict[str, str]], schema: dict) -> tuple[str, str, dict]:
        """One prompt in one request (the single-call path: `complete`, the outage probe)."""
        (result,) = self._send_many([(messages, schema)])
        if isinstance(result, CallFailed):
            raise result
        return result

    # -- many calls -----------------------------------------------------------------------------------------------

    def complete_distinct(self, calls: Sequence[Call]) -> list[Completion]:
        """The completions of distinct calls, in order: cache hits first, the rest `batch_size` to a request,
        ordered by route, at most `max_concurrency` requests in flight."""
        out: list[Completion | None] = [None] * len(calls)
        todo = []
        self._count(calls=len(calls))
        for i, (key, *_rest) in enumerate(calls):
            hit = self.cache.get(key) if self.cache is not None else None
            if hit is not None:
                self._count(cache_hits=1, ok=1)
                out[i] = Completion(hit[0], OK, hit[1], 0.0, True, 0)
            else:
                todo.append(i)
        todo.sort(key=lambda i: calls[i][3])  # a task's prompts together, for the server's prefix cache
        chunks = [todo[k:k + self.batch_size] for k in range(0, len(todo), self.batch_size)]
        if chunks:
            with concurrent.futures.ThreadPoolExecutor(min(self.max_concurrency, len(chunks))) as pool:
                for chunk, done in zip(chunks, pool.map(lambda c: self._complete_chunk([calls[i] for i in c]),
                                                        chunks)):
                    for i, completion in zip(chunk, done):
                        out[i] = completion
        return out

    def _complete_chunk(self, calls: Sequence[Call]) -> list[Completion]:
        """One request's calls, with up to `max_retries` retries of those still unanswered; never raises."""
        t0 = time.perf_counter()
        out: list[Completion | None] = [None] * len(calls)
        pending = list(range(len(calls)))
        failures: dict[int, CallFailed] = {}
        attempt = 0
        for attempt in range(self.max_retries + 1):
            if attempt:
                self._count(retries=len(pending))
                time.sleep(self._backoff(attempt - 1, max((f.retry_after or 0.0 for f in failures.values()),
                                                          default=None)))
            self._count(requests=1)
            self._attempt.route, self._attempt.number = calls[pending[0]][3], attempt
            try:
                results = self._send_many([(calls[i][1], calls[i][2]) for i in pending])
            except CallFailed as e:
                e.detail = self._scrub(e.detail)
                failures = {i: e for i in pending}
                if not e.retryable:
                    break
                continue
            except Exception as e:  # noqa: BLE001 - an unforeseen client error costs these calls, not the batch
                failures = {i: CallFailed(ERROR, self._scrub(f"unexpected {type(e).__name__}: {e}"), False)
                            for i in pending}
                break
            still = []
            for i, result in zip(pending, results):
                if isinstance(result, CallFailed):
                    failures[i] = result
                    still.append(i)
                    continue
                text, finish, usage = result
                usage = {k: int(v) for k, v in usage.items() if v is not None}
                if self.cache is not None:
                    self.cache.put(calls[i][0], text, self.model, finish or "")
                self._count(ok=1, **usage)
                out[i] = Completion(text, OK, finish or "", time.perf_counter() - t0, False, attempt + 1, usage)
                failures.pop(i, None)
            pending = still
            if not pending:
                break
        for i in pending:
            f = failures[i]
            self._count(**{f.status: 1})
            out[i] = Completion(None, f.status, f.detail, time.perf_counter() - t0, False, attempt + 1,
                                retryable=f.retryable)
        return out
