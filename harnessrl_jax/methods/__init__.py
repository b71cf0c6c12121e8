"""Training methods by name (`config.method`): which harness interfaces move and what runs between scoring and
training.

    method = get_method(config.method)(run, workdir)     # run = loop.setup(config)
    method.start(extra)                                   # extra: a checkpoint's `extra` slot, or None (fresh)
    state, metrics, records = method.step(state, step)    # records: harness.jsonl lines of this step
    ckpt.save(step + 1, state, method.extra())            # JSON, everything the method needs to resume exactly
    method.close()

`grpo`: plain GRPO, the harness with every interface frozen (`methods/grpo.py`). `harnessrl`: the full harness,
attributor -> proposer -> just-in-time critic with memory (`methods/harnessrl.py`); its ablations are the
config.harness switches `no_critic`, `no_memory`, `only_guidance`, `only_rubric`.
"""

from __future__ import annotations

from typing import Callable

from harnessrl_jax.methods.grpo import GRPO
from harnessrl_jax.methods.harnessrl import HarnessRL

METHODS: dict[str, Callable] = {"grpo": GRPO, "harnessrl": HarnessRL}


def get_method(name: str) -> Callable:
    """The method class registered as `name`."""
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; known: {sorted(METHODS)}")
    return METHODS[name]


__all__ = ["GRPO", "HarnessRL", "METHODS", "get_method"]
