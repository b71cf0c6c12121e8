"""The run's configuration checked once, before any model loads, and turned into the parts it names.

    problems = check(config)        # values the config gets wrong, each naming the --config. key to fix
    missing = needs(config)         # what the machine lacks for it (model, task file, servers), with the flag
    validate(config)                # raises ConfigError listing both; launch scripts print it in a few lines

Every threshold a part uses comes from the config through the builders here (`attributor_config`,
`proposer_config`, `evolver_config`, `bands`, ...), so the run's config.json says everything that decided the run.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Callable

from harnessrl_jax.words import INTERFACES, Interface

JUDGE_KINDS = ("rule", "openai", "anthropic")
# What an environment variable's name looks like; an API key does not (mixed case and dashes, or far longer).
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


class ConfigError(ValueError):
    """A config that cannot run; `problems` lists each problem, naming the key or flag that fixes it."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("the config cannot run:\n" + "\n".join(f"  - {p}" for p in self.problems))


def load(spec: str):
    """The ConfigDict of `path[:arg]`, as --config=path[:arg] gives it (for tests, notebooks and scripts). The
    config's directory's parent goes on sys.path, so `from experiments import base` resolves."""
    import importlib.util
    import sys

    path, _, arg = spec.partition(":")
    root = os.path.dirname(os.path.dirname(os.path.abspath(path)))
    if root not in sys.path:
        sys.path.insert(0, root)
    module_spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
    if module_spec is None:
        raise ConfigError([f"--config={spec}: no such config file"])
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.get_config(arg) if arg else module.get_config()


# ----------------------------------------------------------------------------------------------- builders

def _build(cls, values, key: str):
    """cls(**values) for a config sub-dict; bad keys or values raise ConfigError naming `--config.<key>`."""
    values = dict(values)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError([f"--config.{key}.{k}: unknown setting (known: {', '.join(sorted(known))})"
                           for k in unknown])
    for k, v in values.items():  # ConfigDict turns tuples into lists on the command line
        if isinstance(v, list):
            values[k] = tuple(v)
    try:
        return cls(**values)
    except (TypeError, ValueError) as e:
        raise ConfigError([f"--config.{key}: {e}"]) from None


def attributor_config(config, cold=None):
    """evolver.AttributorConfig of config.harness.attributor (a cold start's task-saturation threshold wins)."""
    from harnessrl_jax.evolver import AttributorConfig

    values = dict(config.harness.attributor)
    if cold is not None:
        values["task_mass_threshold"] = cold.task_mass_threshold
    return _build(AttributorConfig, values, "harness.attributor")


def proposer_config(config):
    """evolver.ProposerConfig of config.harness.rules."""
    from harnessrl_jax.evolver import ProposerConfig

    return _build(ProposerConfig, config.harness.rules, "harness.rules")


def interfaces(config) -> tuple[Interface, ...]:
    """The interfaces HarnessRL's evolver may update under config.harness's only_* switches."""
    h = config.harness
    only = [i for i, on in ((Interface.GUIDANCE, h.only_guidance), (Interface.RUBRIC, h.only_rubric),
                            (Interface.SAMPLING, h.get("only_sampling", False))) if on]
    if len(only) > 1:
        raise ConfigError([f"--config.harness.only_*: at most one of only_guidance, only_rubric, only_sampling may "
                           f"be set, got {[str(i) for i in only]}"])
    return tuple(only) or INTERFACES


def bands(config, cold=None):
    """The critic's acceptance bands: the cold start's when there is one, else config.harness's."""
    from harnessrl_jax.evolver import Bands

    if cold is not None:
        return cold.to_bands()
    try:
        return Bands(tuple(config.harness.guidance_band), tuple(config.harness.rubric_band))
    except ValueError as e:
        raise ConfigError([f"--config.harness.guidance_band / rubric_band: {e}"]) from None


def evolver_config(config, interfaces_: tuple[Interface, ...]):
    """evolver.EvolverConfig: B, the interfaces, retrieval settings (config.memory) and the reversal filter."""
    from harnessrl_jax.evolver import EvolverConfig

    m, h = config.memory, config.harness
    return EvolverConfig(rounds=int(h.rounds), interfaces=interfaces_, donors_k=int(m.top_k),
                         min_cosine=float(m.min_cosine), donor_examples=int(m.examples),
                         reversal_within=int(h.reversal_filter))


