"""The oracle judge of HarnessRL's analysis: pairwise, rubric-blind, both orders; never seen by training.

    client = make_client("anthropic", "claude-sonnet-5")        # or make_client("openai", model, base_url=...)
    oracle = PairwiseOracle(client, store="RUN/oracle/oracle.sqlite")
    o = oracle.group_matrix(task, responses)                    # [J, J] o_ij in {-1, 0, +1}, NaN: no verdict
    scores = oracle.win_rates(task, responses, anchors)         # [J] win rate x 100 against anchor responses
    summary = oracle_run.oracle_run("RUN", oracle)              # every recorded group of a run -> RUN/oracle/

The judge sees the conversation, one quality guideline per domain (prompts/oracle_<domain>.txt; never the rubric)
and two responses (prompts/oracle_pairwise.txt). o_ij = +1 when i wins in both orders, -1 when j does, else 0. An
oracle score is a win rate x 100 against the seed policy's J responses to the task, both orders, a tie worth half.
Every answered call is stored in a SQLite file keyed by everything that determines it, so no call is made twice.
"""

from __future__ import annotations

import concurrent.futures
import logging
import math
import os
import re
import sqlite3
import threading
import time
from typing import Any, Mapping, Sequence

import numpy as np

from harnessrl_jax import failures
from harnessrl_jax.rubric.judges import OpenAIJudge, RuleJudge, templates
from harnessrl_jax.rubric.judges.anthropic_judge import AnthropicJudge
from harnessrl_jax.rubric.judges.parse import json_objects, strip_thinking
from harnessrl_jax.rubric.reward import rubric_reward
from harnessrl_jax.rubric.schema import Task

log = logging.getLogger(__name__)

PROMPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prompts")
WINNERS = ("A", "B", "tie")
SCHEMA = {"type": "object", "properties": {"reasoning": {"type": "string"}, "winner": {"type": "string",
                                                                                      "enum": list(WINNERS)}},
          "required": ["reasoning", "winner"], "additionalProperties": False}
END_WINDOW = 25  # "at the end of training" = the last 25 steps' groups


def make_client(kind: str = "anthropic", model: str = "claude-sonnet-5", *, base_url: str | None = None,
                **settings):
    """The oracle's API client: an AnthropicJudge (Messages API; key from ANTHROPIC_API_KEY unless `api_key_env`)
    or, for kind 'openai', an OpenAIJudge on `base_url`; its own cache is off (the oracle store replaces it)."""
    settings = {"max_tokens": 400, "timeout_s": 120.0, "max_retries": 6, "temperature": None, **settings,
                "cache": None, "name": f"oracle:{model}"}
    if kind == "anthropic":
        return AnthropicJudge(model, base_url=base_url, **settings)
    if kind == "openai":
        if not base_url:
            raise ValueError("an OpenAI-compatible oracle needs base_url (e.g. http://127.0.0.1:30000/v1)")
        settings.setdefault("structured_output", "json_schema")
        return OpenAIJudge(base_url, model, **settings)
    raise ValueError(f"oracle kind must be 'anthropic' or 'openai', got {kind!r}")


def parse_winner(text: str | None) -> str | None:
    """'A', 'B' or 'tie' from an oracle answer (a JSON object's "winner", else a `winner: X` line), or None."""
    if not text:
        return None
    text = strip_thinking(text)
    for obj in json_objects(text):
        if isinstance(obj, dict) and "winner" in obj:
            return _winner_word(obj["winner"])
    m = re.search(r"(?i)\bwinner\b[\"'*\s]*[:=][\s\"'*]*(response\s+)?([AB]|tie)\b", text)
    return _winner_word(m.group(2)) if m else None


def _winner_word(v: Any) -> str | None:
    if not isinstance(v, str):
        return None
    w = v.strip().strip(".\"'*").lower().removeprefix("response ").strip()
    return {"a": "A", "b": "B", "tie": "tie", "draw": "tie", "equal": "tie"}.get(w)


