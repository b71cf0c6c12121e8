"""The run's config checked once, before any model loads.

    problems = check(config)        # values the config gets wrong, each naming the --config. key to fix
    missing = needs(config)         # what the machine lacks for it (model, task file, servers), with the flag
    validate(config)                # raises ConfigError listing both; launch scripts print it in a few lines

`check` types every section (settings.SECTIONS and every method's registered section: unknown keys and bad values),
then checks what spans sections or names a registry (the method, its parts, the task source, the sampler).
"""

from __future__ import annotations

import os
from typing import Callable

import httpx

from harnessrl_jax import build, methods, tensorboard_log
from harnessrl_jax.errors import ConfigError
from harnessrl_jax.eval import ood as ood_lib
from harnessrl_jax.memory.semantic import embedder_path, model_name
from harnessrl_jax.methods.parts import check_parts
from harnessrl_jax.methods.samplers import SAMPLERS
from harnessrl_jax.models import RANDOM_PRESETS
from harnessrl_jax.models.presets import PRESETS, weights_path
from harnessrl_jax.rl import grpo
from harnessrl_jax.settings import ENV_NAME, SECTIONS, typed


def _typed_sections(config) -> tuple[dict, list[str]]:
    """Every section the config has or a part reads, typed; and the problems found on the way."""
    out, problems = {}, []
    for key, cls in [*SECTIONS.items(), *methods.SETTINGS.items()]:
        try:
            out[key] = typed(cls, config.get(key) or {}, key)
        except ConfigError as e:
            problems += e.problems
    return out, problems


def check(config) -> list[str]:
    """Every value the config gets wrong, each as '--config.KEY...: what is wrong' (nothing is loaded)."""
    try:
        methods.lookup(config.method)  # a method given by module path registers its own section here
    except ConfigError as e:
        return e.problems
    s, p = _typed_sections(config)
    for key, low in (("total_steps", 1), ("tasks_per_step", 1), ("num_generations", 2), ("max_new_tokens", 1),
                     ("max_prompt_len", 1), ("micro_batches", 1), ("mini_batches", 1), ("train_seq_bucket", 0)):
        if int(config[key]) < low:
            p.append(f"--config.{key}={config[key]}: must be >= {low}")
    if not config.temperature > 0:
        p.append(f"--config.temperature={config.temperature}: must be > 0 (training samples)")
    if not 0 < config.top_p <= 1:
        p.append(f"--config.top_p={config.top_p}: must be in (0, 1]")
    if config.advantage not in grpo.ADVANTAGE_FNS:
        p.append(f"--config.advantage={config.advantage!r}: expected one of {', '.join(sorted(grpo.ADVANTAGE_FNS))}")
    if "tasks" in s:
        if s["tasks"].source not in build.TASK_SOURCES:
            p.append(f"--config.tasks.source={s['tasks'].source!r}: expected one of "
                     f"{', '.join(sorted(build.TASK_SOURCES))}")
        if s["tasks"].sampler not in SAMPLERS:
            p.append(f"--config.tasks.sampler={s['tasks'].sampler!r}: expected one of {', '.join(sorted(SAMPLERS))} "
                     "(a method whose mechanism is the sampler brings its own)")
    if "memory" in s:
        p += _embedder_problems(s["memory"])
    if "eval" in s:  # the task source as given, even when the tasks section has a problem of its own
        p += _eval_problems(s["eval"], str((config.get("tasks") or {}).get("source", "")), int(config.total_steps))
    if "harness" in s and "judge" in s and "evolver_model" in s:
        h, j = s["harness"], s["judge"]
        if (h.proposer == "llm" or h.llm_check) and not build.evolver_url(s["evolver_model"], j):
            p.append("--config.evolver_model.base_url is empty: harness.proposer='llm' / llm_check need the evolver "
                     "model's OpenAI-compatible server (or an openai judge whose server it shares)")
    if p:  # a method is described only from a config whose sections hold
        return p
    try:
        method = methods.describe(config)
    except (ConfigError, ValueError) as e:
        return p + (e.problems if isinstance(e, ConfigError) else [str(e)])
    return p + methods.check(config) + check_parts(method, config)


def _eval_problems(e, source: str, total_steps: int) -> list[str]:
    """An evaluation during training needs held-out tasks: a file, a bundled set's split, or the training tasks
    asked for by name; and its OOD benchmarks must be known."""
    out = []
    if e.every and not e.heldout and source != "bundled" and e.split not in ("train", ""):
        out.append(f"--config.eval.heldout is empty: config.eval.every={e.every} evaluates held-out tasks, and a "
                   f"tasks.source={source!r} has no held-out split of its own (give the held-out task JSONL, or "
                   f"--config.eval.split=train to evaluate on the training tasks by name)")
    if e.every > total_steps:
        out.append(f"--config.eval.every={e.every}: more than total_steps={total_steps}, so only step 0 and the last "
                   f"would be evaluated")
    try:
        ood_lib.parse_specs(e.ood)
    except ValueError as err:
        out.append(f"--config.eval.ood={e.ood!r}: {err}")
    return out


