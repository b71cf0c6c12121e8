"""LoRA: low-rank adapters on chosen weight matrices of a frozen base, trained in their place (Hu et al. 2021).

A target is a weight matrix named by a suffix of its params path (`wq`, `layers/w_down`, `full_attn/wq`): a leaf
whose last two axes are (in, out), any before them stacked layers. It gets A [..., in, r], drawn as
PEFT's default draws it (uniform within +-1/sqrt(in)), and B [..., r, out], zero, and the policy's weight is

    W' = W + (alpha / r) * A @ B

so the merged params run through any family's functions (a foreign module's included), and the sampler, the critic
and the exporter see plain params. Adapters are nested like the params, `{"layers": {"wq": {"a": A, "b": B}}}`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

Path = tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Lora:
    """Rank, alpha and the params paths that carry adapters; hashable, so the train step can close over it."""

    rank: int
    alpha: float
    targets: tuple[Path, ...]

    @property
    def scale(self) -> float:
        return self.alpha / self.rank


def _shape(leaf) -> tuple[int, ...]:
    return tuple(leaf) if isinstance(leaf, tuple) else tuple(leaf.shape)


def _flat(tree) -> dict[Path, Any]:
    """The leaves of a nested dict (array, ShapeDtypeStruct or shape-tuple leaves) by their path of key strings."""
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update({(str(key),) + p: v for p, v in _flat(value).items()})
        else:
            out[(str(key),)] = value
    return out


def resolve(shapes, logical, *, rank: int, alpha: float, targets: str) -> Lora | None:
    """The adapters `targets` (comma-separated path suffixes) name among the weight matrices of the params
    `shapes`; None for rank 0 (full fine-tuning). A matrix has two axes besides a stacked `layers` axis (`logical`:
    the params' logical PartitionSpecs, as models.modules.logical_specs reads them). A name that matches no matrix
    is a ValueError naming the field and this model's matrices."""
    if rank == 0:
        return None
    specs = _flat(logical)
    matrices = [p for p, leaf in _flat(shapes).items() if len(_shape(leaf)) - tuple(specs[p]).count("layers") >= 2]
    names = [n.strip() for n in targets.split(",") if n.strip()]
    if not names:
        raise ValueError("lora_targets is empty: lora_rank > 0 needs the weight matrices to adapt")
    chosen = []
    for name in names:
        suffix = tuple(name.split("/"))
        hits = [p for p in matrices if p[-len(suffix):] == suffix]
        if not hits:
            known = ", ".join(sorted({p[-1] for p in matrices}))
            example = "/".join(max(matrices, key=len)[-2:])
            raise ValueError(f"lora_targets: {name!r} names no weight matrix of this model; its matrices are "
                             f"{known} (or a path suffix such as {example})")
        chosen += [p for p in hits if p not in chosen]
    return Lora(int(rank), float(alpha), tuple(sorted(chosen)))


def partition(lora: Lora, tree):
    """(view, rest): the targets' leaves and every other leaf of a nested params dict, each nested as `tree`."""
    def walk(node, prefix):
        view, rest = {}, {}
        for key, value in node.items():
            path = prefix + (str(key),)
            if isinstance(value, dict):
                v, r = walk(value, path)
                if v:
                    view[key] = v
                if r:
                    rest[key] = r
            elif path in lora.targets:
                view[key] = value
            else:
                rest[key] = value
        return view, rest

    return walk(tree, ())


def combine(view, rest):
    """The inverse of `partition`; also joins the per-layer lists of two trees split by llama.split_layers."""
    if isinstance(view, list):
        return [combine(v, r) for v, r in zip(view, rest)]
    out = dict(rest)
    for key, value in view.items():
        out[key] = combine(value, rest[key]) if key in rest else value
    return out


def adapter_shapes(lora: Lora, base):
    """The adapters' shapes as tuples, for a base given as arrays, ShapeDtypeStructs or shape tuples."""
    def one(leaf):
        *lead, d_in, d_out = _shape(leaf)
        return {"a": (*lead, d_in, lora.rank), "b": (*lead, lora.rank, d_out)}
    return jax.tree.map(one, partition(lora, base)[0], is_leaf=lambda x: isinstance(x, tuple))


def adapter_specs(lora: Lora, specs, shapes):
    """PartitionSpecs of the adapters from the base's `specs` (and `shapes`): A split as W's input axis and B as
    its output axis, the rank never split."""
    def one(spec, shape):
        *lead, d_in, d_out = tuple(spec) + (None,) * (len(shape) - len(spec))
        return {"a": jax.sharding.PartitionSpec(*lead, d_in, None),
                "b": jax.sharding.PartitionSpec(*lead, None, d_out)}
    return jax.tree.map(one, partition(lora, specs)[0], partition(lora, shapes)[0],
                        is_leaf=lambda x: isinstance(x, jax.sharding.PartitionSpec))


def init_adapters(lora: Lora, base, rng: jax.Array):
    """Fresh float32 adapters: A uniform within +-1/sqrt(in) (PEFT's kaiming_uniform(a=sqrt(5))), B zero, so the
    merged policy starts as the base."""
    shapes = adapter_shapes(lora, base)
    flat, treedef = jax.tree_util.tree_flatten(
        shapes, is_leaf=lambda x: isinstance(x, dict) and isinstance(x.get("a"), tuple))
    out = []
    for i, leaf in enumerate(flat):
        bound = leaf["a"][-2] ** -0.5
        a = jax.random.uniform(jax.random.fold_in(rng, i), leaf["a"], jnp.float32, -bound, bound)
        out.append({"a": a, "b": jnp.zeros(leaf["b"], jnp.float32)})
    return jax.tree.unflatten(treedef, out)


def merge(lora: Lora, view, adapters):
    """The targets' merged weights W + (alpha / r) A @ B, computed in float32 (view: partition(lora, base)[0])."""
    def one(w, ad):
        delta = jnp.einsum("...ir,...ro->...io", ad["a"], ad["b"], precision=jax.lax.Precision.HIGHEST)
        return (w.astype(jnp.float32) + lora.scale * delta).astype(w.dtype)
    return jax.tree.map(one, view, adapters)

