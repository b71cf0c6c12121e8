"""The prompt a rollout sees: the task prompt with its mounted guidance fields after it (HarnessRL, sec. 4.1).

Fields go at the end of the last user message, after a blank line, one per line in `FIELDS` order:

    <last user message>

    <criterion>...</criterion>
    <reference>...</reference>
    <critique>...</critique>

The last user message is where the request is, so the guidance sits right after it and before the generation
prompt; earlier turns stay as the data gives them. Field text goes in verbatim. The bare rendering (no fields) is
the prompt evaluation uses, and the context the loss may be computed under instead of the guided one.
"""

from __future__ import annotations

from typing import Sequence

from harnessrl_jax.harness.state import FIELDS, GuidanceState
from harnessrl_jax.rubric.schema import Task


def guidance_block(fields: Sequence[tuple[str, str]]) -> str:
    """The text appended for (name, text) fields: `<name>text</name>` lines, in `FIELDS` order."""
    texts = dict(fields)
    if len(texts) != len(fields) or set(texts) - set(FIELDS):
        raise ValueError(f"fields must be distinct names among {FIELDS}, got {[n for n, _ in fields]}")
    return "\n".join(f"<{name}>{texts[name]}</{name}>" for name in FIELDS if name in texts)


def guided_messages(prompt: Sequence[dict[str, str]], fields: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    """A copy of `prompt` with the fields appended to its last user message; unchanged when there are none."""
    messages = [dict(m) for m in prompt]
    if not fields:
        return messages
    last = next((k for k in range(len(messages) - 1, -1, -1) if messages[k].get("role") == "user"), None)
    if last is None:
        raise ValueError("the prompt has no user message to mount guidance fields on")
    messages[last]["content"] = f"{messages[last]['content']}\n\n{guidance_block(fields)}"
    return messages


def task_fields(guidance: GuidanceState, i: int) -> tuple[tuple[str, str], ...]:
    """Task i's mounted fields as (name, text) pairs."""
    return tuple((name, f.text) for name, f in guidance.task_fields(i))


def render_prompt(tokenizer, prompt: Sequence[dict[str, str]], fields: Sequence[tuple[str, str]] = (), *,
                  tokenize: bool = False) -> str | list[int]:
    """One prompt through the chat template with the generation prompt: text, or ids (no BOS) if `tokenize`."""
    return tokenizer.apply_chat_template(guided_messages(prompt, fields), add_generation_prompt=True,
                                         tokenize=tokenize)


def render(tokenizer, tasks: Sequence[Task], indices: Sequence[int], guidance: GuidanceState | None, *,
           tokenize: bool = False) -> list[str] | list[list[int]]:
    """Prompts of the drawn tasks `tasks[i]` for i in `indices` (rows of the harness), with their mounted fields.

    `guidance=None` gives the bare prompts.
    """
    out = []
    for i in (int(i) for i in indices):
        fields = task_fields(guidance, i) if guidance is not None else ()
        out.append(render_prompt(tokenizer, tasks[i].prompt, fields, tokenize=tokenize))
    return out


def render_bare(tokenizer, tasks: Sequence[Task], indices: Sequence[int], *,
                tokenize: bool = False) -> list[str] | list[list[int]]:
    """The same prompts with no guidance: what evaluation sees, and the loss context when training bare."""
    return render(tokenizer, tasks, indices, None, tokenize=tokenize)
