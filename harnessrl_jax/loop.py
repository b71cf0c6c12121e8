"""One training step end to end (DESIGN.md), so far for plain GRPO: the harness with every interface frozen.

    tasks, u   = sample_tasks(...)              uniform sampling without replacement per epoch, so u = 1
    prompts    = render_prompts(tasks, ...)     the chat template over each task's messages, no guidance
    rollouts   = generate_rollouts(...)         n = J samples per prompt, token ids and logprobs kept
    S, rewards = score_responses(judge, ...)    the run's judge per criterion -> S [K, J] -> rubric reward [J]
    advantages = compute_advantages(rewards)    per-task group advantages
    state      = train_on_rollouts(...)         the sharded step (rl/step.py)
    engine.update_weights(state.params)

Each stage is its own function so a method can swap `sample_tasks`, `render_prompts` and the scoring, and insert
memory, attributor, proposer and critic between scoring and training: `harnessrl_jax.methods.harnessrl` does (the
full step of DESIGN.md). `setup` builds the parts a config names; `grpo_step` runs one plain GRPO step;
`harnessrl_jax.methods` maps config.method to a method; launch/train.py owns the loop, logging and checkpoints.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any, Callable, Sequence

import jax
import numpy as np

from harnessrl_jax.models import init_params, load_pretrained, preset_config
from harnessrl_jax.models.llama import ModelConfig, Params
from harnessrl_jax.models.sharding import make_mesh
from harnessrl_jax.rl import grpo
from harnessrl_jax.rl.batch import build_batch, round_up
from harnessrl_jax.rl.optim import make_optimizer
from harnessrl_jax.rl.step import LossSettings, Trainer, TrainState, metrics_to_host, to_host
from harnessrl_jax.rollout import JaxEngine, Rollouts
from harnessrl_jax.rubric import rules
from harnessrl_jax.rubric.judges import Judge, RoutingJudge, RuleJudge, ScoreMatrix
from harnessrl_jax.rubric.judges.base import check_batch
from harnessrl_jax.rubric.reward import rubric_reward
from harnessrl_jax.rubric.schema import Task, load_tasks

# ------------------------------------------------------------------------------------------ parts by name


def _tiny_model(config) -> tuple[ModelConfig, Params, Any]:
    from harnessrl_jax import toy

    tokenizer = toy.char_tokenizer()
    model_config = preset_config("tiny").replace(vocab_size=round_up(tokenizer.vocab_size, 16), **_model_overrides(config))
    params = init_params(model_config, jax.random.PRNGKey(config.seed), std=config.model.get("init_std", 0.02))
    return model_config, params, tokenizer


def _model_overrides(config) -> dict[str, Any]:
    return {k: config.model[k] for k in ("compute_dtype", "remat") if k in config.model}


# model_name -> (config -> (model config, params, tokenizer)); any other name goes to load_pretrained.
MODELS: dict[str, Callable] = {"tiny": _tiny_model}

def _toy_tasks(task_config) -> list[Task]:
    from harnessrl_jax import toy

    return toy.letter_tasks(task_config.letters, tuple(task_config.thresholds))


def _bundled_tasks(task_config) -> list[Task]:
    from harnessrl_jax import data

    return data.load_split(task_config.name, task_config.split)


def _toy_harness_tasks(task_config) -> list[Task]:
    from harnessrl_jax import toy

    return toy.harness_tasks()


# tasks.source -> (config.tasks -> tasks).
TASK_SOURCES: dict[str, Callable[[Any], list[Task]]] = {
    "bundled": _bundled_tasks,  # a set shipped in harnessrl_jax/data (tasks.name, tasks.split)
    "jsonl": lambda task_config: load_tasks(task_config.path),
    "toy": _toy_tasks,
    "toy_harness": _toy_harness_tasks,  # tasks that exercise every evolver path on a random model (tests)
}


def build_model(config) -> tuple[ModelConfig, Params, Any]:
    """(model config, params, tokenizer) for config.model_name."""
    if config.model_name in MODELS:
        return MODELS[config.model_name](config)
    model_config, params, tokenizer = load_pretrained(config.model_name, **_model_overrides(config))
    if tokenizer is None:
        raise ValueError(f"model {config.model_name!r} has no tokenizer files; the loop needs one")
    return model_config, params, tokenizer


def build_tasks(config) -> list[Task]:
    """The training tasks of config.tasks.source, with every rule criterion's checker and kwargs validated."""
    source = config.tasks.source
    if source not in TASK_SOURCES:
        raise ValueError(f"unknown task source {source!r}; known: {sorted(TASK_SOURCES)}")
    if source == "jsonl" and not config.tasks.path:
        raise ValueError("config.tasks.path is empty: point it at a JSONL task file (--config.tasks.path=...)")
    tasks = TASK_SOURCES[source](config.tasks)
    for task in tasks:
        for c in task.criteria:
            if c.verifier == "rule":  # fail at start-up, not hours into a run
                try:
                    rules.validate_kwargs(c.rule_id, c.rule_kwargs, prompt=_user_text(task))
                except (KeyError, ValueError) as e:
                    raise ValueError(f"task {task.id!r}, criterion {c.id!r}: {e}") from None
    return tasks


