"""CoCA's distillation term inside the sharded train step: the teacher's top-k taken on device (Trainer.teacher_topk)
and the step's gradient equal the plain objective L_GRPO + lambda_D * sum KL_t / D_kl written with the contract
function (rl.distill.topk_forward_kl on full teacher logits), on one device and on 8 with micro-batches."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from harnessrl_jax.models import forward, init_params, preset_config
from harnessrl_jax.models.sharding import make_mesh
from harnessrl_jax.rl import distill, grpo
from harnessrl_jax.rl.batch import TrainBatch
from harnessrl_jax.rl.step import LossSettings, Trainer, metrics_to_host

CONFIG = preset_config("tiny").replace(vocab_size=64)
LOSS = LossSettings(clip_low=0.2, clip_high=0.28, kl_coef=0.0, agg="token-mean", temperature=0.9, distill_coef=0.7)
K = 5
ROWS, SEQ, TSEQ, TROWS = 16, 24, 32, 8


def batch_and_teacher(seed=0):
    """A GRPO batch (NaN advantages on the distilled rows' neighbours, as CoCA's qualified guided rows), and teacher
    sequences for 3 of its rows: a longer context, then the same completion tokens."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(2, CONFIG.vocab_size, (ROWS, SEQ)).astype(np.int32)
    prompt = rng.integers(2, 8, ROWS)
    total = np.minimum(prompt + rng.integers(2, SEQ - 8, ROWS), SEQ)
    pos = np.arange(SEQ)[None]
    attention = pos < total[:, None]
    loss_mask = (pos >= prompt[:, None] - 1) & (pos < total[:, None] - 1)
    targets = np.concatenate([tokens[:, 1:], np.zeros((ROWS, 1), np.int32)], axis=1)
    advantages = rng.standard_normal(ROWS).astype(np.float32)
    advantages[[9, 13]] = np.nan
    batch = TrainBatch(tokens, attention, targets, loss_mask, np.zeros((ROWS, SEQ), np.float32), advantages,
                       np.ones(ROWS, np.float32))
    rows = np.full(TROWS, -1, np.int32)
    rows[:3] = [2, 9, 14]  # row 9 has a NaN advantage: distilled only
    t_tokens = np.zeros((TROWS, TSEQ), np.int32)
    t_attention = np.zeros((TROWS, TSEQ), bool)
    positions = np.zeros((TROWS, SEQ), np.int32)
    distill_mask = np.zeros((ROWS, SEQ), bool)
    for d, r in enumerate(rows[:3]):
        p, c = int(prompt[r]), int(total[r] - prompt[r])
        p_t = p + 5 + d  # the teacher's context is longer
        t_tokens[d, :p_t] = rng.integers(2, CONFIG.vocab_size, p_t)
        t_tokens[d, p_t:p_t + c] = tokens[r, p:p + c]
        t_attention[d, :p_t + c] = True
        positions[d] = np.clip(np.arange(SEQ) + (p_t - p), 0, TSEQ - 1)
        distill_mask[r] = loss_mask[r]
    return batch, (t_tokens, t_attention, positions, rows), distill_mask


@pytest.fixture(scope="module")
def params():
    return init_params(CONFIG, jax.random.PRNGKey(0), std=0.2)


def reference(params, batch, teacher, distill_mask, loss=LOSS):
    """The objective written directly: GRPO token-mean + lambda_D * the contract KL over the teacher's full logits."""
    t_tokens, t_attention, positions, rows = teacher
    t_logits = forward(CONFIG, params, t_tokens, t_attention)
    aligned = np.zeros((ROWS, SEQ, CONFIG.vocab_size), np.float32)
    for d, r in enumerate(rows):
        if r >= 0:
            aligned[r] = np.asarray(t_logits[d])[positions[d]]

    def objective(p):
        logits = forward(CONFIG, p, batch.tokens, batch.attention_mask)
        logp = grpo.token_logprobs(logits, batch.targets, loss.temperature)
        total, den, _ = grpo.policy_loss(logp, jax.lax.stop_gradient(logp), None, batch.advantages, batch.loss_mask,
                                         batch.weights, clip_low=loss.clip_low, clip_high=loss.clip_high,
                                         kl_coef=0.0, agg=loss.agg)
        kl, kl_den = distill.topk_forward_kl(jnp.asarray(aligned), logits, distill_mask, k=K,
                                             temperature=loss.temperature)
        return total / den + loss.distill_coef * kl / kl_den, kl / kl_den
    (value, kl), grads = jax.value_and_grad(objective, has_aux=True)(params)
    return value, kl, grads


