"""Set-up of a training run: the parts a config names, built once (model, tokenizer, tasks, mesh, trainer, engine,
judge), and the run's train state at step 0.

    checks.validate(config)           # first: every problem of the config, with the key that fixes it
    run = setup(config)               # stages.Run: everything a step reads
    state = initial_state(run)        # params, zeroed optimiser, root key

Parts are looked up by name: `MODELS` (config.model_name; any other name goes to models.load_pretrained),
`TASK_SOURCES` (config.tasks.source), the judge (`build_judge`: config.judge.kind) and the engine
(config.rollout.engine); the method (methods.describe) adds its loss terms and gradient sketch to the trainer.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from typing import Any, Callable, Sequence

import jax
import numpy as np

from harnessrl_jax import data, failures, methods, toy
from harnessrl_jax.agentic.tasks import TASKS_PATH as AGENT_TASKS_PATH, load_agent_tasks
from harnessrl_jax.data.world import DEFAULT_WORLD, load_world
from harnessrl_jax.harness.render import render_prompt
from harnessrl_jax.models import init_params, load_pretrained, preset_config
from harnessrl_jax.models.llama import ModelConfig, Params
from harnessrl_jax.models.sharding import make_mesh
from harnessrl_jax.rl.batch import round_up
from harnessrl_jax.rl.optim import make_optimizer
from harnessrl_jax.rl.step import LossSettings, Trainer, TrainState
from harnessrl_jax.rollout import JaxEngine, SGLangEngine
from harnessrl_jax.rubric import rules
from harnessrl_jax.rubric.judges import Judge, OpenAIJudge, RoutingJudge, RuleJudge, SGLangJudge, Unjudged
from harnessrl_jax.rubric.judges.anthropic_judge import AnthropicJudge
from harnessrl_jax.rubric.schema import Task, load_tasks
from harnessrl_jax.settings import EvolverModelSection, JudgeSection, section
from harnessrl_jax.stages import Run, push_weights

# ------------------------------------------------------------------------------------------ parts by name


def _tiny_model(config, chars: str = toy.CHARS, positions: int | None = None) -> tuple[ModelConfig, Params, Any]:
    tokenizer = toy.char_tokenizer(chars)
    model = section(config, "model")
    model_config = preset_config("tiny").replace(vocab_size=round_up(tokenizer.vocab_size, 16), **model.overrides())
    if positions is not None:
        model_config = model_config.replace(max_position_embeddings=positions)
    params = init_params(model_config, jax.random.PRNGKey(config.seed), std=model.init_std)
    return model_config, params, tokenizer


READER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models", "reader")


def _reader_model(config) -> tuple[ModelConfig, Params, Any]:
    """The testbed's guidance-reading policy (launch/train_reader.py wrote it; docs/testbed.md)."""
    if not os.path.isfile(os.path.join(READER_DIR, "config.json")):
        raise ValueError(f"model_name='reader': {READER_DIR} has no config.json; python launch/train_reader.py "
                         f"writes it")
    return load_pretrained(READER_DIR, **section(config, "model").overrides())


# model_name -> (config -> (model config, params, tokenizer)); any other name goes to load_pretrained.
# tiny_agentic: the tiny model over the characters tool calls also need (toy.AGENT_CHARS), with room for episodes
MODELS: dict[str, Callable] = {"tiny": _tiny_model, "reader": _reader_model,
                               "tiny_agentic": lambda config: _tiny_model(config, toy.AGENT_CHARS, 1024)}

# tasks.source -> (config.tasks -> tasks).
TASK_SOURCES: dict[str, Callable[[Any], list[Task]]] = {
    "bundled": lambda t: data.load_split(t.name, t.split),  # a set shipped in harnessrl_jax/data (name, split)
    "jsonl": lambda t: load_tasks(t.path),
    "toy": lambda t: toy.letter_tasks(t.letters, tuple(t.thresholds)),
    "toy_harness": lambda t: toy.harness_tasks(),  # tasks that exercise every evolver path on a random model (tests)
    # a planted-failure world (data.world; the planted labels stay with the analysis): tasks.path, else the default
    "world": lambda t: list(load_world(t.path or DEFAULT_WORLD).tasks),
    # workspace tasks for multi-turn agent rollouts (methods.agentic); tasks.split 'train' or 'heldout'
    "agentic": lambda t: load_agent_tasks(t.path or AGENT_TASKS_PATH, split=t.split),
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
                                                      **section(config, "model").overrides())
    if tokenizer is None:
        raise ValueError(f"model {config.model_name!r} has no tokenizer files; the loop needs one")
    return model_config, params, tokenizer


