"""The stages one training step is made of, as plain functions of a `Run` (the parts set-up built): render and
generate a group per task (`sample_groups`), judge it (`score_responses`), advantages, and the sharded train step
(`train_on_rollouts`, `train_on_batch`); the oracle's view of a step (`oracle_metrics`), the critic's access to the
frozen policy (`critic_hooks`) and the step seed. Methods build their parts from these; training, the critic's
resampling, evaluation and the cold start all sample through `sample_groups`, so they cannot drift apart.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import dataclasses
import functools
import gc
import time
from typing import Any, Sequence

import jax
import numpy as np

from harnessrl_jax.eval import agreement
from harnessrl_jax.eval.oracle import rule_oracle_scores
from harnessrl_jax.evolver.critic import CriticHooks
from harnessrl_jax.harness.render import fit_fields, render_prompt
from harnessrl_jax.models.llama import ModelConfig, Params
from harnessrl_jax.rl import grpo
from harnessrl_jax.rl.batch import build_batch
from harnessrl_jax.rl.step import Trainer, TrainState, metrics_to_host, to_host
from harnessrl_jax.rollout import JaxEngine, Rollouts
from harnessrl_jax.rubric.judges import Judge, Unjudged
from harnessrl_jax.rubric.reward import LAMBDA, rubric_reward
from harnessrl_jax.rubric.schema import Task


@dataclasses.dataclass
class Run:
    """The parts one training run is made of; built once by build.setup, read by every stage."""

    config: Any
    model_config: ModelConfig
    tokenizer: Any
    tasks: list[Task]
    trainer: Trainer
    engine: Any  # a rollout.RolloutEngine: JaxEngine or SGLangEngine (config.rollout.engine)
    ref_params: Params | None
    initial_params: Params | None  # host copy of the starting policy (the fresh train state is built from it)
    seq_len: int
    rows: int  # train batch rows: tasks_per_step * J, padded to the mesh and micro-batches
    prompt_limit: int  # prompt tokens a rollout may use: max_prompt_len + the guidance budget
    judge: Judge  # rule checkers, and config.judge.kind's judge for the other criteria

    def close(self) -> None:
        """Releases the judge's clients."""
        self.judge.close()


@dataclasses.dataclass(frozen=True)
class GroupBatch:
    """J responses per task from one engine call: rows of `rollouts` are task-major, `prompt_ids[i]` is the prompt
    task i was sampled in (one per row when a prompt writer gave each rollout its own). `guided[i]`: more than the
    bare prompt was mounted; `shortened[i]`: it was cut to fit the budget; `over_budget[i]`: it did not fit even
    cut, so the task was sampled bare."""

    prompt_ids: list[list[int]]
    rollouts: Rollouts
    responses: list[list[str]]
    guided: list[bool]
    shortened: list[bool]
    over_budget: list[bool]


@dataclasses.dataclass(frozen=True)
class TaskPrompts:
    """The prompts of one drawn task: one message list (shared by the group) or one per rollout; `guided`: some
    prompt carries more than the bare task; `shortened`: what was mounted was cut to fit the budget;
    `over_budget`: some rollout that should have been guided was sampled bare because nothing fit."""

    messages: tuple[tuple[Any, ...], ...]
    guided: bool = False
    shortened: bool = False
    over_budget: bool = False


# ------------------------------------------------------------------------------------------- render, generate


