"""One comparison's arms and records, for launch/compare.py: the paper's arms, the keys every arm shares (LOCKED),
an arm's overrides, what compare.json keeps of each run, and compare.json itself.

    name, overrides = parse_arm("no_critic=method=harnessrl,harness.no_critic=true")
    config = apply_overrides(base_config, overrides); check_locked(base_config, configs, arms, unlocked=())
    record = run_record(workdir)                       a trained, evaluated run: per evaluated step its scores, hours
    table = compare_table({arm: {seed: record}}, reference, configs, arms, base_config)
"""

from __future__ import annotations

import copy
import os
from typing import Any, Mapping, Sequence

import numpy as np

from harnessrl_jax import methods
from harnessrl_jax.eval import arm_tables, cadence, tables
from harnessrl_jax.eval.stats import macro_mean

# The paper's arms: the main table's methods, SEC alone (a supplementary row: the paper uses it only as a sampling
# rule), the ablation rows and the interface replacements.
PAPER_ARMS = {
    "grpo": "method=grpo", "ruscarl": "method=ruscarl", "skillrl": "method=skillrl", "evorubric": "method=evorubric",
    "amaris": "method=amaris", "amaris_pp": "method=amaris_pp", "sec": "method=sec", "harnessrl": "method=harnessrl",
    "harnessrl_no_critic": "method=harnessrl,harness.no_critic=true",
    "harnessrl_no_critic_no_memory": "method=harnessrl,harness.no_critic=true,harness.no_memory=true",
    "harnessrl_g": "method=harnessrl,harness.only_guidance=true",
    "harnessrl_c": "method=harnessrl,harness.only_rubric=true",
    "harnessrl_sec_sampling": "method=harnessrl,harness.sampling_rule=sec",
    "harnessrl_ruscarl_guidance": "method=harnessrl,harness.guidance_rule=ruscarl",
    "harnessrl_evorubric_rubric": "method=harnessrl,harness.rubric_rule=evorubric",
}
# Labelled variants of paper rows, by name only (not in --preset=paper): RuscaRL's off-context update with the
# truncated importance correction, and the EvoRubric replacement with the critic measuring its updates.
VARIANT_ARMS = {
    "ruscarl_tis": "method=ruscarl,ruscarl.tis_cap=2.0",
    "harnessrl_evorubric_rubric_gated": "method=harnessrl,harness.rubric_rule=evorubric,harness.gate_replaced_rule=true",
}
# What every arm shares: the budget, the sampling settings and seeds, the policy, the tasks, the judge and the
# evaluation; a key ending in '.*' locks its whole section. An arm may change one only when --unlock names it.
LOCKED = ("model_name", "total_steps", "tasks_per_step", "num_generations", "max_new_tokens", "max_prompt_len",
          "seed", "temperature", "top_p", "top_k", "mini_batches", "optim.lr", "optim.total_steps", "tasks.*",
          "judge.*", "eval.*")


def is_locked(key: str) -> bool:
    return any(key == k or (k.endswith(".*") and key.startswith(k[:-1])) for k in LOCKED)


def locked_values(config) -> dict[str, Any]:
    """The config's values of every locked key (dotted)."""
    out: dict[str, Any] = {}

    def walk(node, prefix):
        for k, v in node.items():
            key = f"{prefix}{k}"
            if isinstance(v, dict):
                walk(v, f"{key}.")
            elif is_locked(key):
                out[key] = v
    walk(config.to_dict(), "")
    return out


def check_locked(base_config, configs: dict, arms: dict[str, dict[str, str]], unlocked: Sequence[str]) -> None:
    """Every arm's locked values equal the base's but for keys its own overrides set and --unlock names: an arm
    whose method defaults move a locked key, or that overrides one unnamed, is an error naming arm, key and values."""
    names = list(configs)
    base = locked_values(base_config)
    problems = []
    for name in names:
        for key, value in locked_values(configs[name]).items():
            if value != base.get(key) and not (key in arms[name] and key in unlocked):
                problems.append(f"arm {name!r} has {key}={value!r}, the base config {base.get(key)!r}")
    if problems:
        raise ValueError("every arm shares the budget, sampling, tasks, judge and evaluation (eval.comparison."
                         "LOCKED); an arm that exists to change one names it in --unlock=KEY: " + "; ".join(problems))


def parse_arm(spec: str, unlocked: Sequence[str] = ()) -> tuple[str, dict[str, str]]:
    """'NAME' or 'NAME=KEY=VALUE,...' -> (name, {key: value}); a bare NAME is a preset arm or a method. A locked
    key (LOCKED) may be overridden only when `unlocked` names it."""
    name, _, rest = spec.partition("=")
    name = name.strip()
    if not name:
        raise ValueError(f"--arm={spec!r}: no arm name")
    if not rest:
        rest = {**PAPER_ARMS, **VARIANT_ARMS}.get(name) or (f"method={name}" if name in methods.METHODS else "")
        if not rest:
            raise ValueError(f"--arm={spec!r}: {name!r} is neither a method ({sorted(methods.METHODS)}) nor a "
                             f"preset or variant arm ({sorted(PAPER_ARMS) + sorted(VARIANT_ARMS)}); give its "
                             f"overrides as NAME=KEY=VALUE,...")
    overrides = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = part.partition("=")
        if not eq:
            raise ValueError(f"--arm={spec!r}: {part!r} is not KEY=VALUE")
        if is_locked(key.strip()) and key.strip() not in unlocked:
            raise ValueError(f"--arm={spec!r}: {key!r} is shared by every arm (the budget, sampling, tasks, judge and "
                             f"evaluation: eval.comparison.LOCKED); set it on --base_config, or name it in "
                             f"--unlock when the arm exists to change it")
        overrides[key.strip()] = value.strip()
    return name, overrides


