"""`Method`: a training method as a frozen description of its parts (see harnessrl_jax.methods)."""

from __future__ import annotations

import dataclasses

from harnessrl_jax.harness.transitions import DEFAULT_TRANSITIONS, Transitions
from harnessrl_jax.methods.samplers import SAMPLERS
from harnessrl_jax.words import INTERFACES, Interface

LOSS_CONTEXTS = ("guided", "bare")
ADVANTAGE_RUBRICS = ("before", "after")
# Who renders the rollout prompts: the harness's mounted fields, or a published guidance rule (methods.guidance).
GUIDANCE_RULES = ("harness", "ruscarl", "skillrl", "arms")
# A published rule that updates the harness after the evolver (methods.updates): none, or its name.
RULE_UPDATES = ("", "evorubric", "amaris", "amaris_pp")
# A scheme that replaces the group and train stages of the step: none (one group per task, trained as sampled or
# bare), or CoCA's (a query-only and a rubric-guided group per task, calibration, the frontier gate, distillation).
SCHEMES = ("", "coca")


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
    guidance: str = "harness"  # GUIDANCE_RULES: who writes the rollout prompts
    rule_updates: str = ""  # RULE_UPDATES: a published rule whose harness actions apply after the evolver's
    rule_gated: bool = False  # the critic measures the rule's updates (interface replacement, issue's reading)
    rule_interfaces: tuple[Interface, ...] = ()  # the interfaces the rule may update
    anchors: bool = True  # False: no anchor criteria, every seed criterion may change (EvoRubric alone, AMB-3.7)
    tis_cap: float | None = None  # truncated importance sampling cap of the loss; None: config.loss.tis_cap
    scheme: str = ""  # SCHEMES: who samples the groups and builds the train rows (methods.coca_step)
    distill_coef: float = 0.0  # lambda_D of the train step's distillation term (CoCA's scheme)
    sketch: bool = False  # the train step also returns the gradient sketch (HarnessBandit, rl.sketch)

    def __post_init__(self):
        object.__setattr__(self, "interfaces", tuple(Interface(i) for i in self.interfaces))
        object.__setattr__(self, "rule_interfaces", tuple(Interface(i) for i in self.rule_interfaces))
        unknown = set(self.interfaces) - set(INTERFACES)
        if unknown:
            raise ValueError(f"method {self.name}: unknown interfaces {sorted(unknown)}")
        if self.sampler not in SAMPLERS:
            raise ValueError(f"--config.tasks.sampler={self.sampler!r}: known samplers {sorted(SAMPLERS)}")
        if Interface.SAMPLING in self.interfaces and not SAMPLERS[self.sampler].follows_harness:
            raise ValueError(f"--config.tasks.sampler={self.sampler!r} ignores p_t, but method {self.name} updates "
                             f"the sampling interface: use tasks.sampler='harness' (or harness.sampling_rule='sec' "
                             f"to replace HarnessRL's sampling with SEC's)")
        if self.loss_context not in LOSS_CONTEXTS:
            raise ValueError(f"--config.harness.loss_context={self.loss_context!r}: expected one of {LOSS_CONTEXTS}")
        if self.advantages_rubric not in ADVANTAGE_RUBRICS:
            raise ValueError(f"--config.harness.advantages_rubric={self.advantages_rubric!r}: expected one of "
                             f"{ADVANTAGE_RUBRICS}")
        if self.guidance not in GUIDANCE_RULES:
            raise ValueError(f"method {self.name}: guidance rule {self.guidance!r}, known {GUIDANCE_RULES}")
        if self.rule_updates not in RULE_UPDATES:
            raise ValueError(f"method {self.name}: rule updates {self.rule_updates!r}, known {RULE_UPDATES}")
        if self.scheme not in SCHEMES:
            raise ValueError(f"method {self.name}: scheme {self.scheme!r}, known {SCHEMES}")
        if self.scheme and (self.guidance != "harness" or Interface.GUIDANCE in self.interfaces):
            raise ValueError(f"method {self.name}: the {self.scheme} scheme writes the prompts itself")
        both = set(self.interfaces) & set(self.rule_interfaces)
        if both:
            raise ValueError(f"method {self.name}: interfaces {sorted(both)} are updated by both the evolver and "
                             f"the rule {self.rule_updates!r}")
        if self.guidance != "harness" and Interface.GUIDANCE in self.interfaces + self.rule_interfaces:
            raise ValueError(f"method {self.name}: the guidance rule {self.guidance!r} writes the prompts, so no "
                             f"other part may mount guidance fields")

    @property
    def frozen(self) -> bool:
        """True when no part updates the harness (the attributor still runs, to measure failure shares)."""
        return not self.interfaces and not self.rule_updates

    @property
    def mounts_guidance(self) -> bool:
        """Whether rollout prompts may carry more than the bare prompt (so the prompt budget keeps room)."""
        return (Interface.GUIDANCE in self.interfaces + self.rule_interfaces or self.guidance != "harness"
                or bool(self.scheme))

    @property
    def uses_evolver_model(self) -> bool:
        """Whether a part writes with the evolver model when config.harness.proposer is 'llm' (HarnessRL's
        proposer, SkillRL's distiller, EvoRubric's generator and verifier, AMARIS's analyst and reviser, CoCA's
        rewriter)."""
        return (bool(self.interfaces) or bool(self.rule_updates) or self.guidance == "skillrl"
                or self.scheme == "coca")  # CoCA's rewriter of LLM criteria
