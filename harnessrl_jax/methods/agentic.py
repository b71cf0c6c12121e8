"""Multi-turn tool use under agent harnesses (harnessrl_jax.agentic): the scheme a frozen-harness method runs on the
workspace tasks (config.tasks.source 'agentic').

    episodes  = agentic.run_episodes(engine, tasks, harness per task, n=J)   each turn one batched engine call
    S, reward = the rule judge over each episode's outcome (final files + answer; rubric.rules.workspace_rules)
    batch     = rl.batch.build_trajectory_batch(segments)                     loss on the policy's tokens only
    update    = the method's advantages (Dr.GRPO's leave-one-out for the arms methods) and one GRPO step

Each task's harness is the sampler's arm (`step_arms`: HarnessBandit's one arm per step, the mixtures' grid rows),
or config.agentic.train_harness for a sampler without arms (GRPO). At the last step the policy is evaluated on the
held-out tasks under every training harness and the held-out one, k episodes each (`agentic_eval.json`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
import time
from typing import Sequence

import numpy as np

from harnessrl_jax.agentic.harnesses import HELDOUT_HARNESS, TRAIN_HARNESSES, check_names, harness
from harnessrl_jax.agentic.rollout import Episode, TurnFormat, run_episodes
from harnessrl_jax.agentic.tasks import TASKS_PATH, load_agent_tasks, outcome_text
from harnessrl_jax import methods
from harnessrl_jax.errors import ConfigError
from harnessrl_jax.methods.base import Method
from harnessrl_jax.methods.guidance import HarnessPrompts
from harnessrl_jax.methods.parts import PartsContext, Scheme, TrainResult
from harnessrl_jax.methods.schemes import GRPOScheme
from harnessrl_jax.rl.batch import build_trajectory_batch
from harnessrl_jax.rollout import Rollouts
from harnessrl_jax.settings import section
from harnessrl_jax.stages import GroupBatch, compute_advantages, push_weights, score_responses, train_on_batch

log = logging.getLogger(__name__)
SOURCE = "agentic"  # config.tasks.source of the workspace tasks
EVAL_FILE = "agentic_eval.json"


@dataclasses.dataclass(frozen=True)
class AgenticConfig:
    """config.agentic: the episode budget, the harnesses, and the end-of-training evaluation. An episode's opening
    fits in config.max_prompt_len and the rest of it (policy turns and tool results) in config.max_new_tokens."""

    train_harness: str = TRAIN_HARNESSES[0]  # the harness of a sampler without arms (GRPO)
    eval_harnesses: tuple[str, ...] = TRAIN_HARNESSES + (HELDOUT_HARNESS,)
    heldout_harness: str = HELDOUT_HARNESS  # never trained on (the methods' arms must not hold it)
    max_turns: int = 3  # policy turns per episode
    turn_tokens: int = 32  # max new tokens per policy turn
    eval_k: int = 3  # episodes per held-out task and harness (pass@k, pass^k)
    eval_tasks: int = 0  # held-out tasks evaluated, evenly spaced over the file (every kind in turn; 0: all)
    eval_batch: int = 24  # tasks per evaluation call
    pass_threshold: float = 100.0  # an episode passes at reward >= this (every check met)

    def __post_init__(self):
        for name in ("max_turns", "turn_tokens", "eval_k", "eval_batch"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        problems = check_names((self.train_harness, self.heldout_harness) + tuple(self.eval_harnesses))
        if problems:
            raise ValueError("; ".join(problems))
        if self.train_harness == self.heldout_harness:
            raise ValueError(f"train_harness={self.train_harness!r} is the held-out harness")


@dataclasses.dataclass(frozen=True)
class AgentGroups(GroupBatch):
    """A step's groups with their episodes (task-major, J per task)."""

    episodes: tuple[Episode, ...] = ()


def episode_rollouts(episodes: Sequence[Episode], prompt_ids: Sequence[Sequence[int]], n: int) -> Rollouts:
    """The episodes as Rollouts for the step's bookkeeping: each row's policy tokens and logprobs end to end, 'stop'
    for an episode that ended with `done`."""
    toks = [[t for ids, lp in ep.segments if lp is not None for t in ids] for ep in episodes]
    lps = [np.concatenate([lp for _, lp in ep.segments if lp is not None] or [np.zeros(0, np.float32)])
           for ep in episodes]
    width = max(1, max(map(len, toks)))
    tokens = np.zeros((len(episodes), width), np.int32)
    logprobs = np.zeros((len(episodes), width), np.float32)
    for r, (t, lp) in enumerate(zip(toks, lps)):
        tokens[r, :len(t)], logprobs[r, :len(lp)] = t, lp
    return Rollouts([list(p) for p in prompt_ids], np.repeat(np.arange(len(prompt_ids)), n), tokens, logprobs,
                    np.asarray([len(t) for t in toks], np.int32),
                    ["stop" if ep.ended == "done" else "length" for ep in episodes], [ep.turns[-1] if ep.turns else ""
                                                                                      for ep in episodes])


