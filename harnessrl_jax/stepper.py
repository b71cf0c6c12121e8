"""One training step of any method (`Stepper`), and the evolver a method's description and the config make.

    stepper = Stepper(run, methods.describe(config), workdir)      # run = build.setup(config)
    stepper.start(extra)                                           # a checkpoint's `extra` slot, or None (fresh)
    state, metrics, records = stepper.step(state, step)

One step, the same for every method (its parts are the method's, methods.parts):

    idx, u      = sampler.draw(H, seed, B)                 which tasks, and u = 1 / (N p_i)
    groups      = scheme.sample(run, H, idx, tasks)        the prompt writer's prompts or the harness's fields
    S, rewards  = scheme.judge(run, H, tasks, groups)      per task S [K, J] under c_t -> reward [J]
    oracle      = stages.oracle_metrics(...)               pair classes of reward vs the oracle (analysis only)
    result      = evolver.step(step, draws, H, memory)     attributor -> proposer -> critic; the attributor alone
                                                           for a method that freezes every interface
    result      = parts.after_judge(...)                   the prompt writer learns; a published rule's updates
    memory.append_step(step, draw records)
    H'          = transitions.advance_schedule(result.state, step + 1)
    state, ...  = scheme.train(run, state, ...)            advantages and the update; sampler.observe(idx, rewards)
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections import Counter
from typing import Any

import numpy as np

from harnessrl_jax import failures
from harnessrl_jax.build import build_evolver_client, training_tasks
from harnessrl_jax.evolver import (Attributor, ColdStart, Critic, Evolver, EvolverConfig, Group, LLMHackingCheck,
                                   LLMProposer, RuleProposer, task_slice)
from harnessrl_jax.harness import HarnessState
from harnessrl_jax.harness.state import GAMMAS, NUM_LEVELS
from harnessrl_jax.memory import DrawRecord, Memory
from harnessrl_jax.methods import Method
from harnessrl_jax.methods.parts import MethodParts, PartsContext
from harnessrl_jax.rl.step import TrainState
from harnessrl_jax.settings import section
from harnessrl_jax.stages import (GroupBatch, Run, collection_after, critic_hooks, oracle_metrics, push_weights,
                                  step_seed)
from harnessrl_jax.words import INTERFACES, LABELS, Verdict

log = logging.getLogger(__name__)


def build_evolver(config, method: Method, memory: Memory | None, client=None) -> tuple[Evolver, ColdStart | None]:
    """The evolver of `method` with config.harness's thresholds (or the cold start's), proposer and critic; with
    no interface it only attributes. `client` is the evolver model's (build.build_evolver_client)."""
    h, m = section(config, "harness"), section(config, "memory")
    cold = ColdStart.load(h.cold_start) if h.cold_start else None
    llm_proposer = h.proposer == "llm" and bool(method.interfaces)
    if client is None and (llm_proposer or h.llm_check):
        raise ValueError("config.harness.proposer='llm' / llm_check: build_evolver needs the evolver model's client")
    embed = None
    if memory is not None and memory.semantic is not None:
        # near-duplicate merges by embedding: the index's cached vectors, the model only for texts it has not seen
        # (criterion texts are indexed, and the proposer asks for them again at every saturated criterion)
        embed = memory.semantic.query_vectors
    # without the critic nothing is measured, the proposer's arithmetic pre-check of the sign test included
    rules = RuleProposer(h.rules, embed=embed, min_cosine=m.min_cosine, transitions=method.transitions,
                         sign_filter=method.critic)
    proposer = LLMProposer(client, fallback=rules, transitions=method.transitions) if llm_proposer else rules
    attributor_config = h.attributor if cold is None else \
        dataclasses.replace(h.attributor, task_mass_threshold=cold.task_mass_threshold)
    attributor = Attributor(attributor_config, llm_check=LLMHackingCheck(client) if h.llm_check else None)
    critic = Critic(cold.to_bands() if cold is not None else h.bands(), transitions=method.transitions,
                    enabled=method.critic, sampling_gate=h.sampling_gate)
    evolver_config = EvolverConfig(rounds=h.rounds, interfaces=method.interfaces, donors_k=m.top_k,
                                   min_cosine=m.min_cosine, donor_examples=m.examples,
                                   reversal_within=h.reversal_filter)
    return Evolver(attributor, proposer, critic, evolver_config, transitions=method.transitions), cold


