"""HarnessRL: GRPO while the training-time harness H_t = (p_t, g_t, c_t) co-evolves with the policy (DESIGN.md,
"One training step"):

    tasks, u   = sample_tasks(H.sampling, rng, batch)        i.i.d. from p_t, u = 1 / (N p_i)
    prompts    = render(tasks, H.guidance)                    mounted fields after the last user message
    rollouts   = engine.generate(prompts, n=J)
    S, rewards = judge.score_batch(tasks, rollouts, H.rubric) rule checkers; LLM criteria: see below
    result     = evolver.step(step, groups, H, memory, hooks) attributor -> proposer -> critic, <= B rounds
    memory.append_step(step, draw records)                    rollouts, S, rewards, labels, every candidate
    H          = advance_schedule(result.state, step + 1)     the guidance cap falls by one each quarter
    params     = train_step(rollouts, advantages, u)          GRPO, each rollout weighted by its task's u
    engine.update_weights(params)

The critic reaches the frozen current policy through `CriticHooks`: `regrade` scores a recorded group under a
candidate rubric with the same judge; `resample` samples J responses under candidate guidance from the engine,
which still holds this step's params (the train step comes after).

Judging. Criteria tagged `verifier:rule` go to the rule checkers. The others need an LLM judge: with
config.judge.base_url set they go to that OpenAI-compatible server; without one (the CPU default) they are dropped
from the training rubric at start-up, counted in `judge/dropped_llm_criteria`, and any later LLM criterion scores
NaN (not judged, skipped by the reward). Oracle scores (analysis only) use the tasks' rule `oracle_rubrics`.

The evolver's proposer is the rule proposer by default (the CPU default needs no model); config.harness.proposer
'llm' has the evolver model (config.evolver_model, an OpenAI-compatible server; empty fields take config.judge's)
write guidance and rubric candidates, and config.harness.llm_check adds the attributor's LLM hacking check.

Two switches the paper leaves open (config.harness):
- loss_context 'guided' (default): the loss sees the prompt the rollout was sampled in, so the update is on-policy;
  'bare' (RuscaRL): the completion is re-packed after the bare prompt, and train/engine_gap then measures the
  shift between the guided and the bare context.
- advantages_rubric 'before' (default): this step's advantages use the rubric the rollouts were graded with;
  'after': the rollouts are regraded with the rubric the critic accepted this step before the train step.

Checkpoint extra: {"harness": H.to_dict(), "memory": memory positions, "data": {}}; the memory lives in
`<workdir>/memory` and is truncated back to the checkpoint on resume, so a resumed run is the run that never
stopped.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections import Counter
from typing import Any, Sequence

import jax
import numpy as np

from harnessrl_jax import loop
from harnessrl_jax.evolver import (ACCEPTED, LABELS, NOOP, REJECTED, AttributorConfig, Attributor, Bands, ColdStart,
                                   Critic, CriticHooks, Evolver, EvolverConfig, Group, LLMHackingCheck, LLMProposer,
                                   RuleProposer, task_slice)
from harnessrl_jax.harness import DEFAULT_TRANSITIONS, HarnessState, sample_tasks
from harnessrl_jax.harness.ops import INTERFACES
from harnessrl_jax.harness.render import render_prompt, task_fields
from harnessrl_jax.harness.state import GAMMAS, NUM_LEVELS
from harnessrl_jax.memory import DEFAULT_EMBEDDER, DrawRecord, Memory
from harnessrl_jax.rubric.schema import Task

log = logging.getLogger(__name__)


def training_tasks(config, tasks: Sequence[Task]) -> tuple[list[Task], int]:
    """(tasks as the harness trains them, number of LLM criteria dropped): without an LLM judge only rule criteria
    stay; a task left with no positive criterion is dropped."""
    if config.judge.base_url:
        return list(tasks), 0
    out, dropped = [], 0
    for t in tasks:
        kept = tuple(c for c in t.criteria if c.verifier == "rule")
        dropped += len(t.criteria) - len(kept)
        if any(c.points > 0 for c in kept):
            out.append(dataclasses.replace(t, criteria=kept))
    if len(out) < len(tasks):
        log.warning("dropped %d tasks with no positive rule criterion (no LLM judge configured)",
                    len(tasks) - len(out))
    if not out:
        raise ValueError("no task has a positive rule criterion: set config.judge.base_url for an LLM judge")
    return out, dropped


def evolver_client(config):
    """The evolver model's client (an OpenAIJudge, whose `complete` the LLM proposer and hacking check call), or
    None when config.harness asks for neither."""
    h, e, j = config.harness, config.evolver_model, config.judge
    if h.proposer not in ("rule", "llm"):
        raise ValueError(f"config.harness.proposer must be 'rule' or 'llm', got {h.proposer!r}")
    if h.proposer == "rule" and not h.llm_check:
        return None
    base_url, model = e.base_url or j.base_url, e.model or j.model
    if not base_url:
        raise ValueError("config.harness.proposer='llm' / llm_check need an OpenAI-compatible server: set "
                         "config.evolver_model.base_url (or config.judge.base_url)")
    from harnessrl_jax.rubric.judges import OpenAIJudge

    return OpenAIJudge(base_url, model, structured_output=e.structured_output or j.structured_output,
                       api_key_env=e.api_key_env or j.api_key_env or None, max_tokens=int(e.max_tokens),
                       name="evolver")


def build_evolver(config, memory: Memory | None, client=None) -> tuple[Evolver, ColdStart | None]:
    """The evolver with config.harness's bands (or the cold start's), proposer and ablation switches; `client` is
    the evolver model's (evolver_client) when config.harness.proposer is 'llm' or llm_check is on."""
    h = config.harness
    cold = ColdStart.load(h.cold_start) if h.cold_start else None
    bands = cold.to_bands() if cold else Bands(tuple(h.guidance_band), tuple(h.rubric_band))
    attributor = AttributorConfig(task_mass_threshold=cold.task_mass_threshold) if cold else AttributorConfig()
    if h.only_guidance and h.only_rubric:
        raise ValueError("only_guidance and only_rubric exclude each other")
    if client is None and (h.proposer == "llm" or h.llm_check):
        raise ValueError("config.harness.proposer='llm' / llm_check: build_evolver needs the evolver model's client")
    interfaces = ("guidance",) if h.only_guidance else ("rubric",) if h.only_rubric else INTERFACES
    embed = None
    if memory is not None and memory.semantic is not None:
        embed = memory.semantic.embedder.encode  # near-duplicate merges by embedding
    proposer = RuleProposer(embed=embed)
    if h.proposer == "llm":
        proposer = LLMProposer(client, fallback=proposer)
    evolver = Evolver(Attributor(attributor, llm_check=LLMHackingCheck(client) if h.llm_check else None), proposer,
                      Critic(bands, enabled=not h.no_critic, sampling_gate=h.sampling_gate),
                      EvolverConfig(rounds=int(h.rounds), interfaces=interfaces))
    return evolver, cold


