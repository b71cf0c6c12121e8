"""The families as NNX modules (same layout, same logits as the pure functions) and a module defined here trained
one step and sampled."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P

from harnessrl_jax.models import (as_policy, forward, forward_cached, init_cache, init_params, nnx_module,
                                  preset_config)
from harnessrl_jax.models.sharding import make_mesh, partition_specs
from harnessrl_jax.rl.batch import TrainBatch
from harnessrl_jax.rl.step import LossSettings, Trainer
from harnessrl_jax.rollout import JaxEngine

FAMILIES = {
    "qwen3": preset_config("tiny").replace(vocab_size=64, num_layers=2, qk_norm=True, attention_bias=True),
    "qwen3.5": preset_config("qwen3.5-tiny").replace(vocab_size=64, chunk_size=8, num_layers=4),
}


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_a_family_module_splits_to_the_params_dict_and_gives_forwards_logits(name):
    config = FAMILIES[name]
    params = init_params(config, jax.random.PRNGKey(0), std=0.1)
    module = nnx_module(config, params)
    graphdef, state = nnx.split(module)
    # the state is the dict loaders, checkpoints and the exporter address by path, and holds the same arrays
    assert jax.tree.structure(nnx.to_pure_dict(state)) == jax.tree.structure(params)
    assert all(a is b for a, b in zip(jax.tree.leaves(nnx.to_pure_dict(state)), jax.tree.leaves(params)))
    tokens = jnp.asarray(np.random.default_rng(0).integers(1, config.vocab_size, (2, 9)), jnp.int32)
    valid = jnp.asarray(np.arange(9)[None] >= np.array([[0], [3]]))  # the second row left-padded
    positions = jnp.maximum(jnp.cumsum(valid, axis=-1) - 1, 0)

    @jax.jit
    def both(p):  # the module merged from the split state, against the pure functions on the same params
        module = nnx.merge(graphdef, p)
        cache = init_cache(config, 2, 16)
        return ((module(tokens, valid=valid), module(tokens[:, :5], positions[:, :5], cache, valid=valid[:, :5])[0]),
                (forward(config, p, tokens, valid),
                 forward_cached(config, p, tokens[:, :5], positions[:, :5], valid[:, :5], cache, jnp.int32(0))[0]))

    got, expected = both(params)
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_array_equal(got[1], expected[1])
    # the sharding rules read the modules' annotations
    specs = partition_specs(config, make_mesh(1, 2, 4))
    assert specs["embed"] == P("tensor", "fsdp") and specs["layers"]["w_down"] == P(None, "tensor", "fsdp")


class PrefixMeanLM(nnx.Module):
    """Not a family of the package: each position reads the mean of the valid embeddings up to it."""

    def __init__(self, vocab: int, dim: int, rngs: nnx.Rngs):
        self.embed = nnx.Embed(vocab, dim, rngs=rngs)
        self.mix = nnx.Linear(dim, dim, rngs=rngs)
        self.out = nnx.Linear(dim, vocab, rngs=rngs)

    def __call__(self, tokens, positions, cache=None, *, valid=None):
        valid = jnp.ones(tokens.shape, bool) if valid is None else valid
        x = self.embed(tokens) * valid[..., None]
        mean = jnp.cumsum(x, axis=1) / jnp.maximum(jnp.cumsum(valid, axis=1), 1)[..., None]
        return self.out(jax.nn.gelu(self.mix(mean)) + 0.1 * jnp.sin(positions)[..., None])


def test_a_module_defined_here_trains_one_step_and_samples():
    module = PrefixMeanLM(32, 16, nnx.Rngs(0))
    config, params = as_policy(module)
    assert config.vocab_size == 32
    rows, seq = 4, 10
    rng = np.random.default_rng(0)
    tokens = rng.integers(1, 32, (rows, seq)).astype(np.int32)
    mask = np.arange(seq)[None].repeat(rows, 0) >= 4
    targets = np.concatenate([tokens[:, 1:], np.zeros((rows, 1), np.int32)], axis=1)
    batch = TrainBatch(tokens, np.ones((rows, seq), bool), targets, mask, np.zeros((rows, seq), np.float32),
                       np.array([1.0, -1.0, 0.5, -0.5], np.float32), np.ones(rows, np.float32))
    loss = LossSettings(kl_coef=0.0, temperature=0.7)
    trainer = Trainer(config, optax.sgd(0.1), make_mesh(1, 1, 1, devices=jax.devices()[:1]), loss)
    state = trainer.init_state(params, jax.random.PRNGKey(0))
    put = trainer.put_batch(batch)
    before = jax.tree.map(np.asarray, state.params)
    state, metrics = trainer.step(state, put)
    # the step read the module's own logits, at the loss temperature: its entropy metric is theirs
    z = module(tokens, np.arange(seq)[None].repeat(rows, 0)) / 0.7
    entropy = -jnp.sum(jax.nn.softmax(z) * jax.nn.log_softmax(z), axis=-1)
    np.testing.assert_allclose(float(metrics["entropy"]), float(entropy[mask].mean()), rtol=1e-5)
    assert float(metrics["grad_norm"]) > 0
    moved = jax.tree.map(lambda a, b: not np.allclose(a, b), before, jax.tree.map(np.asarray, state.params))
    assert all(jax.tree.leaves(moved))
    # the sampler runs the trained module: each greedy token is the argmax of its logits at the position before
    engine = JaxEngine(config, state.params, stop_ids=[32], pad_id=0)  # 32: no stop token, all four are sampled
    out = engine.generate([[3, 5, 7, 2]], max_new_tokens=4, temperature=0.0)
    sequence = jnp.asarray([[3, 5, 7, 2, *out.tokens[0, :3]]])
    logits = nnx.merge(config.graphdef, state.params)(sequence, jnp.arange(7)[None])
    np.testing.assert_array_equal(jnp.argmax(logits[0, 3:], axis=-1), out.tokens[0])
