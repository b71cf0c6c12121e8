"""HarnessRL: GRPO while the harness H_t = (p_t, g_t, c_t) co-evolves with the policy (attributor -> proposer ->
just-in-time critic, backed by the memory). Its ablations (methods.md 3.9) are config.harness switches: no_critic,
no_memory (and both: the paper's cumulative row), only_guidance / only_rubric / only_sampling."""

from __future__ import annotations

from harnessrl_jax.methods.base import Method


def harnessrl(config) -> Method:
    """HarnessRL: the interfaces config.harness leaves on (all three, or one with only_*), the critic and the
    memory unless ablated, the loss context and advantage rubric config.harness names."""
    from harnessrl_jax import configs

    h = config.harness
    return Method(name="harnessrl", sampler=config.tasks.sampler, interfaces=configs.interfaces(config),
                  critic=not h.no_critic, memory=not h.no_memory, loss_context=h.loss_context,
                  advantages_rubric=h.advantages_rubric)
