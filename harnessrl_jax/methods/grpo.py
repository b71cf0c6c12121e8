"""GRPO: rubric-based GRPO with a frozen harness (HarnessRL's baseline): the seed rubric, no guidance, p_t uniform."""

from __future__ import annotations

from harnessrl_jax import methods
from harnessrl_jax.harness.transitions import FROZEN_TRANSITIONS
from harnessrl_jax.methods.base import Method
from harnessrl_jax.methods.samplers import configured
from harnessrl_jax.settings import section


@methods.register("grpo")
def grpo(config) -> Method:
    """Plain GRPO: the harness with every interface frozen, drawn with config.tasks.sampler."""
    return Method(name="grpo", sampler=configured(config), transitions=FROZEN_TRANSITIONS,
                  memory=not section(config, "harness").no_memory)
