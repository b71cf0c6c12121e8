"""HarnessBandit's gradient sketch (rl.sketch): its coordinates, how well its cosines track the full
gradients', and the sketch the sharded train step returns against the unsharded step and the plain gradient."""

import re

import jax
import numpy as np
import optax
import pytest
from test_step import CONFIG, LOSS, one_device, random_batch, reference_grad  # tests/rl/test_step.py

from harnessrl_jax.models import init_params, param_shapes, preset_config
from harnessrl_jax.models.sharding import make_mesh
from harnessrl_jax.rl.sketch import make_sketch_spec
from harnessrl_jax.rl.step import Trainer, metrics_to_host, to_host

DEEP = preset_config("tiny").replace(vocab_size=64, num_layers=6)


def test_coordinates_are_layer_proportional_sorted_and_fixed_by_the_seed():
    spec = make_sketch_spec(DEEP, 3000, last_blocks=4, seed=0)
    shapes = param_shapes(DEEP)["layers"]
    sizes = {p: 4 * int(np.prod(shapes[p[1]][1:])) for p in spec.paths}
    total = sum(sizes.values())
    assert spec.d == 3000 and sum(len(f) for f in spec.flat) == 3000
    assert {p[1] for p in spec.paths} == set(shapes)  # every per-layer leaf, nothing else (no embed, head, norm)
    for p, f in zip(spec.paths, spec.flat):
        assert abs(len(f) - 3000 * sizes[p] / total) < 1.0  # largest-remainder rounding
        assert (np.diff(f) > 0).all()  # sorted, no repeats
        per_row = int(np.prod(shapes[p[1]][1:]))
        assert (f // per_row >= 2).all()  # rows of the last 4 of 6 layers only
    again, other = make_sketch_spec(DEEP, 3000, seed=0), make_sketch_spec(DEEP, 3000, seed=1)
    assert all((a == b).all() for a, b in zip(spec.flat, again.flat))
    assert not all(len(a) == len(b) and (a == b).all() for a, b in zip(spec.flat, other.flat))
    assert make_sketch_spec(CONFIG, 10**9).d == sum(  # d is capped at the pool's size
        int(np.prod(s)) for s in param_shapes(CONFIG)["layers"].values())


def test_sketch_cosines_track_the_full_gradients_cosines():
    """Random gradient pairs with cosines from -0.9 to 0.9 over the pool: the sketch's cosine is within the JL
    tolerance (a few / sqrt(d)) of the cosine of the whole last-four-block gradients."""
    from harnessrl_jax.rl.sketch import sketch

    spec = make_sketch_spec(DEEP, 4096, last_blocks=4, seed=0)
    shapes = param_shapes(DEEP)
    rng = np.random.default_rng(0)

    def draw():
        return jax.tree.map(lambda s: rng.standard_normal(s).astype(np.float32), shapes,
                            is_leaf=lambda x: isinstance(x, tuple))

    def pool(g):  # the last four blocks' gradient, flattened: what the sketch stands for
        return np.concatenate([np.asarray(g["layers"][k])[2:].ravel() for k in sorted(g["layers"])])

    errors = []
    for rho in (-0.9, -0.5, 0.0, 0.3, 0.7, 0.9):
        a, noise = draw(), draw()
        b = jax.tree.map(lambda x, n: rho * x + np.sqrt(1 - rho**2) * n, a, noise)
        full = np.dot(pool(a), pool(b)) / (np.linalg.norm(pool(a)) * np.linalg.norm(pool(b)))
        sa, sb = np.asarray(sketch(a, spec)), np.asarray(sketch(b, spec))
        np.testing.assert_array_equal(sa, spec.host(a))
        errors.append(abs(np.dot(sa, sb) / (np.linalg.norm(sa) * np.linalg.norm(sb)) - full))
    assert max(errors) < 4 / np.sqrt(4096), errors


def sketch_step(mesh, params, ref_params, spec, micro_batches=1):
    trainer = Trainer(CONFIG, optax.sgd(1.0), mesh, LOSS, micro_batches=micro_batches, sketch_spec=spec)
    state = trainer.init_state(params, jax.random.PRNGKey(0))
    batch, ref = trainer.put_batch(random_batch()), trainer.place_params(ref_params)
    new, metrics, s = trainer.step(state, batch, ref, return_sketch=True)
    assert s.sharding.is_fully_replicated
    grads = jax.tree.map(lambda a, b: np.asarray(a) - np.asarray(b), params, new.params)
    return np.asarray(to_host(s)), grads, metrics_to_host(metrics), trainer


@pytest.fixture(scope="module")
def model():
    params = init_params(CONFIG, jax.random.PRNGKey(0), std=0.2)
    return params, jax.tree.map(lambda p, n: p + 0.05 * n, params, init_params(CONFIG, jax.random.PRNGKey(1)))


def test_step_returns_the_sketch_of_the_gradient_it_applies(model):
    params, ref_params = model
    spec = make_sketch_spec(CONFIG, 512, seed=3)
    s, grads, metrics, trainer = sketch_step(one_device(), params, ref_params, spec)
    _, want = reference_grad(params, ref_params, random_batch())
    np.testing.assert_allclose(s, spec.host(want), atol=1e-6, rtol=1e-5)  # the plain objective's gradient
    np.testing.assert_allclose(s, spec.host(grads), atol=1e-6)  # the one the optimiser got
    assert trainer.compiles() == 1
    # without return_sketch the same compiled step answers as a plain one
    state = trainer.init_state(params, jax.random.PRNGKey(0))
    out = trainer.step(state, trainer.put_batch(random_batch()), trainer.place_params(ref_params))
    assert len(out) == 2 and trainer.compiles() == 1
    plain = Trainer(CONFIG, optax.sgd(1.0), one_device(), LOSS)
    with pytest.raises(ValueError, match="sketch_spec"):
        plain.step(plain.init_state(params, jax.random.PRNGKey(0)), plain.put_batch(random_batch()),
                   plain.place_params(ref_params), return_sketch=True)


def test_sharded_sketch_equals_the_unsharded_one(model):
    params, ref_params = model
    spec = make_sketch_spec(CONFIG, 512, seed=3)
    single = sketch_step(one_device(), params, ref_params, spec)[0]
    sharded = sketch_step(make_mesh(2, 2, 2), params, ref_params, spec, micro_batches=2)[0]
    np.testing.assert_allclose(sharded, single, atol=1e-5, rtol=1e-5)
    fsdp = sketch_step(make_mesh(1, 8, 1), params, ref_params, spec)[0]
    np.testing.assert_allclose(fsdp, single, atol=1e-5, rtol=1e-5)


def test_sharded_gradients_are_gathered_at_the_coordinates_only():
    """On 8 FSDP devices the sketch compiles to local gathers and one all-reduce of d values: no all-gather of
    any gradient leaf (the sketch's per-step cost is d values)."""
    from jax.sharding import NamedSharding, PartitionSpec

    from harnessrl_jax.models.sharding import partition_specs
    from harnessrl_jax.rl.sketch import sketch

    mesh = make_mesh(1, 8, 1)
    specs = partition_specs(DEEP, mesh)
    grads = jax.tree.map(lambda s, p: jax.ShapeDtypeStruct(s, np.float32, sharding=NamedSharding(mesh, p)),
                         param_shapes(DEEP), specs, is_leaf=lambda x: isinstance(x, tuple))
    spec = make_sketch_spec(DEEP, 2048)
    fn = jax.jit(lambda g: sketch(g, spec), out_shardings=NamedSharding(mesh, PartitionSpec()))
    hlo = fn.lower(grads).compile().as_text()
    assert " all-gather(" not in hlo and " all-gather-start(" not in hlo
    reduces = [line for line in hlo.splitlines() if " all-reduce(" in line or " all-reduce-start(" in line]
    assert len(reduces) == 1
    shape = reduces[0].split("= ", 1)[1].split(" all-reduce")[0]  # the reduced arrays' types
    sizes = [int(n) for n in re.findall(r"f32\[(\d+)\]", shape)]
    assert 0 < sum(sizes) <= spec.d  # only the coordinates of the sharded leaves travel


def test_a_hybrid_model_pools_the_last_blocks_of_every_stack():
    """Qwen3.5's linear- and full-attention leaves are stacked apart; the pool takes their rows of the last K
    layers (layer_types decides which rows those are)."""
    config = preset_config("qwen3.5-tiny")  # layers 0-2 Gated DeltaNet, layer 3 full attention
    spec = make_sketch_spec(config, 4000, last_blocks=2)
    shapes = param_shapes(config)
    rows = {}
    for (group, name), f in zip(spec.paths, spec.flat):
        per_row = int(np.prod(shapes[group][name][1:]))
        rows.setdefault(group, set()).update((f // per_row).tolist())
    assert rows == {"layers": {2, 3}, "linear_attn": {2}, "full_attn": {0}}