def episode_metrics(episodes: Sequence[Episode], prefix: str = "agentic") -> dict[str, float]:
    turns = [len(ep.turns) for ep in episodes]
    return {f"{prefix}/turns_mean": float(np.mean(turns)),
            f"{prefix}/done_fraction": float(np.mean([ep.ended == "done" for ep in episodes])),
            f"{prefix}/call_rate": float(sum(ep.calls for ep in episodes) / max(1, sum(turns))),
            f"{prefix}/policy_tokens_mean": float(np.mean([ep.policy_tokens for ep in episodes])),
            f"{prefix}/context_tokens_mean": float(np.mean([len(ep.context) for ep in episodes]))}


class AgentScheme(Scheme):
    """Multi-turn episodes per drawn task under its harness, judged on the outcome, one update on the whole
    trajectories (see the module docstring)."""

    # The openings are the harnesses' own, within config.max_prompt_len: no guidance budget on top of the train rows.
    writes_prompts = False

    def __init__(self, sampler, *, settings: AgenticConfig, workdir: str | None = None, sketch: bool = False):
        self.sampler, self.settings, self.workdir, self.sketch = sampler, settings, workdir, sketch
        names = list(getattr(sampler, "arm_names", None) or [])
        problems = check_names(names)
        if problems:
            raise ValueError(f"--config.bandit.arms / mixture: {'; '.join(problems)}")
        if settings.heldout_harness in names:
            raise ValueError(f"the held-out harness {settings.heldout_harness!r} is one of the method's arms")
        self.arm_harnesses = [harness(n) for n in names]
        self._fmt: TurnFormat | None = None
        self._metrics: dict[str, float] = {}

    @classmethod
    def build(cls, ctx: PartsContext, *, settings: AgenticConfig):
        return cls(ctx.sampler, settings=settings, workdir=ctx.workdir, sketch=ctx.method.sketch is not None)

    def harnesses(self, count: int):
        """The harness of each drawn task: its arm, or the train harness."""
        if self.arm_harnesses:
            return [self.arm_harnesses[a] for a in self.sampler.step_arms[:count]]
        return [harness(self.settings.train_harness)] * count

    def episodes(self, run, tasks, harnesses, *, n: int, seed: int) -> list[Episode]:
        if self._fmt is None:
            stops = list(getattr(run.engine, "stop_ids", []) or [])
            self._fmt = TurnFormat(run.tokenizer, [run.engine.eos_id] + stops)
        s, c = self.settings, run.config
        # the opening is the prompt (max_prompt_len); the rest of the episode is the train step's completion window
        return run_episodes(run.engine, run.tokenizer, tasks, harnesses, n=n, max_turns=s.max_turns,
                            turn_tokens=s.turn_tokens, max_prompt=c.max_prompt_len,
                            max_continuation=c.max_new_tokens, seed=seed, temperature=c.temperature,
                            top_p=c.top_p, top_k=c.top_k, fmt=self._fmt)

    def sample(self, run, harness_state, idx, tasks, *, step: int, seed: int) -> AgentGroups:
        J = run.config.num_generations
        hs = self.harnesses(len(tasks))
        eps = self.episodes(run, tasks, hs, n=J, seed=seed)
        prompt_ids = [eps[i * J].segments[0][0] for i in range(len(tasks))]
        responses = [[outcome_text(ep.files, ep.answer) for ep in eps[i * J:(i + 1) * J]] for i in range(len(tasks))]
        self._metrics = episode_metrics(eps)
        self._metrics["agentic/harnesses_in_step"] = float(len({h.name for h in hs}))
        return AgentGroups(prompt_ids, episode_rollouts(eps, prompt_ids, J), responses, [False] * len(tasks),
                           [False] * len(tasks), [False] * len(tasks), tuple(eps))

    def judge(self, run, harness_state, tasks, groups):
        return score_responses(run.judge, tasks, groups.responses, [harness_state.criteria(t.id) for t in tasks])

    def train(self, run, state, *, step: int, harness, next_harness, tasks, groups: AgentGroups, rewards, u
              ) -> TrainResult:
        advantages, advantage_metrics = compute_advantages(rewards, run.config.advantage)
        J = run.config.num_generations
        batch = build_trajectory_batch([ep.segments for ep in groups.episodes], advantages.reshape(-1),
                                       np.repeat(np.asarray(u, np.float32), J), seq_len=run.seq_len,
                                       pad_id=run.engine.pad_id, num_rows=run.rows,
                                       bucket=run.config.train_seq_bucket)
        sketch = None
        if self.sketch:
            state, metrics, sketch = train_on_batch(run, state, batch, return_sketch=True)
        else:
            state, metrics = train_on_batch(run, state, batch)
        self.sampler.after_update(advantages, sketch)
        timings = {}
        if step == run.config.total_steps - 1 and self.workdir is not None:
            start = time.perf_counter()
            push_weights(run, run.trainer.policy_params(state))
            write_evaluation(self.workdir, evaluate(self, run, seed=run.config.seed + 1))
            timings["time/eval"] = time.perf_counter() - start
        return TrainResult(state, metrics, advantage_metrics, timings, rewards)

    def metrics(self) -> dict[str, float]:
        return dict(self._metrics)


