"""HarnessRL: GRPO while the harness H_t = (p_t, g_t, c_t) co-evolves with the policy (attributor -> proposer ->
just-in-time critic, backed by the memory). Its ablations (methods.md 3.9) are config.harness switches:
no_critic, no_memory (and both: the paper's cumulative row), only_guidance / only_rubric / only_sampling, and the
interface replacements (3.9.4, 3.10): `sampling_rule='sec'` (SEC's bandit draws the tasks), `guidance_rule=
'ruscarl'` (RuscaRL's scaffolds of the current criteria, the bare-context loss), `rubric_rule='evorubric'`
(EvoRubric's prune-regenerate-verify loop, anchors protected). The replaced interface leaves the evolver; the other
two keep attributor, memory and critic. `gate_replaced_rule` (default True, the issue's reading: the critic gates
what it gated before) has the critic measure the replaced rule's harness actions -- only EvoRubric's rubric
updates are actions; SEC's values and RuscaRL's schedule are not -- and False runs them as published (AMB-3.18)."""

from __future__ import annotations

from harnessrl_jax.methods.base import Method
from harnessrl_jax.words import Interface

SAMPLING_RULES = ("harnessrl", "sec")
GUIDANCE_RULES = ("harnessrl", "ruscarl")
RUBRIC_RULES = ("harnessrl", "evorubric")


def harnessrl(config) -> Method:
    """HarnessRL: the interfaces config.harness leaves on (all three, or one with only_*) less any replaced by a
    published rule, the critic and the memory unless ablated, the loss context and advantage rubric config.harness
    names (the bare context under RuscaRL's guidance)."""
    from harnessrl_jax import configs

    h = config.harness
    sampling, guidance, rubric = (h.get("sampling_rule", "harnessrl"), h.get("guidance_rule", "harnessrl"),
                                  h.get("rubric_rule", "harnessrl"))
    for key, value, allowed in (("sampling_rule", sampling, SAMPLING_RULES), ("guidance_rule", guidance,
                                                                             GUIDANCE_RULES),
                                ("rubric_rule", rubric, RUBRIC_RULES)):
        if value not in allowed:
            raise ValueError(f"--config.harness.{key}={value!r}: expected one of {allowed}")
    replaced = {Interface.SAMPLING: sampling != "harnessrl", Interface.GUIDANCE: guidance != "harnessrl",
                Interface.RUBRIC: rubric != "harnessrl"}
    interfaces = tuple(i for i in configs.interfaces(config) if not replaced[i])
    kw = {}
    if guidance == "ruscarl":
        kw.update(guidance="ruscarl", loss_context="bare", tis_cap=configs.method_config(config, "ruscarl").tis_cap)
    if rubric == "evorubric":
        kw.update(rule_updates="evorubric", rule_interfaces=(Interface.RUBRIC,),
                  rule_gated=bool(h.get("gate_replaced_rule", True)))
    return Method(name="harnessrl", sampler="sec" if sampling == "sec" else config.tasks.sampler,
                  interfaces=interfaces, critic=not h.no_critic, memory=not h.no_memory,
                  loss_context=kw.pop("loss_context", h.loss_context), advantages_rubric=h.advantages_rubric, **kw)
