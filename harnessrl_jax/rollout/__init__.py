"""Rollout engines behind one narrow interface: generate token ids, per-token logprobs and text."""

from harnessrl_jax.rollout.base import RolloutEngine, Rollouts
from harnessrl_jax.rollout.jax_engine import JaxEngine
from harnessrl_jax.rollout.sglang import SGLangEngine, SGLangError

__all__ = ["JaxEngine", "RolloutEngine", "Rollouts", "SGLangEngine", "SGLangError"]
