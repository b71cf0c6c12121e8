"""Task samplers: which tasks a step trains on, and each draw's importance correction u.

    sampler = SAMPLERS[config.tasks.sampler](num_tasks, seed=config.seed)
    idx, u = sampler.draw(H, step_seed, batch_size)      # task indices (harness rows), u = 1 / (N p_i)
    extra["sampler"] = sampler.state_dict()              # checkpointed; load_state_dict on resume

- `harness` (every method by default): `batch_size` i.i.d. draws from the harness's Cat(p_t) (HarnessRL, sec. 4.1),
  so a method whose sampling interface is frozen draws exactly as HarnessRL's seed harness does and the comparison
  has no sampling confound; p_t uniform gives u = 1.
- `epoch`: uniform without replacement within each epoch (a permutation seeded by (seed, epoch)): less draw-to-draw
  variance, but it ignores p_t, so only a method whose sampling interface is frozen may use it.
- `sec`: SEC's bandit over task arms (methods.sec): its own values, updated after each step by
  `sampler.observe(idx, rewards)`; it ignores p_t (HarnessRL's sampling interface is replaced where it is used).
- `bandit`: HarnessBandit's scheduler (methods.harnessbandit): one harness arm per step, then the next tasks of
  that arm's own pool; `sampler.after_update(advantages, sketch)` after the train step updates its values.

`make(name, tasks, config)` builds one: a sampler class with `create(tasks, config)` reads its settings from the
config, the others take (num_tasks, seed). Every sampler has `observe` (a no-op unless it learns) and `metrics`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import jax
import numpy as np

from harnessrl_jax.harness.state import HarnessState, sample_tasks
from harnessrl_jax.methods.harnessbandit import BanditSampler
from harnessrl_jax.methods.sec import SECSampler


class HarnessSampler:
    """i.i.d. draws from Cat(p_t); stateless (each step's key comes from the checkpointed root key)."""

    name = "harness"
    follows_harness = True  # draws follow p_t, so the sampling interface has an effect

    def __init__(self, num_tasks: int, *, seed: int = 0):
        self.num_tasks = num_tasks

    def draw(self, harness: HarnessState, seed: int, batch_size: int) -> tuple[list[int], np.ndarray]:
        """(task indices, u = 1 / (N p_i)) of one step."""
        idx, u = sample_tasks(harness.sampling, jax.random.PRNGKey(seed), batch_size)
        return [int(i) for i in np.asarray(idx)], np.asarray(u, np.float32)

    def observe(self, idx, rewards) -> None:
        pass

    def metrics(self) -> dict[str, float]:
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        pass


@dataclasses.dataclass
class EpochSampler:
    """Uniform without replacement per epoch; `epoch`, `index` say where the stream is (checkpointed)."""

    num_tasks: int
    seed: int = 0
    epoch: int = 0
    index: int = 0
    name = "epoch"
    follows_harness = False

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

    def observe(self, idx, rewards) -> None:
        pass

    def metrics(self) -> dict[str, float]:
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "index": self.index}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.epoch, self.index = int(state.get("epoch", 0)), int(state.get("index", 0))


SAMPLERS = {"harness": HarnessSampler, "epoch": EpochSampler, "sec": SECSampler, "bandit": BanditSampler}


def make(name: str, tasks, config):
    """The sampler `name` over the run's tasks, its settings from `config`."""
    cls = SAMPLERS[name]
    if hasattr(cls, "create"):
        return cls.create(tasks, config)
    return cls(len(tasks), seed=config.seed)
