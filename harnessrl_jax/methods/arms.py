"""HarnessBandit's arms: named, frozen prompt harnesses over the same tasks, each a renderer around the task's
messages and a rubric transform (identity unless said); texts in `methods/prompts/arm_<name>.txt`.

    plain          the task's messages under the chat template (the seed harness; the evaluation's training arm)
    sys_helpful    + a generic assistant system prompt
    sys_expert     + a domain-expert system prompt (the task's domain)
    structured     + "headings and bullet points" after the request
    concise        + "be concise" after the request
    plan_first     + "first list the key points, then answer" after the request
    persona_roleplay   the held-out arm: a role-play system prompt, never trained on
    rubric_hint    optional, not in the default six: every criterion in a system message (privileged information)
    snapshot:PATH  a frozen HarnessRL harness (HarnessState JSON, or RUN/checkpoints/<step>/extra/metadata)
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Callable, Sequence

import numpy as np

from harnessrl_jax.evolver import templates
from harnessrl_jax.harness.render import fit_fields, guided_messages, task_fields
from harnessrl_jax.harness.state import HarnessState
from harnessrl_jax.methods.guidance import PROMPTS_DIR, Messages, PromptBudget, TaskPrompts, after_last_user, \
    with_system
from harnessrl_jax.methods.parts import PartsContext, PromptWriter

DEFAULT_ARMS = ("plain", "sys_helpful", "sys_expert", "structured", "concise", "plan_first")
HELDOUT_ARM = "persona_roleplay"
SNAPSHOT = "snapshot:"


@dataclasses.dataclass(frozen=True)
class ArmSpec:
    """One arm: `messages(task, criteria)` renders a task (criteria: the task's rubric as the run holds it);
    `rubric(task, criteria)` is the rubric its rollouts are scored with."""

    name: str
    messages: Callable[..., Messages]
    rubric: Callable[..., tuple] = lambda task, criteria: tuple(criteria)
    fields: Callable[..., tuple] | None = None  # a snapshot arm's mounted (name, text) fields of a task


def _text(name: str, **values) -> str:
    return templates.fill(templates.load(os.path.join(PROMPTS_DIR, f"arm_{name}.txt")), **values).strip()


def _plain(task, criteria) -> Messages:
    return tuple(dict(m) for m in task.prompt)


def _system(name: str, **fixed):
    def render(task, criteria):
        values = {k: v(task, criteria) for k, v in fixed.items()}
        return with_system(task.prompt, _text(name, **values))
    return render


def _instruction(name: str):
    return lambda task, criteria: after_last_user(task.prompt, _text(name))


def _criteria_list(task, criteria) -> str:
    return "\n".join(f"- {c.text} ({c.points:+g})" for c in criteria)


ARMS: dict[str, ArmSpec] = {
    "plain": ArmSpec("plain", _plain),
    "sys_helpful": ArmSpec("sys_helpful", _system("sys_helpful")),
    "sys_expert": ArmSpec("sys_expert", _system("sys_expert", domain=lambda task, _: task.domain or "this field")),
    "structured": ArmSpec("structured", _instruction("structured")),
    "concise": ArmSpec("concise", _instruction("concise")),
    "plan_first": ArmSpec("plan_first", _instruction("plan_first")),
    "persona_roleplay": ArmSpec("persona_roleplay", _system("persona_roleplay")),
    "rubric_hint": ArmSpec("rubric_hint", _system("rubric_hint", criteria=_criteria_list)),
}


def snapshot_arm(path: str) -> ArmSpec:
    """A frozen HarnessRL harness as an arm: its guidance fields rendered after the request, its rubric scored;
    tasks it does not hold get the bare prompt and the run's rubric."""
    if not os.path.isfile(path):
        raise ValueError(f"snapshot arm {path!r}: no such file (a HarnessState JSON)")
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    state = HarnessState.from_dict(data.get("harness", data))  # a bare state or an extra holding one

    def fields(task):
        return task_fields(state.guidance, state.index(task.id)) if state.has_task(task.id) else ()

    def rubric(task, criteria):
        return state.criteria(task.id) if state.has_task(task.id) else tuple(criteria)

    return ArmSpec(f"{SNAPSHOT}{path}", lambda task, criteria: tuple(guided_messages(task.prompt, fields(task))),
                   rubric, fields)


def arm(name: str) -> ArmSpec:
    """The registered arm `name`, or the snapshot arm of `snapshot:PATH`."""
    if name.startswith(SNAPSHOT):
        return snapshot_arm(name[len(SNAPSHOT):])
    if name not in ARMS:
        raise ValueError(f"unknown arm {name!r}: known {sorted(ARMS)} or {SNAPSHOT}PATH")
    return ARMS[name]


def check_names(names: Sequence[str]) -> list[str]:
    """Problems with arm names (unknown names, missing snapshot files), without loading anything."""
    out = []
    for name in names:
        if name.startswith(SNAPSHOT):
            if not os.path.isfile(name[len(SNAPSHOT):]):
                out.append(f"arm {name!r}: no such HarnessState JSON file")
        elif name not in ARMS:
            out.append(f"unknown arm {name!r}: known {sorted(ARMS)} or {SNAPSHOT}PATH")
    return out


def arm_prompts(spec: ArmSpec, tasks: Sequence, criteria: Sequence[Sequence], budget: PromptBudget | None
                ) -> list[TaskPrompts]:
    """One prompt per task under the arm; a prompt over the budget is sampled bare (`over_budget`), a snapshot's
    fields are first shortened to fit (render.fit_fields)."""
    out = []
    for task, crit in zip(tasks, criteria):
        bare = tuple(dict(m) for m in task.prompt)
        if spec.fields is not None:
            fs = spec.fields(task)
            cut = False
            if fs and budget is not None:
                fitted, cut = fit_fields(budget.tokenizer, task.prompt, fs, budget.limit)
                if fitted is None:
                    out.append(TaskPrompts((bare,), over_budget=True))
                    continue
                fs = fitted
            out.append(TaskPrompts((tuple(guided_messages(task.prompt, fs)),), guided=bool(fs), shortened=cut))
            continue
        messages = spec.messages(task, crit)
        guided = messages != bare
        if guided and budget is not None and not budget.fits(messages):
            out.append(TaskPrompts((bare,), over_budget=True))
        else:
            out.append(TaskPrompts((messages,), guided=guided))
    return out


def arm_criteria(spec: ArmSpec, tasks: Sequence, criteria: Sequence[Sequence]) -> list[tuple]:
    """Each task's rubric under the arm's transform."""
    return [tuple(spec.rubric(t, c)) for t, c in zip(tasks, criteria)]


class ArmsGuidance(PromptWriter):
    """Prompts of each drawn task under its arm: `choose(idx, seed)` gives the arm index per task. A snapshot arm
    whose rubric differs from the run's gives `criteria` (the rubric the advantages use)."""

    name = "arms"

    def __init__(self, names: Sequence[str], choose: Callable[[Sequence[int], int], Sequence[int]]):
        self.names = list(names)
        self.specs = [arm(n) for n in self.names]
        self.choose = choose
        self._which: list[int] = []
        self._metrics: dict[str, float] = {}

    @classmethod
    def build(cls, ctx: PartsContext, *, names: Sequence[str], key: str, heldout: str,
              follow_sampler: bool = False):
        """Each task under an arm drawn uniformly from the step seed, or (`follow_sampler`) under the arm the run's
        sampler drew with it (`sampler.step_arms`: HarnessBandit's one arm for the step, the mixtures' grid rows)."""
        if follow_sampler:
            sampler = ctx.sampler
            if list(sampler.arm_names) != list(names):
                raise ValueError(f"--config.{key}: the sampler draws arms {sampler.arm_names}, not {list(names)}")
            return cls(names, lambda idx, seed: list(sampler.step_arms))
        return cls(names, uniform_choice(len(names)))

    @classmethod
    def check(cls, config, *, names: Sequence[str], key: str, heldout: str, follow_sampler: bool = False
              ) -> list[str]:
        return ([f"--config.{key}: {e}" for e in check_names(names)]
                + [f"--config.bandit.heldout_arm: {e}" for e in check_names([heldout])])

    def prompts(self, harness, idx, tasks, *, step: int, seed: int, budget):
        self._which = [int(a) for a in self.choose(idx, seed)]
        out = [arm_prompts(self.specs[a], [t], [harness.criteria(t.id)], budget)[0]
               for t, a in zip(tasks, self._which)]
        self._metrics = {"arms/over_budget": float(sum(p.over_budget for p in out)),
                         "arms/distinct": float(len(set(self._which)))}
        return out

    def criteria(self, harness, tasks) -> list[tuple] | None:
        """Per task the rubric of its arm, or None when every arm keeps the run's rubric (prompt arms)."""
        if all(self.specs[a].fields is None for a in self._which):
            return None
        return [arm_criteria(self.specs[a], [t], [harness.criteria(t.id)])[0] for t, a in zip(tasks, self._which)]

    def metrics(self) -> dict[str, float]:
        return dict(self._metrics)


def uniform_choice(num_arms: int):
    """Each task's arm uniformly at random, from the step seed (a resumed run draws the same)."""
    def choose(idx, seed):
        return np.random.default_rng((int(seed) % (2**32), 1)).integers(0, num_arms, len(idx))
    return choose


__all__ = ["ARMS", "ArmsGuidance", "ArmSpec", "DEFAULT_ARMS", "HELDOUT_ARM", "arm", "arm_criteria", "arm_prompts",
           "check_names", "snapshot_arm", "uniform_choice"]