def _embedder_problems(m) -> list[str]:
    name = m.embedder_name()
    if name is None:
        return []
    used = model_name(name)
    if used.lower() == str(m.calibrated_for).lower():
        return []
    return [f"--config.memory.min_cosine={m.min_cosine} was calibrated for {m.calibrated_for!r}, but the embedder is "
            f"{used!r}: cosine scales differ between embedders, so recalibrate the threshold for it and set "
            f"--config.memory.min_cosine and --config.memory.calibrated_for={used}, or point --config.memory.embedder "
            f"at {m.calibrated_for}"]


def needs(config, *, probe: Callable[[str], str | None] | None = None) -> list[str]:
    """What this machine lacks for the config: weights, files, servers, keys; each with the flag that points at
    it. `probe(url) -> why unreachable | None` checks a server (default: GET <url>/models, 3 s)."""
    probe = probe or _probe_openai
    out: list[str] = []
    if config.model_name not in build.MODELS:
        if config.model_name in RANDOM_PRESETS:  # random weights; only the bundled tokenizer is read
            try:
                weights_path(RANDOM_PRESETS[config.model_name])
            except FileNotFoundError as e:
                out.append(f"--config.model_name={config.model_name}: its tokenizer: {e}")
        elif config.model_name in PRESETS:
            try:
                weights_path(config.model_name)
            except FileNotFoundError as e:
                out.append(f"--config.model_name={config.model_name}: {e}")
        elif not os.path.exists(config.model_name):
            out.append(f"--config.model_name={config.model_name}: no such file or directory (a preset name, a "
                       f".gguf file or a local HF directory)")
    if config.tensorboard and not tensorboard_log.available():
        out.append(tensorboard_log.MISSING)
    # a section check() finds wrong is left out here: its problem is already listed
    s, _ = _typed_sections(config)
    tasks, h, m, j, e = (s.get(k) for k in ("tasks", "harness", "memory", "judge", "evolver_model"))
    if tasks is not None and tasks.source == "jsonl" and tasks.path and not os.path.isfile(tasks.path):
        out.append(f"--config.tasks.path={tasks.path}: no such file (a JSONL task file)")
    ev = s.get("eval")
    if ev is not None:
        for key in ("heldout", "validation"):
            if getattr(ev, key) and not os.path.isfile(getattr(ev, key)):
                out.append(f"--config.eval.{key}={getattr(ev, key)}: no such file (a JSONL task file)")
    if h is not None and h.cold_start and not os.path.isfile(h.cold_start):
        out.append(f"--config.harness.cold_start={h.cold_start}: no such file (launch/cold_start.py writes it)")
    name = m.embedder_name() if m is not None else None
    if name is not None:
        try:
            embedder_path(name)
        except (FileNotFoundError, ValueError) as err:
            out.append(f"--config.memory.embedder={m.embedder}: {err}")
    if j is None or e is None or h is None:
        return out
    if j.kind in ("openai", "sglang") and j.base_url:
        why = probe(j.base_url if j.kind == "openai" else j.base_url.rstrip("/") + "/v1")
        if why:
            out.append(f"--config.judge.base_url={j.base_url}: the judge server does not answer ({why})")
    if j.kind == "sglang" and not os.path.exists(j.tokenizer or j.model):
        out.append(f"--config.judge.tokenizer={j.tokenizer!r}: judge.kind='sglang' renders the prompts with the "
                   f"served model's chat template: give its directory or GGUF ({j.tokenizer or j.model!r} is no "
                   f"such path)")
    if j.kind == "anthropic":
        env = j.api_key_env or "ANTHROPIC_API_KEY"
        if not os.environ.get(env):
            out.append(f"--config.judge.api_key_env: the environment variable {env} holding the Anthropic key is "
                       f"not set")
    elif j.kind == "openai" and j.api_key_env and ENV_NAME.fullmatch(j.api_key_env) and \
            not os.environ.get(j.api_key_env):
        out.append(f"--config.judge.api_key_env={j.api_key_env}: that environment variable (the judge server's key) "
                   f"is not set")
    if (h.proposer == "llm" or h.llm_check) and e.base_url and e.base_url != j.base_url:
        why = probe(e.base_url)
        if why:
            out.append(f"--config.evolver_model.base_url={e.base_url}: the evolver model's server does not answer "
                       f"({why})")
    return out


def _probe_openai(base_url: str) -> str | None:
    try:
        r = httpx.get(base_url.rstrip("/") + "/models", timeout=3.0)
        return None if r.status_code < 500 else f"HTTP {r.status_code}"
    except httpx.HTTPError as e:
        return f"{type(e).__name__}: {e}"


def validate(config, *, probe: Callable[[str], str | None] | None = None) -> None:
    """Raises ConfigError listing every problem of `check` and every missing piece of `needs`."""
    problems = check(config) + needs(config, probe=probe)
    if problems:
        raise ConfigError(problems)


__all__ = ["check", "needs", "validate"]
