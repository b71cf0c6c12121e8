"""Rollouts -> the padded train batch the step consumes: fixed shapes, completion-only loss mask, engine logprobs.

Each row is its prompt followed by its completion, right-padded to `seq_len`. Position t predicts token t + 1, so
`targets` is `tokens` shifted left by one and `loss_mask[t]` is on exactly where `targets[t]` is a completion
token; `engine_logprobs[t]` is the sampler's logprob of that same token. Prompts start at position 0 as they do
in the engine (which left-pads, but derives positions from the mask), so the trainer's recomputation sees the
same positions. Shapes depend only on the config (rows, seq_len), so the jitted step compiles once.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from harnessrl_jax.rollout.base import Rollouts


class TrainBatch(NamedTuple):
    """One step's data; every array has `rows` on its leading axis (the axis sharded over data and fsdp)."""

    tokens: np.ndarray  # [B, T] int32: prompt, completion, then pad
    attention_mask: np.ndarray  # [B, T] bool: real tokens
    targets: np.ndarray  # [B, T] int32: the token position t predicts
    loss_mask: np.ndarray  # [B, T] bool: targets[t] is a completion token
    engine_logprobs: np.ndarray  # [B, T] float32: the sampler's logprob of targets[t] (0 off the mask)
    advantages: np.ndarray  # [B] float32 (NaN: reward failed; the loss skips the row)
    weights: np.ndarray  # [B] float32: per-sequence loss weight (importance correction u; 0 on padding rows)
    # [B, T] float32: the policy's logprobs before this batch's first update (Trainer.logprobs). None: the batch
    # gets one update, so the current forward is the old policy (see rl/step.py).
    old_logprobs: np.ndarray | None = None
    # CoCA's self-distillation targets (rl/distill.py), None without the term: the teacher's top-k token ids and
    # log-probabilities [B, T, k] at each student position, and where the term applies [B, T] (Trainer.teacher_topk).
    distill_ids: np.ndarray | None = None
    distill_logp: np.ndarray | None = None
    distill_mask: np.ndarray | None = None

    @property
    def num_rows(self) -> int:
        return self.tokens.shape[0]

    def rows(self, index) -> "TrainBatch":
        """The batch restricted to rows `index` (a slice or index array): one mini-batch."""
        return TrainBatch(*(None if x is None else x[index] for x in self))


