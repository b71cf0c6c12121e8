"""GRPO: rubric-based GRPO with a frozen harness (HarnessRL's baseline, methods.md 3.1)."""

from __future__ import annotations

from harnessrl_jax.harness.transitions import FROZEN_TRANSITIONS
from harnessrl_jax.methods.base import Method


def grpo(config) -> Method:
    """Plain GRPO: the harness with every interface frozen (seed rubric, no guidance, p_t uniform)."""
    return Method(name="grpo", sampler=config.tasks.sampler, transitions=FROZEN_TRANSITIONS,
                  memory=not config.harness.no_memory)
