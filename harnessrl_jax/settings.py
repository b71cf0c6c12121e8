"""The run's configuration as typed sections: one frozen dataclass per section of the ConfigDict, each field with its
default, unknown keys refused with the `--config.` key to fix.

    judge = settings.section(config, "judge")       # JudgeSection, checked
    c.judge = settings.as_dict(JudgeSection())        # how experiments/base.py builds its sections

A method's own section (config.ruscarl, config.sec, ...) is its settings dataclass, registered by its module
(harnessrl_jax.methods); `SECTIONS` holds the others. `load(spec)` reads a config file as --config=spec does.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import sys
import typing
from typing import Any

from harnessrl_jax.errors import ConfigError
from harnessrl_jax.evolver.attributor import AttributorConfig
from harnessrl_jax.evolver.critic import GUIDANCE_BAND, RUBRIC_BAND, SAMPLING_GATES, Bands
from harnessrl_jax.evolver.rule_proposer import ProposerConfig
from harnessrl_jax.memory.semantic import DEFAULT_EMBEDDER, MIN_COSINE
from harnessrl_jax.models import param_shapes
from harnessrl_jax.models.sharding import logical_param_specs
from harnessrl_jax.rl.lora import Lora, resolve as resolve_lora
from harnessrl_jax.rl.optim import OptimConfig
from harnessrl_jax.rl.step import LossConfig
from harnessrl_jax.words import INTERFACES, Interface

# The step's two open choices: the context the loss sees, the rubric the advantages use (methods.schemes).
LOSS_CONTEXTS = ("guided", "bare")
ADVANTAGE_RUBRICS = ("before", "after")
# What an environment variable's name looks like; an API key does not (mixed case and dashes, or far longer).
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


class Problems(ValueError):
    """Several problems of one section, each a message that starts with the field it is about."""

    def __init__(self, messages: list[str]):
        self.messages = list(messages)
        super().__init__("; ".join(self.messages))


def _one_of(name: str, value, allowed) -> None:
    if value not in allowed:
        raise ValueError(f"{name}={value!r}: expected one of {', '.join(map(str, allowed))}")


def _at_least(obj, low, *names) -> None:
    for name in names:
        if getattr(obj, name) < low:
            raise ValueError(f"{name}={getattr(obj, name)}: must be >= {low}")


def _env_name(value: str) -> None:
    # A key pasted where its variable's name belongs would be written to config.json (and is never echoed).
    if value and ENV_NAME.fullmatch(value) is None:
        raise ValueError("api_key_env: expected the NAME of an environment variable (e.g. JUDGE_API_KEY), got a "
                         "value that is not one; the key itself never goes in the config")


# ---------------------------------------------------------------------------------------------- the sections


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelSection:
    """config.model: how the policy computes (the model itself is config.model_name)."""

    compute_dtype: str = "float32"  # the matmuls' precision; master weights stay float32
    remat: bool = False  # recompute each layer in the backward pass
    # False: the llama layers unrolled, faster updates without remat at a compile time that grows with depth
    # (models/llama.py ModelConfig.scan_layers); keep True with remat.
    scan_layers: bool = True
    init_std: float = 0.02  # random-weight presets only
    # LoRA (rl/lora.py): r > 0 trains rank-r adapters on lora_targets, W' = W + (lora_alpha / r) A @ B, and only
    # they are checkpointed; the base stays frozen. 0: full fine-tuning. lora_alpha's default is PEFT's (8).
    lora_rank: int = 0
    lora_alpha: float = 8.0
    # comma-separated suffixes of params paths (`wq`, `full_attn/wq`); the default: attention and MLP matrices of
    # the llama family and Qwen3.5 (whose Gated DeltaNet projections are w_qkv, w_z, w_b, w_a, w_out)
    lora_targets: str = "wq,wk,wv,wo,w_gate,w_up,w_down"

    def __post_init__(self):
        _at_least(self, 0, "lora_rank")
        if self.lora_alpha <= 0:
            raise ValueError(f"lora_alpha={self.lora_alpha}: must be > 0")

    def overrides(self) -> dict[str, Any]:
        """The ModelConfig fields this section sets (how the model computes, not which model it is)."""
        return {"compute_dtype": self.compute_dtype, "remat": self.remat, "scan_layers": self.scan_layers}

    def lora(self, model_config) -> Lora | None:
        """The adapters this section asks for on `model_config`'s params (None: full fine-tuning); a target that
        names no weight matrix is a ConfigError listing the model's."""
        try:
            return resolve_lora(param_shapes(model_config), logical_param_specs(model_config), rank=self.lora_rank,
                                alpha=self.lora_alpha, targets=self.lora_targets)
        except ValueError as e:
            raise ConfigError([f"--config.model.{e}"]) from None


