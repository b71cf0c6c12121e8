"""The mixed-batch baselines of HarnessBandit (HarnessBandit, sec. 5.1) and the rendering every arms method shares.

    mixture     every batch mixes rows of the six arms: a step takes the next rows of an epoch-wise permutation of
                the task x arm grid (`ArmGridSampler`), as HarnessBandit walks each arm's shuffled pool; one GRPO step
    mixture2    the same over two arms, `mixture.pair`: 'plain' (the evaluation's training arm) and 'structured'
                stand in for the paper's OpenClaw + Codex

Each task is rendered under its arm by methods.arms.ArmsGuidance, as HarnessBandit's are (whose sampler picks one
arm for the whole step). They train with Dr.GRPO's leave-one-out baseline, as HarnessBandit does.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Mapping, Sequence

import numpy as np

from harnessrl_jax import methods
from harnessrl_jax.harness.transitions import FROZEN_TRANSITIONS
from harnessrl_jax.methods.arms import ArmsGuidance
from harnessrl_jax.methods.base import Method
from harnessrl_jax.methods.harnessbandit import check_rloo
from harnessrl_jax.methods.parts import PartsContext, TaskSampler
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


class ArmGridSampler(TaskSampler):
    """Epoch-wise permutations of the task x arm grid (seeded by (seed, epoch)): a step takes its next rows, each a
    task and the arm it is rendered under (`step_arms`, read by ArmsGuidance); u = 1. Where the epoch ends inside a
    step, the step goes on into the next one."""

    def __init__(self, num_tasks: int, arm_names: Sequence[str], seed: int = 0):
        self.num_tasks, self.arm_names, self.seed = num_tasks, list(arm_names), int(seed)
        self.epoch = self.index = 0
        self.step_arms: list[int] = []

    @classmethod
    def build(cls, ctx: PartsContext, *, names: Sequence[str]):
        return cls(len(ctx.tasks), names, ctx.config.seed)

    def draw(self, harness, seed: int, batch_size: int) -> tuple[list[int], np.ndarray]:
        H = len(self.arm_names)
        rows: list[int] = []
        while len(rows) < batch_size:
            order = np.random.default_rng((self.seed, self.epoch)).permutation(self.num_tasks * H)
            take = order[self.index:self.index + batch_size - len(rows)]
            rows.extend(int(r) for r in take)
            self.index += len(take)
            if self.index >= len(order):
                self.epoch, self.index = self.epoch + 1, 0
        self.step_arms = [r % H for r in rows]
        return [r // H for r in rows], np.ones(batch_size, np.float32)

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "index": self.index, "arms": self.arm_names}

    def load_state_dict(self, state: Mapping[str, Any] | None) -> None:
        if not state:
            return
        if list(state.get("arms", self.arm_names)) != self.arm_names:
            raise ValueError(f"the checkpoint's mixture arms {state['arms']} differ from this config's {self.arm_names}")
        self.epoch, self.index = int(state["epoch"]), int(state["index"])


def _mixture(config, name: str, key: str) -> Method:
    names = mixture_arms(config, name)
    return Method(name=name, sampler=functools.partial(ArmGridSampler, names=names), transitions=FROZEN_TRANSITIONS,
                  memory=not section(config, "harness").no_memory,
                  prompts=functools.partial(ArmsGuidance, names=names, key=key, follow_sampler=True,
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