def method_config(config, name: str):
    """The settings dataclass of a method's part from config.<name> (ruscarl, sec, skillrl, evorubric, amaris, coca);
    a config without the sub-dict gets the dataclass's defaults."""
    from harnessrl_jax.methods.amaris import AMARISConfig
    from harnessrl_jax.methods.coca import CoCAConfig
    from harnessrl_jax.methods.evorubric import EvoRubricConfig
    from harnessrl_jax.methods.harnessbandit import BanditConfig
    from harnessrl_jax.methods.mixture import MixtureConfig
    from harnessrl_jax.methods.ruscarl import RuscaRLConfig
    from harnessrl_jax.methods.sec import SECConfig
    from harnessrl_jax.methods.skillrl import SkillRLConfig

    cls = {"ruscarl": RuscaRLConfig, "sec": SECConfig, "skillrl": SkillRLConfig, "evorubric": EvoRubricConfig,
           "amaris": AMARISConfig, "coca": CoCAConfig, "bandit": BanditConfig, "mixture": MixtureConfig}[name]
    return _build(cls, config.get(name) or {}, name)


METHOD_CONFIGS = ("ruscarl", "sec", "skillrl", "evorubric", "amaris", "coca", "bandit", "mixture")


def embedder(config) -> str | None:
    """The semantic index's embedder (a bundled name or a local path), or None for the record store only."""
    name = config.memory.embedder
    if not name:
        return None
    from harnessrl_jax.memory import DEFAULT_EMBEDDER

    return DEFAULT_EMBEDDER if name == "default" else name


# ------------------------------------------------------------------------------------------------- checks

def _check(problems: list[str], ok: bool, message: str) -> None:
    if not ok:
        problems.append(message)


def _one_of(problems, value, allowed, key) -> None:
    _check(problems, value in allowed, f"--config.{key}={value!r}: expected one of {', '.join(map(str, allowed))}")