def build_tasks(config) -> list[Task]:
    """The training tasks of config.tasks.source, with every rule criterion's checker and kwargs validated."""
    tasks_section = section(config, "tasks")
    if tasks_section.source not in TASK_SOURCES:
        raise ValueError(f"--config.tasks.source={tasks_section.source!r}: known sources {sorted(TASK_SOURCES)}")
    tasks = TASK_SOURCES[tasks_section.source](tasks_section)
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
    keep_reference = section(config, "harness").use_dataset_reference
    judge_kind, tasks_section = section(config, "judge").kind, section(config, "tasks")
    out, dropped = [], 0
    for t in tasks:
        crits = t.criteria
        if judge_kind == "rule":
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
    if tasks_section.domain:
        out = [t for t in out if t.domain == tasks_section.domain]
        if not out:
            raise ValueError(f"--config.tasks.domain={tasks_section.domain!r}: no training task of that domain")
    n = tasks_section.subset
    if 0 < n < len(out):
        keep = np.sort(np.random.default_rng(config.seed).choice(len(out), n, replace=False))
        out = [out[i] for i in keep]
    return out, dropped


def within_prompt_budget(tasks: Sequence[Task], tokenizer, max_prompt_len: int) -> list[Task]:
    """The tasks whose bare prompt fits in max_prompt_len tokens (the others are dropped with a warning)."""
    lengths = [len(render_prompt(tokenizer, t.prompt, tokenize=True)) for t in tasks]
    kept = [t for t, n in zip(tasks, lengths) if n <= max_prompt_len]
    if len(kept) < len(tasks):
        logging.warning("dropped %d of %d tasks whose prompt exceeds max_prompt_len=%d tokens",
                        len(tasks) - len(kept), len(tasks), max_prompt_len)
    if not kept:
        raise ValueError(f"no task has a prompt within max_prompt_len={max_prompt_len} tokens")
    return kept


# ------------------------------------------------------------------------------------------------- set-up


def setup(config, timings: dict[str, float] | None = None) -> Run:
    """Model, tokenizer, tasks, mesh, trainer and engine for `config`; no train state yet (see `initial_state`).
    `timings` receives the wall seconds of `weights_s` and `tokenizer_s` (build_model) and `build_s` (the rest)."""
    timings = {} if timings is None else timings
    start = time.perf_counter()
    model_config, params, tokenizer = build_model(config, timings)
    model_s = time.perf_counter() - start
    kept = within_prompt_budget(build_tasks(config), tokenizer, config.max_prompt_len)

    mesh_section = section(config, "mesh")
    devices = jax.devices()[: mesh_section.num_devices] if mesh_section.num_devices else None
    mesh = make_mesh(mesh_section.data, mesh_section.fsdp, mesh_section.tensor, devices=devices)
    method = methods.describe(config)
    trainer = make_trainer(config, model_config, mesh, method)
    # the KL reference: the starting policy (under LoRA the train state's frozen base, not a second copy)
    ref_params = trainer.place_params(params) if section(config, "loss").kl_coef and trainer.lora is None else None
    engine = build_engine(config, trainer.model_config, params, tokenizer)
    rows = round_up(config.tasks_per_step * config.num_generations,
                    config.mini_batches * config.micro_batches * trainer.data_parallel)
    prompt_limit = config.max_prompt_len + guidance_budget(config, method)
    seq_len = round_up(prompt_limit + config.max_new_tokens, 8)
    logging.info("model %s (%.1fM params, compute %s), %d tasks, mesh %s, batch %d x %d tokens",
                 config.model_name, model_config.num_params() / 1e6, model_config.compute_dtype, len(kept),
                 dict(mesh.shape), rows, seq_len)
    run = Run(config, trainer.model_config, tokenizer, kept, trainer, engine, ref_params, params, seq_len, rows,
              prompt_limit, build_judge(config))
    timings["build_s"] = time.perf_counter() - start - model_s
    return run


def make_trainer(config, model_config, mesh, method: methods.Method | None = None) -> Trainer:
    """The run's train step: config's optimiser, loss (with the method's terms), micro-batches and the method's
    gradient sketch; the output head sees only the max_new_tokens completion positions of each row (rl/step.py)."""
    method = method or methods.describe(config)
    optimizer, schedule = make_optimizer(section(config, "optim"))
    sketch_spec = method.sketch(config, model_config) if method.sketch is not None else None
    return Trainer(model_config, optimizer, mesh, loss_settings(config, method), schedule=schedule,
                   micro_batches=config.micro_batches, sketch_spec=sketch_spec, completion_len=config.max_new_tokens,
                   lora=section(config, "model").lora(model_config))


def guidance_budget(config, method: methods.Method | None = None) -> int:
    """Prompt tokens kept free for guidance (mounted fields, scaffolds, skills): 0 when the method never adds any."""
    method = method or methods.describe(config)
    return section(config, "harness").max_guidance_tokens if method.mounts_guidance else 0


def loss_settings(config, method: methods.Method | None = None) -> LossSettings:
    """The train step's loss: config.loss, with the method's importance cap when it sets one (RuscaRL's bare-context
    correction) and its distillation coefficient, and the sampling temperature."""
    method = method or methods.describe(config)
    loss = section(config, "loss")
    tis_cap = loss.tis_cap if method.tis_cap is None else method.tis_cap
    return LossSettings(**dataclasses.asdict(loss) | {"tis_cap": tis_cap or 0.0},
                        distill_coef=method.distill_coef, temperature=config.temperature)


