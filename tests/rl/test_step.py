"""The sharded train step against a plain, unsharded re-derivation of the GRPO objective and its gradient."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from harnessrl_jax.models import forward, init_params, preset_config
from harnessrl_jax.models.sharding import make_mesh
from harnessrl_jax.rl import grpo
from harnessrl_jax.rl.batch import TrainBatch, build_batch
from harnessrl_jax.rl.optim import make_optimizer
from harnessrl_jax.rl.step import LossSettings, Trainer, metrics_to_host
from harnessrl_jax.rollout import JaxEngine

CONFIG = preset_config("tiny").replace(vocab_size=64)
LOSS = LossSettings(clip_low=0.2, clip_high=0.28, kl_coef=0.05, agg="token-mean", temperature=0.9)


def random_batch(rows=16, seq=24, seed=0):
    """Prompts of varied length, completions after them, NaN and negative advantages, uneven weights."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, CONFIG.vocab_size, (rows, seq)).astype(np.int32)
    prompt = rng.integers(2, 8, rows)
    total = np.minimum(prompt + rng.integers(1, seq - 6, rows), seq)
    pos = np.arange(seq)[None]
    attention = pos < total[:, None]
    loss_mask = (pos >= prompt[:, None] - 1) & (pos < total[:, None] - 1)
    targets = np.concatenate([tokens[:, 1:], np.zeros((rows, 1), np.int32)], axis=1)
    advantages = rng.standard_normal(rows).astype(np.float32)
    advantages[3] = np.nan  # a failed reward: the row must drop out
    engine_logprobs = np.where(loss_mask, -rng.random((rows, seq)) * 5, 0).astype(np.float32)
    return TrainBatch(tokens, attention, targets, loss_mask, engine_logprobs, advantages,
                      rng.uniform(0.5, 2.0, rows).astype(np.float32))


@pytest.fixture(scope="module")
def params():
    return init_params(CONFIG, jax.random.PRNGKey(0), std=0.2)  # large enough that ratios clip after a step


@pytest.fixture(scope="module")
def ref_params(params):
    # A reference different from the policy, so the KL term and its gradient are not zero.
    return jax.tree.map(lambda p, n: p + 0.05 * n, params, init_params(CONFIG, jax.random.PRNGKey(1)))


@functools.partial(jax.jit, static_argnames="loss")
def reference_grad(params, ref_params, batch, loss=LOSS):
    """Objective and gradient written directly: one batch, no mesh, no micro-batches, no Trainer."""
    def objective(p):
        logp = grpo.token_logprobs(forward(CONFIG, p, batch.tokens, batch.attention_mask), batch.targets,
                                   loss.temperature)
        ref = grpo.token_logprobs(forward(CONFIG, ref_params, batch.tokens, batch.attention_mask), batch.targets,
                                  loss.temperature)
        total, denominator, _ = grpo.policy_loss(
            logp, jax.lax.stop_gradient(logp), ref, batch.advantages, batch.loss_mask, batch.weights,
            clip_low=loss.clip_low, clip_high=loss.clip_high, kl_coef=loss.kl_coef, agg=loss.agg)
        return total / jnp.maximum(denominator, 1.0)
    return jax.value_and_grad(objective)(params)


def one_device():
    return make_mesh(1, 1, 1, devices=jax.devices()[:1])


def sgd_step(mesh, params, ref_params, batch, micro_batches=1, loss=LOSS, model_config=CONFIG, **trainer_kw):
    """One step with plain SGD at lr 1: the param change is exactly minus the gradient the step computed."""
    trainer = Trainer(model_config, optax.sgd(1.0), mesh, loss, micro_batches=micro_batches, **trainer_kw)
    state = trainer.init_state(params, jax.random.PRNGKey(0))
    state, metrics = trainer.step(state, trainer.put_batch(batch), trainer.place_params(ref_params))
    grads = jax.tree.map(lambda before, after: np.asarray(before) - np.asarray(after), params, state.params)
    return grads, metrics_to_host(metrics)


@pytest.fixture(scope="module")
def unsharded(params, ref_params):
    """(grads, metrics) of the step on one device, one micro-batch: what the other layouts must reproduce."""
    return sgd_step(one_device(), params, ref_params, random_batch())


