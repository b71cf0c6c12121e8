"""The parts a method is made of, as protocols with the defaults every part shares, and the stateful parts of one run
built from a `Method` (`MethodParts`):

    TaskSampler     draw(H, seed, B) -> (task rows, u); observe(rows, rewards); after_update(advantages, sketch)
    PromptWriter    prompts(H, rows, tasks, ...) -> one TaskPrompts per task, or None (the harness's own fields);
                    observe(step, draws, H, memory, hooks): learning from the judged groups; criteria(H, tasks): the
                    rubric the advantages use when the prompts bring their own
    HarnessRule     propose(RuleInput) -> RuleProposal: a published rule's harness updates after the evolver's
    Scheme          sample -> judge -> train: the groups a step draws and how it trains on them

Every part has metrics(), state_dict() and load_state_dict() (checkpoint extra["method"]). A Method names each part
by its class, or `functools.partial(cls, **settings)`; a run builds it with `cls.build(ctx, **settings)` from a
`PartsContext` (the run's config and tasks, the memory, the evolver model's client, the critic, the workdir and the
parts built before it). `build` defaults to `cls(**settings)`, so a part's constructor stays its own.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, ClassVar, Sequence

import numpy as np

from harnessrl_jax.evolver.critic import Critic, CriticHooks
from harnessrl_jax.evolver.evolver import EvolverResult, Group
from harnessrl_jax.harness.state import HarnessState
from harnessrl_jax.methods.updates import RuleInput, RuleProposal, apply_rule
from harnessrl_jax.stages import GroupBatch, TaskPrompts


@dataclasses.dataclass(frozen=True)
class PartsContext:
    """What a part is built from: the run's config and training tasks, the memory (None without one), the evolver
    model's client (None: the parts use their rule fallbacks), the critic, the run directory, the method, and the
    parts built before this one (the sampler, then the prompt writer)."""

    config: Any
    tasks: Sequence[Any]
    method: Any
    memory: Any = None
    client: Any = None
    critic: Critic | None = None
    workdir: str | None = None
    sampler: "TaskSampler | None" = None
    prompts: "PromptWriter | None" = None


class Part:
    """What every part has: metrics of its last call, and its state for the checkpoint."""

    # Whether the part writes with the evolver model when config.harness.proposer is 'llm' (its rule fallback else).
    uses_evolver_model: ClassVar[bool] = False

    @classmethod
    def build(cls, ctx: "PartsContext", **settings):
        """The part for one run: `cls(**settings)` unless the part reads the run (its tasks, config, memory...)."""
        return cls(**settings)

    @classmethod
    def check(cls, config, **settings) -> list[str]:
        """What the config gets wrong for this part (each problem naming the --config. key), before anything loads."""
        return []

    def metrics(self) -> dict[str, float]:
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state) -> None:
        pass


class TaskSampler(Part):
    """Which tasks a step trains on, and each draw's importance correction u = 1 / (N p_i)."""

    # Whether draws follow the harness's p_t (so the sampling interface has an effect).
    follows_harness: ClassVar[bool] = False

    def draw(self, harness: HarnessState, seed: int, batch_size: int) -> tuple[list[int], np.ndarray]:
        raise NotImplementedError

    def observe(self, idx: Sequence[int], rewards: np.ndarray) -> None:
        """The step's rewards [T, J] of the drawn tasks, the ones the advantages use (a learning sampler's update)."""

    def after_update(self, advantages: np.ndarray, sketch: np.ndarray | None) -> None:
        """The step's advantages [T, J] and, for a method that asks for it, the update's gradient sketch."""


class PromptWriter(Part):
    """Who writes the prompts a task's rollouts are sampled in."""

    # False only for the harness's own fields (rendered by the stages): the prompt budget keeps room otherwise.
    writes_prompts: ClassVar[bool] = True

    def prompts(self, harness: HarnessState, idx: Sequence[int], tasks: Sequence[Any], *, step: int, seed: int,
                budget) -> list[TaskPrompts] | None:
        raise NotImplementedError

    def observe(self, step: int, draws: Sequence[Group], harness: HarnessState, memory=None,
                hooks: CriticHooks | None = None) -> None:
        """The step's judged groups (under harness's rubric), after the judge: what the writer learns from; `hooks`
        reach the frozen policy and the judge (for rollouts of its own, e.g. on a validation sample)."""

    def criteria(self, harness: HarnessState, tasks: Sequence[Any]) -> list | None:
        """Per task the rubric the advantages use when the prompts bring their own, else None (the harness's)."""
        return None


class HarnessRule(Part):
    """A published rule that updates the harness after the evolver (methods.updates)."""

    name: ClassVar[str] = "rule"

    def propose(self, inp: RuleInput) -> RuleProposal:
        raise NotImplementedError


