"""The optimiser: AdamW after global-norm clipping, on a learning-rate schedule chosen by name.

`make_optimizer(config)` reads a ConfigDict (or any attribute bag) with the keys of `DEFAULTS`; the schedule is
returned with it so the train step can log the learning rate it applied.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import optax

DEFAULTS = dict(
    lr=1e-6,  # HarnessRL trains every model at 1e-6
    schedule="constant",  # constant | cosine | linear (decay to end_lr_factor * lr after warmup)
    warmup_steps=0,
    total_steps=500,
    end_lr_factor=0.0,
    b1=0.9,
    b2=0.999,
    eps=1e-8,
    weight_decay=0.0,
    max_grad_norm=1.0,  # <= 0 turns clipping off
)


def _get(config, key):
    return config.get(key, DEFAULTS[key]) if hasattr(config, "get") else getattr(config, key, DEFAULTS[key])


SCHEDULES: dict[str, Callable[..., optax.Schedule]] = {
    "constant": lambda lr, decay_steps, end: optax.constant_schedule(lr),
    "cosine": lambda lr, decay_steps, end: optax.cosine_decay_schedule(lr, decay_steps, alpha=end),
    "linear": lambda lr, decay_steps, end: optax.linear_schedule(lr, lr * end, decay_steps),
}


def make_schedule(config) -> optax.Schedule:
    """Linear warmup from 0 over `warmup_steps`, then the named schedule until `total_steps`."""
    name, lr, warmup = _get(config, "schedule"), float(_get(config, "lr")), int(_get(config, "warmup_steps"))
    if name not in SCHEDULES:
        raise ValueError(f"unknown lr schedule {name!r}; known: {sorted(SCHEDULES)}")
    decay_steps = max(int(_get(config, "total_steps")) - warmup, 1)
    main = SCHEDULES[name](lr, decay_steps, float(_get(config, "end_lr_factor")))
    if warmup <= 0:
        return main
    return optax.join_schedules([optax.linear_schedule(0.0, lr, warmup), main], [warmup])


_BIASES = ("bq", "bk", "bv")


def decay_mask(params: Any) -> Any:
    """True for weight matrices; norms and biases are not decayed (the usual AdamW practice)."""
    def keep(path, _):
        name = getattr(path[-1], "key", str(path[-1]))
        return "norm" not in name and name not in _BIASES
    return jax.tree_util.tree_map_with_path(keep, params)


def make_optimizer(config) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """(clip_by_global_norm then AdamW, the schedule it follows)."""
    schedule = make_schedule(config)
    adamw = optax.adamw(schedule, b1=float(_get(config, "b1")), b2=float(_get(config, "b2")),
                        eps=float(_get(config, "eps")), weight_decay=float(_get(config, "weight_decay")),
                        mask=decay_mask)
    max_norm = float(_get(config, "max_grad_norm"))
    if max_norm <= 0:
        return adamw, schedule
    return optax.chain(optax.clip_by_global_norm(max_norm), adamw), schedule