# ------------------------------------------------------------------------------------------------- set-up


@dataclasses.dataclass
class Run:
    """The parts one training run is made of; built once by `setup`, read by every step."""

    config: Any
    model_config: ModelConfig
    tokenizer: Any
    tasks: list[Task]
    trainer: Trainer
    engine: JaxEngine
    ref_params: Params | None
    initial_params: Params  # host copy of the starting policy (the fresh train state is built from it)
    seq_len: int
    rows: int  # train batch rows: tasks_per_step * J, padded to the mesh and micro-batches
    judge: Judge  # build_judge(config): rule checkers, and the LLM judge when config.judge.base_url is set

    def close(self) -> None:
        """Releases the judge's clients."""
        self.judge.close()


def within_prompt_budget(tasks: Sequence[Task], tokenizer, max_prompt_len: int) -> list[Task]:
    """The tasks whose bare prompt fits in max_prompt_len tokens (the others are dropped with a warning)."""
    lengths = [len(render_prompts([t], tokenizer)[0]) for t in tasks]
    kept = [t for t, n in zip(tasks, lengths) if n <= max_prompt_len]
    if len(kept) < len(tasks):
        logging.warning("dropped %d of %d tasks whose prompt exceeds max_prompt_len=%d tokens",
                        len(tasks) - len(kept), len(tasks), max_prompt_len)
    if not kept:
        raise ValueError(f"no task has a prompt within max_prompt_len={max_prompt_len} tokens")
    return kept


def setup(config) -> Run:
    """Model, tokenizer, tasks, mesh, trainer and engine for `config`; no train state yet (see `initial_state`)."""
    model_config, params, tokenizer = build_model(config)
    kept = within_prompt_budget(build_tasks(config), tokenizer, config.max_prompt_len)

    devices = jax.devices()[: config.mesh.num_devices] if config.mesh.get("num_devices", 0) else None
    mesh = make_mesh(config.mesh.data, config.mesh.fsdp, config.mesh.tensor, devices=devices)
    optimizer, schedule = make_optimizer(config.optim)
    trainer = Trainer(model_config, optimizer, mesh, LossSettings.from_config(_loss_config(config)),
                      schedule=schedule, micro_batches=config.micro_batches)
    ref_params = trainer.place_params(params) if config.loss.kl_coef else None
    engine = JaxEngine(trainer.model_config, params, tokenizer)
    rows = round_up(config.tasks_per_step * config.num_generations,
                    config.get("mini_batches", 1) * config.micro_batches * trainer.data_parallel)
    seq_len = round_up(config.max_prompt_len + guidance_budget(config) + config.max_new_tokens, 8)
    logging.info("model %s (%.1fM params, compute %s), %d tasks, mesh %s, batch %d x %d tokens",
                 config.model_name, model_config.num_params() / 1e6,
                 model_config.compute_dtype, len(kept),
                 dict(mesh.shape), rows, seq_len)
    return Run(config, trainer.model_config, tokenizer, kept, trainer, engine, ref_params, params, seq_len, rows,
               build_judge(config))


def guidance_budget(config) -> int:
    """Prompt tokens kept free for mounted guidance fields: 0 for plain GRPO (nothing is ever mounted)."""
    return int(config.harness.max_guidance_tokens) if config.method != "grpo" and "harness" in config else 0


def _loss_config(config) -> dict[str, Any]:
    loss = dict(config.loss)
    loss["tis_cap"] = loss.get("tis_cap") or None  # 0 in a config means off
    return {**loss, "temperature": config.temperature}


def initial_state(run: Run) -> TrainState:
    """The train state at step 0: the starting policy, a zeroed optimiser, the run's root key."""
    state = run.trainer.init_state(run.initial_params, jax.random.PRNGKey(run.config.seed))
    run.engine.update_weights(engine_params(state.params))
    return state


