"""LLM judges: prompt building, bounded concurrency, retries, the cache and parsing, shared by every API flavour.

    'per_criterion'  one call per (criterion, response); prompt `prompts/criterion.txt`, answer
                     {"explanation", "criteria_met"}
    'per_rubric'     one call per response with the criteria numbered 1..K; prompt `prompts/rubric.txt`, answer
                     {"1": {"explanation", "criteria_met"}, ...}: K times fewer calls, one shared context

A pitfall (points < 0) is shown marked PITFALL, and `criteria_met` = true means the bad behaviour occurred. The
response sits between <response> tags it cannot close (`render_response`). Prompts are ordered for a server's prefix
cache and carry their task as a routing key. A call is retried with backoff on timeouts, dropped connections,
408/429/5xx and malformed bodies; what still fails is a NaN cell ('timeout', 'error'; 'unparsed' for an answer
without a verdict). Identical calls are made once per batch and, with a cache, once ever.
"""

from __future__ import annotations

import abc
import concurrent.futures
import dataclasses
import logging
import os
import random
import re
import threading
import time
from typing import Any, Sequence

from harnessrl_jax.rubric.judges import templates
from harnessrl_jax.rubric.judges.base import ERROR, OK, TIMEOUT, UNPARSED, Judge, ScoreMatrix, check_batch
from harnessrl_jax.rubric.judges.cache import JudgeCache, cache_key, call_keyer
from harnessrl_jax.rubric.judges.parse import parse_rubric_verdicts, parse_verdict
from harnessrl_jax.rubric.schema import Criterion, Task

log = logging.getLogger(__name__)

MODES = ("per_criterion", "per_rubric")
# Status codes worth retrying: the server is busy, rate-limiting or briefly down. Anything else 4xx is our request.
RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
_MAX_SHOWN = 2000  # characters of raw output kept as the explanation of an unparsed cell


class CallFailed(Exception):
    """One attempt failed; `status` is 'timeout' or 'error', `retryable` says whether to try again."""

    def __init__(self, status: str, detail: str, retryable: bool, retry_after: float | None = None):
        super().__init__(detail)
        self.status, self.detail, self.retryable, self.retry_after = status, detail, retryable, retry_after


@dataclasses.dataclass(frozen=True)
class Completion:
    """The outcome of one logical call, after retries: text on success, else the last failure."""

    text: str | None
    status: str  # 'ok' | 'error' | 'timeout'
    detail: str  # finish reason on success, the failure otherwise
    latency_s: float
    cache_hit: bool
    attempts: int
    # tokens the call spent, as the API reports them: {"input_tokens", "output_tokens"} ({} when cached or unknown)
    usage: dict = dataclasses.field(default_factory=dict)
    # False when the server refused the request itself (a 4xx other than 408/409/425/429): asking again is useless
    retryable: bool = True


@dataclasses.dataclass(frozen=True)
class _Call:
    messages: tuple[dict[str, str], ...]
    schema: dict
    task: int
    response: int
    rows: tuple[int, ...]  # criterion rows of the task that this call judges
    route: str = ""  # calls with one route share a prompt prefix (the task's): see the module docstring


def render_conversation(task: Task) -> str:
    """The task's prompt messages as `[role]` blocks."""
    return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in task.prompt)


# The templates put the response between <response> and </response>; the same tags inside a response (an attempt
# to close the block early and write as the grader) are shown as [response] / [/response].
_RESPONSE_TAG = re.compile(r"<\s*(/?)\s*response\s*>", re.I)


def render_response(text: str) -> str:
    """A response as the templates show it between <response> tags: any such tag inside it defused."""
    return _RESPONSE_TAG.sub(lambda m: f"[{m.group(1)}response]", text)


def render_criterion(c: Criterion) -> str:
    """One criterion as the templates show it; 'PITFALL' is the word the templates' instructions refer to."""
    return f"[{c.points:+g} points{', PITFALL' if c.is_pitfall else ''}] {c.text}"


