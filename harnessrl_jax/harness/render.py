"""The prompt a rollout sees: the task prompt with its mounted guidance fields after it (HarnessRL, sec. 4.1).

Fields go at the end of the last user message, where the request is, after a blank line, one per line in `FIELDS`
order; earlier turns stay as the data gives them:

    <last user message>

    <criterion>...</criterion>
    <reference>...</reference>
    <critique>...</critique>

Field text goes in verbatim unless the guided prompt exceeds the budget (`fit_fields`). The bare rendering is the
prompt evaluation uses, and the context the loss may be computed under instead of the guided one.
"""

from __future__ import annotations

import functools
import json
from typing import Sequence

from harnessrl_jax.harness.state import FIELDS, GuidanceState
from harnessrl_jax.harness.transitions import DROP_ORDER


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
    """One prompt through the chat template with the generation prompt: text, or ids (no BOS) if `tokenize`.

    The ids are remembered for the last few thousand (prompt, fields): a step asks for a guided prompt's ids up to
    three times (the critic's budget check, then its resample's fit and rendering), ~0.4 ms each at the paper's
    prompt lengths (launch/bench_scale.py)."""
    if tokenize:
        try:
            return list(_ids(tokenizer, getattr(tokenizer, "chat_template", None), json.dumps(prompt, sort_keys=True),
                             tuple((n, t) for n, t in fields)))
        except TypeError:  # something unhashable or not plain JSON (the tokenizer, a message): rendered afresh
            pass
    return tokenizer.apply_chat_template(guided_messages(prompt, fields), add_generation_prompt=True,
                                         tokenize=tokenize)


@functools.lru_cache(maxsize=4096)
def _ids(tokenizer, template: str | None, prompt: str, fields: tuple[tuple[str, str], ...]) -> tuple[int, ...]:
    """The ids of a prompt (as JSON) with its fields, under the tokenizer's current chat template."""
    return tuple(tokenizer.apply_chat_template(guided_messages(json.loads(prompt), fields),
                                               add_generation_prompt=True, tokenize=True))

def fit_fields(tokenizer, prompt: Sequence[dict[str, str]], fields: Sequence[tuple[str, str]], limit: int, *,
               min_chars: int = 40) -> tuple[tuple[tuple[str, str], ...] | None, bool]:
    """(fields, shortened): the fields as rendered within `limit` prompt tokens, or (None, False) when even the
    shortest form does not fit.

    A guided prompt over the budget is shortened, never swapped for another prompt: field texts are cut (ending in
    ' ...'), the one that gives away most first (`transitions.DROP_ORDER`), down to `min_chars` each. The cut is a
    function of the texts and the tokenizer only, so the critic measures a candidate on exactly the prompt training
    will later sample it in.
    """

    fields = tuple((n, t) for n, t in fields)

    def length(fs):
        return len(render_prompt(tokenizer, prompt, fs, tokenize=True))

    over = length(fields) - limit
    if over <= 0:
        return fields, False
    texts = dict(fields)
    for name in DROP_ORDER:
        if name not in texts:
            continue
        for _ in range(4):  # token counts are not additive: re-measure after each cut
            text = texts[name]
            n_tok = max(len(tokenizer.encode(text)), 1)
            keep = int(len(text) * (n_tok - over - 4) / n_tok)
            texts[name] = _cut(text, max(keep, min_chars))
            over = length(tuple((n, texts[n]) for n, _ in fields)) - limit
            if over <= 0:
                return tuple((n, texts[n]) for n, _ in fields), True
            if keep <= min_chars:
                break
    return None, False

def _cut(text: str, n: int) -> str:
    text = text.strip()
    return text if len(text) <= n else text[:n].rstrip() + " ..."