def render_prompts(run: Run, tasks: Sequence[Task], fields: Sequence[Sequence[tuple[str, str]]] | None = None
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


def sample_groups(run: Run, tasks: Sequence[Task], fields: Sequence[Sequence[tuple[str, str]]] | None = None,
                  *, seed: int, n: int | None = None, prompts: Sequence[TaskPrompts] | None = None) -> GroupBatch:
    """n (default J) responses per task in one engine call, with the config's sampling settings. `prompts` (a
    prompt writer's) replace the rendering of `fields`: one prompt per task is sampled n times; tasks with one
    prompt per rollout make every prompt sample once (rows stay task-major, `prompt_ids` then has one entry per
    row)."""
    config = run.config
    n = config.num_generations if n is None else n
    if prompts is not None:
        return _sample_prompts(run, prompts, seed=seed, n=n)
    ids, guided, shortened, over = render_prompts(run, tasks, fields)
    rollouts = run.engine.generate(ids, n=n, max_new_tokens=config.max_new_tokens, temperature=config.temperature,
                                   top_p=config.top_p, top_k=config.top_k, seed=int(seed) % (2**31 - 1))
    texts = np.asarray(rollouts.texts, dtype=object).reshape(len(tasks), n)
    return GroupBatch(ids, rollouts, [list(t) for t in texts], guided, shortened, over)


def _sample_prompts(run: Run, prompts: Sequence[TaskPrompts], *, seed: int, n: int) -> GroupBatch:
    def ids(messages):
        return run.tokenizer.apply_chat_template([dict(m) for m in messages], add_generation_prompt=True,
                                                 tokenize=True)

    per_rollout = any(len(p.messages) > 1 for p in prompts)
    if per_rollout:
        if any(len(p.messages) not in (1, n) for p in prompts):
            raise ValueError(f"a prompt writer gave a task neither 1 nor {n} prompts")
        rendered = [ids(p.messages[j if len(p.messages) > 1 else 0]) for p in prompts for j in range(n)]
    else:
        rendered = [ids(p.messages[0]) for p in prompts]
    config = run.config
    rollouts = run.engine.generate(rendered, n=1 if per_rollout else n, max_new_tokens=config.max_new_tokens,
                                   temperature=config.temperature, top_p=config.top_p, top_k=config.top_k,
                                   seed=int(seed) % (2**31 - 1))
    texts = np.asarray(rollouts.texts, dtype=object).reshape(len(prompts), n)
    return GroupBatch(rendered, rollouts, [list(t) for t in texts], [p.guided for p in prompts],
                      [p.shortened for p in prompts], [p.over_budget for p in prompts])


def bare_context(run: Run, tasks: Sequence[Task], rollouts: Rollouts) -> Rollouts:
    """The rollouts with every row continuing its task's bare prompt (rows are task-major, J per task), whatever
    prompt each was sampled in: one per task or one per row (RuscaRL's scaffolds)."""
    J = rollouts.num_samples // len(tasks)
    return dataclasses.replace(rollouts, prompt_ids=render_prompts(run, tasks)[0],
                               prompt_index=np.repeat(np.arange(len(tasks)), J))


# --------------------------------------------------------------------------------------------- judge, reward


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
                   if name != Unjudged.name)
    metrics = {"reward/judge_failures": float(failures),
               "reward/judged_fraction": float(np.mean([np.mean(~np.isnan(S)) for S in scores]))}
    return scores, rewards, metrics


def oracle_metrics(tasks: Sequence[Task], responses: Sequence[Sequence[str]], rewards: np.ndarray,
                   S: Sequence[np.ndarray] | None = None, points: Sequence[np.ndarray] | None = None
                   ) -> dict[str, float]:
    """The rule stand-in of the oracle (the tasks' rule `oracle_rubrics`, for CPU runs; the pairwise oracle judges
    the recorded groups after training, eval.oracle_run): oracle/score_mean and the reward-oracle pair classes over
    every pair of every group (eval.agreement): shares (`oracle/pair_*`, `oracle/agreement` over all pairs,
    `oracle/agreement_separated`) and the counts (`oracle/count/*`, summed over a window of steps by eval.tables).
    With the groups' S and points, also the oracle-referenced criterion classes (`taxonomy/*`)."""
    oracle = rule_oracle_scores(tasks, responses)
    counts = agreement.total_counts(agreement.group_counts(r, o) for r, o in zip(rewards, oracle))
    valid = oracle[~np.isnan(oracle)]
    out = {"oracle/score_mean": float(valid.mean()) if valid.size else float("nan"),
           **agreement.agreement_metrics(counts)}
    out.update({f"oracle/count/{k}": float(v) for k, v in counts.items()})
    if S is not None and points is not None:
        out.update(agreement.criterion_metrics(agreement.total_counts(
            agreement.criterion_counts(p, s, agreement.pairwise_from_scores(o))
            for p, s, o in zip(points, S, oracle))))
    return out


