"""Train the testbed's reader policy: a ~0.9M-parameter Qwen3-style decoder over a word-level tokenizer
(reader_corpus.reader_tokenizer), on the synthetic instruction language of harnessrl_jax.data.reader_corpus, in
minutes on a CPU.

    python launch/train_reader.py                  # the shipped weights (harnessrl_jax/models/reader, seed 0)

It learns to answer a request about a topic with short sentences of the topic's facts, and to copy what a guidance
field asks for (a quoted word) or shows (a <reference> answer). The directory it writes (config.json,
model.safetensors in bfloat16, the tokenizer files) is what `load_pretrained` and config.model_name='reader' load.
"""

from __future__ import annotations

import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from absl import flags, logging

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from harnessrl_jax import cli  # noqa: E402
from harnessrl_jax.data import reader_corpus  # noqa: E402
from harnessrl_jax.models import export, forward, init_params, load_pretrained  # noqa: E402
from harnessrl_jax.models.llama import ModelConfig  # noqa: E402

flags.DEFINE_string("out", os.path.join(REPO, "harnessrl_jax", "models", "reader"), "Output HF directory.")
flags.DEFINE_integer("steps", 1200, "Optimiser steps.")
flags.DEFINE_integer("batch", 64, "Sequences per step.")
flags.DEFINE_integer("seq_len", 128, "Tokens per sequence (longer examples are dropped).")
flags.DEFINE_float("lr", 3e-3, "Peak learning rate (warm-up, cosine decay).")
flags.DEFINE_integer("seed", 0, "Seed of the data and the initial weights.")
flags.DEFINE_float("list_share", 0.1, "Share of examples whose targets come in a criterion list (a system turn, "
                   "as RuscaRL's scaffold; after the request, as CoCA's guided prompt).")
flags.DEFINE_string("init", "", "Start from this reader directory instead of random weights (a second stage).")
FLAGS = flags.FLAGS

READER = ModelConfig(vocab_size=672, hidden_size=128, intermediate_size=384, num_layers=4, num_heads=4,
                     num_kv_heads=4, head_dim=32, rope_theta=10000.0, rms_norm_eps=1e-6,
                     max_position_embeddings=1024, tie_embeddings=True, qk_norm=True, model_type="qwen3")


def batches(rng: np.random.Generator, tokenizer, n: int, seq_len: int, k: int = 8):
    """k batches of token ids [n, L] of chat-rendered examples and their loss masks (the answer and its end token):
    k * n examples sorted by length, each batch padded to a multiple of 32 tokens (a few compiled shapes, little
    padding)."""
    examples = []
    while len(examples) < n * k:
        messages, reply = reader_corpus.example(rng, FLAGS.list_share)
        prompt = tokenizer.apply_chat_template(messages, tokenize=True)
        ids = prompt + tokenizer.encode(reply) + [tokenizer.eos_id]
        if len(ids) <= seq_len:
            examples.append((ids, len(prompt)))
    examples.sort(key=lambda e: len(e[0]))
    out = []
    for b in range(k):
        chunk = examples[b * n:(b + 1) * n]
        width = min(seq_len, -(-max(len(ids) for ids, _ in chunk) // 32) * 32)
        tokens = np.full((n, width), tokenizer.pad_id, np.int32)
        mask = np.zeros((n, width), np.float32)
        for i, (ids, start) in enumerate(chunk):
            tokens[i, :len(ids)] = ids
            mask[i, start - 1:len(ids) - 1] = 1.0  # position t predicts token t + 1
        out.append((tokens, mask))
    return [out[i] for i in rng.permutation(k)]


def main(argv):
    del argv
    tokenizer = reader_corpus.reader_tokenizer()
    if tokenizer.vocab_size > READER.vocab_size:
        raise ValueError(f"the reader tokenizer has {tokenizer.vocab_size} tokens, the model {READER.vocab_size}")
    rng = np.random.default_rng(FLAGS.seed)
    if FLAGS.init:
        config, params, _ = load_pretrained(FLAGS.init)
        if config.replace(param_dtype=READER.param_dtype, compute_dtype=READER.compute_dtype) != READER:
            raise ValueError(f"--init={FLAGS.init}: not a reader of this shape ({config})")
        params = jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), params)
    else:
        params = init_params(READER, jax.random.PRNGKey(FLAGS.seed))
    schedule = optax.warmup_cosine_decay_schedule(0.0, FLAGS.lr, min(100, FLAGS.steps // 10), FLAGS.steps,
                                                  FLAGS.lr / 20)
    opt = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(schedule, weight_decay=0.01))
    opt_state = opt.init(params)

    def loss_fn(p, tokens, mask):
        logits = forward(READER, p, tokens)[:, :-1]
        logp = jax.nn.log_softmax(logits, -1)
        nll = -jnp.take_along_axis(logp, tokens[:, 1:, None], -1)[..., 0]
        return (nll * mask[:, :-1]).sum() / mask[:, :-1].sum()

    @jax.jit
    def step(p, s, tokens, mask):
        loss, grads = jax.value_and_grad(loss_fn)(p, tokens, mask)
        updates, s = opt.update(grads, s, p)
        return optax.apply_updates(p, updates), s, loss

    logging.info("reader: %.2fM params, %d steps of %d x %d tokens", READER.num_params() / 1e6, FLAGS.steps,
                 FLAGS.batch, FLAGS.seq_len)
    start, losses = time.perf_counter(), []
    queue = []
    for k in range(1, FLAGS.steps + 1):
        if not queue:
            queue = batches(rng, tokenizer, FLAGS.batch, FLAGS.seq_len)
        tokens, mask = queue.pop()
        params, opt_state, loss = step(params, opt_state, jnp.asarray(tokens), jnp.asarray(mask))
        losses.append(float(loss))
        if k % 50 == 0 or k == FLAGS.steps:
            elapsed = time.perf_counter() - start
            logging.info("step %d/%d: loss %.3f (last 50), %.2f s/step, ETA %.0f s", k, FLAGS.steps,
                         np.mean(losses[-50:]), elapsed / k, elapsed / k * (FLAGS.steps - k))
    export.export_hf(READER, params, FLAGS.out, tokenizer, dtype="bfloat16")
    logging.info("wrote %s in %.0f s", FLAGS.out, time.perf_counter() - start)


if __name__ == "__main__":
    cli.run(main)
