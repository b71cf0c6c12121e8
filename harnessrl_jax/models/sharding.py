"""Sharding rules: one PartitionSpec per parameter over the named mesh axes (data, fsdp, tensor).

Each parameter's logical axes are the annotations on the policy module's nnx.Params (modules.AXES for the
families); modules.LOGICAL_RULES maps them to mesh axes: `fsdp` on the model dimension, `tensor` on heads / the MLP
hidden dimension (Megatron style: column-parallel in, row-parallel out), the stacked layer axis never split. A
dimension that a mesh axis does not divide is left replicated on that axis, so any mesh shape works for any model.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from harnessrl_jax.models import Params, nnx_module, param_shapes
from harnessrl_jax.models.modules import LOGICAL_RULES, logical_specs

MESH_AXES = ("data", "fsdp", "tensor")

# Activations: batch over data and fsdp (FSDP is data parallel over weights gathered per layer).
BATCH_SPEC = P(("data", "fsdp"))


def make_mesh(data: int = 1, fsdp: int = -1, tensor: int = 1, devices=None) -> Mesh:
    """A (data, fsdp, tensor) mesh over the given (default: all) devices; -1 takes what is left."""
    devices = list(jax.devices() if devices is None else devices)
    sizes = [data, fsdp, tensor]
    if sizes.count(-1) > 1:
        raise ValueError("at most one mesh axis may be -1")
    known = 1
    for s in sizes:
        known *= s if s != -1 else 1
    sizes = [len(devices) // known if s == -1 else s for s in sizes]
    if sizes[0] * sizes[1] * sizes[2] != len(devices):
        raise ValueError(f"mesh {dict(zip(MESH_AXES, sizes))} does not cover the {len(devices)} devices")
    return Mesh(np.array(devices).reshape(sizes), MESH_AXES)


def _fit(spec: P, shape: tuple[int, ...], mesh: Mesh) -> P:
    """Drop axis names that do not divide the dimension they split."""
    out = []
    for dim, axes in zip(shape, tuple(spec) + (None,) * (len(shape) - len(spec))):
        names = (axes,) if isinstance(axes, str) else tuple(axes or ())
        size = 1
        for n in names:
            size *= mesh.shape[n]
        out.append(axes if names and dim % size == 0 else None)
    return P(*out)


def logical_param_specs(config) -> Params:
    """The logical PartitionSpec of every parameter of `config` (its module's annotations; P() where none)."""
    abstract = jax.tree.map(lambda s: jax.ShapeDtypeStruct(s, np.float32), param_shapes(config),
                            is_leaf=lambda x: isinstance(x, tuple))
    return logical_specs(nnx_module(config, abstract))


def partition_specs(config, mesh: Mesh) -> Params:
    """PartitionSpecs for every parameter of `config`, fitted to `mesh`."""
    shapes = param_shapes(config)
    logical = logical_param_specs(config)
    return jax.tree.map(lambda spec, shape: _fit(P(*(LOGICAL_RULES.get(a) for a in spec)), shape, mesh),
                        logical, shapes, is_leaf=lambda x: isinstance(x, P))


def param_shardings(config, mesh: Mesh) -> Params:
    """NamedShardings for every parameter."""
    return jax.tree.map(lambda s: NamedSharding(mesh, s), partition_specs(config, mesh),
                        is_leaf=lambda x: isinstance(x, P))


def shard_params(config, params: Params, mesh: Mesh) -> Params:
    """Place params on the mesh according to the rules."""
    return jax.device_put(params, param_shardings(config, mesh))