class OracleStore:
    """Answered oracle calls in SQLite: key, model, raw text, parsed winner, tokens. Safe across threads."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        if self.path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=60.0)
        if self.path != ":memory:":
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, model TEXT, text TEXT NOT NULL, "
                         "winner TEXT, input_tokens INTEGER, output_tokens INTEGER, created REAL)")

    def get(self, key: str) -> tuple[str, str | None] | None:
        with self._lock:
            row = self._db.execute("SELECT text, winner FROM calls WHERE key = ?", (key,)).fetchone()
        return None if row is None else (row[0], row[1])

    def put(self, key: str, model: str, text: str, winner: str | None, usage: Mapping[str, int]) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO calls VALUES (?, ?, ?, ?, ?, ?, ?)",
                             (key, model, text, winner, usage.get("input_tokens"), usage.get("output_tokens"),
                              time.time()))

    def totals(self) -> dict[str, int]:
        """Calls stored and the tokens they cost."""
        with self._lock:
            n, i, o = self._db.execute("SELECT COUNT(*), COALESCE(SUM(input_tokens), 0), "
                                       "COALESCE(SUM(output_tokens), 0) FROM calls").fetchone()
        return {"calls": int(n), "input_tokens": int(i), "output_tokens": int(o)}

    def close(self) -> None:
        with self._lock:
            self._db.close()


def guideline(domain: str) -> str:
    """The quality guideline of a domain (prompts/oracle_<domain>.txt; oracle_default.txt for others)."""
    path = os.path.join(PROMPTS, f"oracle_{domain}.txt")
    return templates.load_template(path if os.path.isfile(path) else os.path.join(PROMPTS, "oracle_default.txt"))


def pair_messages(task: Task, response_a: str, response_b: str) -> tuple[dict[str, str], ...]:
    """The oracle's message comparing two responses to the task's conversation (its rubric is never shown)."""
    conversation = "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in task.prompt)
    text = templates.fill(templates.load_template(os.path.join(PROMPTS, "oracle_pairwise.txt")),
                          guideline=guideline(task.domain).strip(), conversation=conversation,
                          response_a=response_a, response_b=response_b)
    return ({"role": "user", "content": text},)


class PairwiseOracle:
    """Pairwise, both-order verdicts through `client` (an LLM judge's `complete`), stored in `store`."""

    def __init__(self, client, store: OracleStore | str | os.PathLike = ":memory:", *, max_workers: int = 8):
        self.client = client
        self.store = store if isinstance(store, OracleStore) else OracleStore(store)
        self.max_workers = max_workers
        self._lock = threading.Lock()
        self._session = {"calls": 0, "cache_hits": 0, "failed": 0, "unparsed": 0, "input_tokens": 0,
                         "output_tokens": 0}
        self._failures: dict[str, tuple[str, str]] = {}  # call key -> (status, detail) of its last failed attempt

    def _count(self, **inc: int) -> None:
        with self._lock:
            for k, v in inc.items():
                self._session[k] += v

    def verdict(self, task: Task, a: str, b: str) -> str | None:
        """'A', 'B' or 'tie' for response a shown first and b second; None when the call failed or the answer has
        no readable winner (a failed call is not stored, so a later run tries again)."""
        messages = pair_messages(task, a, b)
        key = self.client._key(messages, SCHEMA)
        hit = self.store.get(key)
        if hit is not None:
            self._count(cache_hits=1)
            return hit[1]
        c = self.client.complete(messages, SCHEMA, key)
        if c.status != "ok":
            self._count(failed=1)
            with self._lock:
                self._failures[key] = (c.status, c.detail)
            return None
        with self._lock:
            self._failures.pop(key, None)
        winner = parse_winner(c.text)
        self._count(calls=1, unparsed=int(winner is None), **{k: c.usage.get(k, 0) for k in
                                                              ("input_tokens", "output_tokens")})
        self.store.put(key, getattr(self.client, "model", ""), c.text, winner, c.usage)
        return winner

    def verdicts(self, jobs: Sequence[tuple[Task, str, str]]) -> list[str | None]:
        """verdict() of every (task, a, b), concurrently; identical jobs are called once."""
        unique = list(dict.fromkeys((t.id, a, b) for t, a, b in jobs))
        tasks = {t.id: t for t, _, _ in jobs}
        if not unique:
            return []
        with concurrent.futures.ThreadPoolExecutor(max(1, min(self.max_workers, len(unique)))) as pool:
            done = dict(zip(unique, pool.map(lambda j: self.verdict(tasks[j[0]], j[1], j[2]), unique)))
        return [done[(t.id, a, b)] for t, a, b in jobs]

    def failure(self, job: tuple[Task, str, str]) -> tuple[str, str] | None:
        """(status, detail) when the last call of `job` failed (no answer: 'error' or 'timeout'), else None."""
        with self._lock:
            return self._failures.get(self.client._key(pair_messages(*job), SCHEMA))

    def verdicts_until_answered(self, jobs: Sequence[tuple[Task, str, str]], policy,
                                sleep=time.sleep) -> list[str | None]:
        """verdicts(jobs) under a failures.OutagePolicy: while more than max_failed_fraction of them got no answer,
        the unanswered ones are asked again after the pause, up to the policy's retries; an oracle still down then
        raises failures.ModelOutage (the answered calls are in the store, so a rerun goes on from there)."""
        out = self.verdicts(jobs)
        for attempt in range(policy.retries + 1):
            failed = [n for n, job in enumerate(jobs) if out[n] is None and self.failure(job) is not None]
            if len(failed) <= policy.max_failed_fraction * len(jobs):
                return out
            if attempt == policy.retries:
                kinds = [self.failure(jobs[n]) for n in failed]
                counts = {k: sum(s == k for s, _ in kinds) for k in failures.OUTAGE_KINDS}
                raise failures.ModelOutage("oracle", failures.server_of(self.client), counts, len(jobs),
                                           kinds[0][1], policy, "calls")
            log.warning("oracle: %d of %d calls unanswered; asking again in %g s (retry %d of %d)", len(failed),
                        len(jobs), policy.pause_s, attempt + 1, policy.retries)
            sleep(policy.pause_s)
            for n, v in zip(failed, self.verdicts([jobs[n] for n in failed])):
                out[n] = v
        return out

    @staticmethod
    def pair_jobs(task: Task, responses: Sequence[str]) -> list[tuple[Task, str, str]]:
        """The 2 C(J, 2) calls of a group: for i < j, (i first, j second) then (j first, i second)."""
        J = len(responses)
        return [job for i in range(J) for j in range(i + 1, J)
                for job in ((task, responses[i], responses[j]), (task, responses[j], responses[i]))]

    @staticmethod
    def combine(J: int, verdicts: Sequence[str | None]) -> np.ndarray:
        """[J, J] antisymmetric o_ij from pair_jobs' verdicts: +1 / -1 when one side wins in both orders, 0 for a
        tie or an order-inconsistent pair, NaN where a verdict is missing; the diagonal is 0."""
        o = np.zeros((J, J))
        it = iter(verdicts)
        for i in range(J):
            for j in range(i + 1, J):
                first, second = next(it), next(it)  # i shown first; then j shown first
                if first is None or second is None:
                    v = math.nan
                elif first == "A" and second == "B":
                    v = 1.0
                elif first == "B" and second == "A":
                    v = -1.0
                else:
                    v = 0.0
                o[i, j], o[j, i] = v, -v
        return o

    def group_matrix(self, task: Task, responses: Sequence[str]) -> np.ndarray:
        """o_ij of one group (module docstring)."""
        return self.combine(len(responses), self.verdicts(self.pair_jobs(task, responses)))

    @staticmethod
    def anchor_jobs(task: Task, responses: Sequence[str], anchors: Sequence[str]) -> list[tuple[Task, str, str]]:
        return [job for r in responses for a in anchors for job in ((task, r, a), (task, a, r))]

    @staticmethod
    def combine_anchors(n: int, anchors: Sequence[str], verdicts: Sequence[str | None]) -> np.ndarray:
        """[n] win rates x 100 from anchor_jobs' verdicts: per order 1 for a win, 0.5 a tie, 0 a loss; missing
        verdicts left out (NaN if none)."""
        points = {("A", 0): 1.0, ("B", 1): 1.0, ("tie", 0): 0.5, ("tie", 1): 0.5, ("B", 0): 0.0, ("A", 1): 0.0}
        per = np.array([points.get((v, k % 2), np.nan) for k, v in enumerate(verdicts)]).reshape(n, 2 * len(anchors))
        ok = np.isfinite(per)
        return np.where(ok.any(axis=1), 100.0 * np.nansum(per, axis=1) / np.maximum(ok.sum(axis=1), 1), np.nan)

    def win_rates(self, task: Task, responses: Sequence[str], anchors: Sequence[str]) -> np.ndarray:
        """Each response's oracle score: its win rate x 100 against the anchors, both orders, ties half."""
        return self.combine_anchors(len(responses), anchors, self.verdicts(self.anchor_jobs(task, responses,
                                                                                            anchors)))

    def report(self) -> dict[str, Any]:
        """This session's calls, cache hits, failures, unparsed answers and tokens, and the store's totals."""
        with self._lock:
            session = dict(self._session)
        return {**session, "store": self.store.totals(), "model": getattr(self.client, "model", "")}

    def close(self) -> None:
        self.store.close()
        self.client.close()


def strict_json(x):
    """NaN and inf as null, so the files are strict JSON."""
    if isinstance(x, dict):
        return {k: strict_json(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [strict_json(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def rule_oracle_scores(tasks: Sequence[Task], responses: Sequence[Sequence[str]]) -> np.ndarray:
    """[T, J] score of each rollout under its task's rule `oracle_criteria`: the CPU stand-in of the oracle
    (analysis, never training); NaN for a task without rule oracle criteria."""
    judge = RuleJudge()
    out = np.full((len(tasks), len(responses[0]) if len(responses) else 0), np.nan)
    for i, (task, rs) in enumerate(zip(tasks, responses)):
        crits = [c for c in task.oracle_criteria if c.verifier == "rule"]
        if crits and any(c.points > 0 for c in crits):
            S = judge.score(task, list(rs), crits).verdicts
            out[i] = rubric_reward(np.array([c.points for c in crits]), S)
    return out
