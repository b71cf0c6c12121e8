"""The task samplers any method may draw with, chosen by config.tasks.sampler; a method whose mechanism is the
sampler brings its own (SEC's bandit over task arms, HarnessBandit's scheduler).

- `harness` (every method by default): i.i.d. draws from the harness's Cat(p_t) (HarnessRL, sec. 4.1), so a method
  whose sampling interface is frozen draws exactly as HarnessRL's seed harness does and the comparison has no
  sampling confound; p_t uniform gives u = 1.
- `epoch`: uniform without replacement within each epoch (a permutation seeded by (seed, epoch)): less draw-to-draw
  variance, but it ignores p_t, so only a method whose sampling interface is frozen may use it.
"""

from __future__ import annotations

from typing import Any, Mapping

import jax
import numpy as np

from harnessrl_jax.harness.state import HarnessState, sample_tasks
from harnessrl_jax.methods.parts import PartsContext, TaskSampler


class HarnessSampler(TaskSampler):
    """i.i.d. draws from Cat(p_t); stateless (each step's key comes from the checkpointed root key)."""

    follows_harness = True

    def __init__(self, num_tasks: int):
        self.num_tasks = num_tasks

    @classmethod
    def build(cls, ctx: PartsContext):
        return cls(len(ctx.tasks))

    def draw(self, harness: HarnessState, seed: int, batch_size: int) -> tuple[list[int], np.ndarray]:
        """(task indices, u = 1 / (N p_i)) of one step."""
        idx, u = sample_tasks(harness.sampling, jax.random.PRNGKey(seed), batch_size)
        return [int(i) for i in np.asarray(idx)], np.asarray(u, np.float32)


class EpochSampler(TaskSampler):
    """Uniform without replacement per epoch; `epoch`, `index` say where the stream is (checkpointed)."""

    def __init__(self, num_tasks: int, seed: int = 0):
        self.num_tasks, self.seed = num_tasks, int(seed)
        self.epoch = self.index = 0

    @classmethod
    def build(cls, ctx: PartsContext):
        return cls(len(ctx.tasks), ctx.config.seed)

    def draw(self, harness: HarnessState, seed: int, batch_size: int) -> tuple[list[int], np.ndarray]:
        """The next `batch_size` tasks of the stream, u = 1 (the step seed is not used: the order is the epoch's)."""
        picked = []
        while len(picked) < batch_size:
            order = np.random.default_rng((self.seed, self.epoch)).permutation(self.num_tasks)
            take = order[self.index:self.index + batch_size - len(picked)]
            picked.extend(int(i) for i in take)
            self.index += len(take)
            if self.index >= self.num_tasks:
                self.epoch, self.index = self.epoch + 1, 0
        return picked, np.ones(batch_size, np.float32)

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "index": self.index}

    def load_state_dict(self, state: Mapping[str, Any] | None) -> None:
        state = state or {}
        self.epoch, self.index = int(state.get("epoch", 0)), int(state.get("index", 0))


# config.tasks.sampler -> the sampler
SAMPLERS = {"harness": HarnessSampler, "epoch": EpochSampler}


def configured(config) -> type[TaskSampler]:
    """The sampler config.tasks.sampler names (checks.check reports an unknown name with its key)."""
    return SAMPLERS[config.tasks.sampler]


__all__ = ["EpochSampler", "HarnessSampler", "SAMPLERS", "configured"]
