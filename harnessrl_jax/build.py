"""Set-up of a training run: the parts a config names, built once (model, tokenizer, tasks, mesh, trainer, engine,
judge), and the run's train state at step 0.

    config = ...                      # experiments/*.py; harnessrl_jax.configs.validate(config) first
    run = setup(config)               # Run: everything a step reads
    state = initial_state(run)        # params, zeroed optimiser, root key

Parts are looked up by name: `MODELS` (config.model_name; any other name goes to models.load_pretrained),
`TASK_SOURCES` (config.tasks.source) and the judge (`build_judge`: config.judge.kind).
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
from harnessrl_jax.rl.batch import round_up
from harnessrl_jax.rl.optim import make_optimizer
from harnessrl_jax.rl.step import LossSettings, Trainer, TrainState
from harnessrl_jax.rollout import JaxEngine
from harnessrl_jax.rubric import rules
from harnessrl_jax.rubric.judges import Judge, RoutingJudge, RuleJudge, ScoreMatrix
from harnessrl_jax.rubric.judges.base import check_batch
from harnessrl_jax.rubric.schema import Task, load_tasks

# ------------------------------------------------------------------------------------------ parts by name


def _tiny_model(config) -> tuple[ModelConfig, Params, Any]:
    from harnessrl_jax import toy

    tokenizer = toy.char_tokenizer()
    model_config = preset_config("tiny").replace(vocab_size=round_up(tokenizer.vocab_size, 16),
                                                 **model_overrides(config))
    params = init_params(model_config, jax.random.PRNGKey(config.seed), std=config.model.get("init_std", 0.02))
    return model_config, params, tokenizer


# config.model's keys that are ModelConfig fields (how it computes, not which model it is)
MODEL_OVERRIDES = ("compute_dtype", "remat", "scan_layers")


def model_overrides(config) -> dict[str, Any]:
    return {k: config.model[k] for k in MODEL_OVERRIDES if k in config.model}


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


def build_model(config, timings: dict[str, float] | None = None) -> tuple[ModelConfig, Params, Any]:
    """(model config, params, tokenizer) for config.model_name; `timings` receives load_pretrained's `weights_s`
    and `tokenizer_s` (a model built by MODELS counts as weights)."""
    if config.model_name in MODELS:
        start = time.perf_counter()
        built = MODELS[config.model_name](config)
        if timings is not None:
            timings.update(weights_s=time.perf_counter() - start, tokenizer_s=0.0)
        return built
    model_config, params, tokenizer = load_pretrained(config.model_name, timings=timings,
                                                      **model_overrides(config))
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
                    rules.validate_kwargs(c.rule_id, c.rule_kwargs, prompt=task.user_text)
                except (KeyError, ValueError) as e:
                    raise ValueError(f"task {task.id!r}, criterion {c.id!r}: {e}") from None
    return tasks


def training_tasks(config, tasks: Sequence[Task]) -> tuple[list[Task], int]:
    """(tasks as every method trains them, number of LLM criteria dropped): without an LLM judge (judge.kind
    'rule') only rule criteria stay, and a task left with no positive criterion is dropped; dataset references are
    removed unless config.harness.use_dataset_reference (they describe the corpus only: paper sec. 5.1). With
    config.tasks.domain set, that domain's tasks only; with config.tasks.subset = n > 0, a seeded random n of them
    (a short run that draws each task several times)."""
    keep_reference = bool(config.harness.get("use_dataset_reference", False))
    out, dropped = [], 0
    for t in tasks:
        crits = t.criteria
        if config.judge.kind == "rule":
            crits = tuple(c for c in t.criteria if c.verifier == "rule")
            dropped += len(t.criteria) - len(crits)
        if any(c.points > 0 for c in crits):
            out.append(dataclasses.replace(t, criteria=crits, reference=t.reference if keep_reference else None))
    if len(out) < len(tasks):
        logging.warning("dropped %d tasks with no positive rule criterion (no LLM judge configured)",
                    len(tasks) - len(out))
    if not out:
        raise ValueError("no task has a positive rule criterion: set --config.judge.kind and its server for an LLM "
                         "judge")
    domain = config.tasks.get("domain", "")
    if domain:
        out = [t for t in out if t.domain == domain]
        if not out:
            raise ValueError(f"--config.tasks.domain={domain!r}: no training task of that domain")
    n = int(config.tasks.get("subset", 0) or 0)
    if 0 < n < len(out):
        keep = np.sort(np.random.default_rng(config.seed).choice(len(out), n, replace=False))
        out = [out[i] for i in keep]
    return out, dropped


# ------------------------------------------------------------------------------------------------- set-up


@dataclasses.dataclass
class Run:
    """The parts one training run is made of; built once by `setup`, read by every step."""

    config: Any
    model_config: ModelConfig
    tokenizer: Any
    tasks: list[Task]
    trainer: Trainer
    engine: Any  # a rollout.RolloutEngine: JaxEngine or SGLangEngine (config.rollout.engine)
    ref_params: Params | None
    initial_params: Params  # host copy of the starting policy (the fresh train state is built from it)
    seq_len: int
    rows: int  # train batch rows: tasks_per_step * J, padded to the mesh and micro-batches
    prompt_limit: int  # prompt tokens a rollout may use: max_prompt_len + the guidance budget
    judge: Judge  # build_judge(config): rule checkers, and config.judge.kind's judge for the other criteria

    def close(self) -> None:
        """Releases the judge's clients."""
        self.judge.close()