def round_up(x: int, multiple: int) -> int:
    return -(-x // multiple) * multiple


def build_batch(rollouts: Rollouts, advantages, weights=None, *, seq_len: int, pad_id: int,
                num_rows: int | None = None, bucket: int = 0) -> TrainBatch:
    """The train batch of `rollouts`: advantages and weights [N] per rollout row; rows padded to `num_rows`.

    Rows are `seq_len` tokens, or with `bucket` > 0 the longest row rounded up to a multiple of `bucket` (at most
    seq_len): less padding for the layers to run over, one compile of the step per width seen.

    Padding rows carry no loss (mask off, weight 0). Raises ValueError if a prompt plus its completion does not fit
    in `seq_len`, or the rollouts do not fit in `num_rows`.
    """
    n = rollouts.num_samples
    rows = n if num_rows is None else num_rows
    if rows < n:
        raise ValueError(f"{n} rollouts do not fit in a batch of {rows} rows")
    advantages = np.asarray(advantages, np.float32).reshape(-1)
    weights = np.ones(n, np.float32) if weights is None else np.asarray(weights, np.float32).reshape(-1)
    if advantages.shape != (n,) or weights.shape != (n,):
        raise ValueError(f"advantages and weights must have one entry per rollout ({n}), got "
                         f"{advantages.shape} and {weights.shape}")

    if bucket > 0 and n:
        longest = max(len(rollouts.prompt_ids[rollouts.prompt_index[r]]) + int(rollouts.lengths[r]) for r in range(n))
        seq_len = min(seq_len, round_up(longest, bucket))
    tokens = np.full((rows, seq_len), pad_id, np.int32)
    attention = np.zeros((rows, seq_len), bool)
    loss_mask = np.zeros((rows, seq_len), bool)
    engine_logprobs = np.zeros((rows, seq_len), np.float32)
    for r in range(n):
        prompt = rollouts.prompt_ids[rollouts.prompt_index[r]]
        p, c = len(prompt), int(rollouts.lengths[r])
        if p + c > seq_len:
            raise ValueError(f"rollout {r}: prompt ({p}) + completion ({c}) tokens exceed seq_len={seq_len}; "
                             "raise the config's max_prompt_len or lower max_new_tokens")
        tokens[r, :p] = prompt
        tokens[r, p:p + c] = rollouts.tokens[r, :c]
        attention[r, :p + c] = True
        # Completion token i sits at p + i and is predicted from position p + i - 1.
        loss_mask[r, p - 1:p + c - 1] = True
        engine_logprobs[r, p - 1:p + c - 1] = rollouts.logprobs[r, :c]
    targets = np.concatenate([tokens[:, 1:], np.full((rows, 1), pad_id, np.int32)], axis=1)
    pad = rows - n
    return TrainBatch(
        tokens=tokens,
        attention_mask=attention,
        targets=targets,
        loss_mask=loss_mask,
        engine_logprobs=engine_logprobs,
        advantages=np.concatenate([advantages, np.zeros(pad, np.float32)]),
        weights=np.concatenate([weights, np.zeros(pad, np.float32)]),
    )


def build_trajectory_batch(trajectories, advantages, weights=None, *, seq_len: int, pad_id: int,
                           num_rows: int | None = None, bucket: int = 0) -> TrainBatch:
    """The train batch of multi-turn trajectories: per row a list of (token ids, logprobs or None) segments laid end
    to end (the opening prompt, policy turns, tool results). Only segments with logprobs (the policy's own tokens)
    are on the loss mask, with those logprobs as the engine's; the others are context. Rows, padding and the
    ValueErrors as build_batch; a trajectory's first token is never a target, so its first segment must be
    context."""
    n = len(trajectories)
    rows = n if num_rows is None else num_rows
    if rows < n:
        raise ValueError(f"{n} trajectories do not fit in a batch of {rows} rows")
    advantages = np.asarray(advantages, np.float32).reshape(-1)
    weights = np.ones(n, np.float32) if weights is None else np.asarray(weights, np.float32).reshape(-1)
    if advantages.shape != (n,) or weights.shape != (n,):
        raise ValueError(f"advantages and weights must have one entry per trajectory ({n}), got "
                         f"{advantages.shape} and {weights.shape}")
    lengths = [sum(len(ids) for ids, _ in segs) for segs in trajectories]
    if bucket > 0 and n:
        seq_len = min(seq_len, round_up(max(lengths), bucket))
    tokens = np.full((rows, seq_len), pad_id, np.int32)
    attention = np.zeros((rows, seq_len), bool)
    loss_mask = np.zeros((rows, seq_len), bool)
    engine_logprobs = np.zeros((rows, seq_len), np.float32)
    for r, segs in enumerate(trajectories):
        if lengths[r] > seq_len:
            raise ValueError(f"trajectory {r}: {lengths[r]} tokens exceed seq_len={seq_len}; raise "
                             "config.agentic.max_len or lower the turn budget")
        if segs and segs[0][1] is not None:
            raise ValueError(f"trajectory {r}: its first segment is a policy turn; it must open with context")
        at = 0
        for ids, logprobs in segs:
            k = len(ids)
            tokens[r, at:at + k] = ids
            if logprobs is not None and k:
                if len(logprobs) != k:
                    raise ValueError(f"trajectory {r}: a policy segment has {k} tokens and {len(logprobs)} logprobs")
                # token at + i is predicted from position at + i - 1
                loss_mask[r, at - 1:at + k - 1] = True
                engine_logprobs[r, at - 1:at + k - 1] = logprobs
            at += k
        attention[r, :at] = True
    targets = np.concatenate([tokens[:, 1:], np.full((rows, 1), pad_id, np.int32)], axis=1)
    pad = rows - n
    return TrainBatch(tokens=tokens, attention_mask=attention, targets=targets, loss_mask=loss_mask,
                      engine_logprobs=engine_logprobs,
                      advantages=np.concatenate([advantages, np.zeros(pad, np.float32)]),
                      weights=np.concatenate([weights, np.zeros(pad, np.float32)]))


def concat_rollouts(a: Rollouts, b: Rollouts) -> Rollouts:
    """Rows of `a` then of `b` (CoCA's two groups, of different n and prompts): prompt lists concatenated, b's
    prompt_index offset, tokens and logprobs padded to one width (nothing past a row's length is ever read)."""
    width = max(a.tokens.shape[1], b.tokens.shape[1])

    def pad(x):
        return np.pad(x, ((0, 0), (0, width - x.shape[1])))

    return Rollouts(list(a.prompt_ids) + list(b.prompt_ids),
                    np.concatenate([a.prompt_index, np.asarray(b.prompt_index) + len(a.prompt_ids)]),
                    np.concatenate([pad(a.tokens), pad(b.tokens)]), np.concatenate([pad(a.logprobs), pad(b.logprobs)]),
                    np.concatenate([a.lengths, b.lengths]), list(a.finish_reason) + list(b.finish_reason),
                    list(a.texts) + list(b.texts))
