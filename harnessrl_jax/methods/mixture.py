"""The mixed-batch baselines of HarnessBandit (methods.md 2.12) and the rendering every arms method shares.

    mixture     each drawn task (a prompt row) takes one of the six arms uniformly, independently of the task, so a
                batch is uniform over the task x arm rows (the paper's six-harness mixture); one GRPO step
    mixture2    the same over two arms, `mixture.pair` (AMB-2.4: the paper's OpenClaw + Codex; here 'plain', the
                arm evaluation trains-arm scores use, and 'structured')

`ArmsGuidance` renders each task under its arm (methods.arms) for these and for HarnessBandit, whose sampler picks
one arm for the whole step.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import numpy as np

from harnessrl_jax.methods.arms import arm, arm_criteria, arm_prompts


@dataclasses.dataclass(frozen=True)
class MixtureConfig:
    """config.mixture: the arms of the six-arm mixture (empty: config.bandit.arms) and of the two-arm one."""

    arms: tuple[str, ...] = ()
    pair: tuple[str, ...] = ("plain", "structured")

    def __post_init__(self):
        if len(self.pair) != 2 or len(set(self.pair)) != 2:
            raise ValueError(f"pair must name two different arms, got {list(self.pair)}")
        if self.arms and len(set(self.arms)) != len(self.arms):
            raise ValueError(f"arms: names repeat in {list(self.arms)}")


def mixture_arms(config, name: str) -> tuple[str, ...]:
    """The arms a mixture method mixes."""
    from harnessrl_jax import configs

    mix = configs.method_config(config, "mixture")
    if name == "mixture2":
        return tuple(mix.pair)
    return tuple(mix.arms) or tuple(configs.method_config(config, "bandit").arms)


class ArmsGuidance:
    """Prompts of each drawn task under its arm: `choose(idx, seed)` gives the arm index per task. A snapshot arm
    whose rubric differs from the run's gives `criteria` (the rubric the advantages use)."""

    name = "arms"

    def __init__(self, names: Sequence[str], choose: Callable[[Sequence[int], int], Sequence[int]]):
        self.names = list(names)
        self.specs = [arm(n) for n in self.names]
        self.choose = choose
        self._which: list[int] = []
        self._metrics: dict[str, float] = {}

    def prompts(self, harness, idx, tasks, *, step: int, seed: int, budget):
        self._which = [int(a) for a in self.choose(idx, seed)]
        out = [arm_prompts(self.specs[a], [t], [harness.criteria(t.id)], budget)[0]
               for t, a in zip(tasks, self._which)]
        self._metrics = {"arms/over_budget": float(sum(p.over_budget for p in out)),
                         "arms/distinct": float(len(set(self._which)))}
        return out

    def criteria(self, harness, tasks) -> list[tuple] | None:
        """Per task the rubric of its arm, or None when every arm keeps the run's rubric (prompt arms)."""
        if all(self.specs[a].fields is None for a in self._which):
            return None
        return [arm_criteria(self.specs[a], [t], [harness.criteria(t.id)])[0] for t, a in zip(tasks, self._which)]

    def metrics(self) -> dict[str, float]:
        return dict(self._metrics)


def uniform_choice(num_arms: int):
    """Each task's arm uniformly at random, from the step seed (a resumed run draws the same)."""
    def choose(idx, seed):
        return np.random.default_rng((int(seed) % (2**32), 1)).integers(0, num_arms, len(idx))
    return choose


def _mixture(config, name: str):
    from harnessrl_jax.harness.transitions import FROZEN_TRANSITIONS
    from harnessrl_jax.methods.base import Method

    return Method(name=name, sampler=config.tasks.sampler, guidance="arms", transitions=FROZEN_TRANSITIONS,
                  memory=not config.harness.no_memory)


def mixture_method(config):
    """The six-arm mixture: every batch mixes rows of all arms (uniform over task x arm); the harness frozen."""
    return _mixture(config, "mixture")


def mixture2_method(config):
    """The two-arm mixture over config.mixture.pair."""
    return _mixture(config, "mixture2")