def within_prompt_budget(tasks: Sequence[Task], tokenizer, max_prompt_len: int) -> list[Task]:
    """The tasks whose bare prompt fits in max_prompt_len tokens (the others are dropped with a warning)."""
    from harnessrl_jax.harness.render import render_prompt

    lengths = [len(render_prompt(tokenizer, t.prompt, tokenize=True)) for t in tasks]
    kept = [t for t, n in zip(tasks, lengths) if n <= max_prompt_len]
    if len(kept) < len(tasks):
        logging.warning("dropped %d of %d tasks whose prompt exceeds max_prompt_len=%d tokens",
                        len(tasks) - len(kept), len(tasks), max_prompt_len)
    if not kept:
        raise ValueError(f"no task has a prompt within max_prompt_len={max_prompt_len} tokens")
    return kept


def setup(config, timings: dict[str, float] | None = None) -> Run:
    """Model, tokenizer, tasks, mesh, trainer and engine for `config`; no train state yet (see `initial_state`).
    `timings` receives the wall seconds of `weights_s` and `tokenizer_s` (build_model) and `build_s` (the rest)."""
    timings = {} if timings is None else timings
    start = time.perf_counter()
    model_config, params, tokenizer = build_model(config, timings)
    model_s = time.perf_counter() - start
    kept = within_prompt_budget(build_tasks(config), tokenizer, config.max_prompt_len)

    devices = jax.devices()[: config.mesh.num_devices] if config.mesh.get("num_devices", 0) else None
    mesh = make_mesh(config.mesh.data, config.mesh.fsdp, config.mesh.tensor, devices=devices)
    trainer = make_trainer(config, model_config, mesh)
    ref_params = trainer.place_params(params) if config.loss.kl_coef else None
    engine = build_engine(config, trainer.model_config, params, tokenizer)
    rows = round_up(config.tasks_per_step * config.num_generations,
                    config.get("mini_batches", 1) * config.micro_batches * trainer.data_parallel)
    prompt_limit = config.max_prompt_len + guidance_budget(config)
    seq_len = round_up(prompt_limit + config.max_new_tokens, 8)
    logging.info("model %s (%.1fM params, compute %s), %d tasks, mesh %s, batch %d x %d tokens",
                 config.model_name, model_config.num_params() / 1e6,
                 model_config.compute_dtype, len(kept),
                 dict(mesh.shape), rows, seq_len)
    run = Run(config, trainer.model_config, tokenizer, kept, trainer, engine, ref_params, params, seq_len, rows,
              prompt_limit, build_judge(config))
    timings["build_s"] = time.perf_counter() - start - model_s
    return run


def make_trainer(config, model_config, mesh) -> Trainer:
    """The run's train step: config's optimiser, loss, micro-batches and sketch; the output head sees only the
    max_new_tokens completion positions of each row (rl/step.py)."""
    optimizer, schedule = make_optimizer(config.optim)
    return Trainer(model_config, optimizer, mesh, LossSettings.from_config(loss_config(config)), schedule=schedule,
                   micro_batches=config.micro_batches, sketch_spec=sketch_spec(config, model_config),
                   completion_len=config.max_new_tokens)


def sketch_spec(config, model_config):
    """HarnessBandit's gradient sketch coordinates (config.bandit), or None for a method without a sketch."""
    from harnessrl_jax import configs, methods
    from harnessrl_jax.rl.sketch import make_sketch_spec

    if not methods.describe(config).sketch:
        return None
    b = configs.method_config(config, "bandit")
    return make_sketch_spec(model_config, b.sketch_dim, last_blocks=b.sketch_blocks, seed=b.sketch_seed)


def guidance_budget(config) -> int:
    """Prompt tokens kept free for guidance (mounted fields, scaffolds, skills): 0 when the method never adds any."""
    from harnessrl_jax import methods

    return int(config.harness.max_guidance_tokens) if methods.describe(config).mounts_guidance else 0


def loss_config(config) -> dict[str, Any]:
    """The train step's loss settings from config.loss (tis_cap 0 means off; a method that trains off its sampling
    context sets its own, e.g. RuscaRL's bare-context correction) and the sampling temperature."""
    from harnessrl_jax import methods

    loss = dict(config.loss)
    cap = methods.describe(config).tis_cap
    loss["tis_cap"] = (loss.get("tis_cap") if cap is None else cap) or None  # 0 in a config means off
    loss["distill_coef"] = methods.describe(config).distill_coef  # CoCA's lambda_D (0: no distillation term)
    return {**loss, "temperature": config.temperature}