def apply_overrides(config, overrides: dict[str, str]):
    """A copy of `config` with the overrides set, each value of the type the config holds there."""
    config = copy.deepcopy(config)  # keeps field references (optim.total_steps -> total_steps)
    with config.unlocked():
        for key, value in overrides.items():
            *path, last = key.split(".")
            node = config
            for p in path:
                node = node[p]
            if last not in node:
                raise ValueError(f"arm override {key}={value}: the base config has no {key!r}")
            old = node[last]
            if isinstance(old, bool):
                if value.lower() not in ("true", "false", "1", "0"):
                    raise ValueError(f"arm override {key}={value}: expected true or false")
                node[last] = value.lower() in ("true", "1")
            elif isinstance(old, (int, float)) and not isinstance(old, bool):
                node[last] = type(old)(value)
            else:
                node[last] = value
    if "method" in overrides and "advantage" not in overrides:  # what its paper fixes beyond its parts
        methods.apply_defaults(config)
    return config


SCORES_FILE = "compare_scores.json"


def run_record(workdir: str) -> dict[str, Any]:
    """What compare.json keeps of a run: per evaluated step the test scores, the validation and OOD macro scores
    and the training hours; the test tasks and the over-budget counts."""
    evals = cadence.read_evals(workdir)
    if not evals:
        raise ValueError(f"{workdir} has no {cadence.EVALS_FILE}: the run was not evaluated")
    hours = arm_tables.cumulative_hours(tables.read_jsonl(os.path.join(workdir, "metrics.jsonl")))
    first = evals[min(evals)]["test"]
    return {"test": {str(k): {q: [None if not np.isfinite(x) else float(x) for x in v["test"][q]]
                              for q in ("seed_rubric", "oracle")} for k, v in evals.items()},
            "validation": {str(k): v["validation"]["macro"]["seed_rubric"] for k, v in evals.items()},
            "ood": {str(k): v["ood"]["aggregate"] for k, v in evals.items() if "ood" in v},
            "hours": {str(k): hours.get(k) for k in evals},
            "task_ids": first["task_ids"], "domains": first["domains"],
            "validation_tasks": len(evals[min(evals)]["validation"]["task_ids"]),
            "over_budget": {split: evals[min(evals)][split]["over_budget"] for split in cadence.SPLITS}}


def record_macro(record: dict, step: str | None = None) -> float:
    step = step or max(record["test"], key=int)
    return macro_mean(np.array(record["test"][step]["seed_rubric"], np.float64), np.asarray(record["domains"]))


def compare_table(records: Mapping[str, Mapping[str, Mapping]], reference: str, configs: Mapping,
                  arms: Mapping[str, Mapping[str, str]], base_config, *, unlocked: Sequence[str] = (),
                  equal_compute_hours: float = 0.0, n_boot: int = 10_000, n_perm: int = 10_000) -> dict[str, Any]:
    """compare.json (launch/compare.py's docstring) from the runs' records ({arm: {seed: run_record}}): the test
    scores, validation and OOD scores and hours per evaluated step, the steps each pick reads (the equal-compute
    budget: `equal_compute_hours`, else the reference arm's mean hours to its best step), the arms and the locked
    values, and arm_tables.arm_stats."""
    names = list(records)
    ids = {tuple(r["task_ids"]) for rs in records.values() for r in rs.values()}
    if len(ids) != 1:
        raise ValueError("the runs were evaluated on different test tasks: one comparison needs one task set "
                         "(were some runs made with other --heldout or --validation settings?)")
    first = next(iter(records[names[0]].values()))
    table: dict[str, Any] = {"tasks": {"ids": first["task_ids"], "domains": first["domains"]},
                             "validation_tasks": first["validation_tasks"], "over_budget": first["over_budget"]}
    for key, field in (("per_step", "test"), ("validation", "validation"), ("ood", "ood"), ("hours", "hours")):
        table[key] = {m: {s: r[field] for s, r in records[m].items()} for m in names}
    no_budget = {m: {s: arm_tables.choose_steps(r["validation"], r["ood"], r["hours"], None)
                     for s, r in records[m].items()} for m in names}
    budget = equal_compute_hours or float(np.mean(
        [records[reference][s]["hours"][str(p["best"])] for s, p in no_budget[reference].items()]))
    table["equal_compute_hours"] = budget
    table["picks"] = {m: {s: arm_tables.choose_steps(r["validation"], r["ood"], r["hours"], budget)
                          for s, r in records[m].items()} for m in names}
    table["steps_to_best"] = {m: {s: p["best"] for s, p in table["picks"][m].items()} for m in names}
    table["hours_to_best"] = {m: {s: records[m][s]["hours"][str(p["best"])] for s, p in table["picks"][m].items()}
                              for m in names}
    table["arms"] = {m: {"method": configs[m].method, "overrides": arms[m],
                         "unlocked": sorted(k for k in arms[m] if k in unlocked),
                         "rule_fallback": arm_tables.rule_fallback(configs[m])} for m in names}
    table["locked"] = locked_values(base_config)
    table["reference"] = reference
    table["stats"] = arm_tables.arm_stats(table, reference=reference, n_boot=n_boot, n_perm=n_perm)
    table["config"] = base_config.to_dict()
    return table


__all__ = ["LOCKED", "PAPER_ARMS", "SCORES_FILE", "VARIANT_ARMS", "apply_overrides", "check_locked", "compare_table",
           "is_locked", "locked_values", "parse_arm", "record_macro", "run_record"]
