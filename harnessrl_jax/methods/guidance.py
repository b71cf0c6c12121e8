"""Prompt writers (methods.parts.PromptWriter): who writes the prompts a task's rollouts are sampled in, and the
helpers they share.

`HarnessPrompts` (the default) returns None: the harness's own mounted fields, rendered after the prompt by
stages.sample_groups. A published rule returns, per drawn task, either one message list shared by its group
(SkillRL: skills mounted on every rollout) or J of them, one per rollout (RuscaRL: scaffolds that differ within the
group); sample_groups then generates n = 1 per prompt and still groups the rows by task. Every prompt must fit the
run's prompt budget (`PromptBudget`): a writer shortens what it mounts to fit, and samples bare what cannot fit.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping, Sequence

from harnessrl_jax.evolver import templates
from harnessrl_jax.methods.parts import PromptWriter
from harnessrl_jax.stages import TaskPrompts

PROMPTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prompts")
Messages = tuple[Mapping[str, str], ...]


def load_template(name: str) -> str:
    """A prompt template of methods/prompts by name (`ruscarl_scaffold`), or a path to a .txt file."""
    return templates.load(name if os.sep in name or name.endswith(".txt") else os.path.join(PROMPTS_DIR, f"{name}.txt"))


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


class HarnessPrompts(PromptWriter):
    """HarnessRL's guidance interface: the prompts are the harness's mounted fields (rendered by the stages)."""

    writes_prompts = False

    def prompts(self, harness, idx, tasks, *, step: int, seed: int, budget: PromptBudget):
        return None


__all__ = ["HarnessPrompts", "Messages", "PROMPTS_DIR", "PromptBudget", "TaskPrompts", "after_last_user",
           "load_template", "with_system"]
