"""Training methods by name (`config.method`), each a small frozen description of its parts (`Method`); one step
function, `loop.Stepper`, runs any description:

    method = describe(config)                    # METHODS[config.method](config) -> Method
    stepper = loop.Stepper(run, method, workdir)  # run = build.setup(config)
    stepper.start(extra)                          # extra: a checkpoint's `extra` slot, or None (fresh)
    state, metrics, records = stepper.step(state, step)

A description names: the task sampler (`samplers.SAMPLERS`), the interfaces the evolver may update (none: the
harness is frozen and the attributor only observes), the transition functions, whether the critic measures and the
memory is kept, the context the loss sees, and which rubric the advantages use. `grpo` is the harness with every
interface frozen; `harnessrl` the full harness, its ablations set by config.harness switches. Add a method by
registering a function from the config to its description here (docs/design.md, "Adding a method").
"""

from __future__ import annotations

from typing import Callable

from harnessrl_jax.methods.base import ADVANTAGE_RUBRICS, LOSS_CONTEXTS, Method
from harnessrl_jax.methods.grpo import grpo
from harnessrl_jax.methods.harnessrl import harnessrl
from harnessrl_jax.methods.samplers import SAMPLERS, EpochSampler, HarnessSampler

METHODS: dict[str, Callable[..., Method]] = {"grpo": grpo, "harnessrl": harnessrl}


def describe(config) -> Method:
    """The description of config.method under `config`."""
    if config.method not in METHODS:
        raise ValueError(f"--config.method={config.method!r}: known methods {sorted(METHODS)}")
    return METHODS[config.method](config)


__all__ = ["ADVANTAGE_RUBRICS", "EpochSampler", "HarnessSampler", "LOSS_CONTEXTS", "METHODS", "Method", "SAMPLERS",
           "describe", "grpo", "harnessrl"]