def build_engine(config, model_config: ModelConfig, params: Params, tokenizer):
    """The rollout engine config.rollout names: 'jax' (in-process, the CPU default) or 'sglang' (SGLang servers
    over their native API; weights reach them through config.rollout.weights_dir)."""
    r = section(config, "rollout")
    if r.engine == "jax":
        return JaxEngine(model_config, params, tokenizer, min_batch=r.min_batch)
    base = config.model_name if os.path.isdir(config.model_name) else None
    return SGLangEngine(r.base_urls, tokenizer, model_config=model_config, weights_dir=r.weights_dir,
                        base_model_dir=base, export_dtype=r.export_dtype, chunk_rows=r.chunk_rows,
                        timeout_s=r.timeout_s)


def initial_state(run: Run) -> TrainState:
    """The train state at step 0: the starting policy, a zeroed optimiser, the run's root key."""
    state = run.trainer.init_state(run.initial_params, jax.random.PRNGKey(run.config.seed))
    push_weights(run, run.trainer.policy_params(state))
    return state


# --------------------------------------------------------------------------------------------------- judges


def build_judge(config) -> Judge:
    """Rule checkers for criteria tagged `verifier:rule`; config.judge.kind's judge for the others: 'openai' (an
    OpenAI-compatible server), 'sglang' (SGLang's native /generate, batched), 'anthropic' (the Messages API) or
    'rule' (none: those cells are not judged, NaN, and the reward skips them). Behind config.judge's outage policy (failures.GuardedJudge: failed cells counted,
    a failing batch asked again after a pause, a judge that stays down stops the run)."""
    j = section(config, "judge")
    client = dict(max_retries=j.max_retries, timeout_s=j.timeout_s, max_concurrency=j.max_concurrency)
    if j.kind == "sglang":
        llm = SGLangJudge(j.base_url, j.model, tokenizer=j.tokenizer or j.model, batch_size=j.batch_size,
                          structured_output=j.structured_output or "json_schema", api_key_env=j.api_key_env or None,
                          **client)
    else:
        llm = Unjudged() if j.kind == "rule" else _llm_judge(j.kind, j.base_url, j.model, j.api_key_env,
                                                            j.structured_output, **client)
    return failures.GuardedJudge(RoutingJudge(llm, rule=RuleJudge()),
                                 failures.OutagePolicy(j.max_failed_fraction, j.outage_pause_s, j.outage_retries,
                                                       "--config.judge."))


def _llm_judge(kind: str, base_url: str, model: str, api_key_env: str, structured_output: str, **client) -> Judge:
    """An LLM judge client: an OpenAI-compatible server or Anthropic's API, with the client's own settings
    (retries with backoff, the read timeout, calls in flight, the answer's token limit, a name)."""
    if kind == "openai":
        return OpenAIJudge(base_url, model, structured_output=structured_output or "json_schema",
                           api_key_env=api_key_env or None, **client)
    return AnthropicJudge(model, base_url=base_url or None, structured_output=structured_output or "tool",
                          api_key_env=api_key_env or "ANTHROPIC_API_KEY", **client)


def build_evolver_client(config):
    """The evolver model's client (an OpenAI-compatible server) when config.harness.proposer is 'llm' or llm_check
    is on, else None; empty config.evolver_model fields take config.judge's. A failed call is asked again after
    config.evolver_model.outage_pause_s, and a model that stays down stops the run (failures.GuardedClient)."""
    h = section(config, "harness")
    if h.proposer == "rule" and not h.llm_check:
        return None
    e, j = section(config, "evolver_model"), section(config, "judge")
    url = evolver_url(e, j)
    if not url:
        raise ValueError("--config.evolver_model.base_url is empty: harness.proposer='llm' / llm_check need an "
                         "OpenAI-compatible server (or config.judge.base_url)")
    client = _llm_judge("openai", url, e.model or j.model, e.api_key_env or j.api_key_env,
                        e.structured_output or j.structured_output, name="evolver", max_tokens=e.max_tokens)
    return failures.GuardedClient(client, failures.OutagePolicy(0.0, e.outage_pause_s, e.outage_retries,
                                                                "--config.evolver_model."), "evolver model")


def evolver_url(e: EvolverModelSection, j: JudgeSection) -> str:
    """The evolver model's server: config.evolver_model.base_url, else an OpenAI-compatible judge's."""
    return e.base_url or (j.base_url if j.kind == "openai" else "")


__all__ = ["MODELS", "READER_DIR", "TASK_SOURCES", "build_engine", "build_evolver_client", "build_judge",
           "build_model", "build_tasks", "evolver_url", "guidance_budget", "initial_state", "loss_settings", "make_trainer",
           "setup", "training_tasks", "within_prompt_budget"]
