"""Multi-turn agent rollouts: every episode alternates a policy turn and a tool result until `done` or the turn
budget, and each turn of all live episodes is one batched engine call.

An episode's context is kept as token ids, never re-tokenised: the rendered opening (chat template), then per turn
the engine's own tokens (with their logprobs: the only segments that carry loss) and the tool result's tokens (the
chat template's turn suffix around the harness's result message; context only).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import numpy as np

from harnessrl_jax.agentic.harnesses import NO_CALL, PLAN_ACK, Harness
from harnessrl_jax.agentic.tools import execute, parse

Segment = tuple[list[int], "np.ndarray | None"]  # token ids, and the engine's logprobs for a policy turn


@dataclasses.dataclass
class Episode:
    """One trajectory: its segments (opening, then policy turns and tool results), the workspace, the answer and
    why it ended ('done', 'turns': the turn budget, 'length': the context budget)."""

    harness: Harness
    segments: list[Segment]
    files: dict[str, str]
    answer: str | None = None
    ended: str | None = None
    turns: list[str] = dataclasses.field(default_factory=list)
    calls: int = 0  # turns that parsed to a tool call

    @property
    def context(self) -> list[int]:
        return [t for ids, _ in self.segments for t in ids]

    @property
    def policy_tokens(self) -> int:
        return sum(len(ids) for ids, lp in self.segments if lp is not None)


class TurnFormat:
    """The chat template's pieces around a turn for one tokenizer: the text that closes an assistant turn, and the
    text that opens a user message and the next assistant turn, found by rendering a probe conversation."""

    def __init__(self, tokenizer, stop_ids: Sequence[int]):
        self.tokenizer, self.stop_ids = tokenizer, set(int(s) for s in stop_ids)
        probe = [{"role": "user", "content": "\x00u"}, {"role": "assistant", "content": "\x00a"}]
        base = tokenizer.apply_chat_template(probe, add_generation_prompt=False)
        full = tokenizer.apply_chat_template(probe + [{"role": "user", "content": "\x00r"}],
                                             add_generation_prompt=True)
        if not full.startswith(base) or "\x00a" not in base or "\x00r" not in full:
            raise ValueError("the chat template does not render a conversation as a prefix of its continuation")
        self.close = base[base.index("\x00a") + 2:]
        tail = full[len(base):]
        self.open_user, self.open_assistant = tail.split("\x00r")

    def result_ids(self, text: str, last_token: int | None) -> list[int]:
        """Token ids after a policy turn (whose last token is `last_token`) up to the next assistant turn: the
        turn's close (less the stop token the policy already sampled), the result message, the assistant opener."""
        close = self.close
        if last_token is not None and last_token in self.stop_ids:
            stop_text = self.tokenizer.decode([last_token], skip_special_tokens=False)
            close = close[len(stop_text):] if close.startswith(stop_text) else close
        return self.tokenizer.encode(close + self.open_user + text + self.open_assistant)


def start(harness: Harness, task, tokenizer) -> Episode:
    """A fresh episode of `task` under `harness`."""
    prompt = tokenizer.apply_chat_template(harness.messages(task.user_text), add_generation_prompt=True,
                                           tokenize=True)
    return Episode(harness, [(list(prompt), None)], dict(task.extra.get("files", {})))


def step_episode(ep: Episode, text: str) -> str | None:
    """Applies one policy turn's text to the episode (its workspace, answer, end); the tool result to show, or
    None when the episode ended."""
    turn = len(ep.turns)
    ep.turns.append(text)
    if not ep.harness.parses(turn):
        return PLAN_ACK
    call = parse(text, ep.harness.schema)
    if call is None:
        return NO_CALL
    ep.calls += 1
    out = execute(ep.files, call)
    ep.files = dict(out.files)
    if out.answer is not None:
        ep.answer, ep.ended = out.answer, "done"
        return None
    return out.output


def run_episodes(engine, tokenizer, tasks: Sequence[Any], harnesses: Sequence[Harness], *, n: int, max_turns: int,
                 turn_tokens: int, max_prompt: int, max_continuation: int, seed: int, temperature: float = 1.0,
                 top_p: float = 1.0, top_k: int = 0, fmt: TurnFormat | None = None) -> list[Episode]:
    """n episodes per task (task-major), task i under harnesses[i]; each turn one engine call over every live
    episode. An episode ends on `done`, after `max_turns` policy turns, or when its next turn could pass
    `max_continuation` tokens after the opening (which must fit in `max_prompt`)."""
    fmt = fmt or TurnFormat(tokenizer, [engine.eos_id] + list(getattr(engine, "stop_ids", []) or []))
    if turn_tokens > max_continuation:
        raise ValueError(f"a {turn_tokens}-token turn does not fit in {max_continuation} tokens after the opening "
                         f"(config.max_new_tokens)")
    episodes = [start(h, t, tokenizer) for t, h in zip(tasks, harnesses) for _ in range(n)]
    for i, ep in enumerate(episodes):
        if len(ep.context) > max_prompt:
            raise ValueError(f"task {tasks[i // n].id!r} under {ep.harness.name}: its opening has "
                             f"{len(ep.context)} tokens, over config.max_prompt_len={max_prompt}")
    opening = [len(ep.context) for ep in episodes]
    for turn in range(max_turns):
        live = [(ep, o) for ep, o in zip(episodes, opening) if ep.ended is None]
        if not live:
            break
        out = engine.generate([ep.context for ep, _ in live], n=1, max_new_tokens=turn_tokens, temperature=temperature,
                              top_p=top_p, top_k=top_k, seed=(int(seed) + 7919 * turn) % (2**31 - 1))
        for r, (ep, o) in enumerate(live):
            ids = out.completion(r)
            ep.segments.append((ids, np.asarray(out.logprobs[r, :len(ids)], np.float32)))
            result = step_episode(ep, out.texts[r])
            if result is None:
                continue
            if turn == max_turns - 1:
                ep.ended = "turns"
                continue
            tool = fmt.result_ids(ep.harness.result(result), ids[-1] if ids else None)
            if len(ep.context) - o + len(tool) + turn_tokens > max_continuation:
                ep.ended = "length"
                continue
            ep.segments.append((tool, None))
    return episodes


__all__ = ["Episode", "Segment", "TurnFormat", "run_episodes", "start", "step_episode"]