@dataclasses.dataclass(frozen=True, kw_only=True)
class TasksSection:
    """config.tasks: where the training tasks come from and how a step draws them."""

    source: str = "bundled"  # build.TASK_SOURCES: bundled | jsonl | toy | toy_harness
    name: str = "mini"  # bundled: the set (harnessrl_jax/data/<name>/)
    split: str = "train"
    path: str = ""  # jsonl: a task file (rubric.schema.load_tasks)
    letters: str = "q"  # toy: the letters asked for
    thresholds: tuple[int, ...] = (1, 3)  # toy: counts that earn a point
    # 'harness': i.i.d. draws from the harness's Cat(p_t) (every method, so methods differ only in their parts);
    # 'epoch': uniform without replacement per epoch (only where the sampling interface is frozen).
    sampler: str = "harness"
    domain: str = ""  # keep one domain's tasks
    subset: int = 0  # n > 0: a seeded random n of them (a short run then draws each several times)

    def __post_init__(self):
        _at_least(self, 0, "subset")
        if self.source == "jsonl" and not self.path:
            raise ValueError("path is empty: tasks.source='jsonl' needs a JSONL task file")


@dataclasses.dataclass(frozen=True, kw_only=True)
class MeshSection:
    """config.mesh: the device mesh; -1 takes what the other axes leave."""

    data: int = 1
    fsdp: int = -1
    tensor: int = 1
    num_devices: int = 0  # 0: every device; n: the first n


@dataclasses.dataclass(frozen=True, kw_only=True)
class HarnessSection:
    """config.harness: the harness, its evolver and HarnessRL's switches. Which interfaces move is the method's;
    the attributor observes every method, so failure shares are measured the same way for all."""

    # HarnessRL's ablation rows: every valid candidate accepted unmeasured; no time or semantic index (any method).
    no_critic: bool = False
    no_memory: bool = False
    only_guidance: bool = False
    only_rubric: bool = False
    only_sampling: bool = False
    # 'guided': the loss sees the prompt the rollout was sampled in; 'bare': the completion re-packed after the bare
    # prompt, so train/engine_gap measures the context shift between the two.
    loss_context: str = "guided"
    # 'before': advantages under the rubric the rollouts were graded with; 'after': regraded with the rubric the
    # critic accepted this step.
    advantages_rubric: str = "before"
    # Dataset reference responses describe the corpus only (paper sec. 5.1): nothing reads them unless this is on.
    use_dataset_reference: bool = False
    cold_start: str = ""  # a cold_start.json (bands, gammas, anchors, task-saturation threshold)
    guidance_band: tuple[float, float] = GUIDANCE_BAND  # the critic's bands, reward points
    rubric_band: tuple[float, float] = RUBRIC_BAND
    sampling_gate: str = "previous"  # critic condition (iv): 'previous' (paper) | 'current' | 'off'
    rounds: int = 3  # B
    # Rejects, unmeasured, a candidate that would undo an update accepted within this many of the task's last
    # draws; 0 leaves reversals to the proposer (which sees the update history) and the critic.
    reversal_filter: int = 0
    max_guidance_tokens: int = 256  # prompt budget for mounted fields (render.fit_fields shortens, else bare)
    # 'rule': thresholds, keywords, merges, reweights; 'llm': the evolver model writes guidance and rubric candidates,
    # and every other method's LLM component (SkillRL's teacher, EvoRubric's generator and meta-verifier, AMARIS's
    # analyst and reviser, CoCA's rewriter) uses it instead of its rule fallback.
    proposer: str = "rule"
    llm_check: bool = False  # the attributor's LLM hacking check on the evolver model
    attributor: AttributorConfig = AttributorConfig()
    rules: ProposerConfig = ProposerConfig()
    # Interface replacement: a published rule in place of HarnessRL's on one interface, the other two keep
    # HarnessRL's mechanism.
    sampling_rule: str = "harnessrl"  # 'harnessrl' | 'sec'
    guidance_rule: str = "harnessrl"  # 'harnessrl' | 'ruscarl'
    rubric_rule: str = "harnessrl"  # 'harnessrl' | 'evorubric'
    # False (the paper rows): the replaced interface runs its published rule as published; True (a labelled
    # variant): the critic measures the rule's harness actions (only EvoRubric's rubric updates are actions).
    gate_replaced_rule: bool = False

    def __post_init__(self):
        _one_of("loss_context", self.loss_context, LOSS_CONTEXTS)
        _one_of("advantages_rubric", self.advantages_rubric, ADVANTAGE_RUBRICS)
        _one_of("sampling_gate", self.sampling_gate, SAMPLING_GATES)
        _one_of("proposer", self.proposer, ("rule", "llm"))
        _one_of("sampling_rule", self.sampling_rule, ("harnessrl", "sec"))
        _one_of("guidance_rule", self.guidance_rule, ("harnessrl", "ruscarl"))
        _one_of("rubric_rule", self.rubric_rule, ("harnessrl", "evorubric"))
        _at_least(self, 1, "rounds")
        _at_least(self, 0, "reversal_filter", "max_guidance_tokens")
        if sum((self.only_guidance, self.only_rubric, self.only_sampling)) > 1:
            raise ValueError("only_*: at most one of only_guidance, only_rubric, only_sampling may be set")
        try:
            self.bands()
        except ValueError as e:
            raise ValueError(f"guidance_band / rubric_band: {e}") from None

    def bands(self) -> Bands:
        """The critic's acceptance bands of this section (a cold start's replace them)."""
        return Bands(tuple(self.guidance_band), tuple(self.rubric_band))

    def interfaces(self) -> tuple[Interface, ...]:
        """The interfaces HarnessRL's evolver may update under the only_* switches (all three by default)."""
        only = [i for i, on in ((Interface.GUIDANCE, self.only_guidance), (Interface.RUBRIC, self.only_rubric),
                                (Interface.SAMPLING, self.only_sampling)) if on]
        return tuple(only) or INTERFACES