class HarnessRL:
    """config.method = 'harnessrl'; see the module docstring."""

    name = "harnessrl"

    def __init__(self, run: loop.Run, workdir: str):
        self.run, self.workdir, config = run, workdir, run.config
        self.tasks, self.dropped_llm = training_tasks(config, run.tasks)
        if self.dropped_llm:
            log.warning("no LLM judge (config.judge.base_url): %d LLM criteria dropped from the training rubric",
                        self.dropped_llm)
        self.judge = run.judge
        self.transitions = DEFAULT_TRANSITIONS
        self.memory: Memory | None = None
        self.client = None  # the evolver model's (proposer='llm', llm_check)
        self.harness: HarnessState | None = None
        self.prompt_limit = config.max_prompt_len + loop.guidance_budget(config)

    # ------------------------------------------------------------------------------------------- set-up

    def start(self, extra: dict[str, Any] | None) -> None:
        """Fresh (extra None) or resumed from a checkpoint's extra: the harness state and the memory."""
        h = self.run.config.harness
        if not h.no_memory:
            embedder = {"": None, "default": DEFAULT_EMBEDDER}.get(h.embedder, h.embedder)
            positions = extra["memory"] if extra else -1  # fresh: drop whatever an earlier run left
            self.memory = Memory.open(os.path.join(self.workdir, "memory"), embedder=embedder, positions=positions)
        self.client = evolver_client(self.run.config)
        self.evolver, cold = build_evolver(self.run.config, self.memory, self.client)
        if extra:
            self.harness = HarnessState.from_dict(extra["harness"])
            if self.harness.task_ids != tuple(t.id for t in self.tasks):
                raise ValueError("the checkpoint's harness has other tasks than this config")
        else:
            self.harness = HarnessState.from_tasks(self.tasks, gammas=cold.gammas if cold else GAMMAS,
                                                   anchors=cold.anchors if cold else None)
            self.harness = self.transitions.advance_schedule(self.harness, 0, self.run.config.total_steps)
            if self.memory is not None and self.memory.semantic is not None:
                self.memory.add_criteria((t.id, c.id, c.text) for t in self.tasks for c in t.criteria)

    def extra(self) -> dict[str, Any]:
        return {"data": {}, "harness": self.harness.to_dict(),
                "memory": self.memory.save() if self.memory is not None else None}

    def close(self) -> None:
        if self.memory is not None:
            self.memory.close()
        if self.client is not None:
            self.client.close()

    # ------------------------------------------------------------------------------------------- helpers

    def _prompt(self, task: Task, fields: Sequence[tuple[str, str]]) -> tuple[list[int], bool]:
        """Token ids of the guided prompt, or of the bare one (True) when the fields overflow the budget."""
        ids = render_prompt(self.run.tokenizer, task.prompt, fields, tokenize=True)
        if fields and len(ids) > self.prompt_limit:
            return render_prompt(self.run.tokenizer, task.prompt, (), tokenize=True), True
        return ids, False

    def _score(self, tasks: Sequence[Task], responses, criteria) -> list[np.ndarray]:
        return loop.score_responses(self.judge, tasks, responses, criteria)[0]

    def _hooks(self, seed: int, timer: dict[str, float]) -> CriticHooks:
        """The critic's access to the frozen current policy (the engine) and the judge, timed."""
        cfg, calls = self.run.config, [0]

        def regrade_batch(items):
            start = time.perf_counter()
            out = self._score([it[0] for it in items], [it[1] for it in items], [it[2] for it in items])
            timer["critic"] += time.perf_counter() - start
            return out

        def resample_batch(items):
            start = time.perf_counter()
            calls[0] += 1
            prompts = [self._prompt(task, tuple(fields))[0] for task, fields in items]
            out = self.run.engine.generate(prompts, n=cfg.num_generations, max_new_tokens=cfg.max_new_tokens,
                                           temperature=cfg.temperature, top_p=cfg.top_p, top_k=cfg.top_k,
                                           seed=(seed + 7919 * calls[0]) % (2**31 - 1))
            texts = np.asarray(out.texts, dtype=object).reshape(len(items), cfg.num_generations)
            timer["critic"] += time.perf_counter() - start
            timer["resampled"] += out.num_samples
            return [list(t) for t in texts]

        return CriticHooks(regrade_batch=regrade_batch, resample_batch=resample_batch)

    # ---------------------------------------------------------------------------------------------- step

    def step(self, state, step: int):
        """One HarnessRL step: (new train state, metrics, harness.jsonl lines). `state` is donated."""
        run, cfg, H = self.run, self.run.config, self.harness
        J, timings = cfg.num_generations, {}

        # --- sample, render, roll out
        start = time.perf_counter()
        seed = loop.step_seed(state, step)
        idx, u = sample_tasks(H.sampling, jax.random.PRNGKey(seed), cfg.tasks_per_step)
        idx, u = [int(i) for i in np.asarray(idx)], np.asarray(u, np.float32)
        tasks = [self.tasks[i] for i in idx]
        rendered = [self._prompt(t, task_fields(H.guidance, i)) for t, i in zip(tasks, idx)]
        rollouts = loop.generate_rollouts(run.engine, [p for p, _ in rendered], cfg, seed)
        responses = [list(r) for r in np.asarray(rollouts.texts, dtype=object).reshape(len(tasks), J)]
        timings["time/rollout"] = time.perf_counter() - start

        # --- judge
        start = time.perf_counter()
        S, rewards, metrics = loop.score_responses(self.judge, tasks, responses, [H.criteria(t.id) for t in tasks])
        metrics.update(loop.oracle_metrics(tasks, responses, rewards))
        timings["time/judge"] = time.perf_counter() - start

        # --- evolver (attributor -> proposer -> critic) and memory
        start = time.perf_counter()
        timer = {"critic": 0.0, "resampled": 0}
        groups = [Group(t, tuple(r), s) for t, r, s in zip(tasks, responses, S)]
        result = self.evolver.step(step, groups, H, memory=self.memory, hooks=self._hooks(seed, timer))
        if self.memory is not None:
            self.memory.append_step(step, [
                DrawRecord(step, t.id, tuple(c.id for c in H.rubric_of(t.id)),
                           tuple(c.text for c in H.rubric_of(t.id)), tuple(r), s, rw,
                           harness=task_slice(H, t.id),
                           dynamics={"u": float(u[n]), "level": int(H.sampling.level[idx[n]])},
                           **result.draw_fields(n))
                for n, (t, r, s, rw) in enumerate(zip(tasks, responses, S, rewards))])
        H_next = self.transitions.advance_schedule(result.state, step + 1, cfg.total_steps)
        timings["time/evolver"] = time.perf_counter() - start
        timings["time/critic"] = timer["critic"]

        # --- advantages under the rubric before or after this step's update
        start = time.perf_counter()
        train_rewards = rewards
        if cfg.harness.advantages_rubric == "after":
            _, train_rewards, _ = loop.score_responses(self.judge, tasks, responses,
                                                       [H_next.criteria(t.id) for t in tasks])
        elif cfg.harness.advantages_rubric != "before":
            raise ValueError(f"harness.advantages_rubric must be 'before' or 'after', got "
                             f"{cfg.harness.advantages_rubric!r}")
        timings["time/judge"] += time.perf_counter() - start
        advantages, adv_metrics = loop.compute_advantages(train_rewards, cfg.advantage)

        # --- train on the guided or the bare context
        start = time.perf_counter()
        if cfg.harness.loss_context == "bare":
            bare = [render_prompt(run.tokenizer, t.prompt, (), tokenize=True) for t in tasks]
            rollouts = dataclasses.replace(rollouts, prompt_ids=bare)
        elif cfg.harness.loss_context != "guided":
            raise ValueError(f"harness.loss_context must be 'guided' or 'bare', got {cfg.harness.loss_context!r}")
        state, train_metrics = loop.train_on_rollouts(run, state, rollouts, advantages, u)
        run.engine.update_weights(loop.engine_params(state.params))
        timings["time/train"] = time.perf_counter() - start

        self.harness = H_next
        metrics.update(self._harness_metrics(result, H, H_next, idx, rendered, timer))
        metrics.update(adv_metrics)  # reward/* of the rewards the advantages use
        metrics["reward/graded_mean"] = float(np.nanmean(rewards))  # under the rubric the rollouts were graded with
        metrics.update({
            "rollout/length_mean": float(rollouts.lengths.mean()),
            "rollout/stop_fraction": float(np.mean([r == "stop" for r in rollouts.finish_reason])),
            "judge/dropped_llm_criteria": float(self.dropped_llm),
        })
        return state, {**metrics, **train_metrics, **timings}, result.harness_records()

    def _harness_metrics(self, result, H, H_next, idx, rendered, timer) -> dict[str, float]:
        out: dict[str, float] = {}
        summary = result.summary()
        for label in LABELS:
            out[f"attribution/frac_{label}"] = float(summary[f"frac_{label}"])
        out["attribution/criteria"] = float(summary["criteria"])
        out["attribution/saturated_tasks"] = float(summary["saturated_tasks"])
        masses = [a.mass for a in result.attributions if np.isfinite(a.mass)]
        out["attribution/discriminative_mass"] = float(np.mean(masses)) if masses else float("nan")
        for key in ("candidates", "accepted", "rejected", "noops", "candidates_with_evidence",
                    "candidates_without_evidence"):
            out[f"critic/{key}"] = float(summary[key])
        out["critic/acceptance_rate"] = float(summary["acceptance_rate"])
        out["critic/acceptance_with_evidence"] = float(summary["acceptance_with_evidence"])
        out["critic/acceptance_without_evidence"] = float(summary["acceptance_without_evidence"])
        out["critic/resampled_rollouts"] = float(timer["resampled"])
        counts: Counter = Counter()
        for e in result.log:
            if e.verdict == NOOP or e.candidate is None:
                counts[f"actions/noop/{e.interface}"] += 1
                continue
            for a in e.candidate.actions:
                counts[f"actions/proposed/{a.interface}/{a.op}"] += 1
                counts[f"actions/{e.verdict}/{a.interface}/{a.op}"] += 1
        for iface in INTERFACES:
            for verdict in ("proposed", ACCEPTED, REJECTED):
                out[f"actions/{verdict}/{iface}"] = float(sum(v for k, v in counts.items()
                                                              if k.startswith(f"actions/{verdict}/{iface}/")))
            out[f"actions/noop/{iface}"] = float(counts.pop(f"actions/noop/{iface}", 0))
        out.update({k: float(v) for k, v in counts.items()})
        # Guidance and sampling as the next step will see them.
        n = H_next.num_tasks
        mounted = H_next.guidance.mounted()
        out["guidance/fields_per_task"] = float(mounted.sum() / n)
        out["guidance/tasks_with_fields"] = float(mounted.any(axis=1).mean())
        out["guidance/fields_per_drawn_task"] = float(np.mean([H.guidance.count(i) for i in idx]))
        out["guidance/cap"] = float(H_next.guidance.cap)
        out["guidance/over_budget"] = float(sum(over for _, over in rendered))
        level = np.asarray(H_next.sampling.level)
        out["sampling/downweighted_share"] = float(np.mean(level > 0))
        for k in range(NUM_LEVELS):
            out[f"sampling/level_{k}"] = float(np.mean(level == k))
        out["rubric/criteria_per_task"] = float(np.mean([len(r) for r in H_next.rubric.criteria]))
        out["rubric/changed_tasks"] = float(np.mean([a != b for a, b in zip(H.rubric.criteria,
                                                                            H_next.rubric.criteria)]))
        if self.memory is not None:
            reversed_, accepted = self.memory.store.reversals()
            out["harness/reversals"], out["harness/accepted_total"] = float(reversed_), float(accepted)
            out["harness/reversal_rate"] = reversed_ / accepted if accepted else float("nan")
        return out