def engine_params(params: Params) -> Params:
    """The params the in-process engine samples with: the sharded arrays themselves on one host; with several
    processes, a full host copy on each (every process then samples the same rollouts from the same seed)."""
    if jax.process_count() == 1:
        return params
    from jax.experimental import multihost_utils
    return multihost_utils.process_allgather(params, tiled=True)


# -------------------------------------------------------------------------------------------- the stages


@dataclasses.dataclass(frozen=True)
class DataPosition:
    """Where the task stream is: each epoch is a permutation seeded by (seed, epoch), read from `index` on."""

    epoch: int = 0
    index: int = 0

    def to_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, int]) -> "DataPosition":
        return cls(int(d["epoch"]), int(d["index"]))


def sample_tasks(num_tasks: int, batch_size: int, position: DataPosition, seed: int):
    """(task indices, their importance weights u, next position): uniform without replacement within an epoch.

    Sampling is uniform, so u = 1 / (N * p_i) = 1 for every task (the sampling interface later changes p).
    """
    picked, epoch, index = [], position.epoch, position.index
    while len(picked) < batch_size:
        order = np.random.default_rng((seed, epoch)).permutation(num_tasks)
        take = order[index:index + batch_size - len(picked)]
        picked.extend(int(i) for i in take)
        index += len(take)
        if index >= num_tasks:
            epoch, index = epoch + 1, 0
    return picked, np.ones(batch_size, np.float32), DataPosition(epoch, index)


def _user_text(task: Task) -> str:
    return next((m["content"] for m in reversed(task.prompt) if m["role"] == "user"), "")


def render_prompts(tasks: Sequence[Task], tokenizer) -> list[list[int]]:
    """Token ids of each task's messages under the chat template, ending in the assistant's turn."""
    return [tokenizer.apply_chat_template(list(t.prompt), add_generation_prompt=True, tokenize=True) for t in tasks]


def generate_rollouts(engine, prompts: list[list[int]], config, seed: int) -> Rollouts:
    """J samples per prompt from the engine, with the config's sampling settings."""
    return engine.generate(prompts, n=config.num_generations, max_new_tokens=config.max_new_tokens,
                           temperature=config.temperature, top_p=config.top_p, top_k=config.top_k, seed=seed)


class Unjudged(Judge):
    """The judge of LLM criteria when no LLM judge is configured: every cell not judged (NaN, status 'error')."""

    name = "unjudged"

    def score_batch(self, tasks, responses, criteria=None):
        criteria = check_batch(tasks, responses, criteria)
        return [ScoreMatrix.empty([c.id for c in cs], len(rs), self.name) for rs, cs in zip(responses, criteria)]


def build_judge(config) -> Judge:
    """Rule checkers for `verifier:rule`; an OpenAI-compatible judge for the rest when config.judge.base_url is set,
    else those cells are not judged (NaN: the reward skips them)."""
    j = config.judge
    default: Judge = Unjudged()
    if j.base_url:
        from harnessrl_jax.rubric.judges import OpenAIJudge

        default = OpenAIJudge(j.base_url, j.model, structured_output=j.structured_output,
                              api_key_env=j.api_key_env or None)
    return RoutingJudge(default, rule=RuleJudge())


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
    failures = sum(int(m.failed[k].sum()) for m in mats for k, name in enumerate(m.judges) if name != Unjudged.name)
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


def train_on_rollouts(run: Run, state: TrainState, rollouts: Rollouts, advantages: np.ndarray,
                      weights: np.ndarray) -> tuple[TrainState, dict[str, float]]:
    """Pack the rollouts into the fixed-shape batch and run the sharded step; `state` is donated.

    With config.mini_batches = n > 1 the batch is split into n consecutive row blocks, each one optimiser update;
    the old policy's logprobs of every block are computed before the first update. Metrics are the mean over the
    n updates.
    """
    batch = build_batch(rollouts, advantages.reshape(-1), np.repeat(weights, run.config.num_generations),
                        seq_len=run.seq_len, pad_id=run.engine.pad_id, num_rows=run.rows)
    n = run.config.get("mini_batches", 1)
    if n == 1:
        state, metrics = run.trainer.step(state, run.trainer.put_batch(batch), run.ref_params)
        return state, {f"train/{k}": v for k, v in metrics_to_host(metrics).items()}
    size = run.rows // n
    blocks = [run.trainer.put_batch(batch.rows(slice(i * size, (i + 1) * size))) for i in range(n)]
    blocks = [b._replace(old_logprobs=run.trainer.logprobs(state.params, b)) for b in blocks]
    updates = []
    for block in blocks:
        state, metrics = run.trainer.step(state, block, run.ref_params)
        updates.append(metrics_to_host(metrics))
    return state, {f"train/{k}": float(np.mean([m[k] for m in updates])) for k in updates[0]}


