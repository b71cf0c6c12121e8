"""GRPO's scheme, the one most methods run (CoCA's is methods.coca.scheme): one group of J rollouts per drawn task
in the prompt writer's prompts (or the harness's mounted fields), judged under the harness's rubric c_t, and one
GRPO update on them.

Its settings are the step's two open choices: `loss_context` 'guided' (the loss sees the prompt a rollout was sampled
in) or 'bare' (the completion re-packed after the bare prompt: RuscaRL); `advantages_rubric` 'before' (the rubric
the rollouts were graded with) or 'after' (regraded under the rubric accepted this step). A prompt writer whose
prompts bring their own rubric (HarnessBandit's snapshot arms) supplies the advantages' rubric instead. For a method
with a gradient sketch (Method.sketch) the update also returns it, and the sampler gets it with the advantages.
"""

from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from harnessrl_jax.harness.render import task_fields
from harnessrl_jax.methods.guidance import PromptBudget
from harnessrl_jax.methods.parts import PartsContext, Scheme, TrainResult
from harnessrl_jax.settings import ADVANTAGE_RUBRICS, LOSS_CONTEXTS
from harnessrl_jax.stages import (GroupBatch, bare_context, compute_advantages, sample_groups, score_responses,
                                  train_on_rollouts)

class GRPOScheme(Scheme):
    """One group per task, one GRPO update (see the module docstring)."""

    def __init__(self, sampler, writer, *, loss_context: str = "guided", advantages_rubric: str = "before",
                 sketch: bool = False):
        if loss_context not in LOSS_CONTEXTS:
            raise ValueError(f"loss_context={loss_context!r}: expected one of {LOSS_CONTEXTS}")
        if advantages_rubric not in ADVANTAGE_RUBRICS:
            raise ValueError(f"advantages_rubric={advantages_rubric!r}: expected one of {ADVANTAGE_RUBRICS}")
        self.sampler, self.writer = sampler, writer
        self.loss_context, self.advantages_rubric, self.sketch = loss_context, advantages_rubric, sketch

    @classmethod
    def build(cls, ctx: PartsContext, **settings):
        # the trainer was built with the method's sketch spec when it has one (build.make_trainer)
        return cls(ctx.sampler, ctx.prompts, sketch=ctx.method.sketch is not None, **settings)

    def sample(self, run, harness, idx: Sequence[int], tasks: Sequence, *, step: int, seed: int) -> GroupBatch:
        prompts = self.writer.prompts(harness, idx, tasks, step=step, seed=seed,
                                      budget=PromptBudget(run.tokenizer, run.prompt_limit))
        return sample_groups(run, tasks, [task_fields(harness.guidance, i) for i in idx], seed=seed,
                             prompts=prompts)

    def judge(self, run, harness, tasks: Sequence, groups: GroupBatch):
        return score_responses(run.judge, tasks, groups.responses, [harness.criteria(t.id) for t in tasks])

    def train(self, run, state, *, step: int, harness, next_harness, tasks: Sequence, groups: GroupBatch,
              rewards: np.ndarray, u: np.ndarray) -> TrainResult:
        start, train_rewards = time.perf_counter(), rewards
        if self.advantages_rubric == "after":
            _, train_rewards, _ = score_responses(run.judge, tasks, groups.responses,
                                                  [next_harness.criteria(t.id) for t in tasks])
        own = self.writer.criteria(harness, tasks)  # the prompts' own rubric (snapshot arms) wins
        if own is not None:
            _, train_rewards, _ = score_responses(run.judge, tasks, groups.responses, own)
        judge_s = time.perf_counter() - start
        advantages, advantage_metrics = compute_advantages(train_rewards, run.config.advantage)
        rollouts = groups.rollouts if self.loss_context == "guided" else bare_context(run, tasks, groups.rollouts)
        sketch = None
        if self.sketch:
            state, metrics, sketch = train_on_rollouts(run, state, rollouts, advantages, u, return_sketch=True)
        else:
            state, metrics = train_on_rollouts(run, state, rollouts, advantages, u)
        self.sampler.after_update(advantages, sketch)
        return TrainResult(state, metrics, advantage_metrics, {"time/judge": judge_s}, train_rewards)


__all__ = ["GRPOScheme"]
