"""Sharding rules on 8 fake CPU devices (set in conftest before jax is imported)."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from harnessrl_jax.models import forward, init_params, preset_config
from harnessrl_jax.models.sharding import make_mesh, partition_specs, shard_params


def test_fake_devices_are_available():
    assert len(jax.devices()) == 8


def test_sharded_forward_equals_unsharded():
    config = preset_config("tiny")
    params = init_params(config, jax.random.PRNGKey(0), std=0.1)
    tokens = jnp.asarray(np.random.default_rng(0).integers(0, config.vocab_size, size=(4, 12)))
    expected = np.asarray(forward(config, params, tokens))
    mesh = make_mesh(data=2, fsdp=2, tensor=2)
    sharded = shard_params(config, params, mesh)
    wq = sharded["layers"]["wq"]
    assert wq.sharding.spec == P(None, "fsdp", "tensor")
    assert wq.addressable_shards[0].data.shape == (config.num_layers, config.hidden_size // 2, config.q_dim // 2)
    got = np.asarray(jax.jit(forward, static_argnums=0)(config, sharded, tokens))
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-5)


def test_axes_that_do_not_divide_a_dimension_are_dropped():
    config = preset_config("tiny").replace(hidden_size=60, intermediate_size=100)
    specs = partition_specs(config, make_mesh(data=1, fsdp=8, tensor=1))
    assert specs["layers"]["wq"] == P(None, None, "tensor")  # 60 % 8 != 0; tensor axis has size 1
    assert specs["layers"]["w_down"] == P(None, "tensor", None)
    assert specs["embed"] == P("tensor", None)


def test_mesh_must_cover_the_devices():
    import pytest

    with pytest.raises(ValueError, match="does not cover"):
        make_mesh(data=3, fsdp=1, tensor=1)
    assert make_mesh(data=2, fsdp=-1, tensor=2).shape == {"data": 2, "fsdp": 2, "tensor": 4 // 2}
