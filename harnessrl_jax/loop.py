"""One training step for any method (DESIGN "One training step"), and the stages it is made of.

    idx, u      = sampler.draw(H, seed, B)                  Cat(p_t) i.i.d. (u = 1 / (N p_i)); SEC's bandit for SEC
    prompts     = parts.prompts(H, idx, tasks)              None (the harness's fields) or a guidance rule's
    groups      = sample_groups(run, tasks, fields, seed)   render (fields fitted to the budget), generate J, group
    S, rewards  = score_responses(judge, tasks, ..., c_t)   the run's judge per criterion -> S [K, J] -> reward [J]
    oracle      = oracle_metrics(tasks, responses, rewards) pair classes of reward vs the rule oracle (analysis)
    result      = evolver.step(step, groups, H, memory)     attributor -> proposer -> critic; attributor only
                                                            when the method freezes every interface
    result      = parts.after_judge(step, groups, H, result)   a published rule's harness updates (methods.updates)
    memory.append_step(step, draw records)
    H'          = transitions.advance_schedule(result.state, step + 1)
    advantages  = compute_advantages(rewards under c_t or c_{t+1}, or the arms' own rubric, parts.criteria);
                  sampler.observe(idx, rewards)
    state       = train_on_rollouts(run, state, rollouts in the guided or bare context, advantages, u)
                  (and the gradient sketch for a method with `sketch`: sampler.after_update(advantages, sketch))

`Stepper` runs this for any `methods.Method`; the stages are plain functions, and `sample_groups` is the one place
that renders, generates with the config's sampling settings and groups by task: training, the critic's
resampling, evaluation and the cold start all call it, so they cannot drift apart. launch/train.py owns the loop
over steps, logging and checkpoints.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import functools
import logging
import os
import time
from collections import Counter
from typing import Any, Sequence

import jax
import numpy as np

from harnessrl_jax import build, configs, failures
from harnessrl_jax.eval import agreement
from harnessrl_jax.eval.oracle import rule_oracle_scores
from harnessrl_jax.evolver import (Attributor, ColdStart, Critic, CriticHooks, Evolver, Group, LLMHackingCheck,
                                   LLMProposer, RuleProposer, task_slice)
from harnessrl_jax.harness import HarnessState
from harnessrl_jax.harness.render import fit_fields, render_prompt, task_fields
from harnessrl_jax.harness.state import GAMMAS, NUM_LEVELS
from harnessrl_jax.memory import DrawRecord, Memory
from harnessrl_jax.methods import Method, parts as method_parts, samplers
from harnessrl_jax.methods.guidance import PromptBudget, TaskPrompts
from harnessrl_jax.rl import grpo
from harnessrl_jax.rl.batch import build_batch
from harnessrl_jax.rl.step import TrainState, metrics_to_host, to_host
from harnessrl_jax.rollout import Rollouts
from harnessrl_jax.rubric.judges import Judge
from harnessrl_jax.rubric.reward import rubric_reward
from harnessrl_jax.rubric.schema import Task
from harnessrl_jax.words import INTERFACES, LABELS, Verdict

log = logging.getLogger(__name__)

# ------------------------------------------------------------------------------------------------ the stages


@dataclasses.dataclass(frozen=True)
class Groups:
    """J responses per task from one engine call: rows of `rollouts` are task-major, `prompt_ids[i]` is the prompt
    task i was sampled in. `guided[i]`: fields were mounted; `shortened[i]`: their texts were cut to fit the budget;
    `over_budget[i]`: they did not fit even cut, so the task was sampled bare."""

    prompt_ids: list[list[int]]
    rollouts: Rollouts
    responses: list[list[str]]
    guided: list[bool]
    shortened: list[bool]
    over_budget: list[bool]


def render_prompts(run: build.Run, tasks: Sequence[Task], fields: Sequence[Sequence[tuple[str, str]]] | None = None
                   ) -> tuple[list[list[int]], list[bool], list[bool], list[bool]]:
    """(prompt ids, guided, shortened, over budget) per task: the chat template over the task's messages with its
    guidance fields (none when `fields` is None) fitted to run.prompt_limit tokens (`render.fit_fields`)."""
    ids, guided, shortened, over = [], [], [], []
    for n, task in enumerate(tasks):
        fs = tuple(fields[n]) if fields is not None else ()
        cut = False
        if fs:
            fitted, cut = fit_fields(run.tokenizer, task.prompt, fs, run.prompt_limit)
            over.append(fitted is None)
            fs = fitted or ()
        else:
            over.append(False)
        ids.append(render_prompt(run.tokenizer, task.prompt, fs, tokenize=True))
        guided.append(bool(fs))
        shortened.append(cut)
    return ids, guided, shortened, over


def sample_groups(run: build.Run, tasks: Sequence[Task], fields: Sequence[Sequence[tuple[str, str]]] | None = None,
                  *, seed: int, n: int | None = None, prompts: Sequence[TaskPrompts] | None = None) -> Groups:
    """n (default J) responses per task in one engine call, with the config's sampling settings. `prompts` (a
    guidance rule's, methods.guidance) replace the rendering of `fields`: one prompt per task is sampled n times;
    tasks with one prompt per rollout make every prompt sample once (rows stay task-major, `prompt_ids` then has
    one entry per row)."""
    config = run.config
    n = config.num_generations if n is None else n
    if prompts is not None:
        return _sample_prompts(run, prompts, seed=seed, n=n)
    ids, guided, shortened, over = render_prompts(run, tasks, fields)
    rollouts = run.engine.generate(ids, n=n, max_new_tokens=config.max_new_tokens, temperature=config.temperature,
                                   top_p=config.top_p, top_k=config.top_k, seed=int(seed) % (2**31 - 1))
    texts = np.asarray(rollouts.texts, dtype=object).reshape(len(tasks), n)
    return Groups(ids, rollouts, [list(t) for t in texts], guided, shortened, over)


def _sample_prompts(run: build.Run, prompts: Sequence[TaskPrompts], *, seed: int, n: int) -> Groups:
    def ids(messages):
        return run.tokenizer.apply_chat_template([dict(m) for m in messages], add_generation_prompt=True,
                                                 tokenize=True)

    per_rollout = any(len(p.messages) > 1 for p in prompts)
    if per_rollout:
        if any(len(p.messages) not in (1, n) for p in prompts):
            raise ValueError(f"a guidance rule gave a task neither 1 nor {n} prompts")
        rendered = [ids(p.messages[j if len(p.messages) > 1 else 0]) for p in prompts for j in range(n)]
    else:
        rendered = [ids(p.messages[0]) for p in prompts]
    config = run.config
    rollouts = run.engine.generate(rendered, n=1 if per_rollout else n, max_new_tokens=config.max_new_tokens,
                                   temperature=config.temperature, top_p=config.top_p, top_k=config.top_k,
                                   seed=int(seed) % (2**31 - 1))
    texts = np.asarray(rollouts.texts, dtype=object).reshape(len(prompts), n)
    return Groups(rendered, rollouts, [list(t) for t in texts], [p.guided for p in prompts],
                  [p.shortened for p in prompts], [p.over_budget for p in prompts])


def bare_context(run: build.Run, tasks: Sequence[Task], rollouts: Rollouts) -> Rollouts:
    """The rollouts with every row continuing its task's bare prompt (rows are task-major, J per task), whatever
    prompt each was sampled in: one per task or one per row (RuscaRL's scaffolds)."""
    J = rollouts.num_samples // len(tasks)
    return dataclasses.replace(rollouts, prompt_ids=render_prompts(run, tasks)[0],
                               prompt_index=np.repeat(np.arange(len(tasks)), J))


def score_responses(judge: Judge, tasks: Sequence[Task], responses: Sequence[Sequence[str]],
                    criteria: Sequence[Sequence[Any]] | None = None):
    """(S [K, J] per task, rewards [T, J] in reward points, metrics) under each task's seed criteria (or
    `criteria[i]` with `.points`); a cell the judge could not score is NaN and skipped by the reward."""
    criteria = [list(t.criteria) for t in tasks] if criteria is None else [list(c) for c in criteria]
    mats = judge.score_batch(list(tasks), [list(r) for r in responses], criteria)
    scores = [np.asarray(m.verdicts, np.float64) for m in mats]
    rewards = np.stack([rubric_reward(np.array([c.points for c in cs], np.float64), S)
                        for cs, S in zip(criteria, scores)])
    # failed cells of criteria a judge was asked about (not the ones left unjudged for want of an LLM judge)
    failures = sum(int(m.failed[k].sum()) for m in mats for k, name in enumerate(m.judges)
                   if name != build.Unjudged.name)
    metrics = {"reward/judge_failures": float(failures),
               "reward/judged_fraction": float(np.mean([np.mean(~np.isnan(S)) for S in scores]))}
    return scores, rewards, metrics


def compute_advantages(rewards: np.ndarray, estimator: str) -> tuple[np.ndarray, dict[str, float]]:
    """(advantages [T, J], reward and advantage statistics) with the named estimator (grpo.ADVANTAGE_FNS)."""
    advantages = np.asarray(grpo.get_advantage_fn(estimator)(rewards), np.float32)
    metrics = {f"reward/{k.removeprefix('reward_')}": float(v)
               for k, v in grpo.advantage_metrics(rewards).items()}
    valid = advantages[np.isfinite(advantages)]
    if valid.size:
        metrics.update({"advantage/abs_mean": float(np.abs(valid).mean()), "advantage/std": float(valid.std()),
                        "advantage/min": float(valid.min()), "advantage/max": float(valid.max())})
    return advantages, metrics


def train_on_rollouts(run: build.Run, state: TrainState, rollouts: Rollouts, advantages: np.ndarray,
                      weights: np.ndarray, *, return_sketch: bool = False):
    """Pack the rollouts into the fixed-shape batch and run the sharded step; `state` is donated. `weights` [T] is
    each task's u, applied to every one of its rows. Returns (state, metrics), and with `return_sketch` the
    gradient sketch as well (HarnessBandit; the trainer needs a sketch_spec).

    With config.mini_batches = n > 1 the batch is split into n consecutive row blocks, each one optimiser update;
    the old policy's logprobs of every block are computed before the first update. Metrics, and the sketch, are
    the mean over the n updates.
    """
    J = rollouts.num_samples // len(weights)
    batch = build_batch(rollouts, advantages.reshape(-1), np.repeat(np.asarray(weights, np.float32), J),
                        seq_len=run.seq_len, pad_id=run.engine.pad_id, num_rows=run.rows,
                        bucket=run.config.get("train_seq_bucket", 0))
    return train_on_batch(run, state, batch, return_sketch=return_sketch)


@functools.cache
def _malloc_trim():
    libc = ctypes.util.find_library("c")
    return getattr(ctypes.CDLL(libc), "malloc_trim", None) if libc else None


def release_free_heap() -> None:
    """Gives the C heap's free pages back to the system. glibc keeps memory freed by other threads (a checkpoint's
    background write frees 0.1-0.2 GB on the CPU default) in its arenas, where it would sit under the peak of every
    later train step. A no-op where the C library has no malloc_trim (not glibc)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def train_on_batch(run: build.Run, state: TrainState, batch, *, return_sketch: bool = False):
    """Run the sharded step on a packed batch (rl.batch.TrainBatch; see train_on_rollouts for mini-batches and
    the sketch). The C heap's free pages go back to the system first (`release_free_heap`): the step's
    temporaries are its largest allocation."""
    release_free_heap()
    n = run.config.get("mini_batches", 1)
    kw = {"return_sketch": True} if return_sketch else {}
    if n == 1:
        state, metrics, *sketch = run.trainer.step(state, run.trainer.put_batch(batch), run.ref_params, **kw)
        metrics = {f"train/{k}": v for k, v in metrics_to_host(metrics).items()}
        return (state, metrics, np.asarray(to_host(sketch[0]))) if return_sketch else (state, metrics)
    size = run.rows // n
    blocks = [run.trainer.put_batch(batch.rows(slice(i * size, (i + 1) * size))) for i in range(n)]
    blocks = [b._replace(old_logprobs=run.trainer.logprobs(state.params, b)) for b in blocks]
    updates, sketches = [], []
    for block in blocks:
        state, metrics, *sketch = run.trainer.step(state, block, run.ref_params, **kw)
        updates.append(metrics_to_host(metrics))
        sketches += [np.asarray(to_host(s), np.float64) for s in sketch]
    metrics = {f"train/{k}": float(np.mean([m[k] for m in updates])) for k in updates[0]}
    if return_sketch:
        return state, metrics, np.mean(sketches, axis=0).astype(np.float32)
    return state, metrics


def step_seed(state: TrainState, step: int) -> int:
    """The sampling seed of `step`, derived from the checkpointed root key (so a resumed run draws the same)."""
    key = jax.random.fold_in(np.asarray(to_host(state.rng)), step)
    return int(jax.random.randint(key, (), 0, np.iinfo(np.int32).max))


def oracle_metrics(tasks: Sequence[Task], responses: Sequence[Sequence[str]], rewards: np.ndarray,
                   S: Sequence[np.ndarray] | None = None, points: Sequence[np.ndarray] | None = None
                   ) -> dict[str, float]:
    """oracle/score_mean and the reward-oracle pair classes over every pair of every group (eval.agreement):
    shares (`oracle/pair_*`, `oracle/agreement` over all pairs, `oracle/agreement_separated`) and the counts
    (`oracle/count/*`, summed over a window of steps by eval.tables). With the groups' S and points, also the
    oracle-referenced criterion classes of every method (`taxonomy/*`, the paper's Fig. 3)."""
    oracle = rule_oracle_scores(tasks, responses)
    counts = agreement.total_counts(agreement.group_counts(r, o) for r, o in zip(rewards, oracle))
    valid = oracle[~np.isnan(oracle)]
    out = {"oracle/score_mean": float(valid.mean()) if valid.size else float("nan"),
           **agreement.agreement_metrics(counts)}
    out.update({f"oracle/count/{k}": float(v) for k, v in counts.items()})
    if S is not None and points is not None:
        out.update(agreement.criterion_metrics(agreement.total_counts(
            agreement.criterion_counts(p, s, o) for p, s, o in zip(points, S, oracle))))
    return out


# -------------------------------------------------------------------------------------------------- the step


def build_evolver(config, method: Method, memory: Memory | None, client=None) -> tuple[Evolver, ColdStart | None]:
    """The evolver of `method` with config.harness's thresholds (or the cold start's), proposer and critic; with
    no interface it only attributes. `client` is the evolver model's (build.build_evolver_client)."""
    h = config.harness
    cold = ColdStart.load(h.cold_start) if h.cold_start else None
    llm_proposer = h.proposer == "llm" and bool(method.interfaces)
    if client is None and (llm_proposer or h.llm_check):
        raise ValueError("config.harness.proposer='llm' / llm_check: build_evolver needs the evolver model's client")
    embed, min_cosine = None, float(config.memory.min_cosine)
    if memory is not None and memory.semantic is not None:
        semantic = memory.semantic  # near-duplicate merges by embedding; the model is first waited for when used

        def embed(texts):
            return semantic.embedder.encode(texts)
    rules = RuleProposer(configs.proposer_config(config), embed=embed, min_cosine=min_cosine,
                         transitions=method.transitions)
    proposer = LLMProposer(client, fallback=rules, transitions=method.transitions) if llm_proposer else rules
    attributor = Attributor(configs.attributor_config(config, cold),
                            llm_check=LLMHackingCheck(client) if h.llm_check else None)
    critic = Critic(configs.bands(config, cold), transitions=method.transitions, enabled=method.critic,
                    sampling_gate=h.sampling_gate)
    return Evolver(attributor, proposer, critic, configs.evolver_config(config, method.interfaces),
                   transitions=method.transitions), cold


def critic_hooks(run: build.Run, seed: int, timer: dict[str, float]) -> CriticHooks:
    """The critic's access to the frozen current policy (the run's engine, which still holds this step's params)
    and the judge, timed into `timer` ('critic' seconds, 'resampled' rollouts); a candidate whose guided prompt
    cannot fit the budget is not measured."""
    calls = [0]

    def regrade_batch(items):
        start = time.perf_counter()
        out = score_responses(run.judge, [it[0] for it in items], [it[1] for it in items],
                              [it[2] for it in items])[0]
        timer["critic"] += time.perf_counter() - start
        return out

    def resample_batch(items):
        start = time.perf_counter()
        calls[0] += 1
        groups = sample_groups(run, [task for task, _ in items], [tuple(fields) for _, fields in items],
                               seed=seed + 7919 * calls[0])
        timer["critic"] += time.perf_counter() - start
        timer["resampled"] += groups.rollouts.num_samples
        return groups.responses

    def prompt_problem(task, fields):
        fitted, _ = fit_fields(run.tokenizer, task.prompt, tuple(fields), run.prompt_limit)
        if fitted is None:
            return (f"guided prompt over the budget: the fields do not fit in {run.prompt_limit} prompt tokens "
                    f"even shortened")
        return None

    return CriticHooks(regrade_batch=regrade_batch, resample_batch=resample_batch, prompt_problem=prompt_problem)


class Stepper:
    """Runs one training step of any method description; holds what persists across steps (the harness, the
    memory, the sampler) and writes it to / reads it from a checkpoint's `extra` slot."""

    def __init__(self, run: build.Run, method: Method, workdir: str):
        self.run, self.method, self.workdir, config = run, method, workdir, run.config
        self.tasks, self.dropped_llm = build.training_tasks(config, run.tasks)
        if self.dropped_llm:
            log.warning("no LLM judge (config.judge.kind='rule'): %d LLM criteria dropped from the training rubric",
                        self.dropped_llm)
        self.sampler = samplers.make(method.sampler, self.tasks, config)
        self.parts: method_parts.Parts | None = None  # the method's guidance rule and rule updates
        self.memory: Memory | None = None
        self.client = None
        self.harness: HarnessState | None = None
        self.evolver: Evolver | None = None
        self._step_start: dict[str, Any] | None = None  # sampler and memory positions as the last step began

    # ----------------------------------------------------------------------------------------------- set-up

    def start(self, extra: dict[str, Any] | None) -> None:
        """Fresh (extra None) or resumed from a checkpoint's extra: the harness, the memory, the sampler."""
        config = self.run.config
        if self.method.memory:
            positions = extra["memory"] if extra else -1  # fresh: drop whatever an earlier run left
            self.memory = Memory.open(os.path.join(self.workdir, "memory"), embedder=configs.embedder(config),
                                      positions=positions)
        h = config.harness
        # the hacking check observes every method; the evolver model writes for every part that has a model
        if h.llm_check or (h.proposer == "llm" and self.method.uses_evolver_model):
            self.client = build.build_evolver_client(config)
        self.evolver, cold = build_evolver(config, self.method, self.memory, self.client)
        self.parts = method_parts.build(self.method, config, self.tasks, memory=self.memory,
                                        client=self.client if h.proposer == "llm" else None,
                                        critic=self.evolver.critic, workdir=self.workdir, sampler=self.sampler)
        if extra:
            self.harness = HarnessState.from_dict(extra["harness"])
            if self.harness.task_ids != tuple(t.id for t in self.tasks):
                raise ValueError("the checkpoint's harness has other tasks than this config")
            self.sampler.load_state_dict(extra.get("sampler") or {})
            self.parts.load_state_dict(extra.get("method"))
        else:
            anchors = cold.anchors if cold else None
            if not self.method.anchors:  # no anchor criteria (EvoRubric alone, AMB-3.7)
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
        """One step: (new train state, metrics, harness.jsonl lines). `state` is donated."""
        run, cfg, method, H = self.run, self.run.config, self.method, self.harness
        timings: dict[str, float] = {}

        # --- sample tasks, render, roll out
        start = time.perf_counter()
        judge_before = dict(getattr(run.judge, "stats", {}) or {})
        evolver_before = dict(getattr(self.client, "stats", {}) or {})
        self._step_start = {"sampler": self.sampler.state_dict(),
                            "memory": self.memory.positions() if self.memory is not None else None}
        seed = step_seed(state, step)
        idx, u = self.sampler.draw(H, seed, cfg.tasks_per_step)
        tasks = [self.tasks[i] for i in idx]
        prompts = self.parts.prompts(H, idx, tasks, step=step, seed=seed,
                                     budget=PromptBudget(run.tokenizer, run.prompt_limit))
        scheme = self.parts.scheme  # CoCA: a query-only and a rubric-guided group per task (methods.coca_step)
        if scheme is None:
            groups = sample_groups(run, tasks, [task_fields(H.guidance, i) for i in idx], seed=seed, prompts=prompts)
        else:  # the Normal groups go on through the step; the scheme keeps the Guided ones
            groups = scheme.sample(run, tasks, [H.criteria(t.id) for t in tasks], seed)
        timings["time/rollout"] = time.perf_counter() - start

        # --- judge, and the oracle (analysis only)
        start = time.perf_counter()
        if scheme is None:
            S, rewards, metrics = score_responses(run.judge, tasks, groups.responses,
                                                  [H.criteria(t.id) for t in tasks])
        else:  # both groups in one call, under the original rubric
            S, rewards, metrics = scheme.judge(run, score_responses)
        metrics.update(oracle_metrics(tasks, groups.responses, rewards, S, [H.points(t.id) for t in tasks]))
        timings["time/judge"] = time.perf_counter() - start

        # --- the memory's seed vectors, owed since Stepper.start, before the evolver reads it: waiting for the
        # embedding model's background load is start-up, counted as the memory's time and not the evolver's
        start = time.perf_counter()
        if self.memory is not None:
            self.memory.embed_deferred()
        memory_s = time.perf_counter() - start

        # --- evolver (attributor -> proposer -> critic; the attributor alone for a frozen harness) and memory
        start = time.perf_counter()
        timer = {"critic": 0.0, "resampled": 0}
        draws = [Group(t, tuple(r), s) for t, r, s in zip(tasks, groups.responses, S)]
        hooks = critic_hooks(run, seed, timer)
        result = self.evolver.step(step, draws, H, memory=self.memory, hooks=hooks)
        # the method's own rule (EvoRubric, AMARIS) updates the harness after the evolver, logged as it is
        result, dynamics = self.parts.after_judge(step, draws, H, result, memory=self.memory, hooks=hooks)
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

        # --- advantages under the rubric before or after this step's update
        train_rewards = rewards
        if scheme is not None:  # calibration, the gate, advantages and the train step (with distillation)
            start = time.perf_counter()
            state, train_metrics, adv_metrics, stage_times, train_rewards = scheme.train(
                run, state, step, u, score_responses, train_on_batch)
            self.sampler.observe(idx, train_rewards)
            build.push_weights(run, state.params)
            timings.update(stage_times)
            timings["time/train"] = time.perf_counter() - start
            rollouts = groups.rollouts
        elif method.advantages_rubric == "after":
            start = time.perf_counter()
            _, train_rewards, _ = score_responses(run.judge, tasks, groups.responses,
                                                  [H_next.criteria(t.id) for t in tasks])
            timings["time/judge"] += time.perf_counter() - start
        if scheme is None:
            arm_criteria = self.parts.criteria(H, tasks)  # arms with their own rubric (HarnessBandit's snapshots)
            if arm_criteria is not None:
                start = time.perf_counter()
                _, train_rewards, _ = score_responses(run.judge, tasks, groups.responses, arm_criteria)
                timings["time/judge"] += time.perf_counter() - start
            advantages, adv_metrics = compute_advantages(train_rewards, cfg.advantage)
            self.sampler.observe(idx, train_rewards)  # a learning sampler's update (SEC's values)

            # --- train on the guided or the bare context
            start = time.perf_counter()
            rollouts = groups.rollouts
            if method.loss_context == "bare":
                rollouts = bare_context(run, tasks, rollouts)
            if method.sketch:  # the update's gradient sketch, for the sampler's observation (HarnessBandit)
                state, train_metrics, sketch = train_on_rollouts(run, state, rollouts, advantages, u,
                                                                 return_sketch=True)
                self.sampler.after_update(advantages, sketch)
            else:
                state, train_metrics = train_on_rollouts(run, state, rollouts, advantages, u)
            build.push_weights(run, state.params)
            timings["time/train"] = time.perf_counter() - start

        self.harness = H_next
        metrics.update(self._harness_metrics(result, H, H_next, idx, groups, timer))
        metrics.update(adv_metrics)  # reward/* of the rewards the advantages use
        metrics.update(self.sampler.metrics())
        metrics.update(self.parts.metrics())
        metrics["reward/graded_mean"] = float(np.nanmean(rewards))  # under the rubric the rollouts were graded with
        metrics.update({
            "rollout/length_mean": float(rollouts.lengths.mean()),
            "rollout/stop_fraction": float(np.mean([r == "stop" for r in rollouts.finish_reason])),
            "sampling/u_mean": float(np.mean(u)), "sampling/u_max": float(np.max(u)),
            "judge/dropped_llm_criteria": float(self.dropped_llm),
        })
        # The LLM judge's cost this step (scoring, the critic's regrades, the 'after' regrade): calls and tokens.
        judge_after = dict(getattr(run.judge, "stats", {}) or {})
        for k in ("calls", "input_tokens", "output_tokens"):
            metrics[f"judge/{k}"] = float(judge_after.get(k, 0) - judge_before.get(k, 0))
        # Failed (no answer) and unparsed cells, and the outage policy's retries (failures.GuardedJudge).
        metrics.update(failures.judge_step_metrics(judge_before, judge_after))
        if self.client is not None:
            evolver_after = dict(getattr(self.client, "stats", {}) or {})
            for k in ("calls", "failed_calls", "outage_retries"):
                metrics[f"evolver_model/{k}"] = float(evolver_after.get(k, 0) - evolver_before.get(k, 0))
        return state, {**metrics, **train_metrics, **timings}, result.harness_records()

    def _harness_metrics(self, result, H, H_next, idx, groups: Groups, timer) -> dict[str, float]:
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
        # <reference> fields accepted this step, and how many of them donors supplied (the paper's 58%).
        refs = [e.candidate.reference_source for e in result.log
                if e.verdict == Verdict.ACCEPTED and e.candidate is not None and e.candidate.reference_source]
        out["guidance/reference_fields_added"] = float(len(refs))
        out["guidance/reference_fields_from_donors"] = float(sum(r == "donor" for r in refs))
        # Guidance as this step's rollouts saw it, and as the next step will.
        n = H_next.num_tasks
        mounted = H_next.guidance.mounted()
        out["guidance/fields_per_task"] = float(mounted.sum() / n)
        out["guidance/tasks_with_fields"] = float(mounted.any(axis=1).mean())
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


__all__ = ["Groups", "Stepper", "bare_context", "build_evolver", "critic_hooks", "compute_advantages",
           "oracle_metrics", "render_prompts", "sample_groups", "score_responses", "step_seed", "train_on_batch",
           "train_on_rollouts"]
