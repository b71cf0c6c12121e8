"""`Method`: a training method as a frozen description of its parts (see harnessrl_jax.methods)."""

from __future__ import annotations

import dataclasses

from harnessrl_jax.harness.transitions import DEFAULT_TRANSITIONS, Transitions
from harnessrl_jax.methods.samplers import SAMPLERS
from harnessrl_jax.words import INTERFACES, Interface

LOSS_CONTEXTS = ("guided", "bare")
ADVANTAGE_RUBRICS = ("before", "after")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Method:
    """A method as a description of its parts (see the module docstring); checked at construction."""

    name: str
    sampler: str = "harness"  # SAMPLERS key
    interfaces: tuple[Interface, ...] = ()  # what the evolver may change; () = frozen harness, observing attributor
    transitions: Transitions = DEFAULT_TRANSITIONS
    critic: bool = True  # False: every valid candidate accepted unmeasured
    memory: bool = True  # False: no time or semantic index
    loss_context: str = "guided"  # the loss sees the prompt the rollout was sampled in, or the bare prompt
    advantages_rubric: str = "before"  # the rubric the rollouts were graded with, or the one accepted this step

    def __post_init__(self):
        object.__setattr__(self, "interfaces", tuple(Interface(i) for i in self.interfaces))
        unknown = set(self.interfaces) - set(INTERFACES)
        if unknown:
            raise ValueError(f"method {self.name}: unknown interfaces {sorted(unknown)}")
        if self.sampler not in SAMPLERS:
            raise ValueError(f"--config.tasks.sampler={self.sampler!r}: known samplers {sorted(SAMPLERS)}")
        if Interface.SAMPLING in self.interfaces and not SAMPLERS[self.sampler].follows_harness:
            raise ValueError(f"--config.tasks.sampler={self.sampler!r} draws uniformly and ignores p_t, but method "
                             f"{self.name} updates the sampling interface: use tasks.sampler='harness'")
        if self.loss_context not in LOSS_CONTEXTS:
            raise ValueError(f"--config.harness.loss_context={self.loss_context!r}: expected one of {LOSS_CONTEXTS}")
        if self.advantages_rubric not in ADVANTAGE_RUBRICS:
            raise ValueError(f"--config.harness.advantages_rubric={self.advantages_rubric!r}: expected one of "
                             f"{ADVANTAGE_RUBRICS}")

    @property
    def frozen(self) -> bool:
        """True when no interface moves (the attributor still runs, to measure failure shares)."""
        return not self.interfaces
