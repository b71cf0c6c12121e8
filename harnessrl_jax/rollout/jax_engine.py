"""In-process JAX sampler: batched prompts, n samples each, KV cache, a jitted decode loop.

Prompts are left-padded into a shape bucket (batch to a power of two, at least `min_batch`; prompt length to a
multiple of 16 while below `prompt_bucket`, else to a multiple of it; cache to the prompt bucket plus a power-of-two
budget of new tokens), prefilled once per distinct prompt, then the cache is repeated n times and a
`lax.while_loop` decodes until every row has sampled a stop token or the token budget is spent. Only the shapes are
static, so each bucket compiles once and later calls with other prompts, lengths, temperatures or seeds reuse it.
"""

from __future__ import annotations

import functools
import logging
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from harnessrl_jax.models import ModelConfig, Params, decode_layout, forward_cached, init_cache
from harnessrl_jax.rollout.base import Rollouts, checked_prompts


def _round_up(x: int, multiple: int) -> int:
    return -(-x // multiple) * multiple


def _pow2(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())


def _prompt_bucket(length: int, bucket: int) -> int:
    """Padded prompt length: a multiple of 16 while that is below `bucket`, else a multiple of `bucket`. A short
    prompt then prefills at most 15 pad tokens, at the cost of a few more shapes to compile."""
    small = _round_up(length, 16)
    return small if small < bucket else _round_up(length, bucket)


def _argmax(x: jax.Array) -> jax.Array:
    """jnp.argmax over the last axis (first maximal index, NaN counting as maximal) as a max and a min: XLA's CPU
    backend runs argmax's variadic reduce about 4x slower than these two plain ones over a vocabulary row."""
    nan = jnp.isnan(x)
    hit = jnp.where(jnp.any(nan, axis=-1, keepdims=True), nan, x == jnp.max(x, axis=-1, keepdims=True))
    return jnp.min(jnp.where(hit, jnp.arange(x.shape[-1], dtype=jnp.int32), x.shape[-1]), axis=-1)


def _filter_logits(logits: jax.Array, top_k: int, top_p: jax.Array | None) -> jax.Array:
    """Mask logits outside the top-k set and outside the smallest set whose mass reaches top_p."""
    neg = jnp.finfo(logits.dtype).min
    if top_k > 0:
        kth = jax.lax.top_k(logits, top_k)[0][..., -1:]
        logits = jnp.where(logits < kth, neg, logits)
    if top_p is not None:
        sorted_logits = jnp.sort(logits, axis=-1)[..., ::-1]
        probs = jax.nn.softmax(sorted_logits, axis=-1)
        # Keep a token while the mass strictly before it is below top_p (the top token is always kept).
        keep = (jnp.cumsum(probs, axis=-1) - probs) < top_p
        threshold = jnp.min(jnp.where(keep, sorted_logits, jnp.inf), axis=-1, keepdims=True)
        logits = jnp.where(logits < threshold, neg, logits)
    return logits


@functools.partial(jax.jit, static_argnames=("config", "n", "cache_len", "top_k", "use_top_p"))
def _generate(params, prompt_tokens, prompt_valid, num_prompts, stop_ids, key, temperature, top_p, max_new, pad_id, *,
              config: ModelConfig, n: int, cache_len: int, top_k: int, use_top_p: bool):
    batch, prompt_len = prompt_tokens.shape
    positions = jnp.maximum(jnp.cumsum(prompt_valid, axis=-1) - 1, 0)
    cache = init_cache(config, batch, cache_len)
    logits, cache = forward_cached(config, params, prompt_tokens, positions, prompt_valid, cache, jnp.int32(0))
    # Prefill once per distinct prompt, then give each of the n samples its own copy of the cache.
    cache = cache.repeat(n)
    params, cache = decode_layout(config, params, cache)
    last = jnp.repeat(logits, n, axis=0)
    next_pos = jnp.repeat(prompt_valid.sum(-1).astype(jnp.int32), n)
    rows = batch * n
    budget = cache_len - prompt_len
    greedy = temperature <= 0.0
    inv_t = jnp.where(greedy, 1.0, 1.0 / jnp.where(greedy, 1.0, temperature))

    def cond(state):
        step, done = state[0], state[3]
        return (step < max_new) & ~jnp.all(done)

    def body(state):
        step, out_tokens, out_logprobs, done, last, cache = state
        scaled = last * inv_t

        def sample():
            filtered = _filter_logits(scaled, top_k, top_p if use_top_p else None)
            # jax.random.categorical's Gumbel-max draw (the same noise, so the same tokens), with the faster argmax
            noise = jax.random.gumbel(jax.random.fold_in(key, step), filtered.shape, filtered.dtype)
            return _argmax(filtered + noise)

        # one branch runs: greedy decoding draws no [rows, vocab] Gumbel noise
        token = jax.lax.cond(greedy, lambda: _argmax(last), sample)
        # log_softmax(scaled) at the token, without materialising it
        logprob = jnp.take_along_axis(scaled, token[:, None], axis=-1)[:, 0] - jax.nn.logsumexp(scaled, axis=-1)
        token = jnp.where(done, pad_id, token)
        out_tokens = out_tokens.at[:, step].set(token)
        out_logprobs = out_logprobs.at[:, step].set(jnp.where(done, 0.0, logprob))
        live = ~done
        done = done | jnp.isin(token, stop_ids)
        logits, cache = forward_cached(
            config, params, token[:, None], (next_pos + step)[:, None], live[:, None], cache, prompt_len + step
        )
        return step + 1, out_tokens, out_logprobs, done, logits, cache

    state = (
        jnp.int32(0),
        jnp.full((rows, budget), pad_id, jnp.int32),
        jnp.zeros((rows, budget), jnp.float32),
        jnp.arange(rows) >= num_prompts * n,  # rows of bucket padding start finished
        last,
        cache,
    )
    steps, out_tokens, out_logprobs, done, _, _ = jax.lax.while_loop(cond, body, state)
    return out_tokens, out_logprobs, done, steps


class JaxEngine:
    """The in-process sampler; implements `RolloutEngine`."""

    def __init__(self, config: ModelConfig, params: Params, tokenizer=None, *, stop_ids: Sequence[int] | None = None,
                 pad_id: int | None = None, prompt_bucket: int = 64, max_context: int | None = None,
                 min_batch: int = 1):
        if tokenizer is None and (stop_ids is None or pad_id is None):
            raise ValueError("JaxEngine needs a tokenizer, or explicit stop_ids and pad_id")
        self.config = config
        self.params = params
        self.tokenizer = tokenizer
        self.eos_id = int(tokenizer.eos_id if tokenizer is not None else stop_ids[0])
        self.pad_id = int(pad_id if pad_id is not None else tokenizer.pad_id)
        self.stop_ids = tuple(int(s) for s in (stop_ids if stop_ids is not None else (self.eos_id,)))
        self.prompt_bucket = prompt_bucket
        if int(min_batch) < 1:
            raise ValueError(f"min_batch must be >= 1, got {min_batch}")
        # Calls with fewer prompts pad up to it: they run the program of a bigger call instead of compiling their own.
        self.min_batch = _pow2(int(min_batch))
        self.max_context = int(max_context or config.max_position_embeddings)

    def update_weights(self, params: Params) -> None:
        self.params = params

    def generate(self, prompts, n: int = 1, *, max_new_tokens: int, temperature: float = 1.0, top_p: float = 1.0,
                 top_k: int = 0, seed: int = 0) -> Rollouts:
        """Sample n continuations of each prompt; see `Rollouts` for the layout."""
        prompt_ids = checked_prompts(prompts, self.tokenizer, n=n, max_new_tokens=max_new_tokens, top_p=top_p,
                                     vocab_size=self.config.vocab_size)
        for i, p in enumerate(prompt_ids):
            if len(p) + max_new_tokens > self.max_context:
                raise ValueError(
                    f"prompt {i} has {len(p)} tokens; with max_new_tokens={max_new_tokens} that exceeds the "
                    f"model's context of {self.max_context} tokens"
                )
        batch = max(_pow2(len(prompt_ids)), self.min_batch)
        prompt_len = _prompt_bucket(max(map(len, prompt_ids)), self.prompt_bucket)
        tokens = np.full((batch, prompt_len), self.pad_id, np.int32)
        valid = np.zeros((batch, prompt_len), bool)
        for i, p in enumerate(prompt_ids):
            tokens[i, prompt_len - len(p):] = p
            valid[i, prompt_len - len(p):] = True
        valid[len(prompt_ids):, -1] = True  # padding rows: one dummy token so attention has a key
        cache_len = prompt_len + _pow2(max_new_tokens)
        logging.debug("generate: batch bucket %d, prompt bucket %d, cache %d", batch, prompt_len, cache_len)
        out_tokens, out_logprobs, done, _ = _generate(
            self.params, jnp.asarray(tokens), jnp.asarray(valid), jnp.int32(len(prompt_ids)),
            jnp.asarray(self.stop_ids, jnp.int32),
            jax.random.PRNGKey(seed), jnp.float32(temperature), jnp.float32(top_p), jnp.int32(max_new_tokens),
            jnp.int32(self.pad_id), config=self.config, n=n, cache_len=cache_len, top_k=int(top_k),
            use_top_p=top_p < 1.0,
        )
        rows = len(prompt_ids) * n
        out_tokens = np.asarray(out_tokens)[:rows, :max_new_tokens]
        out_logprobs = np.asarray(out_logprobs)[:rows, :max_new_tokens]
        done = np.asarray(done)[:rows]
        is_stop = np.isin(out_tokens, self.stop_ids)
        # A row's length runs through its first stop token, or is the whole budget.
        lengths = np.where(done, is_stop.argmax(axis=1) + 1, max_new_tokens).astype(np.int32)
        keep = np.arange(max_new_tokens)[None, :] < lengths[:, None]
        out_tokens = np.where(keep, out_tokens, self.pad_id).astype(np.int32)
        out_logprobs = np.where(keep, out_logprobs, 0.0).astype(np.float32)
        texts = [
            self.tokenizer.decode(out_tokens[r, : lengths[r]].tolist()) if self.tokenizer is not None else ""
            for r in range(rows)
        ]
        return Rollouts(
            prompt_ids=prompt_ids,
            prompt_index=np.repeat(np.arange(len(prompt_ids)), n),
            tokens=out_tokens,
            logprobs=out_logprobs,
            lengths=lengths,
            finish_reason=["stop" if d else "length" for d in done],
            texts=texts,
        )