@dataclasses.dataclass(frozen=True, kw_only=True)
class MemorySection:
    """config.memory: the record store (time index) and the semantic index over criterion texts. `min_cosine` is the
    donor threshold and the rule proposer's near-duplicate threshold; it is calibrated per embedder
    (`calibrated_for`: the paper's 0.82 is bge-base-en-v1.5's; 0.82 for the bundled all-MiniLM-L6-v2 was set on this
    project's paraphrase / near-miss pairs)."""

    embedder: str = "default"  # 'default' (the bundled MiniLM), a local path, or '' (the record store only)
    min_cosine: float = MIN_COSINE
    calibrated_for: str = DEFAULT_EMBEDDER
    top_k: int = 4  # donors per query
    examples: int = 2  # responses per donor

    def __post_init__(self):
        if not -1.0 <= self.min_cosine <= 1.0:
            raise ValueError(f"min_cosine={self.min_cosine}: must be in [-1, 1]")
        _at_least(self, 1, "top_k")
        _at_least(self, 0, "examples")

    def embedder_name(self) -> str | None:
        """The semantic index's embedder (the bundled name or a local path), or None for the record store only."""
        if not self.embedder:
            return None
        return DEFAULT_EMBEDDER if self.embedder == "default" else self.embedder


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvolverModelSection:
    """config.evolver_model: the evolver's model (harness.proposer='llm', harness.llm_check), an OpenAI-compatible
    server; empty fields take config.judge's. A failed call is asked again after outage_pause_s seconds, up to
    outage_retries times; a model still down stops the run with a checkpoint (harnessrl_jax.failures)."""

    base_url: str = ""
    model: str = ""
    api_key_env: str = ""  # the NAME of the environment variable holding the key (config.json records it)
    structured_output: str = ""
    max_tokens: int = 1024
    outage_pause_s: float = 30.0
    outage_retries: int = 3

    def __post_init__(self):
        _env_name(self.api_key_env)
        _at_least(self, 0, "outage_pause_s", "outage_retries")
        _at_least(self, 1, "max_tokens")


JUDGE_KINDS = ("rule", "openai", "sglang", "anthropic")


