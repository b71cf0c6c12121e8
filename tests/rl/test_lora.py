"""LoRA (model.lora_rank): the step trains the adapters by the gradient of the merged policy and leaves the base
as it was; the merged policy is W + (alpha / r) A @ B computed in numpy; checkpoints hold the adapters only."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from harnessrl_jax.errors import ConfigError
from harnessrl_jax.models import as_policy, forward, init_params, preset_config
from harnessrl_jax.models.sharding import make_mesh
from harnessrl_jax.rl import grpo
from harnessrl_jax.rl.batch import TrainBatch
from harnessrl_jax.rl.checkpoint import Checkpointer
from harnessrl_jax.rl.optim import make_optimizer
from harnessrl_jax.rl.step import LossSettings, Trainer, metrics_to_host
from harnessrl_jax.settings import ModelSection, typed

CONFIG = preset_config("tiny").replace(vocab_size=64)
LOSS = LossSettings(clip_low=0.2, clip_high=0.28, kl_coef=0.05, temperature=0.9)
RANK, ALPHA = 4, 6.0
TARGETS = ("wq", "w_down")  # one attention and one MLP matrix; the other matrices keep the base's weights


def random_batch(rows=8, seq=12):
    """Completions of varied length after short prompts, advantages of both signs, uneven weights."""
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, CONFIG.vocab_size, (rows, seq)).astype(np.int32)
    prompt, total = rng.integers(2, 5, rows), rng.integers(8, seq + 1, rows)
    pos = np.arange(seq)[None]
    loss_mask = (pos >= prompt[:, None] - 1) & (pos < total[:, None] - 1)
    targets = np.concatenate([tokens[:, 1:], np.zeros((rows, 1), np.int32)], axis=1)
    return TrainBatch(tokens, pos < total[:, None], targets, loss_mask, np.zeros((rows, seq), np.float32),
                      rng.standard_normal(rows).astype(np.float32), rng.uniform(0.5, 2.0, rows).astype(np.float32))


def lora_of(model_config, targets=",".join(TARGETS)):
    return ModelSection(lora_rank=RANK, lora_alpha=ALPHA, lora_targets=targets).lora(model_config)


def with_random_b(trainer, state, seed=1):
    """The state with B drawn at random (it starts at zero, where the gradient of A vanishes)."""
    rng = np.random.default_rng(seed)
    adapters = jax.tree.map(lambda x: np.asarray(x), state.params)
    for node in jax.tree.leaves(adapters, is_leaf=lambda x: isinstance(x, dict) and "b" in x):
        node["b"] = (0.3 * rng.standard_normal(node["b"].shape)).astype(np.float32)
    return state._replace(params=jax.device_put(adapters, trainer.state_shardings().params))


def numpy_merged(base, adapters, groups=("layers",)):
    """The base with each adapted matrix replaced by W + alpha / r * A @ B, in numpy (float64, then float32)."""
    out = jax.tree.map(np.asarray, base)
    for group in groups:
        for name, ad in adapters[group].items():
            a, b = np.asarray(ad["a"], np.float64), np.asarray(ad["b"], np.float64)
            out[group][name] = (out[group][name] + ALPHA / RANK * (a @ b)).astype(np.float32)
    return out


def test_a_step_moves_only_the_adapters_by_the_merged_policys_gradient():
    """8 devices, 2 micro-batches, SGD at lr 1: the adapters move by minus the gradient of the objective of
    W + alpha/r A @ B written here; the base (and the KL reference, which it is) does not move. Catches the base in
    the optimiser or differentiated, a reference that follows the adapters, and a wrong pull-back to A and B."""
    params = init_params(CONFIG, jax.random.PRNGKey(0), std=0.2)
    trainer = Trainer(CONFIG, optax.sgd(1.0), make_mesh(2, 2, 2), LOSS, micro_batches=2, lora=lora_of(CONFIG))
    fresh = trainer.init_state(params, jax.random.PRNGKey(0))
    assert set(fresh.params["layers"]) == set(TARGETS) and set(fresh.params) == {"layers"}
    bound = CONFIG.hidden_size ** -0.5
    a = np.asarray(fresh.params["layers"]["wq"]["a"])
    assert a.shape == (2, 64, RANK) and 0 < np.abs(a).max() <= bound
    assert not np.asarray(fresh.params["layers"]["wq"]["b"]).any()  # B = 0: the fresh policy is the base
    state = with_random_b(trainer, fresh)
    before = jax.tree.map(np.asarray, state.params)
    base = jax.tree.map(np.asarray, state.frozen)
    batch = random_batch()

    def objective(adapters):
        merged = dict(params, layers=dict(params["layers"]))
        for name, ad in adapters["layers"].items():
            merged["layers"][name] = params["layers"][name] + ALPHA / RANK * ad["a"] @ ad["b"]
        z = lambda p: grpo.token_logprobs(forward(CONFIG, p, batch.tokens, batch.attention_mask),  # noqa: E731
                                          batch.targets, LOSS.temperature)
        logp = z(merged)
        total, den, _ = grpo.policy_loss(logp, jax.lax.stop_gradient(logp), z(params), batch.advantages,
                                         batch.loss_mask, batch.weights, clip_low=LOSS.clip_low,
                                         clip_high=LOSS.clip_high, kl_coef=LOSS.kl_coef, agg=LOSS.agg)
        return total / jnp.maximum(den, 1.0)

    with jax.default_matmul_precision("highest"):
        loss, grads = jax.value_and_grad(objective)(before)
    state, metrics = trainer.step(state, trainer.put_batch(batch))
    metrics = metrics_to_host(metrics)
    np.testing.assert_allclose(metrics["loss"], loss, rtol=1e-5)
    assert metrics["kl"] > 0
    for (path, g), old, new in zip(jax.tree_util.tree_leaves_with_path(grads), jax.tree.leaves(before),
                                   jax.tree.leaves(state.params)):
        np.testing.assert_allclose(old - np.asarray(new), g, atol=1e-5, rtol=1e-4, err_msg=jax.tree_util.keystr(path))
    moved = max(float(np.abs(np.asarray(n) - o).max()) for o, n in zip(jax.tree.leaves(before),
                                                                       jax.tree.leaves(state.params)))
    assert moved > 1e-4
    for x, y in zip(jax.tree.leaves(base), jax.tree.leaves(state.frozen)):
        assert np.array_equal(x, np.asarray(y))


class TwoLayerLM(nnx.Module):
    """A foreign policy: an embedding and two linear layers, the second the output head."""

    def __init__(self, vocab: int, dim: int, rngs: nnx.Rngs):
        self.embed = nnx.Embed(vocab, dim, rngs=rngs)
        self.hidden = nnx.Linear(dim, dim, rngs=rngs)
        self.out = nnx.Linear(dim, vocab, rngs=rngs)

    def __call__(self, tokens, positions, cache=None, *, valid=None):
        return self.out(jnp.tanh(self.hidden(self.embed(tokens)) + 0.1 * positions[..., None]))


@pytest.mark.parametrize("family", ["llama", "module"])
def test_the_policy_is_the_numpy_merge_of_base_and_adapters(family):
    """policy_params (what the sampler, the critic and the exporter get) gives the logits of W + alpha/r A @ B
    computed in numpy, on the named targets only. Catches a wrong scale, A and B swapped or transposed, and an
    adapter merged into another matrix than its own."""
    tokens = np.random.default_rng(0).integers(0, 32, (2, 6)).astype(np.int32)
    if family == "llama":
        config = CONFIG
        params = init_params(config, jax.random.PRNGKey(0), std=0.2)
        lora, groups = lora_of(config), ("layers",)
    else:
        module = TwoLayerLM(32, 8, nnx.Rngs(0))
        config, params = as_policy(module)
        lora, groups = lora_of(config, "hidden/kernel,out/kernel"), ("hidden", "out")
    trainer = Trainer(config, optax.sgd(1.0), make_mesh(1, 1, 1, devices=jax.devices()[:1]), lora=lora)
    state = with_random_b(trainer, trainer.init_state(params, jax.random.PRNGKey(3)))
    expected = numpy_merged(params, jax.tree.map(np.asarray, state.params), groups)
    positions = np.broadcast_to(np.arange(6), (2, 6))
    want = forward(config, expected, tokens, None, positions)
    got = forward(config, trainer.policy_params(state), tokens, None, positions)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=2e-5, rtol=1e-5)
    base = forward(config, params, tokens, None, positions)
    assert float(np.abs(np.asarray(got) - np.asarray(base)).max()) > 1e-2  # the adapters change the logits


def test_a_checkpoint_holds_the_adapters_and_restores_the_policy_on_the_base(tmp_path):
    """Saved: the adapters and their AdamW moments, no base array; restored on the base it reproduces the
    policy's logits bit for bit. Catches the base saved (or moments sized by it) and a restore that drops the
    adapters."""
    params = init_params(CONFIG, jax.random.PRNGKey(0), std=0.2)
    optimizer, _ = make_optimizer(dict(lr=1e-2))
    trainer = Trainer(CONFIG, optimizer, make_mesh(1, 1, 1, devices=jax.devices()[:1]), LOSS,
                      lora=lora_of(CONFIG))
    state, _ = trainer.step(trainer.init_state(params, jax.random.PRNGKey(0)), trainer.put_batch(random_batch()))
    adapter_size = sum(x.size for x in jax.tree.leaves(state.params))
    moments = [x.size for x in jax.tree.leaves(state.opt_state) if x.size > 1]
    assert sum(moments) == 2 * adapter_size  # mu and nu, each the adapters' size
    tokens = random_batch().tokens[:2]
    logits = np.asarray(forward(CONFIG, trainer.policy_params(state), tokens))
    with Checkpointer(tmp_path / "ckpt", async_save=False) as ckpt:
        ckpt.save(1, state)
    saved = os.listdir(tmp_path / "ckpt" / "1" / "state")
    assert {d.split(".")[0] for d in saved if "." in d and not d.endswith(".txt")} == {"params", "opt_state"}
    assert sorted(d for d in saved if d.startswith("params")) == sorted(
        f"params.layers.{n}.{m}" for n in TARGETS for m in "ab")
    state_bytes = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(tmp_path / "ckpt" / "1" / "state")
                      for f in fs)
    base_bytes = 4 * sum(x.size for x in jax.tree.leaves(params))
    assert state_bytes < base_bytes / 2
    with Checkpointer(tmp_path / "ckpt") as ckpt:
        restored, _, _ = ckpt.restore(trainer.abstract_state())
    restored = trainer.with_base(restored, params)
    assert np.array_equal(np.asarray(forward(CONFIG, trainer.policy_params(restored), tokens)), logits)


@pytest.mark.parametrize("values, message", [
    ({"lora_rank": 4, "lora_targets": "wq,q_proj"},
     "--config.model.lora_targets: 'q_proj' names no weight matrix of this model; its matrices are embed, w_down, "
     "w_gate, w_up, wk, wo, wq, wv (or a path suffix such as layers/wq)"),
    ({"lora_rank": -1}, "--config.model.lora_rank=-1: must be >= 0"),
    ({"lora_rank": 4, "lora_alpha": 0.0}, "--config.model.lora_alpha=0.0: must be > 0"),
])
def test_bad_lora_settings_are_config_errors_naming_the_field(values, message):
    with pytest.raises(ConfigError) as e:
        typed(ModelSection, values, "model").lora(CONFIG)
    assert e.value.problems[0].startswith(message)
