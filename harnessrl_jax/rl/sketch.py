"""HarnessBandit's gradient sketch: d fixed coordinates of the last K transformer blocks' gradient.

    spec = make_sketch_spec(model_config, d, last_blocks=4, seed=0)    # host, once per run
    s = sketch(grads, spec)                                            # jittable: [d] float32

The pool is every per-layer leaf's rows of the last K blocks (embeddings, the output head and the final norm are
left out). Leaf j of the pool (n_j elements, N in all) gets d_j = round(d n_j / N) coordinates by largest remainder
(sum d_j = d), drawn uniformly without replacement with the seed and kept sorted; d is capped at N. A linear
subsample keeps inner products approximately (Johnson-Lindenstrauss), and only cosines are read, so no scaling.
The coordinates are multi-dimensional indices into the full leaf: under jit, with FSDP-sharded gradients, each is
an XLA gather of d values and an all-reduce of a d-vector, never a gather of the whole gradient.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from harnessrl_jax.models import param_shapes


@dataclasses.dataclass(frozen=True, eq=False)
class SketchSpec:
    """The run's sketch coordinates: per pool leaf its path in the params, and its sorted flat indices into the
    whole leaf (`flat`) with the same as per-axis index arrays (`index`)."""

    paths: tuple[tuple[str, ...], ...]
    flat: tuple[np.ndarray, ...]
    index: tuple[tuple[np.ndarray, ...], ...]
    d: int
    seed: int
    last_blocks: int

    def host(self, grads) -> np.ndarray:
        """The sketch of host arrays (numpy): what `sketch` computes, for references and tests."""
        return np.concatenate([np.asarray(_get(grads, p), np.float32).reshape(-1)[f]
                               for p, f in zip(self.paths, self.flat)])


def _get(tree, path):
    for k in path:
        tree = tree[k]
    return tree


def _layer_rows(model_config, shapes) -> dict[str, list[int]]:
    """Per stacked group of per-layer leaves (`layers`, and a hybrid model's `linear_attn` / `full_attn`), the
    global layer index of each row."""
    rows = {}
    types = tuple(getattr(model_config, "layer_types", ()) or ())
    for group in shapes:
        if group == "layers":
            rows[group] = list(range(model_config.num_layers))
        elif types and group in ("linear_attn", "full_attn"):
            kind = group.removesuffix("_attn")  # layer_types names: 'linear_attention' / 'full_attention'
            rows[group] = [i for i, t in enumerate(types) if t.startswith(kind)]
    return rows


def make_sketch_spec(model_config, d: int, *, last_blocks: int = 4, seed: int = 0) -> SketchSpec:
    """The fixed coordinates (see the module docstring) for `model_config`'s params."""
    shapes = param_shapes(model_config)
    first = model_config.num_layers - min(last_blocks, model_config.num_layers)
    pool = []  # (path, rows of the leaf in the pool, elements per row)
    for group, layer_of_row in _layer_rows(model_config, shapes).items():
        for name in sorted(shapes[group]):
            shape = tuple(shapes[group][name])
            if shape[0] != len(layer_of_row):
                raise ValueError(f"params[{group!r}][{name!r}] has {shape[0]} rows for {len(layer_of_row)} layers")
            rows = [r for r, layer in enumerate(layer_of_row) if layer >= first]
            if rows:
                pool.append(((group, name), np.asarray(rows), int(np.prod(shape[1:], dtype=np.int64)), shape))
    sizes = np.array([len(rows) * per_row for _, rows, per_row, _ in pool], np.int64)
    total = int(sizes.sum())
    if total == 0:
        raise ValueError("the model has no per-layer parameters to sketch")
    d = int(min(d, total))
    exact = d * sizes / total
    counts = np.floor(exact).astype(np.int64)
    for j in np.argsort(-(exact - counts), kind="stable")[:d - int(counts.sum())]:  # largest remainders
        counts[j] += 1
    rng = np.random.default_rng(seed)
    paths, flats, indices = [], [], []
    for (path, rows, per_row, shape), size, k in zip(pool, sizes, counts):
        picked = np.sort(rng.choice(int(size), size=int(k), replace=False, shuffle=False))
        flat = rows[picked // per_row].astype(np.int64) * per_row + picked % per_row
        paths.append(path)
        flats.append(flat)
        indices.append(tuple(np.asarray(i, np.int32) for i in np.unravel_index(flat, shape)))
    return SketchSpec(tuple(paths), tuple(flats), tuple(indices), d, int(seed), int(last_blocks))


def sketch(grads: Any, spec: SketchSpec) -> jax.Array:
    """s = concat_j grads_j at the spec's coordinates, float32 [d] (jittable)."""
    parts = [_get(grads, p)[tuple(jnp.asarray(i) for i in idx)] for p, idx in zip(spec.paths, spec.index)]
    return jnp.concatenate([x.astype(jnp.float32) for x in parts])
