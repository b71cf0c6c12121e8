"""Plain GRPO: the harness with every interface frozen (no evolver, no guidance, the seed rubric, uniform sampling).

Tasks are drawn uniformly without replacement within each epoch (`loop.sample_tasks`): the frozen harness's
distribution p = 1/N, so u = 1, with less draw-to-draw variance than i.i.d. draws. Scoring is the run's judge
(loop.build_judge), as for HarnessRL: the rule checkers, and the LLM judge when config.judge.base_url is set; without
one the LLM criteria count as not judged (NaN cells, skipped by the reward).
"""

from __future__ import annotations

from typing import Any

from harnessrl_jax import loop


class GRPO:
    """config.method = 'grpo'. Checkpoint extra: {"data": the data position}."""

    name = "grpo"

    def __init__(self, run: loop.Run, workdir: str):
        self.run, self.workdir = run, workdir
        self.position = loop.DataPosition()

    def start(self, extra: dict[str, Any] | None) -> None:
        self.position = loop.DataPosition.from_dict(extra["data"]) if extra else loop.DataPosition()

    def step(self, state, step: int):
        state, self.position, metrics = loop.grpo_step(self.run, state, self.position, step)
        return state, metrics, []

    def extra(self) -> dict[str, Any]:
        return {"data": self.position.to_dict()}

    def close(self) -> None:
        pass
