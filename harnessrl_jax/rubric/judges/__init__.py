"""Judges: score K criteria on J responses into a ScoreMatrix (verdicts 1/0, NaN where no verdict was obtained).

    judge.score(task, responses, criteria=None) -> ScoreMatrix
    judge.score_batch(tasks, responses, criteria=None) -> list[ScoreMatrix]

`RuleJudge` (criteria tagged verifier:rule), `OpenAIJudge` (any /v1/chat/completions server: SGLang, vLLM,
llama.cpp), `SGLangJudge` (SGLang's native /generate, many prompts a request), `AnthropicJudge`, and
`RoutingJudge` (each criterion to the judge its tags name). A verdict of 1 means
the criterion holds; for a pitfall (negative points) that the bad behaviour occurred, so the reward subtracts.
`make_judge(config)` builds one from a config dict by `kind`.
"""

from __future__ import annotations

from typing import Any, Mapping

from harnessrl_jax.rubric.judges.anthropic_judge import AnthropicJudge  # imports `anthropic` only when built
from harnessrl_jax.rubric.judges.base import (ERROR, FAILURES, OK, STATUSES, TIMEOUT, UNPARSED, Judge,
                                              JudgeProtocol, ScoreMatrix, Unjudged, total_failures)
from harnessrl_jax.rubric.judges.cache import JudgeCache, cache_key
from harnessrl_jax.rubric.judges.llm import MODES, CallFailed, Completion, LLMJudge
from harnessrl_jax.rubric.judges.openai_compat import OpenAIJudge
from harnessrl_jax.rubric.judges.parse import Parsed, parse_rubric_verdicts, parse_verdict
from harnessrl_jax.rubric.judges.routing import RoutingJudge
from harnessrl_jax.rubric.judges.rule import RuleJudge
from harnessrl_jax.rubric.judges.sglang_native import SGLangJudge


JUDGES = {"rule": RuleJudge, "openai": OpenAIJudge, "sglang": SGLangJudge, "anthropic": AnthropicJudge}


def make_judge(config: Mapping[str, Any]) -> Judge:
    """A judge from a config dict: {"kind": "rule" | "openai" | "sglang" | "anthropic" | "routing", **its settings}.

    For "routing": {"kind": "routing", "default": {...judge config...}, "judges": {name: {...}}, "rule": {...}}.
    """
    cfg = dict(config)
    kind = cfg.pop("kind", None)
    if kind == "routing":
        default = cfg.pop("default", None)
        rule = cfg.pop("rule", None)
        named = cfg.pop("judges", {}) or {}
        if cfg:
            raise ValueError(f"routing judge: unknown settings {sorted(cfg)}")
        return RoutingJudge(make_judge(default) if default else None, rule=make_judge(rule) if rule else None,
                            judges={k: make_judge(v) for k, v in named.items()})
    if kind not in JUDGES:
        raise ValueError(f"unknown judge kind {kind!r}; known: {sorted(JUDGES) + ['routing']}")
    return JUDGES[kind](**cfg)


__all__ = [
    "AnthropicJudge", "CallFailed", "Completion", "ERROR", "FAILURES", "JUDGES", "Judge", "JudgeCache",
    "JudgeProtocol", "LLMJudge", "MODES", "OK", "OpenAIJudge", "Parsed", "RoutingJudge", "RuleJudge", "SGLangJudge",
    "STATUSES",
    "ScoreMatrix", "TIMEOUT", "UNPARSED", "Unjudged", "cache_key", "make_judge", "parse_rubric_verdicts",
    "parse_verdict", "total_failures",
]
