"""The mixed-batch baselines of HarnessBandit (HarnessBandit, sec. 5.1) and the rendering every arms method shares.

    mixture     each drawn task (a prompt row) takes one of the six arms uniformly, independently of the task, so a
                batch is uniform over the task x arm rows (the paper's six-harness mixture); one GRPO step
    mixture2    the same over two arms, `mixture.pair`: 'plain' (the evaluation's training arm) and 'structured'
                stand in for the paper's OpenClaw + Codex

Each task is rendered under its arm by methods.arms.ArmsGuidance, as HarnessBandit's are (whose sampler picks one
arm for the whole step). They train with Dr.GRPO's leave-one-out baseline, as HarnessBandit does.
"""

from __future__ import annotations

import dataclasses
import functools

from harnessrl_jax import methods
from harnessrl_jax.harness.transitions import FROZEN_TRANSITIONS
from harnessrl_jax.methods.arms import ArmsGuidance
from harnessrl_jax.methods.base import Method
from harnessrl_jax.methods.harnessbandit import check_rloo
from harnessrl_jax.methods.samplers import configured
from harnessrl_jax.settings import section


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
    mix = methods.settings(config, "mixture")
    if name == "mixture2":
        return tuple(mix.pair)
    return tuple(mix.arms) or tuple(methods.settings(config, "bandit").arms)


def _mixture(config, name: str, key: str) -> Method:
    return Method(name=name, sampler=configured(config), transitions=FROZEN_TRANSITIONS,
                  memory=not section(config, "harness").no_memory,
                  prompts=functools.partial(ArmsGuidance, names=mixture_arms(config, name), key=key,
                                            heldout=methods.settings(config, "bandit").heldout_arm))


@methods.register("mixture", settings=("mixture", MixtureConfig), check=check_rloo, defaults={"advantage": "rloo"})
def mixture_method(config) -> Method:
    """The six-arm mixture: every batch mixes rows of all arms (uniform over task x arm); the harness frozen."""
    return _mixture(config, "mixture", "mixture.arms")


@methods.register("mixture2", settings=("mixture", MixtureConfig), check=check_rloo,
                  defaults={"advantage": "rloo"})
def mixture2_method(config) -> Method:
    """The two-arm mixture over config.mixture.pair."""
    return _mixture(config, "mixture2", "mixture.pair")
