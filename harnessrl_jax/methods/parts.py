"""The stateful parts a method description names beyond the sampler: its guidance rule and its rule updates, built
once per run by `loop.Stepper` and called at fixed points of the one step:

    parts = build(method, config, tasks, memory=..., client=..., critic=...)
    prompts = parts.prompts(H, idx, tasks, step=..., seed=..., budget=...)   # None: the harness's own fields
    result, dynamics = parts.after_judge(step, draws, H, result, memory=..., hooks=...)   # after the evolver
    parts.metrics(); parts.state_dict() / load_state_dict(...)              # checkpoint extra["method"]

A scheme (CoCA's, methods.coca_step) replaces the step's group and train stages: `parts.scheme` is None otherwise.

Each part's settings come from its config sub-dict through configs.py's builders (config.ruscarl, config.skillrl,
config.evorubric, config.amaris), so config.json records them. `client` is the evolver model's client when
config.harness.proposer is 'llm' (AMB-3.1: every method's LLM component uses the evolver model), else None and the
parts use their rule fallbacks.
"""

from __future__ import annotations

from typing import Any, Sequence

from harnessrl_jax.methods.base import Method
from harnessrl_jax.methods.guidance import HarnessGuidance
from harnessrl_jax.methods.updates import RuleInput, apply_rule


class Parts:
    def __init__(self, method: Method, guidance, rule=None, *, critic=None, scheme=None):
        self.method, self.guidance, self.rule, self.critic = method, guidance, rule, critic
        self.scheme = scheme  # CoCA's dual-group scheme (methods.coca_step), or None
        self._metrics: dict[str, float] = {}

    def prompts(self, harness, idx, tasks, *, step: int, seed: int, budget):
        return self.guidance.prompts(harness, idx, tasks, step=step, seed=seed, budget=budget)

    def after_judge(self, step: int, draws: Sequence, harness, result, *, memory=None, hooks=None
                    ) -> tuple[Any, dict[int, dict[str, Any]]]:
        """The guidance rule's learning from this step's groups (SkillRL's bank) and the rule's harness updates,
        applied onto the evolver's result (methods.updates)."""
        if hasattr(self.guidance, "observe"):
            self.guidance.observe(step, [(g.task, harness.rubric_of(g.task.id), g.S, g.responses) for g in draws],
                                  memory)
        if self.rule is None:
            return result, {}
        from harnessrl_jax.evolver.critic import CriticHooks

        inp = RuleInput(step, draws, harness, result.attributions, memory, hooks or CriticHooks())
        proposal = self.rule.propose(inp)
        self._metrics = dict(proposal.metrics)
        result = apply_rule(proposal, inp, result, transitions=self.method.transitions, critic=self.critic,
                            gated=self.method.rule_gated, source=self.rule.name)
        return result, proposal.dynamics

    def criteria(self, harness, tasks) -> list | None:
        """The rubric the advantages use when the guidance rule's arms bring their own (HarnessBandit's snapshot
        arms), else None: the harness's."""
        return self.guidance.criteria(harness, tasks) if hasattr(self.guidance, "criteria") else None

    def metrics(self) -> dict[str, float]:
        return {**self.guidance.metrics(), **self._metrics, **(self.scheme.metrics() if self.scheme else {})}

    def state_dict(self) -> dict[str, Any]:
        out = {}
        if hasattr(self.guidance, "state_dict"):
            out["guidance"] = self.guidance.state_dict()
        if self.rule is not None:
            out["rule"] = self.rule.state_dict()
        if self.scheme is not None:
            out["scheme"] = self.scheme.state_dict()
        return out

    def load_state_dict(self, state) -> None:
        state = state or {}
        if hasattr(self.guidance, "load_state_dict"):
            self.guidance.load_state_dict(state.get("guidance"))
        if self.rule is not None:
            self.rule.load_state_dict(state.get("rule"))
        if self.scheme is not None:
            self.scheme.load_state_dict(state.get("scheme"))


def build(method: Method, config, tasks: Sequence, *, memory=None, client=None, critic=None,
          workdir: str | None = None, sampler=None) -> Parts:
    """The parts of `method` for a run over `tasks` (see the module docstring); a scheme logs under `workdir`;
    `sampler` is the run's (the arms of HarnessBandit follow its draw)."""
    from harnessrl_jax import configs

    if method.guidance == "ruscarl":
        from harnessrl_jax.methods.ruscarl import RuscaRLGuidance

        guidance = RuscaRLGuidance(configs.method_config(config, "ruscarl"), group_size=config.num_generations,
                                   total_steps=config.total_steps)
    elif method.guidance == "skillrl":
        from harnessrl_jax.methods.skillrl import SkillRLGuidance

        guidance = SkillRLGuidance(configs.method_config(config, "skillrl"), tasks=tasks, client=client,
                                   memory=memory)
    elif method.guidance == "arms":
        from harnessrl_jax.methods.mixture import ArmsGuidance, mixture_arms, uniform_choice

        if method.sampler == "bandit":  # the step's one arm, as the bandit drew it
            guidance = ArmsGuidance(sampler.arm_names, lambda idx, seed: [sampler.arm] * len(idx))
        else:
            names = mixture_arms(config, method.name)
            guidance = ArmsGuidance(names, uniform_choice(len(names)))
    else:
        guidance = HarnessGuidance()
    rule = None
    if method.rule_updates == "evorubric":
        from harnessrl_jax.methods.evorubric import EvoRubricRule

        rule = EvoRubricRule(configs.method_config(config, "evorubric"), client=client)
    elif method.rule_updates in ("amaris", "amaris_pp"):
        from harnessrl_jax.methods.amaris import AMARISRule

        rule = AMARISRule(configs.method_config(config, "amaris"), plus=method.rule_updates == "amaris_pp",
                          client=client, total_steps=config.total_steps)
        rule.start(memory)
    scheme = None
    if method.scheme == "coca":
        from harnessrl_jax.methods.coca_step import CoCAScheme

        scheme = CoCAScheme(configs.method_config(config, "coca"), client=client, workdir=workdir)
    return Parts(method, guidance, rule, critic=critic, scheme=scheme)
