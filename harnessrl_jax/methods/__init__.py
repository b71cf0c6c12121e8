"""Training methods by name (`config.method`), each a small frozen description of its parts (`Method`); one step
function, `loop.Stepper`, runs any description:

    method = describe(config)                    # METHODS[config.method](config) -> Method
    stepper = loop.Stepper(run, method, workdir)  # run = build.setup(config)
    stepper.start(extra)                          # extra: a checkpoint's `extra` slot, or None (fresh)
    state, metrics, records = stepper.step(state, step)

A description names: the task sampler (`samplers.SAMPLERS`), the interfaces the evolver may update (none: the
harness is frozen and the attributor only observes), the transition functions, whether the critic measures and the
memory is kept, the context the loss sees, which rubric the advantages use, who writes the rollout prompts (the
harness's fields or a published guidance rule, `guidance`) and a published rule that updates the harness after the
evolver (`rule_updates`). The stateful parts behind those names are built by `parts.build`.

    grpo        the harness with every interface frozen (methods.md 3.1)
    harnessrl   the full harness; ablations and interface replacements by config.harness switches (3.9)
    ruscarl     rubric scaffolds decaying within the group and over training, bare-context loss (3.2)
    skillrl     a skill bank distilled from successful rollouts, retrieved into the prompt, evolving (3.3)
    evorubric   prune, regenerate and verify criteria (3.4)
    amaris      memory-augmented rubric revision (3.5); amaris_pp: on all three interfaces (3.6)
    sec         SEC's curriculum bandit over task arms (3.7)
    coca        CoCA: query-only and rubric-guided groups, per-visit calibration, frontier-guided self-distillation
                (methods.md 1; its scheme replaces the group and train stages: methods.coca_step)
    harnessbandit   one prompt harness (arm) per step, scheduled by learnability x transferability (2)
    mixture     every batch mixes all of HarnessBandit's arms; mixture2: two of them (2.12)

Add a method by registering a function from the config to its description here (docs/design.md, "Adding a
method").
"""

from __future__ import annotations

from typing import Callable

# The method modules stay the package's attributes (`harnessrl_jax.methods.ruscarl.scaffold_ratios`,
# `...sec.update_values`, `...coca.diagnose`, `...harnessbandit.selection_probs` are DESIGN contracts): the registry
# holds their functions without rebinding the module names.
from harnessrl_jax.methods import (amaris, coca, evorubric, grpo, harnessbandit, harnessrl, mixture, ruscarl, sec,
                                   skillrl)
from harnessrl_jax.methods.base import ADVANTAGE_RUBRICS, LOSS_CONTEXTS, Method
from harnessrl_jax.methods.samplers import SAMPLERS, EpochSampler, HarnessSampler

METHODS: dict[str, Callable[..., Method]] = {
    "grpo": grpo.grpo, "harnessrl": harnessrl.harnessrl, "ruscarl": ruscarl.ruscarl, "skillrl": skillrl.skillrl,
    "evorubric": evorubric.evorubric, "amaris": amaris.amaris, "amaris_pp": amaris.amaris_pp, "sec": sec.sec,
    "coca": coca.coca, "harnessbandit": harnessbandit.harnessbandit_method, "mixture": mixture.mixture_method,
    "mixture2": mixture.mixture2_method}


def describe(config) -> Method:
    """The description of config.method under `config`."""
    if config.method not in METHODS:
        raise ValueError(f"--config.method={config.method!r}: known methods {sorted(METHODS)}")
    return METHODS[config.method](config)


__all__ = ["ADVANTAGE_RUBRICS", "EpochSampler", "HarnessSampler", "LOSS_CONTEXTS", "METHODS", "Method", "SAMPLERS",
           "describe"]
