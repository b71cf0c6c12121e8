"""RuleJudge: verdicts from the rule checkers (`rubric.rules.check`) for criteria tagged `verifier:rule`."""

from __future__ import annotations

import logging
import time
from typing import Sequence

from harnessrl_jax.rubric import rules
from harnessrl_jax.rubric.judges.base import ERROR, OK, Judge, ScoreMatrix, check_batch
from harnessrl_jax.rubric.schema import Criterion, Task

log = logging.getLogger(__name__)


class RuleJudge(Judge):
    """Checks each criterion's `rule:<id>` with its `rule_kwargs:<json>`; a True check is verdict 1.

    For a pitfall the rule describes the bad behaviour (e.g. `keywords:existence` of a forbidden word), so 1 means
    it occurred, as for every judge. A criterion whose rule cannot run (no rule tag, unknown id, bad kwargs) is an
    'error' row, and a checker that raises on one response an 'error' cell, each logged once per criterion;
    with `strict=True` they raise instead.
    """

    name = "rule"

    def __init__(self, strict: bool = False):
        self.strict = strict
        self._warned: set[str] = set()

    def score_batch(self, tasks: Sequence[Task], responses: Sequence[Sequence[str]],
                    criteria: Sequence[Sequence[Criterion]] | None = None) -> list[ScoreMatrix]:
        """One matrix per task; rules are cheap, so this runs inline."""
        criteria = check_batch(tasks, responses, criteria)
        return [self._score(t, rs, cs) for t, rs, cs in zip(tasks, responses, criteria)]

    def _score(self, task: Task, responses: Sequence[str], criteria: Sequence[Criterion]) -> ScoreMatrix:
        m = ScoreMatrix.empty([c.id for c in criteria], len(responses), self.name)
        prompt = task.user_text
        for k, c in enumerate(criteria):
            try:
                if c.rule_id is None:
                    raise ValueError(f"criterion {c.id!r} has no 'rule:<checker id>' tag")
                kwargs = c.rule_kwargs
                rules.validate_kwargs(c.rule_id, kwargs, prompt=prompt)  # once per row, not per response
            except ValueError as e:
                if self.strict:
                    raise
                self._warn(c.id, f"cannot be checked: {e}")
                for j in range(len(responses)):
                    m.set(k, j, None, ERROR, str(e))
                continue
            for j, r in enumerate(responses):
                t0 = time.perf_counter()
                try:
                    v = rules.check(c.rule_id, kwargs, r, prompt=prompt)
                except Exception as e:  # noqa: BLE001 - a checker bug on odd text costs one cell, not the run
                    if self.strict:
                        raise
                    self._warn(c.id, f"checker {c.rule_id} raised on a response: {type(e).__name__}: {e}")
                    m.set(k, j, None, ERROR, f"{c.rule_id} raised {type(e).__name__}: {e}", time.perf_counter() - t0)
                    continue
                m.set(k, j, v, OK, f"{c.rule_id}: {'holds' if v else 'does not hold'}", time.perf_counter() - t0)
        return m

    def _warn(self, cid: str, msg: str) -> None:
        if cid not in self._warned:  # once per criterion: a broken rule would otherwise flood the log every step
            self._warned.add(cid)
            log.warning("rule judge: criterion %r: %s", cid, msg)