@dataclasses.dataclass(frozen=True, kw_only=True)
class JudgeSection:
    """config.judge. Criteria tagged verifier:rule always go to the rule checkers; the others go to `kind`: 'rule'
    (no LLM judge: they are dropped from the training rubric at start-up), 'openai' (an OpenAI-compatible server at
    base_url: SGLang, vLLM, llama.cpp; several servers of one model comma-separated), 'sglang' (SGLang's native
    /generate at base_url, the server's root: `batch_size` prompts a request, rendered with the chat template of
    `tokenizer`, the served model's directory or GGUF, default `model`) or 'anthropic'. Outages: a
    batch of LLM-judged cells with more than max_failed_fraction of them unanswered is asked again after
    outage_pause_s, up to outage_retries times; a judge still down stops the run with a checkpoint. max_retries,
    timeout_s and max_concurrency are the HTTP client's own (retries of one request, its read timeout, calls in
    flight at once)."""

    kind: str = "rule"
    base_url: str = ""
    model: str = ""
    api_key_env: str = ""  # the NAME of the environment variable holding the key, never the key
    structured_output: str = ""
    tokenizer: str = ""
    batch_size: int = 256
    max_retries: int = 3
    timeout_s: float = 60.0
    max_concurrency: int = 8
    max_failed_fraction: float = 0.02
    outage_pause_s: float = 30.0
    outage_retries: int = 3

    def __post_init__(self):
        _one_of("kind", self.kind, JUDGE_KINDS)
        _env_name(self.api_key_env)
        _at_least(self, 0, "max_retries", "outage_pause_s", "outage_retries")
        _at_least(self, 1, "max_concurrency", "batch_size")
        if not self.timeout_s > 0:
            raise ValueError(f"timeout_s={self.timeout_s}: must be > 0")
        if not 0.0 <= self.max_failed_fraction < 1.0:
            raise ValueError(f"max_failed_fraction={self.max_failed_fraction}: must be in [0, 1)")
        missing = []
        if self.kind == "openai" and not self.base_url:
            missing.append("base_url is empty: judge.kind='openai' needs the server's OpenAI-compatible URL "
                           "(http://HOST:PORT/v1)")
        if self.kind == "sglang" and not self.base_url:
            missing.append("base_url is empty: judge.kind='sglang' needs the SGLang server's root (http://HOST:PORT)")
        if self.kind in ("openai", "sglang", "anthropic") and not self.model:
            missing.append(f"model is empty: the model name the judge ({self.kind}) asks for")
        if missing:
            raise Problems(missing)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RolloutSection:
    """config.rollout: 'jax' (in-process, the CPU default) or 'sglang' (SGLang servers over their native API). For
    'sglang': base_urls (server roots, comma-separated), weights_dir (where each weight version is written for
    /update_weights_from_disk: a path every server can read), export_dtype, chunk_rows and timeout_s. For 'jax':
    min_batch, the fewest prompts a call is padded to (batch buckets are powers of two from it)."""

    engine: str = "jax"
    base_urls: str = ""
    weights_dir: str = ""
    export_dtype: str = "bfloat16"
    chunk_rows: int = 64
    timeout_s: float = 3600.0
    min_batch: int = 1

    def __post_init__(self):
        _one_of("engine", self.engine, ("jax", "sglang"))
        if not isinstance(self.min_batch, int) or isinstance(self.min_batch, bool) or self.min_batch < 1:
            raise ValueError(f"min_batch={self.min_batch!r}: the fewest prompts an engine call is padded to must be "
                             f"an integer >= 1")
        _at_least(self, 1, "chunk_rows")
        if self.engine == "sglang":
            missing = [m for m, ok in (
                ("base_urls is empty: rollout.engine='sglang' needs the policy servers' roots (http://HOST:PORT, "
                 "comma-separated)", self.base_urls),
                ("weights_dir is empty: where each weight version is written for the servers to load (a path they "
                 "can all read)", self.weights_dir)) if not ok]
            if missing:
                raise Problems(missing)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CheckpointSection:
    """config.checkpoint: how often and how many; min_free_mb is the free space the workdir's file system must have
    at start-up (checkpoints, memory, logs)."""

    every: int = 50
    max_to_keep: int = 3
    async_save: bool = True
    min_free_mb: float = 1024.0

    def __post_init__(self):
        _at_least(self, 1, "every", "max_to_keep")
        _at_least(self, 0, "min_free_mb")


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvalSection:
    """config.eval: evaluation of the policy during training (launch/train.py, eval.cadence), at step 0, every
    `every` steps (the papers' 25; 0: none during training) and at the last step, into <workdir>/evals.jsonl.

    The tasks: `heldout` (a task JSONL file), else split `split` of a bundled set ('train': the training tasks,
    asked for by name). The best step is chosen on a validation split disjoint from the reported (test) tasks:
    `validation` (a task JSONL file), else `validation_share` of each domain's held-out tasks (a fixed, seed-free
    choice by task id). `num_samples` responses per task (0: config.num_generations), sampling seed `seed`, bare
    prompts of at most `max_prompt_len` tokens (0: config.max_prompt_len; a task over it is counted per domain in
    `over_budget`, never silently dropped); `ood` (NAME=PATH,...: eval.ood's benchmarks) at each evaluated step,
    for the paper's own pick (the best OOD checkpoint), `ood_samples` and `ood_max_new_tokens` (0: the in-domain
    ones)."""

    every: int = 0
    split: str = "heldout"
    heldout: str = ""
    validation: str = ""
    validation_share: float = 0.2
    num_samples: int = 0
    seed: int = 10_000
    max_prompt_len: int = 0
    ood: str = ""
    ood_samples: int = 0
    ood_max_new_tokens: int = 0

    def __post_init__(self):
        _at_least(self, 0, "every", "num_samples", "max_prompt_len", "ood_samples", "ood_max_new_tokens")
        if not 0.0 < self.validation_share < 1.0:
            raise ValueError(f"validation_share={self.validation_share}: the share of each domain's held-out tasks "
                             f"kept for choosing the best step must be in (0, 1)")