def check(config) -> list[str]:
    """Every value the config gets wrong, each as '--config.KEY...: what is wrong' (nothing is loaded)."""
    from harnessrl_jax import methods
    from harnessrl_jax.build import TASK_SOURCES
    from harnessrl_jax.rl import grpo

    p: list[str] = []
    _one_of(p, config.method, sorted(methods.METHODS), "method")
    _one_of(p, config.tasks.source, sorted(TASK_SOURCES), "tasks.source")
    if config.tasks.source == "jsonl":
        _check(p, bool(config.tasks.path), "--config.tasks.path is empty: point it at a JSONL task file")
    _one_of(p, config.tasks.sampler, sorted(methods.SAMPLERS), "tasks.sampler")
    _check(p, config.tasks.sampler != "bandit", "--config.tasks.sampler='bandit' is HarnessBandit's own sampler (it "
                                                "needs the arms and the gradient sketch): use --config.method="
                                                "harnessbandit")
    for key, low in (("total_steps", 1), ("tasks_per_step", 1), ("num_generations", 2), ("max_new_tokens", 1),
                     ("max_prompt_len", 1), ("micro_batches", 1), ("mini_batches", 1), ("train_seq_bucket", 0)):
        _check(p, int(config.get(key, low)) >= low, f"--config.{key}={config.get(key)}: must be >= {low}")
    _check(p, config.temperature > 0, f"--config.temperature={config.temperature}: must be > 0 (training samples)")
    _check(p, 0 < config.top_p <= 1, f"--config.top_p={config.top_p}: must be in (0, 1]")
    _one_of(p, config.advantage, sorted(grpo.ADVANTAGE_FNS), "advantage")
    _check(p, config.method not in ("harnessbandit", "mixture", "mixture2") or config.advantage == "rloo",
           f"--config.advantage={config.advantage!r}: {config.method} trains with Dr.GRPO's leave-one-out baseline "
           f"(methods.md 2.3): set --config.advantage=rloo (the `:method={config.method}` config argument sets it)")
    _one_of(p, config.loss.agg, ("token-mean", "sequence-mean-token-mean"), "loss.agg")
    _one_of(p, config.loss.get("name", "grpo"), sorted(grpo.LOSS_FNS), "loss.name")
    _check(p, int(config.checkpoint.every) >= 1, f"--config.checkpoint.every={config.checkpoint.every}: must be >= 1")

    h = config.harness
    _one_of(p, h.loss_context, ("guided", "bare"), "harness.loss_context")
    _one_of(p, h.advantages_rubric, ("before", "after"), "harness.advantages_rubric")
    _one_of(p, h.sampling_gate, ("previous", "current", "off"), "harness.sampling_gate")
    _one_of(p, h.proposer, ("rule", "llm"), "harness.proposer")
    _check(p, int(h.rounds) >= 1, f"--config.harness.rounds={h.rounds}: must be >= 1 (B)")
    _check(p, int(h.reversal_filter) >= 0, f"--config.harness.reversal_filter={h.reversal_filter}: must be >= 0")
    _check(p, int(h.max_guidance_tokens) >= 0,
           f"--config.harness.max_guidance_tokens={h.max_guidance_tokens}: must be >= 0")
    from harnessrl_jax.methods.harnessrl import GUIDANCE_RULES, RUBRIC_RULES, SAMPLING_RULES

    _one_of(p, h.get("sampling_rule", "harnessrl"), SAMPLING_RULES, "harness.sampling_rule")
    _one_of(p, h.get("guidance_rule", "harnessrl"), GUIDANCE_RULES, "harness.guidance_rule")
    _one_of(p, h.get("rubric_rule", "harnessrl"), RUBRIC_RULES, "harness.rubric_rule")
    builders = [lambda: interfaces(config), lambda: bands(config), lambda: attributor_config(config),
                lambda: proposer_config(config)]
    builders += [lambda name=name: method_config(config, name) for name in METHOD_CONFIGS]
    for build in builders:
        try:
            build()
        except ConfigError as e:
            p += e.problems
    if config.method in methods.METHODS and not p:
        try:
            method = methods.describe(config)
        except (ConfigError, ValueError) as e:
            p += e.problems if isinstance(e, ConfigError) else [str(e)]
        else:
            if method.sampler == "sec" and method_config(config, "sec").arms in ("seed_quintile", "domain_x_tercile"):
                from harnessrl_jax.methods.sec import seed_groups_path

                _check(p, bool(seed_groups_path(config)),
                       f"--config.sec.arms={method_config(config, 'sec').arms!r} needs the seed policy's rewards: set "
                       f"--config.harness.cold_start (launch/cold_start.py writes it and its seed groups) or "
                       f"--config.sec.seed_groups, or use --config.sec.arms=domain or task")

    try:
        groups = method_config(config, "coca").groups
    except ConfigError:  # reported by the builders above
        groups = None
    if config.method == "coca" and groups is not None:
        _check(p, sum(groups) == int(config.num_generations),
               f"--config.coca.groups={groups} splits the rollout budget --config.num_generations="
               f"{config.num_generations} per query into (G_N, G_G): their sum must equal it")
        _check(p, int(config.get("mini_batches", 1)) == 1,
               f"--config.mini_batches={config.get('mini_batches')}: CoCA's teacher targets are taken for one update "
               f"per batch (theta_old = the current params); use 1")
    if config.method in ("harnessbandit", "mixture", "mixture2") and not p:
        from harnessrl_jax.methods.arms import check_names
        from harnessrl_jax.methods.mixture import mixture_arms

        bandit = method_config(config, "bandit")
        key = "bandit.arms" if config.method == "harnessbandit" else \
            ("mixture.pair" if config.method == "mixture2" else "mixture.arms")
        names = bandit.arms if config.method == "harnessbandit" else mixture_arms(config, config.method)
        p += [f"--config.{key}: {e}" for e in check_names(names)]
        p += [f"--config.bandit.heldout_arm: {e}" for e in check_names([bandit.heldout_arm])]

    m = config.memory
    _check(p, -1.0 <= float(m.min_cosine) <= 1.0, f"--config.memory.min_cosine={m.min_cosine}: must be in [-1, 1]")
    _check(p, int(m.top_k) >= 1, f"--config.memory.top_k={m.top_k}: must be >= 1")
    name = embedder(config)
    if name is not None:
        from harnessrl_jax.memory.semantic import model_name

        used = model_name(name)
        _check(p, used.lower() == str(m.calibrated_for).lower(),
               f"--config.memory.min_cosine={m.min_cosine} was calibrated for {m.calibrated_for!r}, but the embedder "
               f"is {used!r}: cosine scales differ between embedders, so recalibrate the threshold for it and set "
               f"--config.memory.min_cosine and --config.memory.calibrated_for={used}, or point "
               f"--config.memory.embedder at {m.calibrated_for}")

    r = config.get("rollout")
    if r is not None:
        _one_of(p, r.engine, ("jax", "sglang"), "rollout.engine")
        _check(p, isinstance(r.get("min_batch", 1), int) and r.get("min_batch", 1) >= 1,
               f"--config.rollout.min_batch={r.get('min_batch')!r}: the fewest prompts an engine call is padded to "
               "must be an integer >= 1")
        if r.engine == "sglang":
            _check(p, bool(r.base_urls), "--config.rollout.base_urls is empty: rollout.engine='sglang' needs the "
                                         "policy servers' roots (http://HOST:PORT, comma-separated)")
            _check(p, bool(r.weights_dir), "--config.rollout.weights_dir is empty: where each weight version is "
                                           "written for the servers to load (a path they can all read)")

    j = config.judge
    _one_of(p, j.kind, JUDGE_KINDS, "judge.kind")
    if j.kind == "openai":
        _check(p, bool(j.base_url), "--config.judge.base_url is empty: judge.kind='openai' needs the server's "
                                    "OpenAI-compatible URL (http://HOST:PORT/v1)")
        _check(p, bool(j.model), "--config.judge.model is empty: the model name the judge server serves")
    if j.kind == "anthropic":
        _check(p, bool(j.model), "--config.judge.model is empty: the Anthropic model to judge with")
    _check(p, 0.0 <= float(j.get("max_failed_fraction", 0.0)) < 1.0,
           f"--config.judge.max_failed_fraction={j.get('max_failed_fraction')}: must be in [0, 1)")
    for key, low in (("max_retries", 0), ("max_concurrency", 1)):
        _check(p, int(j.get(key, low)) >= low, f"--config.judge.{key}={j.get(key)}: must be >= {low}")
    _check(p, float(j.get("timeout_s", 1.0)) > 0, f"--config.judge.timeout_s={j.get('timeout_s')}: must be > 0")
    for section in ("judge", "evolver_model"):
        s = config[section]
        _check(p, float(s.get("outage_pause_s", 0.0)) >= 0,
               f"--config.{section}.outage_pause_s={s.get('outage_pause_s')}: must be >= 0")
        _check(p, int(s.get("outage_retries", 0)) >= 0,
               f"--config.{section}.outage_retries={s.get('outage_retries')}: must be >= 0")
        env = str(s.get("api_key_env", "") or "")
        # A key pasted where its variable's name belongs would be written to config.json (and is never echoed).
        _check(p, not env or ENV_NAME.fullmatch(env) is not None,
               f"--config.{section}.api_key_env: expected the NAME of an environment variable (e.g. JUDGE_API_KEY), "
               f"got a value that is not one; the key itself never goes in the config")
    if h.proposer == "llm" or h.llm_check:
        url = config.evolver_model.base_url or (j.base_url if j.kind == "openai" else "")
        _check(p, bool(url) or (j.kind == "openai" and not j.base_url), "--config.evolver_model.base_url is empty: harness.proposer='llm' / llm_check need the "
                             "evolver model's OpenAI-compatible server (or an openai judge whose server it shares)")
    return p


