"""The optimiser: AdamW after global-norm clipping, on a learning-rate schedule chosen by name.

`make_optimizer(config)` takes an `OptimConfig` (config.optim; a mapping of its fields is typed first); the
schedule is returned with it so the train step can log the learning rate it applied.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

import jax
import optax

SCHEDULES: dict[str, Callable[..., optax.Schedule]] = {
    "constant": lambda lr, decay_steps, end: optax.constant_schedule(lr),
    "cosine": lambda lr, decay_steps, end: optax.cosine_decay_schedule(lr, decay_steps, alpha=end),
    "linear": lambda lr, decay_steps, end: optax.linear_schedule(lr, lr * end, decay_steps),
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class OptimConfig:
    """config.optim: AdamW after global-norm clipping, on a named learning-rate schedule."""

    lr: float = 1e-6  # HarnessRL trains every model at 1e-6
    schedule: str = "constant"  # constant | cosine | linear (decay to end_lr_factor * lr after warmup)
    warmup_steps: int = 0
    total_steps: int = 500
    end_lr_factor: float = 0.0
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0  # <= 0 turns clipping off

    def __post_init__(self):
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule={self.schedule!r}: known schedules {sorted(SCHEDULES)}")
        if self.warmup_steps < 0 or self.total_steps < 1:
            raise ValueError(f"warmup_steps={self.warmup_steps} must be >= 0 and total_steps={self.total_steps} >= 1")


def _typed(config: OptimConfig | Mapping[str, Any]) -> OptimConfig:
    return config if isinstance(config, OptimConfig) else OptimConfig(**dict(config))


def make_schedule(config: OptimConfig | Mapping[str, Any]) -> optax.Schedule:
    """Linear warmup from 0 over `warmup_steps`, then the named schedule until `total_steps`."""
    config = _typed(config)
    lr, warmup = float(config.lr), int(config.warmup_steps)
    decay_steps = max(int(config.total_steps) - warmup, 1)
    main = SCHEDULES[config.schedule](lr, decay_steps, float(config.end_lr_factor))
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


def make_optimizer(config: OptimConfig | Mapping[str, Any]) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """(clip_by_global_norm then AdamW, the schedule it follows)."""
    config = _typed(config)
    schedule = make_schedule(config)
    adamw = optax.adamw(schedule, b1=float(config.b1), b2=float(config.b2), eps=float(config.eps),
                        weight_decay=float(config.weight_decay), mask=decay_mask)
    max_norm = float(config.max_grad_norm)
    if max_norm <= 0:
        return adamw, schedule
    return optax.chain(optax.clip_by_global_norm(max_norm), adamw), schedule