# config key -> the dataclass of that section (a method's own section is registered by its module)
SECTIONS: dict[str, type] = {
    "model": ModelSection, "tasks": TasksSection, "loss": LossConfig, "optim": OptimConfig, "mesh": MeshSection,
    "harness": HarnessSection, "memory": MemorySection, "evolver_model": EvolverModelSection,
    "judge": JudgeSection, "rollout": RolloutSection, "checkpoint": CheckpointSection, "eval": EvalSection}


# ------------------------------------------------------------------------------------------------- building


def typed(cls, values, key: str):
    """cls(**values) for a config section (nested dataclass fields from nested dicts); an unknown key or a bad value
    raises ConfigError naming `--config.<key>...`."""
    values = dict(values or {})
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ConfigError([f"--config.{key}.{k}: unknown setting (known: {', '.join(sorted(fields))})"
                           for k in unknown])
    hints = typing.get_type_hints(cls)
    for k, v in values.items():
        if dataclasses.is_dataclass(hints.get(k)) and not dataclasses.is_dataclass(v):
            values[k] = typed(hints[k], v, f"{key}.{k}")
        elif isinstance(v, list):  # ConfigDict turns tuples into lists on the command line
            values[k] = tuple(v)
    try:
        return cls(**values)
    except Problems as e:
        raise ConfigError([_named(key, m, fields) for m in e.messages]) from None
    except (TypeError, ValueError) as e:
        raise ConfigError([_named(key, str(e), fields)]) from None


def _named(key: str, message: str, fields) -> str:
    """'--config.<key>.<field>...' when the message starts with one of the section's fields, else '--config.<key>:'."""
    head = re.match(r"[A-Za-z_*]+", message)
    name = head.group(0) if head else ""
    if name in fields or (name.endswith("*") and any(f.startswith(name[:-1]) for f in fields)):
        return f"--config.{key}.{message}"
    return f"--config.{key}: {message}"


def section(config, key: str, cls: type | None = None):
    """config.<key> as its typed section (SECTIONS, or `cls` for a method's own); a config without the section gets
    the defaults."""
    cls = cls or SECTIONS[key]
    return typed(cls, config.get(key) or {}, key)


def as_dict(obj) -> dict[str, Any]:
    """A section as the plain dict a ConfigDict holds (nested sections as dicts)."""
    return dataclasses.asdict(obj)


def load(spec: str):
    """The ConfigDict of `path[:arg]`, as --config=path[:arg] gives it (for tests, notebooks and scripts). The
    config's directory's parent goes on sys.path, so `from experiments import base` resolves."""
    path, _, arg = spec.partition(":")
    root = os.path.dirname(os.path.dirname(os.path.abspath(path)))
    if root not in sys.path:
        sys.path.insert(0, root)
    module_spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
    if module_spec is None or not os.path.isfile(path):
        raise ConfigError([f"--config={spec}: no such config file"])
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.get_config(arg) if arg else module.get_config()


__all__ = ["ADVANTAGE_RUBRICS", "CheckpointSection", "LOSS_CONTEXTS", "ENV_NAME", "EvalSection", "EvolverModelSection",
           "HarnessSection", "JUDGE_KINDS", "JudgeSection", "MemorySection", "MeshSection", "ModelSection",
           "RolloutSection", "SECTIONS", "TasksSection", "as_dict", "load", "section", "typed"]