def evaluate(scheme: AgentScheme, run, *, seed: int) -> dict:
    """Per eval harness and held-out task, the rewards of k episodes (the policy the engine holds)."""
    s = scheme.settings
    tasks = [t for t in load_agent_tasks(_tasks_path(run.config), split="heldout")
             if all(c.verifier == "rule" for c in t.criteria)]
    if s.eval_tasks and s.eval_tasks < len(tasks):
        tasks = [tasks[i] for i in np.linspace(0, len(tasks) - 1, s.eval_tasks).round().astype(int)]
    out = {"k": s.eval_k, "pass_threshold": s.pass_threshold, "tasks": [t.id for t in tasks], "rewards": {},
           "episodes": {}}
    for name in s.eval_harnesses:
        h, rewards, eps_all = harness(name), [], []
        start = time.perf_counter()
        for b in range(0, len(tasks), s.eval_batch):
            chunk = tasks[b:b + s.eval_batch]
            eps = scheme.episodes(run, chunk, [h] * len(chunk), n=s.eval_k, seed=seed + b)
            responses = [[outcome_text(ep.files, ep.answer) for ep in eps[i * s.eval_k:(i + 1) * s.eval_k]]
                         for i in range(len(chunk))]
            rewards.extend(score_responses(run.judge, chunk, responses)[1].tolist())
            eps_all.extend(eps)
        out["rewards"][name] = rewards
        out["episodes"][name] = episode_metrics(eps_all, "eval")
        log.info("agentic eval %s: mean %.1f over %d tasks x %d (%.1f s)", name, float(np.mean(rewards)), len(tasks),
                 s.eval_k, time.perf_counter() - start)
    return out


def write_evaluation(workdir: str, result: dict) -> None:
    with open(os.path.join(workdir, EVAL_FILE), "w", encoding="utf-8") as f:
        json.dump(result, f)


def _tasks_path(config) -> str:
    return section(config, "tasks").path or TASKS_PATH


AGENTIC_METHODS = ("grpo", "harnessbandit", "mixture", "mixture2")


def on_workspace_tasks(method: Method, config, settings: AgenticConfig) -> Method:
    """`method` on the workspace tasks: its sampler and update as they are, its rollouts multi-turn episodes
    (AgentScheme) instead of single-turn prompts. Only frozen-harness methods with GRPO's scheme fit."""
    if method.name not in AGENTIC_METHODS or not method.frozen or method.scheme is not GRPOScheme:
        raise ConfigError([f"--config.method={method.name!r}: on --config.tasks.source={SOURCE!r} only "
                           f"{list(AGENTIC_METHODS)} run (a frozen harness, GRPO's scheme)"])
    return dataclasses.replace(method, prompts=HarnessPrompts,
                               scheme=functools.partial(AgentScheme, settings=settings))


methods.register_settings("agentic", AgenticConfig)
methods.register_task_source(SOURCE, lambda method, config: on_workspace_tasks(
    method, config, methods.settings(config, "agentic")))


__all__ = ["AGENTIC_METHODS", "AgentGroups", "AgentScheme", "AgenticConfig", "EVAL_FILE", "SOURCE", "episode_metrics",
           "episode_rollouts", "evaluate", "on_workspace_tasks"]