def assert_trees_close(a, b, atol, rtol=1e-5):
    # Gradients here reach ~1 in magnitude: a different summation order moves them by float32 rounding (rtol).
    for (path, x), y in zip(jax.tree_util.tree_leaves_with_path(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(x, y, atol=atol, rtol=rtol, err_msg=jax.tree_util.keystr(path))


def assert_metrics_close(a, b, tol):
    assert a.keys() == b.keys()
    for k in a:
        # engine_gap_*: the trainer's logprobs minus the engine's, itself float32 rounding of logprobs ~10 in
        # magnitude (ulp ~1e-6); another summation order moves it by a few ulps.
        t = max(tol, 1e-5) if k.startswith("engine_gap") else tol
        np.testing.assert_allclose(a[k], b[k], atol=t, rtol=t, err_msg=k)


def test_step_gradient_equals_the_plain_objectives_gradient(params, ref_params, unsharded):
    loss, grads = reference_grad(params, ref_params, random_batch())
    got, metrics = unsharded
    np.testing.assert_allclose(metrics["loss"], loss, rtol=1e-6)
    assert_trees_close(got, grads, atol=1e-6)
    assert metrics["kl"] > 0 and metrics["num_sequences"] == 15  # the NaN-advantage row is left out
    np.testing.assert_allclose(metrics["grad_norm"], optax.tree.norm(grads), rtol=1e-5)


def test_sharded_step_on_8_devices_equals_unsharded(params, ref_params, unsharded):
    grads, metrics = sgd_step(make_mesh(2, 2, 2), params, ref_params, random_batch())
    assert_trees_close(grads, unsharded[0], atol=1e-5)
    assert_metrics_close(metrics, unsharded[1], 1e-5)


def test_four_micro_batches_equal_one_batch(params, ref_params, unsharded):
    grads, metrics = sgd_step(one_device(), params, ref_params, random_batch(), micro_batches=4)
    assert_trees_close(grads, unsharded[0], atol=1e-6)
    assert_metrics_close(metrics, unsharded[1], 1e-6)


def test_the_completion_window_equals_the_whole_row_head(params, ref_params, unsharded):
    """Only each row's completion_len positions from its first loss position reach the output head (in chunks of
    a few positions): the same gradient and metrics as every position, on 8 devices with micro-batches too."""
    span = random_batch().loss_mask.sum(axis=1).max()
    for mesh, micro in ((one_device(), 1), (make_mesh(2, 2, 2), 2)):
        grads, metrics = sgd_step(mesh, params, ref_params, random_batch(), micro_batches=micro,
                                  completion_len=int(span), head_tokens=8)
        assert_trees_close(grads, unsharded[0], atol=1e-5)
        assert_metrics_close(metrics, unsharded[1], 1e-5)


def test_a_batch_wider_than_the_completion_window_is_refused():
    batch = random_batch()
    span = int(batch.loss_mask.sum(axis=1).max())
    trainer = Trainer(CONFIG, optax.sgd(1.0), one_device(), LOSS, completion_len=span - 1)
    with pytest.raises(ValueError, match=f"span {span} tokens, more than the trainer's completion_len"):
        trainer.put_batch(batch)


def test_old_logprobs_from_the_window_equal_the_whole_row(params):
    batch = random_batch()
    span = int(batch.loss_mask.sum(axis=1).max())
    whole = Trainer(CONFIG, optax.sgd(1.0), one_device(), LOSS, micro_batches=2)
    window = Trainer(CONFIG, optax.sgd(1.0), one_device(), LOSS, micro_batches=2, completion_len=span)
    want = np.asarray(whole.logprobs(whole.place_params(params), whole.put_batch(batch)))
    got = np.asarray(window.logprobs(window.place_params(params), window.put_batch(batch)))
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert (got[~batch.loss_mask] == 0).all() and (got[batch.loss_mask] < 0).all()


def test_four_micro_batches_equal_one_batch_with_sequence_mean(params, ref_params):
    # Per-sequence means are summed, so slicing whole rows keeps this aggregation exact too.
    loss = LossSettings(**{**LOSS.__dict__, "agg": "sequence-mean-token-mean"})
    grads, metrics = sgd_step(make_mesh(1, 2, 1, devices=jax.devices()[:2]), params, ref_params, random_batch(),
                              micro_batches=4, loss=loss)
    value, reference = reference_grad(params, ref_params, random_batch(), loss)
    np.testing.assert_allclose(metrics["loss"], value, rtol=1e-6)
    assert metrics["denominator"] == 15  # sequences with a loss token, the NaN row excluded
    assert_trees_close(grads, reference, atol=1e-6)


def test_adamw_steps_compile_once_donate_state_and_clip_off_policy(params, ref_params):
    """Two AdamW updates on one batch whose old logprobs were taken before the first: the second is off-policy,
    so the ratio moves and the clip binds; the step compiles once and updates in place."""
    optimizer, schedule = make_optimizer(dict(lr=1e-2, warmup_steps=1, schedule="cosine", total_steps=10))
    trainer = Trainer(CONFIG, optimizer, make_mesh(2, 2, 2), LOSS, schedule=schedule, micro_batches=2)
    state = trainer.init_state(params, jax.random.PRNGKey(0))
    ref = trainer.place_params(ref_params)
    batch = trainer.put_batch(random_batch())
    batch = batch._replace(old_logprobs=trainer.logprobs(state.params, batch))
    history = []
    for _ in range(3):
        old = state
        state, metrics = trainer.step(state, batch, ref)
        history.append(metrics_to_host(metrics))
        assert old.params["embed"].is_deleted()  # donated: updated in place
    assert trainer.compiles() == 1
    assert int(state.step) == 3
    assert [m["lr"] for m in history] == pytest.approx([0.0, 1e-2, 1e-2 * (1 + np.cos(np.pi / 9)) / 2])
    assert history[0]["ratio"] == pytest.approx(1.0, abs=1e-6)  # lr 0 at step 0: still on-policy
    assert history[2]["clip_low"] + history[2]["clip_high"] > 0
    assert history[2]["abs_log_ratio"] > 1e-3
    # Optimiser moments are sharded like the params they follow.
    mu = state.opt_state[1][0].mu
    assert mu["layers"]["wq"].sharding.spec == state.params["layers"]["wq"].sharding.spec
    for key in ("loss", "kl", "entropy", "engine_gap", "grad_norm", "update_norm", "param_norm"):
        assert np.isfinite(history[2][key]) and history[2][key] > 0, key


def test_logprobs_with_micro_batches_keep_row_order(params):
    batch = random_batch()
    trainer = Trainer(CONFIG, optax.sgd(1.0), make_mesh(1, 2, 1, devices=jax.devices()[:2]), micro_batches=4)
    got = np.asarray(trainer.logprobs(trainer.place_params(params), trainer.put_batch(batch)))
    want = grpo.token_logprobs(forward(CONFIG, params, batch.tokens, batch.attention_mask), batch.targets)
    np.testing.assert_allclose(got, np.where(batch.loss_mask, want, 0.0), atol=1e-5)


def test_bfloat16_compute_keeps_float32_master_weights(params, ref_params, unsharded):
    grads, metrics = sgd_step(one_device(), params, ref_params, random_batch(),
                              model_config=CONFIG.replace(compute_dtype="bfloat16"))
    np.testing.assert_allclose(metrics["loss"], unsharded[1]["loss"], rtol=0.05, atol=1e-3)
    cos = optax.tree_utils.tree_vdot(grads, unsharded[0]) / (optax.tree.norm(grads) * optax.tree.norm(unsharded[0]))
    assert cos > 0.98


def test_trainer_keeps_float32_master_weights_for_bfloat16_params(params):
    config = CONFIG.replace(param_dtype="bfloat16", compute_dtype="bfloat16")
    trainer = Trainer(config, optax.sgd(1.0), one_device())
    state = trainer.init_state(jax.tree.map(lambda p: p.astype(jnp.bfloat16), params), jax.random.PRNGKey(0))
    assert all(p.dtype == jnp.float32 for p in jax.tree.leaves(state.params))
    assert trainer.model_config.compute_dtype == "bfloat16"


def test_batch_aligns_engine_logprobs_with_the_trainers_recomputation(params):
    """The engine samples with a KV cache from left-padded prompts; the batch replays prompt + completion
    right-padded. On the mask the trainer's logprobs must equal the engine's (float32: to ~1e-5)."""
    engine = JaxEngine(CONFIG, params, stop_ids=[1], pad_id=0)
    prompts = [[5, 6, 7], [8, 9, 10, 11, 12, 13, 14], [15]]
    rollouts = engine.generate(prompts, n=2, max_new_tokens=9, temperature=0.9, seed=3)
    batch = build_batch(rollouts, np.ones(6), seq_len=24, pad_id=0, num_rows=8)
    assert batch.loss_mask.sum() == rollouts.lengths.sum()
    trainer = Trainer(CONFIG, optax.sgd(1.0), make_mesh(1, 1, 1, devices=jax.devices()[:1]),
                      LossSettings(temperature=0.9))
    logp = np.asarray(trainer.sequence_logprobs(params, batch.tokens, batch.attention_mask, batch.targets))
    mask = batch.loss_mask
    np.testing.assert_allclose(logp[mask], batch.engine_logprobs[mask], atol=2e-5)
    for r in range(6):  # targets under the mask are the completion tokens, in order
        np.testing.assert_array_equal(batch.targets[r][mask[r]], rollouts.tokens[r, :rollouts.lengths[r]])
    assert not mask[6:].any() and (batch.weights[6:] == 0).all()


def test_a_bucketed_batch_is_the_full_batch_cut_after_its_longest_row_and_trains_the_same(params, ref_params):
    engine = JaxEngine(CONFIG, params, stop_ids=[1], pad_id=0)
    rollouts = engine.generate([[5, 6, 7], [8, 9, 10, 11, 12, 13, 14], [15]], n=2, max_new_tokens=9,
                               temperature=0.9, seed=3)
    advantages = np.array([1.0, -1.0, 0.5, -0.5, 2.0, -2.0])
    full = build_batch(rollouts, advantages, seq_len=40, pad_id=0, num_rows=8)
    cut = build_batch(rollouts, advantages, seq_len=40, pad_id=0, num_rows=8, bucket=8)
    longest = int(full.attention_mask.sum(axis=1).max())
    assert cut.tokens.shape[1] == -(-longest // 8) * 8 < 40
    for a, b in zip(full, cut):
        if a is not None:
            np.testing.assert_array_equal(a if a.ndim == 1 else a[:, :b.shape[1]], b)
            assert a.ndim == 1 or not a[:, b.shape[1]:].any() or (a[:, b.shape[1]:] == 0).all()
    grads_full, metrics_full = sgd_step(one_device(), params, ref_params, full)
    grads_cut, metrics_cut = sgd_step(one_device(), params, ref_params, cut)
    assert_trees_close(grads_cut, grads_full, atol=1e-6)
    assert_metrics_close(metrics_cut, metrics_full, 1e-6)
    assert build_batch(rollouts, advantages, seq_len=16, pad_id=0, num_rows=8, bucket=64).tokens.shape[1] == 16


def test_batch_rejects_a_sequence_longer_than_seq_len(params):
    engine = JaxEngine(CONFIG, params, stop_ids=[-1], pad_id=0)
    rollouts = engine.generate([[5] * 10], n=1, max_new_tokens=8, temperature=1.0)
    with pytest.raises(ValueError, match="exceed seq_len=16"):
        build_batch(rollouts, np.ones(1), seq_len=16, pad_id=0)


def _step_temporaries(trainer: Trainer, rows: int, seq: int) -> int:
    """XLA's temporary bytes per device of the compiled step for a [rows, seq] batch (nothing runs)."""
    def spec(dtype, *shape):
        return jax.ShapeDtypeStruct(shape, dtype, sharding=trainer.batch_sharding)

    batch = TrainBatch(spec(jnp.int32, rows, seq), spec(jnp.bool_, rows, seq), spec(jnp.int32, rows, seq),
                       spec(jnp.bool_, rows, seq), spec(jnp.float32, rows, seq), spec(jnp.float32, rows),
                       spec(jnp.float32, rows))
    compiled = trainer._step.lower(trainer.abstract_state(), batch, trainer.abstract_params()).compile()
    return compiled.memory_analysis().temp_size_in_bytes


def test_fsdp_keeps_activations_sharded_so_temporaries_shrink_with_devices():
    """With the batch over 8 FSDP devices each holds an eighth of the rows' activations; were the activations
    gathered instead of the weights (the partitioner's choice without Trainer._constrain), the per-device
    temporaries would stay those of one device. The output head's chunk is head_tokens positions per device on
    either mesh, and no device ever holds the [rows, T, vocab] logits. Compiled only, from XLA's memory analysis."""
    config = preset_config("tiny").replace(vocab_size=16384)
    loss = LossSettings(kl_coef=0.001)
    one = Trainer(config, optax.adamw(1e-3), make_mesh(1, 1, 1, devices=jax.devices()[:1]), loss, head_tokens=64)
    eight = Trainer(config, optax.adamw(1e-3), make_mesh(1, 8, 1), loss, head_tokens=64)
    rows, seq = 64, 64
    logits = rows * seq * config.vocab_size * 4
    t1, t8 = _step_temporaries(one, rows, seq), _step_temporaries(eight, rows, seq)
    assert t1 < logits / 2, (t1, logits)  # the chunked head (rl/head.py): not even the logits once
    assert t8 < t1 / 3, (t1, t8)

    class Unconstrained(Trainer):
        def _constrain(self, x, kind):
            return x

    loose = Unconstrained(config, optax.adamw(1e-3), make_mesh(1, 8, 1), loss, head_tokens=64)
    assert _step_temporaries(loose, rows, seq) > t8  # the constraint is what keeps them sharded


def test_truncated_importance_sampling_through_the_sharded_step_equals_the_plain_objective(params, ref_params):
    """The engine-vs-trainer correction (tis_cap) inside the sharded, micro-batched step: the same gradient as the
    plain objective with it (whose per-token terms tests/rl/test_grpo.py re-derives in NumPy), and not the same as
    without it."""
    loss = LossSettings(**{**LOSS.__dict__, "tis_cap": 1.5})
    batch = random_batch(seed=3)

    @jax.jit
    def plain(p):
        logp = grpo.token_logprobs(forward(CONFIG, p, batch.tokens, batch.attention_mask), batch.targets,
                                   loss.temperature)
        ref = grpo.token_logprobs(forward(CONFIG, ref_params, batch.tokens, batch.attention_mask), batch.targets,
                                  loss.temperature)
        total, den, _ = grpo.policy_loss(
            logp, jax.lax.stop_gradient(logp), ref, batch.advantages, batch.loss_mask, batch.weights,
            clip_low=loss.clip_low, clip_high=loss.clip_high, kl_coef=loss.kl_coef, agg=loss.agg,
            tis_cap=loss.tis_cap, engine_logp=batch.engine_logprobs)
        return total / jnp.maximum(den, 1.0)

    value, want = jax.value_and_grad(plain)(params)
    grads, metrics = sgd_step(make_mesh(2, 2, 2), params, ref_params, batch, micro_batches=2, loss=loss)
    np.testing.assert_allclose(metrics["loss"], value, rtol=1e-5)
    assert_trees_close(grads, want, atol=1e-5)
    assert metrics["tis_capped"] > 0  # the cap bound somewhere: the correction was not a no-op
    off, _ = sgd_step(make_mesh(2, 2, 2), params, ref_params, batch, micro_batches=2)
    assert not all(np.allclose(a, b, atol=1e-6) for a, b in zip(jax.tree.leaves(grads), jax.tree.leaves(off)))


def test_rematerialised_layers_give_the_same_step(params, ref_params, unsharded):
    grads, metrics = sgd_step(one_device(), params, ref_params, random_batch(),
                              model_config=CONFIG.replace(remat=True))
    assert_trees_close(grads, unsharded[0], atol=1e-6)
    assert_metrics_close(metrics, unsharded[1], 1e-6)


def test_unrolled_layers_give_the_same_step_sharded_with_micro_batches(params, ref_params, unsharded):
    """scan_layers=False: the step slices the layers once (split_layers), the policy and the reference forward run
    them unrolled, and the gradient is stacked back; on 8 devices (fsdp and tensor shards of each slice) with two
    micro-batches it is the scanned one-device step."""
    unrolled = CONFIG.replace(scan_layers=False)
    grads, metrics = sgd_step(make_mesh(2, 2, 2), params, ref_params, random_batch(), micro_batches=2,
                              model_config=unrolled)
    assert_trees_close(grads, unsharded[0], atol=1e-5)
    assert_metrics_close(metrics, unsharded[1], 1e-5)

    def traced(config):
        trainer = Trainer(config, optax.sgd(1.0), one_device(), LOSS, micro_batches=2)
        args = trainer.init_state(params, jax.random.PRNGKey(0)), trainer.put_batch(random_batch()), ref_params
        loops = trainer._step.lower(*args).as_text().count("stablehlo.while")
        # what the micro-batch scan takes in: the stacked weights, or the per-layer slices made once before it
        scan = next(e for e in jax.make_jaxpr(trainer._train_step)(*args).jaxpr.eqns if e.primitive.name == "scan")
        return loops, [v.aval.shape for v in scan.invars]
    (scanned_loops, scanned_in), (unrolled_loops, unrolled_in) = traced(CONFIG), traced(unrolled)
    assert unrolled_loops == scanned_loops - 3  # the layer loops of the policy's forward and backward and the ref's
    stacked = params["layers"]["w_gate"].shape
    assert stacked in scanned_in and stacked not in unrolled_in
    assert unrolled_in.count(stacked[1:]) >= 2 * CONFIG.num_layers  # the policy's and the reference's slices
