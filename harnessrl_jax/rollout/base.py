"""The rollout interface the trainer sees (`generate`, `update_weights`, `pad_id`, `eos_id`) and its output."""

from __future__ import annotations

import dataclasses
from typing import Protocol, Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class Rollouts:
    """n samples per prompt, grouped: rows [i*n, (i+1)*n) belong to prompt i.

    `tokens` and `logprobs` are [N, L] with N = prompts * n; a row's first `lengths[r]` entries are real (the
    stop token included when the row stopped), the rest are `pad_id` and 0. `logprobs` are
    log_softmax(logits / T) over the full vocabulary at the sampled token (SGLang's convention; T = 1 for greedy).
    """

    prompt_ids: list[list[int]]
    prompt_index: np.ndarray  # [N] which prompt each row continues
    tokens: np.ndarray  # [N, L] int32
    logprobs: np.ndarray  # [N, L] float32
    lengths: np.ndarray  # [N] int32
    finish_reason: list[str]  # 'stop' (a stop token was sampled) or 'length'
    texts: list[str]

    @property
    def num_samples(self) -> int:
        return len(self.prompt_index)

    def completion(self, row: int) -> list[int]:
        """The generated ids of one row, without padding."""
        return self.tokens[row, : self.lengths[row]].tolist()


class RolloutEngine(Protocol):
    """What the trainer needs from a sampler; it never sees more (in-process JAX, SGLang over HTTP, ...)."""

    pad_id: int
    eos_id: int

    def generate(
        self, prompts: Sequence[Sequence[int]] | Sequence[str], n: int = 1, *, max_new_tokens: int,
        temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0, seed: int = 0,
    ) -> Rollouts:
        """Sample n continuations of every prompt (token ids, or text the engine tokenizes as is)."""
        ...

    def update_weights(self, params) -> None:
        """Use these policy params from the next `generate` on."""
        ...


def checked_prompts(prompts, tokenizer, *, n: int, max_new_tokens: int, top_p: float,
               vocab_size: int | None = None) -> list[list[int]]:
    """The checks every engine's `generate` makes, and its prompts as token ids (text encoded by `tokenizer`):
    n >= 1, max_new_tokens >= 1, top_p in (0, 1], at least one prompt, none empty, ids inside `vocab_size`."""
    if n < 1 or max_new_tokens < 1:
        raise ValueError(f"need n >= 1 and max_new_tokens >= 1 (got n={n}, max_new_tokens={max_new_tokens})")
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    out = []
    for i, p in enumerate(prompts):
        if isinstance(p, str):
            if tokenizer is None:
                raise ValueError(f"prompt {i} is text but the engine has no tokenizer")
            p = tokenizer.encode(p)
        p = [int(t) for t in p]
        if not p:
            raise ValueError(f"prompt {i} is empty")
        bad = [t for t in p if vocab_size is not None and not 0 <= t < vocab_size]
        if bad:
            raise ValueError(f"prompt {i} has token id {bad[0]} outside the vocabulary [0, {vocab_size})")
        out.append(p)
    if not out:
        raise ValueError("no prompts given")
    return out