def needs(config, *, probe: Callable[[str], str | None] | None = None) -> list[str]:
    """What this machine lacks for the config: weights, files, servers, keys; each with the flag that points at
    it. `probe(url) -> why unreachable | None` checks a server (default: GET <url>/models, 3 s)."""
    probe = probe or _probe_openai
    out: list[str] = []
    if config.model_name != "tiny":
        from harnessrl_jax.models import RANDOM_PRESETS
        from harnessrl_jax.models.presets import PRESETS, weights_path

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
    if config.tasks.source == "jsonl" and config.tasks.path and not os.path.isfile(config.tasks.path):
        out.append(f"--config.tasks.path={config.tasks.path}: no such file (a JSONL task file)")
    if config.get("sec") and config.sec.get("seed_groups") and not os.path.isfile(config.sec.seed_groups):
        out.append(f"--config.sec.seed_groups={config.sec.seed_groups}: no such file (launch/cold_start.py writes "
                   f"it next to cold_start.json)")
    if config.harness.cold_start and not os.path.isfile(config.harness.cold_start):
        out.append(f"--config.harness.cold_start={config.harness.cold_start}: no such file (launch/cold_start.py "
                   f"writes it)")
    name = embedder(config)
    if name is not None:
        from harnessrl_jax.memory.semantic import embedder_path

        try:
            embedder_path(name)
        except (FileNotFoundError, ValueError) as e:
            out.append(f"--config.memory.embedder={config.memory.embedder}: {e}")
    j = config.judge
    if j.kind == "openai" and j.base_url:
        why = probe(j.base_url)
        if why:
            out.append(f"--config.judge.base_url={j.base_url}: the judge server does not answer ({why})")
    if j.kind == "anthropic":
        env = j.api_key_env or "ANTHROPIC_API_KEY"
        if not os.environ.get(env):
            out.append(f"--config.judge.api_key_env: the environment variable {env} holding the Anthropic key is "
                       f"not set")
    elif j.kind == "openai" and j.api_key_env and ENV_NAME.fullmatch(j.api_key_env) and \
            not os.environ.get(j.api_key_env):
        out.append(f"--config.judge.api_key_env={j.api_key_env}: that environment variable (the judge server's key) "
                   f"is not set")
    if config.harness.proposer == "llm" or config.harness.llm_check:
        url = config.evolver_model.base_url
        if url and url != j.base_url:
            why = probe(url)
            if why:
                out.append(f"--config.evolver_model.base_url={url}: the evolver model's server does not answer "
                           f"({why})")
    return out


def _probe_openai(base_url: str) -> str | None:
    import httpx

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
