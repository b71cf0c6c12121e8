"""RoutingJudge: each criterion goes to the judge its `verifier:` tag names; the matrices merge in criterion order.

    verifier:rule          -> the rule judge
    verifier:llm, no tag   -> the default judge
    verifier:<name>        -> judges[<name>]
"""

from __future__ import annotations

from typing import Mapping, Sequence

from harnessrl_jax.rubric.judges.base import Judge, ScoreMatrix, check_batch
from harnessrl_jax.rubric.judges.rule import RuleJudge
from harnessrl_jax.rubric.schema import Criterion, Task


class RoutingJudge(Judge):
    """Splits every task's criteria by verifier, scores each part with its judge (one batch per judge), merges."""

    name = "routing"

    def __init__(self, default: Judge | None = None, *, rule: Judge | None = None,
                 judges: Mapping[str, Judge] | None = None):
        self.routes: dict[str, Judge] = dict(judges or {})
        for reserved, arg in (("rule", "rule"), ("llm", "default")):
            if reserved in self.routes:
                raise ValueError(f"judge name {reserved!r} is reserved; pass that judge as `{arg}=`")
        self.routes["rule"] = rule if rule is not None else RuleJudge()
        if default is not None:
            self.routes["llm"] = default

    def route(self, c: Criterion) -> str:
        """The route name of a criterion ('rule', 'llm' or a named judge); a clear error if none serves it."""
        name = c.verifier or "llm"
        if name not in self.routes:
            if name == "llm":
                raise ValueError(f"criterion {c.id!r} needs an LLM judge (tag 'verifier:llm' or none) but the "
                                 f"routing judge has no default judge")
            raise ValueError(f"criterion {c.id!r} names verifier {name!r}; known: {sorted(self.routes)}")
        return name

    def score_batch(self, tasks: Sequence[Task], responses: Sequence[Sequence[str]],
                    criteria: Sequence[Sequence[Criterion]] | None = None) -> list[ScoreMatrix]:
        """One matrix per task, rows in the task's criterion order, each row scored by its judge."""
        criteria = check_batch(tasks, responses, criteria)
        # Route everything before any call, so a misrouted criterion fails fast instead of after paid calls.
        routed = [[self.route(c) for c in cs] for cs in criteria]
        parts: list[list[tuple[list[int], ScoreMatrix]]] = [[] for _ in tasks]
        for name, judge in self.routes.items():
            picks = [[k for k, r in enumerate(rs) if r == name] for rs in routed]
            which = [i for i, p in enumerate(picks) if p]
            if not which:
                continue
            got = judge.score_batch([tasks[i] for i in which], [responses[i] for i in which],
                                    [[criteria[i][k] for k in picks[i]] for i in which])
            for i, m in zip(which, got):
                parts[i].append((picks[i], m))
        return [ScoreMatrix.merge(p, len(cs), len(rs)) for p, cs, rs in zip(parts, criteria, responses)]

    @property
    def stats(self) -> dict[str, int]:
        """The counters of the routed judges that keep them (the HTTP judges: calls, requests, tokens), summed."""
        out: dict[str, int] = {}
        for judge in self.routes.values():
            for k, v in (getattr(judge, "stats", None) or {}).items():
                out[k] = out.get(k, 0) + int(v)
        return out

    def close(self) -> None:
        for judge in self.routes.values():
            judge.close()