def verdict_schema(explanation_max_chars: int | None = None) -> dict:
    """JSON schema of one verdict; the explanation comes first so the model reasons before it decides."""
    explanation: dict[str, Any] = {"type": "string"}
    if explanation_max_chars is not None:
        # Grammar-constrained servers (llama.cpp, vLLM, SGLang) enforce this; it bounds rambling small judges.
        explanation["maxLength"] = explanation_max_chars
    return {"type": "object", "properties": {"explanation": explanation, "criteria_met": {"type": "boolean"}},
            "required": ["explanation", "criteria_met"], "additionalProperties": False}


def rubric_schema(n: int, explanation_max_chars: int | None = None) -> dict:
    """JSON schema of a per-rubric answer: one verdict object under each key "1".."n"."""
    item = verdict_schema(explanation_max_chars)
    keys = [str(i) for i in range(1, n + 1)]
    return {"type": "object", "properties": {k: item for k in keys}, "required": keys,
            "additionalProperties": False}


class LLMJudge(Judge):
    """Base of the HTTP judges; a subclass supplies `api`, `_send` and, optionally, `_identity`.

    model: the served model name; mode: 'per_criterion' | 'per_rubric'; temperature, max_tokens, top_p, seed:
    sampling (None: not sent); timeout_s: per request (a read that stalls this long is a timeout);
    max_retries, backoff_s, max_backoff_s: retry schedule; max_concurrency: calls in flight at once;
    cache: a JudgeCache or a path to one; explanation_max_chars: a maxLength on the explanation in the schema;
    criterion_template, rubric_template: prompt names in rubric/prompts/ or paths to .txt files.
    """

    api: str = "llm"

    def __init__(self, model: str, *, name: str | None = None, mode: str = "per_criterion",
                 temperature: float | None = 0.0, max_tokens: int = 512, top_p: float | None = None,
                 seed: int | None = None, timeout_s: float = 60.0, max_retries: int = 3, backoff_s: float = 0.5,
                 max_backoff_s: float = 30.0, max_concurrency: int = 8,
                 cache: JudgeCache | str | os.PathLike | None = None, explanation_max_chars: int | None = None,
                 criterion_template: str = "criterion", rubric_template: str = "rubric"):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if max_concurrency < 1 or max_retries < 0 or timeout_s <= 0:
            raise ValueError("need max_concurrency >= 1, max_retries >= 0 and timeout_s > 0")
        self.model, self.name, self.mode = model, name or f"{self.api}:{model}", mode
        self.temperature, self.max_tokens, self.top_p, self.seed = temperature, max_tokens, top_p, seed
        self.timeout_s, self.max_retries = timeout_s, max_retries
        self.backoff_s, self.max_backoff_s, self.max_concurrency = backoff_s, max_backoff_s, max_concurrency
        self.explanation_max_chars = explanation_max_chars
        self._owns_cache = isinstance(cache, (str, os.PathLike))
        self.cache = JudgeCache(cache) if self._owns_cache else cache
        self.criterion_template = templates.load_template(criterion_template)
        self.rubric_template = templates.load_template(rubric_template)
        self._rng = random.Random()
        self._secrets: tuple[str, ...] = ()  # a subclass's API key: cut from every failure detail it reports
        self._lock = threading.Lock()
        self._attempt = threading.local()  # (route, attempt number) of the call this thread is sending
        self._stats = {"calls": 0, "requests": 0, "retries": 0, "cache_hits": 0, OK: 0, ERROR: 0, TIMEOUT: 0,
                       "input_tokens": 0, "output_tokens": 0}

    def __repr__(self):  # deliberately short: subclasses hold clients and keys that must never be printed
        return f"{type(self).__name__}(name={self.name!r}, model={self.model!r}, mode={self.mode!r})"

    # -- what a subclass provides ------------------------------------------------------------------------------

    @abc.abstractmethod
    def _send(self, messages: Sequence[dict[str, str]], schema: dict) -> tuple[str, str] | tuple[str, str, dict]:
        """One attempt: (completion text, finish reason[, usage {"input_tokens", "output_tokens"}]); raises
        CallFailed."""

    def _identity(self) -> dict[str, Any]:
        """What besides the messages and schema determines the answer (never credentials)."""
        return {"api": self.api, "model": self.model, "temperature": self.temperature,
                "max_tokens": self.max_tokens, "top_p": self.top_p, "seed": self.seed}

    # -- one call: cache, retries ------------------------------------------------------------------------------

    @property
    def stats(self) -> dict[str, int]:
        """Counters since construction: logical calls, HTTP attempts, retries, cache hits, outcomes, and the input
        and output tokens of the successful attempts (as the API reports them)."""
        with self._lock:
            return dict(self._stats)

    def _count(self, **inc: int) -> None:
        with self._lock:
            for k, v in inc.items():
                self._stats[k] += v

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            if secret:
                text = text.replace(secret, "***")
        return text

    def _key(self, messages: Sequence[dict[str, str]], schema: dict) -> str:
        return call_keyer(self._identity())(messages, schema)

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        d = min(self.max_backoff_s, self.backoff_s * 2 ** attempt)
        # Equal jitter: spreads out retries from many threads hitting one server, but keeps a floor of d/2.
        d = d / 2 + self._rng.uniform(0, d / 2)
        if retry_after is not None:
            d = max(d, min(retry_after, self.max_backoff_s))
        return d

    def current_attempt(self) -> tuple[str | None, int]:
        """(route, attempt number from 0) of the call being sent from this thread: what `_send` may use to pick a
        server."""
        return getattr(self._attempt, "route", None), getattr(self._attempt, "number", 0)

    def complete(self, messages: Sequence[dict[str, str]], schema: dict, key: str | None = None,
                 route: str | None = None) -> Completion:
        """One logical call: from the cache, else with up to `max_retries` retries; never raises CallFailed.
        `route` groups calls that share a prompt prefix (see the module docstring)."""
        key = key or self._key(messages, schema)
        t0 = time.perf_counter()
        self._count(calls=1)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self._count(cache_hits=1, ok=1)
                return Completion(hit[0], OK, hit[1], time.perf_counter() - t0, True, 0)
        failure = None
        for attempt in range(self.max_retries + 1):
            if attempt:
                self._count(retries=1)
                time.sleep(self._backoff(attempt - 1, failure.retry_after))
            self._count(requests=1)
            self._attempt.route, self._attempt.number = route, attempt
            try:
                text, finish, *rest = self._send(messages, schema)
            except CallFailed as e:
                # An error page may echo the request (a proxy showing its Authorization header): never the key.
                e.detail = self._scrub(e.detail)
                failure = e
                log.debug("%s: attempt %d failed: %s", self.name, attempt + 1, e.detail)
                if not e.retryable:
                    break
                continue
            except Exception as e:  # noqa: BLE001 - an unforeseen client error costs this call, not the batch
                log.error("%s: unexpected error in a judge call: %s", self.name,
                          self._scrub(f"{type(e).__name__}: {e}"))
                log.debug("%s: the unexpected error's traceback", self.name, exc_info=True)
                failure = CallFailed(ERROR, self._scrub(f"unexpected {type(e).__name__}: {e}"), False)
                break
            usage = {k: int(v) for k, v in (rest[0] if rest and rest[0] else {}).items()
                     if k in ("input_tokens", "output_tokens") and v is not None}
            if self.cache is not None:
                self.cache.put(key, text, self.model, finish or "")
            self._count(ok=1, **usage)
            return Completion(text, OK, finish or "", time.perf_counter() - t0, False, attempt + 1, usage)
        self._count(**{failure.status: 1})
        return Completion(None, failure.status, failure.detail, time.perf_counter() - t0, False, attempt + 1,
                          retryable=failure.retryable)

    # -- scoring -----------------------------------------------------------------------------------------------

    def _calls(self, ti: int, task: Task, responses: Sequence[str], criteria: Sequence[Criterion]) -> list[_Call]:
        conversation = render_conversation(task)
        route = cache_key({"conversation": conversation})
        # What the task's cells share is rendered once: its criteria and their schema (one object, serialised
        # once by the cache keyer).
        shown = [render_criterion(c) for c in criteria]
        if self.mode == "per_criterion":
            schema = verdict_schema(self.explanation_max_chars)
        elif criteria:
            listing = "\n".join(f"{i}. {c}" for i, c in enumerate(shown, start=1))
            schema = rubric_schema(len(criteria), self.explanation_max_chars)
        calls = []
        for j, response in enumerate(responses):
            response = render_response(response)
            if self.mode == "per_criterion":
                for k, c in enumerate(shown):
                    text = templates.fill(self.criterion_template, conversation=conversation, response=response,
                                          criterion=c)
                    calls.append(_Call(({"role": "user", "content": text},), schema, ti, j, (k,), route))
            elif criteria:
                text = templates.fill(self.rubric_template, conversation=conversation, response=response,
                                      criteria=listing, n_criteria=len(criteria))
                calls.append(_Call(({"role": "user", "content": text},), schema, ti, j,
                                   tuple(range(len(criteria))), route))
        return calls

    def score_batch(self, tasks: Sequence[Task], responses: Sequence[Sequence[str]],
                    criteria: Sequence[Sequence[Criterion]] | None = None) -> list[ScoreMatrix]:
        """Scores every task; all calls of the batch share one pool of `max_concurrency` workers."""
        criteria = check_batch(tasks, responses, criteria)
        out = [ScoreMatrix.empty([c.id for c in cs], len(rs), self.name) for cs, rs in zip(criteria, responses)]
        calls = [call for ti, t in enumerate(tasks) for call in self._calls(ti, t, responses[ti], criteria[ti])]
        # A group often repeats a response word for word; judge each distinct prompt once.
        key = call_keyer(self._identity())
        by_key: dict[str, list[_Call]] = {}
        for call in calls:
            by_key.setdefault(key(call.messages, call.schema), []).append(call)
        if not by_key:
            return out
        groups = list(by_key.values())
        completions = self.complete_distinct([(key, g[0].messages, g[0].schema, g[0].route)
                                              for key, g in by_key.items()])
        for group, completion in zip(groups, completions):
            for n, call in enumerate(group):
                self._fill(out[call.task], call, completion, reused=n > 0)
        return out

    def complete_distinct(self, calls: Sequence[tuple[str, Sequence[dict[str, str]], dict, str]]) -> list[Completion]:
        """The completions of distinct calls (key, messages, schema, route), in order: one `complete` each, at most
        `max_concurrency` in flight. A judge that can send many prompts in one request overrides this."""
        with concurrent.futures.ThreadPoolExecutor(min(self.max_concurrency, len(calls))) as pool:
            return list(pool.map(lambda c: self.complete(c[1], c[2], c[0], c[3]), calls))

    def _fill(self, m: ScoreMatrix, call: _Call, c: Completion, reused: bool) -> None:
        cache_hit = c.cache_hit or reused
        if c.status != OK:
            for k in call.rows:
                m.set(k, call.response, None, c.status, c.detail, c.latency_s, cache_hit)
            return
        if self.mode == "per_criterion":
            parsed = [parse_verdict(c.text)]
        else:
            parsed = parse_rubric_verdicts(c.text, len(call.rows))
        note = " [cut off at max_tokens]" if c.detail == "length" else ""
        for k, p in zip(call.rows, parsed):
            if p.verdict is None:
                m.set(k, call.response, None, UNPARSED, c.text[:_MAX_SHOWN] + note, c.latency_s, cache_hit)
            else:
                m.set(k, call.response, p.verdict, OK, p.explanation, c.latency_s, cache_hit)

    def close(self) -> None:
        if self._owns_cache and self.cache is not None:
            self.cache.close()