class Stepper:
    """Runs one training step of any method description; holds what persists across steps (the harness, the
    memory, the method's parts) and writes it to / reads it from a checkpoint's `extra` slot."""

    def __init__(self, run: Run, method: Method, workdir: str):
        self.run, self.method, self.workdir, config = run, method, workdir, run.config
        self.tasks, self.dropped_llm = training_tasks(config, run.tasks)
        if self.dropped_llm:
            log.warning("no LLM judge (config.judge.kind='rule'): %d LLM criteria dropped from the training rubric",
                        self.dropped_llm)
        self.parts: MethodParts | None = None  # the method's sampler, prompt writer, rule and scheme
        self.memory: Memory | None = None  # every run records its draws (the reversal rate, launch/oracle.py)
        self.client = None
        self.harness: HarnessState | None = None
        self.evolver: Evolver | None = None
        self._step_start: dict[str, Any] | None = None  # sampler and memory positions as the last step began

    @property
    def sampler(self):
        return self.parts.sampler

    @property
    def seen_memory(self) -> Memory | None:
        """The memory as the evolver and the method's parts see it: none without the method's memory."""
        return self.memory if self.method.memory else None

    # ----------------------------------------------------------------------------------------------- set-up

    def start(self, extra: dict[str, Any] | None) -> None:
        """Fresh (extra None) or resumed from a checkpoint's extra: the harness, the memory, the method's parts."""
        config = self.run.config
        h = section(config, "harness")
        # The record store is kept by every run, for logging; a method without memory (no_memory) is shown none
        # of it (no time index, no semantic index, no donors, no update history) and builds no semantic index.
        positions = extra["memory"] if extra else -1  # fresh: drop whatever an earlier run left
        self.memory = Memory.open(os.path.join(self.workdir, "memory"), positions=positions,
                                  embedder=section(config, "memory").embedder_name() if self.method.memory else None)
        seen = self.seen_memory
        # the hacking check observes every method; the evolver model writes for every part that has a model
        if h.llm_check or (h.proposer == "llm" and self.method.uses_evolver_model):
            self.client = build_evolver_client(config)
        self.evolver, cold = build_evolver(config, self.method, seen, self.client)
        self.parts = MethodParts(self.method, PartsContext(
            config, self.tasks, self.method, memory=seen, client=self.client if h.proposer == "llm" else None,
            critic=self.evolver.critic, workdir=self.workdir))
        if extra:
            self.harness = HarnessState.from_dict(extra["harness"])
            if self.harness.task_ids != tuple(t.id for t in self.tasks):
                raise ValueError("the checkpoint's harness has other tasks than this config")
            self.sampler.load_state_dict(extra.get("sampler") or {})
            self.parts.load_state_dict(extra.get("method"))
        else:
            anchors = cold.anchors if cold else None
            if not self.method.anchors:  # no anchor criteria (EvoRubric alone)
                anchors = {t.id: () for t in self.tasks}
            self.harness = HarnessState.from_tasks(self.tasks, gammas=cold.gammas if cold else GAMMAS,
                                                   anchors=anchors)
            self.harness = self.method.transitions.advance_schedule(self.harness, 0, config.total_steps)
            if self.memory is not None and self.memory.semantic is not None:
                # Embedded in step 1 before the evolver (Stepper.step), so the model's load (started in the
                # background by launch/train.py) goes on through the first rollout instead of holding up step 1.
                self.memory.add_criteria(((t.id, c.id, c.text) for t in self.tasks for c in t.criteria), embed=False)

    def extra(self) -> dict[str, Any]:
        """Everything the method needs to resume exactly (JSON)."""
        return {"harness": self.harness.to_dict(), "sampler": self.sampler.state_dict(),
                "memory": self.memory.save() if self.memory is not None else None,
                "method": self.parts.state_dict()}

    def extra_before_step(self) -> dict[str, Any]:
        """`extra` as it was when the last `step` call began, for a step that stopped part-way (a server outage):
        the harness is replaced only at a step's end, and the sampler and memory positions were noted at its
        start, so a checkpoint with this resumes at that step exactly (a memory write of the stopped step is cut
        back on resume)."""
        start = self._step_start
        if start is None:
            return self.extra()
        if self.memory is not None:
            self.memory.save()
        return {"harness": self.harness.to_dict(), "sampler": dict(start["sampler"]), "memory": start["memory"]}

    def close(self) -> None:
        if self.memory is not None:
            self.memory.close()
        if self.client is not None:
            self.client.close()

    # --------------------------------------------------------------------------------------------- the step

    def step(self, state: TrainState, step: int):
        """One step: (new train state, metrics, harness.jsonl lines). `state` is donated. The garbage collector
        runs once, at its end (`time/gc`), not whenever the step's allocations would trigger a scan of the whole
        heap (stages.collection_after)."""
        collected: dict[str, float] = {}
        with collection_after(collected):
            state, metrics, records = self._step(state, step)
        return state, {**metrics, **collected}, records

    def _step(self, state: TrainState, step: int):
        run, cfg, method, H = self.run, self.run.config, self.method, self.harness
        sampler, scheme = self.parts.sampler, self.parts.scheme
        timings: dict[str, float] = {}

        # --- sample tasks, roll out
        start = time.perf_counter()
        judge_before = dict(getattr(run.judge, "stats", {}) or {})
        evolver_before = dict(getattr(self.client, "stats", {}) or {})
        self._step_start = {"sampler": sampler.state_dict(),
                            "memory": self.memory.positions() if self.memory is not None else None}
        seed = step_seed(state, step)
        idx, u = sampler.draw(H, seed, cfg.tasks_per_step)
        tasks = [self.tasks[i] for i in idx]
        groups = scheme.sample(run, H, idx, tasks, step=step, seed=seed)
        timings["time/rollout"] = time.perf_counter() - start

        # --- judge, and the oracle (analysis only)
        start = time.perf_counter()
        S, rewards, metrics = scheme.judge(run, H, tasks, groups)
        metrics.update(oracle_metrics(tasks, groups.responses, rewards, S, [H.points(t.id) for t in tasks]))
        timings["time/judge"] = time.perf_counter() - start

        # --- the memory's seed vectors, owed since start, before the evolver reads it: waiting for the embedding
        # model's background load is start-up, counted as the memory's time and not the evolver's
        start = time.perf_counter()
        if self.memory is not None:
            self.memory.embed_deferred()
        memory_s = time.perf_counter() - start

        # --- evolver (attributor -> proposer -> critic; the attributor alone for a frozen harness), the method's
        # own rule after it, and the memory
        start = time.perf_counter()
        timer = {"critic": 0.0, "resampled": 0}
        draws = [Group(t, tuple(r), s) for t, r, s in zip(tasks, groups.responses, S)]
        hooks = critic_hooks(run, seed, timer)
        seen = self.seen_memory
        result = self.evolver.step(step, draws, H, memory=seen, hooks=hooks)
        result, dynamics = self.parts.after_judge(step, draws, H, result, memory=seen, hooks=hooks)
        timings["time/evolver"] = time.perf_counter() - start
        start = time.perf_counter()
        if self.memory is not None:
            self.memory.append_step(step, [
                DrawRecord(step, t.id, tuple(c.id for c in H.rubric_of(t.id)),
                           tuple(c.text for c in H.rubric_of(t.id)), tuple(r), s, rw,
                           harness=task_slice(H, t.id),
                           dynamics={"u": float(u[n]), "level": int(H.sampling.level[idx[n]]),
                                     "guided": groups.guided[n], **dynamics.get(n, {})},
                           **result.draw_fields(n))
                for n, (t, r, s, rw) in enumerate(zip(tasks, groups.responses, S, rewards))])
        H_next = method.transitions.advance_schedule(result.state, step + 1, cfg.total_steps)
        timings["time/memory"] = memory_s + time.perf_counter() - start
        timings["time/critic"] = timer["critic"]

        # --- advantages and the update, under the scheme's rubric and context
        start = time.perf_counter()
        trained = scheme.train(run, state, step=step, harness=H, next_harness=H_next, tasks=tasks, groups=groups,
                               rewards=rewards, u=u)
        sampler.observe(idx, trained.rewards)  # a learning sampler's update (SEC's values)
        state = trained.state
        push_weights(run, run.trainer.policy_params(state))
        judge_s = trained.timings.get("time/judge", 0.0)  # a regrade for the advantages counts as judging
        for key, seconds in trained.timings.items():
            timings[key] = timings.get(key, 0.0) + seconds
        timings["time/train"] = time.perf_counter() - start - judge_s

        self.harness = H_next
        metrics.update(self._harness_metrics(result, H, H_next, idx, groups, timer))
        metrics.update(trained.advantage_metrics)  # reward/* of the rewards the advantages use
        metrics.update(sampler.metrics())
        metrics.update(self.parts.metrics())
        metrics["reward/graded_mean"] = float(np.nanmean(rewards))  # under the rubric the rollouts were graded with
        rollouts = groups.rollouts
        metrics.update({
            "rollout/length_mean": float(rollouts.lengths.mean()),
            "rollout/stop_fraction": float(np.mean([r == "stop" for r in rollouts.finish_reason])),
            "sampling/u_mean": float(np.mean(u)), "sampling/u_max": float(np.max(u)),
            "judge/dropped_llm_criteria": float(self.dropped_llm),
        })
        # The LLM judge's cost this step (scoring, the critic's regrades, the scheme's regrades): calls and tokens.
        judge_after = dict(getattr(run.judge, "stats", {}) or {})
        for k in ("calls", "input_tokens", "output_tokens"):
            metrics[f"judge/{k}"] = float(judge_after.get(k, 0) - judge_before.get(k, 0))
        # Failed (no answer) and unparsed cells, and the outage policy's retries (failures.GuardedJudge).
        metrics.update(failures.judge_step_metrics(judge_before, judge_after))
        if self.client is not None:
            evolver_after = dict(getattr(self.client, "stats", {}) or {})
            for k in ("calls", "failed_calls", "outage_retries"):
                metrics[f"evolver_model/{k}"] = float(evolver_after.get(k, 0) - evolver_before.get(k, 0))
        return state, {**metrics, **trained.metrics, **timings}, result.harness_records()

    def _harness_metrics(self, result, H, H_next, idx, groups: GroupBatch, timer) -> dict[str, float]:
        out: dict[str, float] = {}
        summary = result.summary()
        for label in LABELS:
            out[f"attribution/frac_{label}"] = float(summary[f"frac_{label}"])
        out["attribution/criteria"] = float(summary["criteria"])
        out["attribution/saturated_tasks"] = float(summary["saturated_tasks"])
        masses = [a.mass for a in result.attributions if np.isfinite(a.mass)]
        out["attribution/discriminative_mass"] = float(np.mean(masses)) if masses else float("nan")
        for key in ("candidates", "accepted", "rejected", "noops", "candidates_with_evidence",
                    "candidates_without_evidence", "over_budget"):
            out[f"critic/{key}"] = float(summary[key])
        out["critic/acceptance_rate"] = float(summary["acceptance_rate"])
        out["critic/acceptance_with_evidence"] = float(summary["acceptance_with_evidence"])
        out["critic/acceptance_without_evidence"] = float(summary["acceptance_without_evidence"])
        out["critic/resampled_rollouts"] = float(timer["resampled"])
        counts: Counter = Counter()
        for e in result.log:
            if e.verdict == Verdict.NOOP or e.candidate is None:
                counts[f"actions/noop/{e.interface}"] += 1
                continue
            for a in e.candidate.actions:
                counts[f"actions/proposed/{a.interface}/{a.op}"] += 1
                counts[f"actions/{e.verdict}/{a.interface}/{a.op}"] += 1
        for iface in INTERFACES:
            for verdict in ("proposed", Verdict.ACCEPTED, Verdict.REJECTED):
                out[f"actions/{verdict}/{iface}"] = float(sum(v for k, v in counts.items()
                                                              if k.startswith(f"actions/{verdict}/{iface}/")))
            out[f"actions/noop/{iface}"] = float(counts.pop(f"actions/noop/{iface}", 0))
        out.update({k: float(v) for k, v in counts.items()})
        # <reference> fields accepted this step, and how many of them donors supplied (the paper's 58%): every
        # mounted one counts, also a model-written one that quotes no record it was shown (source None).
        refs = [e.candidate.reference_source for e in result.log
                if e.verdict == Verdict.ACCEPTED and e.candidate is not None
                for a in e.candidate.actions if a.op == "add_field" and a.field == "reference"]
        out["guidance/reference_fields_added"] = float(len(refs))
        out["guidance/reference_fields_from_donors"] = float(sum(r == "donor" for r in refs))
        # Guidance as this step's rollouts saw it, and as the next step will (means and shares over all tasks).
        n = H_next.num_tasks
        mounted = H_next.guidance.mounted()
        out["guidance/fields_per_task"] = float(mounted.sum() / n)
        out["guidance/tasks_with_fields"] = float(mounted.any(axis=1).mean())
        out["guidance/tasks_without_fields"] = 1.0 - out["guidance/tasks_with_fields"]
        out["guidance/fields_per_drawn_task"] = float(np.mean([H.guidance.count(i) for i in idx]))
        out["guidance/guided_groups"] = float(sum(groups.guided))
        out["guidance/shortened"] = float(sum(groups.shortened))
        out["guidance/over_budget"] = float(sum(groups.over_budget))
        out["guidance/cap"] = float(H_next.guidance.cap)
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


__all__ = ["Stepper", "build_evolver"]