@dataclasses.dataclass
class TrainResult:
    """What a scheme's train stage gives the step: the new train state, the train step's metrics, the advantage
    metrics, seconds to add to the step's `time/*` keys, and the rewards [T, J] the advantages used."""

    state: Any
    metrics: dict[str, float]
    advantage_metrics: dict[str, float]
    timings: dict[str, float]
    rewards: np.ndarray


class Scheme(Part):
    """The groups a step samples and how it trains on them: sample -> judge -> (evolver, memory) -> train."""

    # True when the scheme writes rollout prompts itself (so the prompt budget keeps room).
    writes_prompts: ClassVar[bool] = False

    def sample(self, run, harness: HarnessState, idx: Sequence[int], tasks: Sequence[Any], *, step: int,
               seed: int) -> GroupBatch:
        """The groups the rest of the step sees (judged, attributed, recorded)."""
        raise NotImplementedError

    def judge(self, run, harness: HarnessState, tasks: Sequence[Any], groups: GroupBatch):
        """(S [K, J] per task, rewards [T, J], metrics) of `groups` under the harness's rubric."""
        raise NotImplementedError

    def train(self, run, state, *, step: int, harness: HarnessState, next_harness: HarnessState,
              tasks: Sequence[Any], groups: GroupBatch, rewards: np.ndarray, u: np.ndarray) -> TrainResult:
        raise NotImplementedError


PartFactory = Any  # a Part subclass, or functools.partial(subclass, **settings)


def part_class(factory) -> type:
    """The class a part factory builds: the class itself, or the one a functools.partial wraps."""
    cls = factory.func if isinstance(factory, functools.partial) else factory
    if not isinstance(cls, type) or (isinstance(factory, functools.partial) and factory.args):
        raise TypeError(f"a part is named by its class or functools.partial(cls, **settings), got {factory!r}")
    return cls


def _settings(factory) -> dict[str, Any]:
    return dict(factory.keywords) if isinstance(factory, functools.partial) else {}


def build_part(factory, ctx: PartsContext) -> Part:
    """The part `factory` names, built for the run `ctx` describes."""
    return part_class(factory).build(ctx, **_settings(factory))


def check_parts(method, config) -> list[str]:
    """The problems each of `method`'s parts finds in `config` (Part.check)."""
    return [p for f in (method.sampler, method.prompts, method.rule, method.scheme) if f is not None
            for p in part_class(f).check(config, **_settings(f))]


# ------------------------------------------------------------------------------------------- a run's parts


class MethodParts:
    """The stateful parts of one run of a method (the sampler, the prompt writer, the rule, the scheme), called at
    fixed points of the one step; their state is the checkpoint's extra["method"] (and extra["sampler"])."""

    def __init__(self, method, ctx: PartsContext):
        self.method = method
        self.sampler: TaskSampler = build_part(method.sampler, ctx)
        ctx = dataclasses.replace(ctx, sampler=self.sampler)
        self.prompts: PromptWriter = build_part(method.prompts, ctx)
        ctx = dataclasses.replace(ctx, prompts=self.prompts)
        self.rule: HarnessRule | None = build_part(method.rule, ctx) if method.rule is not None else None
        self.scheme: Scheme = build_part(method.scheme, ctx)
        self.critic = ctx.critic
        self._rule_metrics: dict[str, float] = {}

    def after_judge(self, step: int, draws: Sequence[Group], harness: HarnessState, result: EvolverResult, *,
                    memory=None, hooks: CriticHooks | None = None) -> tuple[EvolverResult, dict[int, dict]]:
        """The prompt writer's learning from this step's groups, then the rule's harness updates applied onto the
        evolver's result (methods.updates); returns the result and per-draw fields of the memory's records."""
        self.prompts.observe(step, draws, harness, memory, hooks)
        if self.rule is None:
            return result, {}
        inp = RuleInput(step, draws, harness, result.attributions, memory, hooks or CriticHooks())
        proposal = self.rule.propose(inp)
        self._rule_metrics = dict(proposal.metrics)
        result = apply_rule(proposal, inp, result, transitions=self.method.transitions, critic=self.critic,
                            gated=self.method.rule_gated, source=self.rule.name)
        return result, proposal.dynamics

    def metrics(self) -> dict[str, float]:
        return {**self.prompts.metrics(), **self._rule_metrics, **self.scheme.metrics()}

    def state_dict(self) -> dict[str, Any]:
        out = {"guidance": self.prompts.state_dict(), "scheme": self.scheme.state_dict()}
        if self.rule is not None:
            out["rule"] = self.rule.state_dict()
        return out

    def load_state_dict(self, state) -> None:
        state = state or {}
        self.prompts.load_state_dict(state.get("guidance"))
        if self.rule is not None:
            self.rule.load_state_dict(state.get("rule"))
        self.scheme.load_state_dict(state.get("scheme"))


__all__ = ["HarnessRule", "MethodParts", "Part", "PartFactory", "PartsContext", "PromptWriter", "Scheme",
           "TaskSampler", "TrainResult", "build_part", "check_parts", "part_class"]
