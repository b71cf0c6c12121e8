"""HarnessRL: GRPO while the harness H_t = (p_t, g_t, c_t) co-evolves with the policy (attributor -> proposer ->
just-in-time critic, backed by the memory). Its ablations are config.harness switches: no_critic, no_memory (both:
the paper's cumulative row), only_guidance / only_rubric / only_sampling, and the interface replacements, where one
interface runs a published rule and the other two keep HarnessRL's mechanism: `sampling_rule='sec'` (SEC's bandit
draws the tasks), `guidance_rule='ruscarl'` (RuscaRL's scaffolds of the current criteria, the bare-context loss),
`rubric_rule='evorubric'` (EvoRubric's prune-regenerate-verify loop, anchors protected). `gate_replaced_rule` has
the critic measure the replaced rule's harness actions (only EvoRubric's rubric updates are actions; SEC's values
and RuscaRL's schedule are not).
"""

from __future__ import annotations

import functools

from harnessrl_jax import methods
from harnessrl_jax.methods.base import Method
from harnessrl_jax.methods.evorubric import EvoRubricRule
from harnessrl_jax.methods.ruscarl import RuscaRLGuidance
from harnessrl_jax.methods.samplers import configured
from harnessrl_jax.methods.schemes import GRPOScheme
from harnessrl_jax.methods.sec import SECSampler
from harnessrl_jax.settings import section
from harnessrl_jax.words import Interface


@methods.register("harnessrl")
def harnessrl(config) -> Method:
    """HarnessRL: the interfaces config.harness leaves on (all three, or one with only_*) less any replaced by a
    published rule, the critic and the memory unless ablated, the loss context and advantage rubric config.harness
    names (the bare context under RuscaRL's guidance)."""
    h = section(config, "harness")
    replaced = {Interface.SAMPLING: h.sampling_rule != "harnessrl", Interface.GUIDANCE: h.guidance_rule != "harnessrl",
                Interface.RUBRIC: h.rubric_rule != "harnessrl"}
    parts, loss_context = {}, h.loss_context
    if h.sampling_rule == "sec":
        parts["sampler"] = functools.partial(SECSampler, settings=methods.settings(config, "sec"))
    if h.guidance_rule == "ruscarl":
        ruscarl = methods.settings(config, "ruscarl")
        parts.update(prompts=functools.partial(RuscaRLGuidance, settings=ruscarl), tis_cap=ruscarl.tis_cap)
        loss_context = "bare"
    if h.rubric_rule == "evorubric":
        parts.update(rule=functools.partial(EvoRubricRule, settings=methods.settings(config, "evorubric")),
                     rule_interfaces=(Interface.RUBRIC,), rule_gated=h.gate_replaced_rule)
    return Method(name="harnessrl", sampler=parts.pop("sampler", configured(config)),
                  interfaces=tuple(i for i in h.interfaces() if not replaced[i]), critic=not h.no_critic,
                  memory=not h.no_memory,
                  scheme=functools.partial(GRPOScheme, loss_context=loss_context,
                                           advantages_rubric=h.advantages_rubric), **parts)
