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