def critic_hooks(run: Run, seed: int, timer: dict[str, float]) -> CriticHooks:
    """The critic's (and the parts') access to the frozen current policy (the run's engine, which still holds this
    step's params) and the judge; the critic's calls are timed into `timer` ('critic' seconds, 'resampled'
    rollouts); a candidate whose guided prompt cannot fit the budget is not measured."""
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

    def sample_prompts(tasks, prompts):
        calls[0] += 1
        return sample_groups(run, list(tasks), seed=seed + 7919 * calls[0], prompts=list(prompts)).responses

    return CriticHooks(regrade_batch=regrade_batch, resample_batch=resample_batch, prompt_problem=prompt_problem,
                       sample_prompts=sample_prompts)


# ------------------------------------------------------------------------------------------- advantages, train


def compute_advantages(rewards: np.ndarray, estimator: str) -> tuple[np.ndarray, dict[str, float]]:
    """(advantages [T, J], reward and advantage statistics) of rewards in reward points with the named estimator
    (grpo.ADVANTAGE_FNS). An estimator that does not divide by the group std (Dr.GRPO's mean or leave-one-out
    baseline) sees the rewards on the 0-1 scale, the papers' unit, so its advantages keep their size against the KL
    term and the clip; a std-normalised one is the same on either scale."""
    scaled = rewards if estimator in grpo.SCALE_FREE else np.asarray(rewards, np.float64) / LAMBDA
    advantages = np.asarray(grpo.get_advantage_fn(estimator)(scaled), np.float32)
    metrics = {f"reward/{k.removeprefix('reward_')}": float(v)
               for k, v in grpo.advantage_metrics(rewards).items()}
    valid = advantages[np.isfinite(advantages)]
    if valid.size:
        metrics.update({"advantage/abs_mean": float(np.abs(valid).mean()), "advantage/std": float(valid.std()),
                        "advantage/min": float(valid.min()), "advantage/max": float(valid.max())})
    return advantages, metrics


def train_on_rollouts(run: Run, state: TrainState, rollouts: Rollouts, advantages: np.ndarray,
                      weights: np.ndarray, *, return_sketch: bool = False):
    """Pack the rollouts into the fixed-shape batch and run the sharded step; `state` is donated. `weights` [T] is
    each task's u, applied to every one of its rows. Returns (state, metrics), and with `return_sketch` the
    gradient sketch as well (the trainer needs a sketch_spec).

    With config.mini_batches = n > 1 the batch is split into n consecutive row blocks, each one optimiser update;
    the old policy's logprobs of every block are computed before the first update. Metrics, and the sketch, are
    the mean over the n updates.
    """
    J = rollouts.num_samples // len(weights)
    batch = build_batch(rollouts, advantages.reshape(-1), np.repeat(np.asarray(weights, np.float32), J),
                        seq_len=run.seq_len, pad_id=run.engine.pad_id, num_rows=run.rows,
                        bucket=run.config.train_seq_bucket)
    return train_on_batch(run, state, batch, return_sketch=return_sketch)


@functools.cache
def _malloc_trim():
    libc = ctypes.util.find_library("c")
    return getattr(ctypes.CDLL(libc), "malloc_trim", None) if libc else None