def step_seed(state: TrainState, step: int) -> int:
    """The sampling seed of `step`, derived from the checkpointed root key (so a resumed run draws the same)."""
    key = jax.random.fold_in(np.asarray(to_host(state.rng)), step)
    return int(jax.random.randint(key, (), 0, np.iinfo(np.int32).max))


def oracle_agreement(rewards: np.ndarray, oracle: np.ndarray) -> tuple[int, int]:
    """(agreeing, separated) rollout pairs within each group: among pairs whose oracle scores differ, those whose
    training rewards order them the same way (a tie in reward does not agree). rewards, oracle: [T, J]."""
    agree = separated = 0
    for r, o in zip(np.asarray(rewards, np.float64), np.asarray(oracle, np.float64)):
        ok = ~(np.isnan(r) | np.isnan(o))
        r, o = r[ok], o[ok]
        do = np.sign(o[:, None] - o[None, :])
        dr = np.sign(r[:, None] - r[None, :])
        upper = np.triu(np.ones_like(do, bool), 1) & (do != 0)
        separated += int(upper.sum())
        agree += int((upper & (dr == do)).sum())
    return agree, separated


def oracle_scores(tasks: Sequence[Task], responses: Sequence[Sequence[str]]) -> np.ndarray:
    """[T, J] oracle score of each rollout: its task's `oracle_criteria`, rule criteria only (analysis, never
    training); NaN for a task without rule oracle criteria."""
    judge = RuleJudge()
    out = np.full((len(tasks), len(responses[0]) if len(responses) else 0), np.nan)
    for i, (task, rs) in enumerate(zip(tasks, responses)):
        crits = [c for c in task.oracle_criteria if c.verifier == "rule"]
        if crits and any(c.points > 0 for c in crits):
            S = judge.score(task, list(rs), crits).verdicts
            out[i] = rubric_reward(np.array([c.points for c in crits]), S)
    return out


def oracle_metrics(tasks: Sequence[Task], responses: Sequence[Sequence[str]], rewards: np.ndarray
                   ) -> dict[str, float]:
    """oracle/score_mean and oracle/agreement (rollout-pair agreement of reward and oracle orderings)."""
    oracle = oracle_scores(tasks, responses)
    agree, separated = oracle_agreement(rewards, oracle)
    valid = oracle[~np.isnan(oracle)]
    return {"oracle/score_mean": float(valid.mean()) if valid.size else float("nan"),
            "oracle/agreement": agree / separated if separated else float("nan"),
            "oracle/separated_pairs": float(separated)}


# ------------------------------------------------------------------------------------------------ the step


def grpo_step(run: Run, state: TrainState, position: DataPosition, step: int):
    """One GRPO step: (new state, new data position, metrics with time by stage). `state` is donated."""
    config, timings = run.config, {}
    start = time.perf_counter()
    picked, u, position = sample_tasks(len(run.tasks), config.tasks_per_step, position, config.seed)
    tasks = [run.tasks[i] for i in picked]
    prompts = render_prompts(tasks, run.tokenizer)
    rollouts = generate_rollouts(run.engine, prompts, config, step_seed(state, step))
    timings["time/rollout"] = time.perf_counter() - start

    start = time.perf_counter()
    responses = np.asarray(rollouts.texts, dtype=object).reshape(len(tasks), config.num_generations)
    _, rewards, reward_metrics = score_responses(run.judge, tasks, responses)
    advantages, adv_metrics = compute_advantages(rewards, config.advantage)
    reward_metrics.update(oracle_metrics(tasks, responses, rewards))
    timings["time/judge"] = time.perf_counter() - start

    start = time.perf_counter()
    state, train_metrics = train_on_rollouts(run, state, rollouts, advantages, u)
    run.engine.update_weights(engine_params(state.params))
    timings["time/train"] = time.perf_counter() - start

    rollout_metrics = {
        "rollout/length_mean": float(rollouts.lengths.mean()),
        "rollout/stop_fraction": float(np.mean([r == "stop" for r in rollouts.finish_reason])),
    }
    return state, position, {**reward_metrics, **adv_metrics, **rollout_metrics, **train_metrics, **timings}

