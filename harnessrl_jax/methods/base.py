"""`Method`: a training method as a frozen description of its parts (methods.parts), checked at construction."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from harnessrl_jax.harness.transitions import DEFAULT_TRANSITIONS, Transitions
from harnessrl_jax.methods.guidance import HarnessPrompts
from harnessrl_jax.methods.parts import HarnessRule, PartFactory, PromptWriter, Scheme, TaskSampler, part_class
from harnessrl_jax.methods.samplers import HarnessSampler
from harnessrl_jax.methods.schemes import GRPOScheme
from harnessrl_jax.words import INTERFACES, Interface


@dataclasses.dataclass(frozen=True, kw_only=True)
class Method:
    """A method as a description of its parts: each part by its class (or a functools.partial of it with its
    settings), what the evolver may change, and what the train step adds for it."""

    name: str
    sampler: PartFactory = HarnessSampler  # a TaskSampler
    prompts: PartFactory = HarnessPrompts  # a PromptWriter: the harness's mounted fields by default
    rule: PartFactory | None = None  # a HarnessRule applied after the evolver, or None
    rule_gated: bool = False  # the critic measures the rule's updates (an interface replacement, gated)
    rule_interfaces: tuple[Interface, ...] = ()  # the interfaces the rule may update
    scheme: PartFactory = GRPOScheme  # a Scheme: one group per task and one GRPO update by default
    interfaces: tuple[Interface, ...] = ()  # what the evolver may change; () = frozen harness, observing attributor
    transitions: Transitions = DEFAULT_TRANSITIONS
    critic: bool = True  # False: every valid candidate accepted unmeasured
    memory: bool = True  # False: no time or semantic index
    anchors: bool = True  # False: no anchor criteria, every seed criterion may change (EvoRubric alone)
    tis_cap: float | None = None  # truncated importance sampling cap of the loss; None: config.loss.tis_cap
    distill_coef: float = 0.0  # lambda_D of the train step's distillation term (CoCA's scheme)
    # (config, model config) -> rl.sketch.SketchSpec: the train step also returns the update's gradient sketch
    sketch: Callable[[Any, Any], Any] | None = None

    def __post_init__(self):
        object.__setattr__(self, "interfaces", tuple(Interface(i) for i in self.interfaces))
        object.__setattr__(self, "rule_interfaces", tuple(Interface(i) for i in self.rule_interfaces))
        for key, base in (("sampler", TaskSampler), ("prompts", PromptWriter), ("scheme", Scheme),
                          ("rule", HarnessRule)):
            factory = getattr(self, key)
            if factory is not None and not issubclass(part_class(factory), base):
                raise ValueError(f"method {self.name}: its {key} must build a {base.__name__}, got {factory!r}")
        sampler, prompts, scheme = (part_class(f) for f in (self.sampler, self.prompts, self.scheme))
        moved = set(self.interfaces) | set(self.rule_interfaces)
        if Interface.SAMPLING in moved and not sampler.follows_harness:
            raise ValueError(f"--config.tasks.sampler: method {self.name} updates the sampling interface, but its "
                             f"sampler {sampler.__name__} ignores p_t: use tasks.sampler='harness' (or "
                             f"harness.sampling_rule='sec' to replace HarnessRL's sampling with SEC's)")
        if scheme.writes_prompts and (prompts.writes_prompts or Interface.GUIDANCE in moved):
            raise ValueError(f"method {self.name}: its scheme {scheme.__name__} writes the prompts itself")
        both = set(self.interfaces) & set(self.rule_interfaces)
        if both:
            raise ValueError(f"method {self.name}: interfaces {sorted(both)} are updated by both the evolver and "
                             f"its rule")
        if prompts.writes_prompts and Interface.GUIDANCE in moved:
            raise ValueError(f"method {self.name}: {prompts.__name__} writes the prompts, so no other part may "
                             f"mount guidance fields")
        if self.rule is None and (self.rule_interfaces or self.rule_gated):
            raise ValueError(f"method {self.name}: rule_interfaces / rule_gated without a rule")
        unknown = moved - set(INTERFACES)
        if unknown:
            raise ValueError(f"method {self.name}: unknown interfaces {sorted(unknown)}")

    @property
    def frozen(self) -> bool:
        """True when no part updates the harness (the attributor still runs, to measure failure shares)."""
        return not self.interfaces and self.rule is None

    @property
    def mounts_guidance(self) -> bool:
        """Whether rollout prompts may carry more than the bare prompt (so the prompt budget keeps room)."""
        return (Interface.GUIDANCE in self.interfaces + self.rule_interfaces
                or part_class(self.prompts).writes_prompts or part_class(self.scheme).writes_prompts)

    @property
    def uses_evolver_model(self) -> bool:
        """Whether a part writes with the evolver model when config.harness.proposer is 'llm' (HarnessRL's proposer
        and any part that declares it: SkillRL's teacher, EvoRubric's and AMARIS's rules, CoCA's rewriter)."""
        return bool(self.interfaces) or any(
            part_class(f).uses_evolver_model for f in (self.sampler, self.prompts, self.scheme, self.rule)
            if f is not None)