def release_free_heap() -> None:
    """Gives the C heap's free pages back to the system. glibc keeps memory freed by other threads (a checkpoint's
    background write) in its arenas, where it would sit under the peak of every later train step. A no-op where
    the C library has no malloc_trim (not glibc)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@contextlib.contextmanager
def collection_after(timings: dict[str, float], key: str = "time/gc"):
    """Python's automatic garbage collection paused for the block, then one collection of the young generations
    (what the block allocated and still holds), its seconds in `timings[key]`.

    A step allocates hundreds of thousands of objects that live until its end (decoded records, contexts, the
    evolver's log). Each time enough of them survive, the automatic collector scans the whole heap again (the
    harness, the tasks, the tokenizer): several times a step at the paper's scale, ~2 s of a step at 256,000 draws
    (launch/bench_scale.py). Collecting the young generations at the end frees the step's cycles; the full
    collections are left to the automatic collector between steps, as Python's own rule schedules them (after a
    quarter of the long-lived objects is new). Where the caller has the collector off already, the block runs as
    it is and nothing is collected.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        start = time.perf_counter()
        gc.collect(1)
        gc.enable()
        timings[key] = time.perf_counter() - start


def train_on_batch(run: Run, state: TrainState, batch, *, return_sketch: bool = False):
    """Run the sharded step on a packed batch (rl.batch.TrainBatch; see train_on_rollouts for mini-batches and
    the sketch). The C heap's free pages go back to the system first (`release_free_heap`): the step's
    temporaries are its largest allocation."""
    release_free_heap()
    n = run.config.mini_batches
    kw = {"return_sketch": True} if return_sketch else {}
    if n == 1:
        state, metrics, *sketch = run.trainer.step(state, run.trainer.put_batch(batch), run.ref_params, **kw)
        metrics = {f"train/{k}": v for k, v in metrics_to_host(metrics).items()}
        return (state, metrics, np.asarray(to_host(sketch[0]))) if return_sketch else (state, metrics)
    size = run.rows // n
    blocks = [run.trainer.put_batch(batch.rows(slice(i * size, (i + 1) * size))) for i in range(n)]
    policy = run.trainer.policy_params(state)
    blocks = [b._replace(old_logprobs=run.trainer.logprobs(policy, b)) for b in blocks]
    del policy  # under LoRA, its merged copies of the targets are freed before the updates
    updates, sketches = [], []
    for block in blocks:
        state, metrics, *sketch = run.trainer.step(state, block, run.ref_params, **kw)
        updates.append(metrics_to_host(metrics))
        sketches += [np.asarray(to_host(s), np.float64) for s in sketch]
    metrics = {f"train/{k}": float(np.mean([m[k] for m in updates])) for k in updates[0]}
    if return_sketch:
        return state, metrics, np.mean(sketches, axis=0).astype(np.float32)
    return state, metrics


def push_weights(run: Run, params: Params) -> None:
    """Moves the run's engine to `params`: the in-process engine samples with the arrays themselves (a full host
    copy on each process when there are several, so every process samples the same rollouts); SGLang's engine is
    given the sharded params and exports them leaf by leaf."""
    run.engine.update_weights(engine_params(params) if isinstance(run.engine, JaxEngine) else params)


def engine_params(params: Params) -> Params:
    """The params the in-process engine samples with: the sharded arrays themselves on one host; with several
    processes, a full host copy on each (every process then samples the same rollouts from the same seed)."""
    if jax.process_count() == 1:
        return params
    from jax.experimental import multihost_utils
    return multihost_utils.process_allgather(params, tiled=True)


def step_seed(state: TrainState, step: int) -> int:
    """The sampling seed of `step`, derived from the checkpointed root key (so a resumed run draws the same)."""
    key = jax.random.fold_in(np.asarray(to_host(state.rng)), step)
    return int(jax.random.randint(key, (), 0, np.iinfo(np.int32).max))


__all__ = ["GroupBatch", "Run", "TaskPrompts", "bare_context", "collection_after", "compute_advantages", "critic_hooks",
           "engine_params", "oracle_metrics", "push_weights", "release_free_heap", "render_prompts",
           "sample_groups", "score_responses", "step_seed", "train_on_batch", "train_on_rollouts"]