def build_engine(config, model_config: ModelConfig, params: Params, tokenizer):
    """The rollout engine config.rollout names: 'jax' (in-process, the CPU default) or 'sglang' (SGLang servers
    over their native API; weights reach them through config.rollout.weights_dir)."""
    r = config.get("rollout") or {"engine": "jax"}
    if r["engine"] == "jax":
        return JaxEngine(model_config, params, tokenizer, min_batch=r.get("min_batch", 1))
    if r["engine"] == "sglang":
        import os

        from harnessrl_jax.rollout import SGLangEngine

        base = config.model_name if os.path.isdir(config.model_name) else None
        return SGLangEngine(r["base_urls"], tokenizer, model_config=model_config, weights_dir=r["weights_dir"],
                            base_model_dir=base, export_dtype=r["export_dtype"], chunk_rows=int(r["chunk_rows"]),
                            timeout_s=float(r["timeout_s"]))
    raise ValueError(f"--config.rollout.engine={r['engine']!r}: expected jax or sglang")


def initial_state(run: Run) -> TrainState:
    """The train state at step 0: the starting policy, a zeroed optimiser, the run's root key."""
    state = run.trainer.init_state(run.initial_params, jax.random.PRNGKey(run.config.seed))
    push_weights(run, state.params)
    return state


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


class Unjudged(Judge):
    """The judge of LLM criteria when no LLM judge is configured: every cell not judged (NaN, status 'error')."""

    name = "unjudged"

    def score_batch(self, tasks, responses, criteria=None):
        criteria = check_batch(tasks, responses, criteria)
        return [ScoreMatrix.empty([c.id for c in cs], len(rs), self.name) for rs, cs in zip(responses, criteria)]


def build_judge(config) -> Judge:
    """Rule checkers for criteria tagged `verifier:rule`; config.judge.kind's judge for the others: 'openai' (an
    OpenAI-compatible server), 'anthropic' (the Messages API) or 'rule' (none: those cells are not judged, NaN,
    and the reward skips them). Behind config.judge's outage policy (failures.GuardedJudge: failed cells counted,
    a failing batch asked again after a pause, a judge that stays down stops the run)."""
    from harnessrl_jax import failures

    return failures.GuardedJudge(RoutingJudge(_llm_judge(config.judge), rule=RuleJudge()),
                                 failures.OutagePolicy.of(config.judge, "judge"))


def _llm_judge(j, name: str | None = None, max_tokens: int | None = None) -> Judge:
    extra: dict[str, Any] = {} if max_tokens is None else {"max_tokens": int(max_tokens)}
    if name:
        extra["name"] = name
    # The client's own schedule (per request): retries with backoff, the read timeout, calls in flight.
    for key, cast in (("max_retries", int), ("timeout_s", float), ("max_concurrency", int)):
        if j.get(key) is not None:
            extra[key] = cast(j[key])
    if j.kind == "openai":
        from harnessrl_jax.rubric.judges import OpenAIJudge

        return OpenAIJudge(j.base_url, j.model, structured_output=j.structured_output or "json_schema",
                           api_key_env=j.api_key_env or None, **extra)
    if j.kind == "anthropic":
        from harnessrl_jax.rubric.judges import AnthropicJudge

        return AnthropicJudge(j.model, base_url=j.base_url or None, structured_output=j.structured_output or "tool",
                              api_key_env=j.api_key_env or "ANTHROPIC_API_KEY", **extra)
    if j.kind == "rule":
        return Unjudged()
    raise ValueError(f"--config.judge.kind={j.kind!r}: expected rule, openai or anthropic")


def build_evolver_client(config):
    """The evolver model's client (an OpenAI-compatible server) when config.harness.proposer is 'llm' or llm_check
    is on, else None; empty config.evolver_model fields take config.judge's. A failed call is asked again after
    config.evolver_model.outage_pause_s, and a model that stays down stops the run (failures.GuardedClient)."""
    h, e, j = config.harness, config.evolver_model, config.judge
    if h.proposer == "rule" and not h.llm_check:
        return None
    import ml_collections

    settings = ml_collections.ConfigDict({
        "kind": "openai", "base_url": e.base_url or j.base_url, "model": e.model or j.model,
        "api_key_env": e.api_key_env or j.api_key_env, "structured_output": e.structured_output or j.structured_output})
    if not settings.base_url:
        raise ValueError("--config.evolver_model.base_url is empty: harness.proposer='llm' / llm_check need an "
                         "OpenAI-compatible server (or config.judge.base_url)")
    from harnessrl_jax import failures

    return failures.GuardedClient(_llm_judge(settings, name="evolver", max_tokens=e.max_tokens),
                                  failures.OutagePolicy.of(e, "evolver_model"), "evolver model")