def sgd_step(mesh, params, batch, teacher, distill_mask, micro_batches=1, **trainer_kw):
    trainer = Trainer(CONFIG, optax.sgd(1.0), mesh, LOSS, micro_batches=micro_batches, **trainer_kw)
    state = trainer.init_state(params, jax.random.PRNGKey(0))
    ids, logp = trainer.teacher_topk(state.params, *teacher, k=K, num_rows=ROWS)
    placed = trainer.put_batch(batch._replace(distill_ids=ids, distill_logp=logp, distill_mask=distill_mask))
    state, metrics = trainer.step(state, placed)
    grads = jax.tree.map(lambda before, after: np.asarray(before) - np.asarray(after), params, state.params)
    return grads, metrics_to_host(metrics), trainer


def assert_trees_close(a, b, atol, rtol=1e-5):
    for (path, x), y in zip(jax.tree_util.tree_leaves_with_path(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(x, y, atol=atol, rtol=rtol, err_msg=jax.tree_util.keystr(path))


def test_step_with_distillation_equals_the_plain_objective_on_one_and_on_8_devices(params):
    batch, teacher, distill_mask = batch_and_teacher()
    value, kl, want = reference(params, batch, teacher, distill_mask)
    one, m1, _ = sgd_step(make_mesh(1, 1, 1, devices=jax.devices()[:1]), params, batch, teacher, distill_mask)
    np.testing.assert_allclose(m1["loss"], value, rtol=1e-5)
    np.testing.assert_allclose(m1["distill_kl"], kl, rtol=1e-5)
    assert m1["distill_tokens"] == distill_mask.sum() and kl > 0
    assert_trees_close(one, want, atol=1e-5)
    # 8 devices, two micro-batches of the step and of the teacher's rows (TROWS = 8 = 2 x 4 data-parallel), and
    # only each row's completion window through the output head, in chunks (rl/step.py)
    span = int(batch.loss_mask.sum(axis=1).max())
    eight, m8, trainer = sgd_step(make_mesh(2, 2, 2), params, batch, teacher, distill_mask, micro_batches=2,
                                  completion_len=span, head_tokens=8)
    assert_trees_close(eight, one, atol=1e-5)
    for k in m1:
        np.testing.assert_allclose(m8[k], m1[k], rtol=1e-5, atol=1e-6, err_msg=k)
    assert trainer.compiles() == 1


def test_the_term_moves_the_gradient_and_the_teacher_rows_land_where_asked(params):
    batch, teacher, distill_mask = batch_and_teacher(seed=1)
    mesh = make_mesh(1, 1, 1, devices=jax.devices()[:1])
    with_term, _, trainer = sgd_step(mesh, params, batch, teacher, distill_mask)
    ids, logp = (np.asarray(x) for x in trainer.teacher_topk(trainer.place_params(params), *teacher, k=K,
                                                              num_rows=ROWS))
    untouched = [r for r in range(ROWS) if r not in teacher[3]]
    assert not ids[untouched].any() and not logp[untouched].any()
    assert np.all(np.diff(logp[2], axis=-1) <= 0)  # top-k in decreasing order
    plain = Trainer(CONFIG, optax.sgd(1.0), mesh, LOSS)
    state = plain.init_state(params, jax.random.PRNGKey(0))
    state, metrics = plain.step(state, plain.put_batch(batch))
    assert "distill_kl" not in metrics_to_host(metrics)
    without = jax.tree.map(lambda b, a: np.asarray(b) - np.asarray(a), params, state.params)
    assert not all(np.allclose(a, b, atol=1e-6) for a, b in zip(jax.tree.leaves(with_term), jax.tree.leaves(without)))


def test_concat_rollouts_keeps_each_rows_prompt_and_tokens():
    from harnessrl_jax.rl.batch import build_batch, concat_rollouts
    from harnessrl_jax.rollout import Rollouts

    a = Rollouts([[5, 6], [7]], np.array([0, 0, 1, 1]), np.array([[9, 9, 9], [8, 0, 0], [3, 3, 0], [4, 0, 0]]),
                 np.full((4, 3), -0.5, np.float32), np.array([3, 1, 2, 1]), ["length", "stop", "stop", "stop"],
                 ["a", "b", "c", "d"])
    b = Rollouts([[1, 2, 3, 4]], np.array([0, 0]), np.array([[6, 6, 6, 6, 6], [2, 0, 0, 0, 0]]),
                 np.full((2, 5), -1.0, np.float32), np.array([5, 1]), ["length", "stop"], ["e", "f"])
    c = concat_rollouts(a, b)
    assert c.num_samples == 6 and c.tokens.shape == (6, 5) and c.texts == list("abcdef")
    assert [c.prompt_ids[i] for i in c.prompt_index] == [[5, 6], [5, 6], [7], [7], [1, 2, 3, 4], [1, 2, 3, 4]]
    batch = build_batch(c, np.arange(6), seq_len=16, pad_id=0, num_rows=8)
    assert batch.tokens[4, :9].tolist() == [1, 2, 3, 4, 6, 6, 6, 6, 6] and batch.loss_mask.sum() == c.lengths.sum()
    np.testing.assert_allclose(batch.engine_logprobs[4][batch.loss_mask[4]], -1.0)
