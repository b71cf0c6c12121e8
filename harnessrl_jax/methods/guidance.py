"""Guidance rules: who writes the prompts a task's rollouts are sampled in.

    prompts = rule.prompts(H, idx, tasks, step=step, seed=seed, budget=budget)   # None, or one TaskPrompts per task

`None` means the harness's own mounted fields (HarnessRL's guidance interface; `loop.sample_groups` renders them
after the prompt). A published rule returns, per drawn task, either one message list shared by its group (SkillRL:
skills mounted on every rollout) or J of them, one per rollout (RuscaRL: scaffolds that differ within the group);
`loop.sample_groups` then generates n = 1 per prompt and still groups the rows by task. Every prompt must fit the
run's prompt budget (`PromptBudget`); a rule shortens what it mounts to fit, and samples bare what cannot fit.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping, Sequence

from harnessrl_jax.evolver import templates

PROMPTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prompts")
Messages = tuple[Mapping[str, str], ...]


def load_template(name: str) -> str:
    """A prompt template of methods/prompts by name (`ruscarl_scaffold`), or a path to a .txt file."""
    return templates.load(name if os.sep in name or name.endswith(".txt") else os.path.join(PROMPTS_DIR, f"{name}.txt"))


@dataclasses.dataclass(frozen=True)
class TaskPrompts:
    """The prompts of one drawn task: one message list (shared by the group) or one per rollout; `guided`: some
    prompt carries more than the bare task; `shortened`: what was mounted was cut to fit the budget;
    `over_budget`: some rollout that should have been guided was sampled bare because nothing fit."""

    messages: tuple[Messages, ...]
    guided: bool = False
    shortened: bool = False
    over_budget: bool = False


@dataclasses.dataclass(frozen=True)
class PromptBudget:
    """The run's prompt limit in tokens, measured through the chat template the engine sees."""

    tokenizer: Any
    limit: int

    def length(self, messages: Sequence[Mapping[str, str]]) -> int:
        return len(self.tokenizer.apply_chat_template([dict(m) for m in messages], add_generation_prompt=True,
                                                      tokenize=True))

    def fits(self, messages: Sequence[Mapping[str, str]]) -> bool:
        return self.length(messages) <= self.limit


def with_system(prompt: Sequence[Mapping[str, str]], text: str) -> Messages:
    """`prompt` with `text` as its system turn: a new first turn, or prepended to the system turn it has."""
    messages = [dict(m) for m in prompt]
    if messages and messages[0].get("role") == "system":
        messages[0]["content"] = f"{text}\n\n{messages[0]['content']}"
    else:
        messages.insert(0, {"role": "system", "content": text})
    return tuple(messages)


def after_last_user(prompt: Sequence[Mapping[str, str]], block: str) -> Messages:
    """`prompt` with `block` after its last user message (a blank line between), as guidance fields go."""
    messages = [dict(m) for m in prompt]
    last = next((k for k in range(len(messages) - 1, -1, -1) if messages[k].get("role") == "user"), None)
    if last is None:
        raise ValueError("the prompt has no user message to mount guidance on")
    messages[last]["content"] = f"{messages[last]['content']}\n\n{block}"
    return tuple(messages)


class HarnessGuidance:
    """HarnessRL's guidance interface: the prompts are the harness's mounted fields (rendered by the loop)."""

    name = "harness"

    def prompts(self, harness, idx, tasks, *, step: int, seed: int, budget: PromptBudget):
        return None

    def metrics(self) -> dict[str, float]:
        return {}
