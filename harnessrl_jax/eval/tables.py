"""The paper's tables from run directories: one run's headline numbers, methods over seeds, and the compare table.

    stats = run_stats("runs/compare/harnessrl-s0")              from metrics.jsonl, harness.jsonl (and eval.json)
    rows = method_table({"grpo": [dirs...], "harnessrl": [dirs...]})   mean and range over seeds per statistic
    rows = compare_rows(json.load(open("runs/compare/compare.json")))  held-out scores with paired intervals
    print(markdown(rows))

The other artefacts: `ood_rows` (OOD per method over seeds), `process_stats` / `process_rows` (the training-process
figures), `case_study` (one task's harness history), `cost_rows` (time by stage, judge and oracle calls and tokens).
docs/design.md (Measurements) lists a run's statistics; metric names live in KEYS.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Mapping, Sequence

import numpy as np

from harnessrl_jax.eval import agreement
from harnessrl_jax.words import INTERFACES
from harnessrl_jax.memory import RecordStore

END_WINDOW = 25  # "at the end of training": the last 25 steps


# Every metrics.jsonl key these tables read, in one place (the training loop writes them; rename here if it does).
KEYS = {
    "reward": "reward/mean",
    "oracle_score": "oracle/score_mean",
    "agreement": "oracle/agreement",
    "zero_variance": "reward/zero_variance_fraction",
    "reversal_rate": "harness/reversal_rate",
    "guidance_fields": "guidance/fields_per_task",
    "tasks_with_fields": "guidance/tasks_with_fields",
    "reference_fields_added": "guidance/reference_fields_added",
    "reference_fields_from_donors": "guidance/reference_fields_from_donors",
    "downweighted_share": "sampling/downweighted_share",
    "acceptance_with_evidence": "critic/acceptance_with_evidence",
    "acceptance_without_evidence": "critic/acceptance_without_evidence",
    "judge_calls": "judge/calls",
    "judge_input_tokens": "judge/input_tokens",
    "judge_output_tokens": "judge/output_tokens",
    "step_time": "time/step",
    "evolver_time": "time/evolver",
}
STAGES = ("rollout", "judge", "evolver", "critic", "memory", "train")  # time/<stage> keys of the cost table


def read_jsonl(path: str) -> list[dict[str, Any]]:
    """The records of a JSONL file ([] when it does not exist)."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]

def _mean(rows: Sequence[Mapping[str, Any]], key: str) -> float:
    v = [float(r[key]) for r in rows if isinstance(r.get(key), (int, float)) and math.isfinite(r[key])]
    return float(np.mean(v)) if v else math.nan

def stats_from_records(metrics: Sequence[Mapping[str, Any]], records: Sequence[Mapping[str, Any]]
                       ) -> dict[str, float]:
    """A run's statistics (docs/design.md, Measurements) from its metrics.jsonl and harness.jsonl records."""
    if not metrics:
        return {"steps": 0.0}
    k = max(1, min(3, len(metrics) // 3))
    first, last = metrics[:k], metrics[-k:]
    measured = [r for r in records if r.get("verdict") in ("accepted", "rejected")]
    accepted = [r for r in measured if r["verdict"] == "accepted"]
    step_time = sum(float(m.get(KEYS["step_time"], 0.0)) for m in metrics)
    evolver_time = sum(float(m.get(KEYS["evolver_time"], 0.0)) for m in metrics)
    end = metrics[-1]
    out = {"steps": float(end["step"]), "k": float(k),
           "reward_first": _mean(first, KEYS["reward"]), "reward_last": _mean(last, KEYS["reward"]),
           "oracle_first": _mean(first, KEYS["oracle_score"]), "oracle_last": _mean(last, KEYS["oracle_score"]),
           **pair_stats(metrics[-END_WINDOW:]),
           "oracle_agreement_all": pair_stats(metrics)["oracle_agreement"],
           "zero_variance": _mean(metrics, KEYS["zero_variance"]),
           "measured": float(len(measured)), "accepted": float(len(accepted)),
           "acceptance_rate": len(accepted) / len(measured) if measured else math.nan,
           "reversal_rate": float(end.get(KEYS["reversal_rate"], math.nan)),
           "guidance_fields": float(end.get(KEYS["guidance_fields"], math.nan)),
           "downweighted_share": float(end.get(KEYS["downweighted_share"], math.nan)),
           "donor_share": donor_share(metrics),
           "evolver_share": evolver_time / step_time if step_time else math.nan,
           "step_seconds": step_time}
    for i in INTERFACES:
        out[f"accepted_{i}"] = float(sum(r.get("interface") == i for r in accepted))
    return out

def pair_stats(metrics: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """oracle_agreement and the pair-class shares over every rollout pair of these steps (their counts summed)."""
    counts = agreement.total_counts(
        {k.removeprefix("oracle/count/"): int(v) for k, v in m.items() if k.startswith("oracle/count/")}
        for m in metrics)
    shares = agreement.agreement_metrics(counts, prefix="")
    out = {"oracle_agreement": shares["agreement"], "oracle_agreement_separated": shares["agreement_separated"],
           "oracle_pairs": shares["pairs"]}
    out.update({k: v for k, v in shares.items() if k.startswith("pair_")})
    return out

def donor_share(metrics: Sequence[Mapping[str, Any]]) -> float:
    """Of the <reference> fields accepted over these steps, the share donor tasks supplied (the paper's 58%)."""
    n = sum(float(m.get(KEYS["reference_fields_from_donors"], 0.0)) for m in metrics)
    d = sum(float(m.get(KEYS["reference_fields_added"], 0.0)) for m in metrics)
    return n / d if d else math.nan

def run_stats(workdir: str) -> dict[str, float]:
    """The statistics of the run in `workdir`, with its held-out scores when it has an eval.json."""
    out = stats_from_records(read_jsonl(os.path.join(workdir, "metrics.jsonl")),
                             read_jsonl(os.path.join(workdir, "harness.jsonl")))
    path = os.path.join(workdir, "eval.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            ev = json.load(f)
        for key, name in (("heldout", "seed_rubric"), ("heldout_oracle", "oracle")):
            v = ev.get(name, {}).get("mean")
            out[key] = math.nan if v is None else float(v)
    return out

def method_table(runs: Mapping[str, Sequence[str]], keys: Sequence[str] = (
        "heldout", "heldout_oracle", "oracle_agreement", "reversal_rate", "acceptance_rate", "evolver_share",
        "reward_last")) -> list[dict[str, Any]]:
    """One row per statistic: per method the mean over its runs (seeds) and the [min, max] range."""
    per_method = {m: [run_stats(d) for d in dirs] for m, dirs in runs.items()}
    rows = []
    for key in keys:
        row: dict[str, Any] = {"statistic": key}
        for m, stats in per_method.items():
            v = np.array([s.get(key, math.nan) for s in stats], np.float64)
            v = v[np.isfinite(v)]
            row[m] = {"mean": float(v.mean()), "min": float(v.min()), "max": float(v.max()), "n": int(v.size)} \
                if v.size else None
        rows.append(row)
    return rows

def compare_rows(compare: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The held-out table of launch/compare.py's compare.json: per score, each method's mean and the paired
    difference with its 95% interval."""
    methods = list(compare["steps_to_best"])
    rows = []
    for key in ("final/seed_rubric", "final/oracle", "best/seed_rubric", "best/oracle"):
        r = compare[key]
        rows.append({"score": key, **{m: r[m] for m in methods},
                     "diff": r["diff"], "ci95": [r["ci_low"], r["ci_high"]]})
    rows.append({"score": "steps to best", **{m: compare["steps_to_best"][m] for m in methods}})
    return rows

def _cell(v: Any) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, dict) and "mean" in v:
        return f"{v['mean']:.3g} [{v['min']:.3g}, {v['max']:.3g}]"
    if isinstance(v, float):
        return "n/a" if not math.isfinite(v) else f"{v:.3g}"
    if isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, float) for x in v):
        return f"[{v[0]:.3g}, {v[1]:.3g}]"
    return str(v)

def markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """A Markdown table of dict rows (columns in the first row's order)."""
    if not rows:
        return ""
    cols = list(dict.fromkeys(c for r in rows for c in r))
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_cell(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines)

# ------------------------------------------------------------------------------------------- more paper artefacts


def runs_in(directory: str) -> dict[str, list[str]]:
    """The run directories of a compare-style directory (`<method>-s<seed>`), by method, sorted."""
    import re

    runs: dict[str, list[str]] = {}
    for name in sorted(os.listdir(directory)):
        m = re.fullmatch(r"(.+)-s(\d+)", name)
        if m and os.path.isdir(os.path.join(directory, name)):
            runs.setdefault(m.group(1), []).append(os.path.join(directory, name))
    return runs

def _eval(workdir: str) -> dict[str, Any]:
    path = os.path.join(workdir, "eval.json")
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)

def _spread(values: Sequence[float]) -> dict[str, Any] | None:
    v = np.array([x for x in values if x is not None and math.isfinite(x)], np.float64)
    return {"mean": float(v.mean()), "min": float(v.min()), "max": float(v.max()), "n": int(v.size)} if v.size \
        else None

OOD_ORDER = ("medqa", "gpqa", "writingbench", "rolebench", "ifbench")
OOD_SUBSCORES = {"ifbench": ("prompt_strict", "instruction_strict", "prompt_loose", "instruction_loose"),
                 "rolebench": ("CUS", "SPE", "RAW"), "medqa": ("unparsed_share",), "gpqa": ("unparsed_share",)}

def ood_rows(runs: Mapping[str, Sequence[str]]) -> list[dict[str, Any]]:
    """The OOD table: per benchmark (and sub-score) and the macro aggregate, each method's mean over its runs'
    eval.json `ood` blocks with the [min, max] range; benchmarks no run has are left out."""
    blocks = {m: [_eval(d).get("ood") or {} for d in dirs] for m, dirs in runs.items()}
    rows = []
    for bench in OOD_ORDER:
        if not any(bench in b for bs in blocks.values() for b in bs):
            continue
        for sub in ("score",) + OOD_SUBSCORES.get(bench, ()):
            if sub != "score" and not any(sub in (b.get(bench) or {}) for bs in blocks.values() for b in bs):
                continue
            row: dict[str, Any] = {"benchmark": bench if sub == "score" else f"  {bench} {sub}"}
            for m, bs in blocks.items():
                row[m] = _spread([(b.get(bench) or {}).get(sub) for b in bs])
            rows.append(row)
    rows.append({"benchmark": "OOD aggregate (macro)",
                 **{m: _spread([b.get("aggregate") for b in bs]) for m, bs in blocks.items()}})
    return rows

def process_stats(workdir: str, *, window: int = 100, unguided_step: int | None = None) -> dict[str, Any]:
    """A run's training-process statistics (the paper's process figures) from metrics.jsonl and harness.jsonl:
    guidance_peak and guidance_peak_step (the largest mean number of guidance fields per task), unguided_share
    (tasks with no field, at `unguided_step` or the last step), rubric_updates per `window` steps (accepted rubric
    actions; creates counted apart), downweighted_share (last step), acceptance_with_evidence /
    acceptance_without_evidence (accepted over measured candidates, by whether they cited evidence),
    donor_share (mean over steps, when logged) and reversal_rate (last step)."""
    metrics = read_jsonl(os.path.join(workdir, "metrics.jsonl"))
    records = read_jsonl(os.path.join(workdir, "harness.jsonl"))
    out: dict[str, Any] = {"steps": len(metrics)}
    fields = [(m["step"], m.get(KEYS["guidance_fields"])) for m in metrics
              if isinstance(m.get(KEYS["guidance_fields"]), (int, float))]
    if fields:
        step, peak = max(fields, key=lambda x: (x[1], -x[0]))
        out["guidance_peak"], out["guidance_peak_step"] = float(peak), int(step)
    at = [m for m in metrics if unguided_step is None or m["step"] == unguided_step]
    if at and isinstance(at[-1].get(KEYS["tasks_with_fields"]), (int, float)):
        out["unguided_share"] = 1.0 - float(at[-1][KEYS["tasks_with_fields"]])
        out["unguided_step"] = int(at[-1]["step"])
    if metrics:
        out["downweighted_share"] = float(metrics[-1].get(KEYS["downweighted_share"], math.nan))
        out["reversal_rate"] = float(metrics[-1].get(KEYS["reversal_rate"], math.nan))
        out["donor_share"] = donor_share(metrics)
    updates: dict[int, dict[str, int]] = {}
    for r in records:
        if r.get("interface") == "rubric" and r.get("verdict") == "accepted":
            w = updates.setdefault(int(r["step"]) // window, {"updates": 0, "creates": 0})
            w["updates"] += 1
            ops = [a.get("op") for a in ((r.get("candidate") or {}).get("actions") or [])]
            w["creates"] += int("create_criterion" in ops)
    out["rubric_updates"] = [{"window": f"{k * window}-{(k + 1) * window - 1}", **v} for k, v in sorted(updates.items())]
    for flag, name in ((True, "acceptance_with_evidence"), (False, "acceptance_without_evidence")):
        measured = [r for r in records if r.get("verdict") in ("accepted", "rejected")
                    and bool(r.get("with_evidence")) == flag]
        out[name] = sum(r["verdict"] == "accepted" for r in measured) / len(measured) if measured else math.nan
        out[name.replace("acceptance", "measured")] = len(measured)
    return out

def process_rows(runs: Mapping[str, Sequence[str]], *, window: int = 100) -> list[dict[str, Any]]:
    """The process statistics per method (mean and range over runs), one row per statistic."""
    per = {m: [process_stats(d, window=window) for d in dirs] for m, dirs in runs.items()}
    keys = ("guidance_peak", "guidance_peak_step", "unguided_share", "downweighted_share",
            "acceptance_with_evidence", "acceptance_without_evidence", "donor_share", "reversal_rate")
    rows = [{"statistic": k, **{m: _spread([s.get(k, math.nan) for s in st]) for m, st in per.items()}}
            for k in keys]
    windows = sorted({w["window"] for st in per.values() for s in st for w in s["rubric_updates"]},
                     key=lambda w: int(w.split("-")[0]))
    for w in windows:
        rows.append({"statistic": f"rubric updates, steps {w}", **{
            m: _spread([float(next((x["updates"] for x in s["rubric_updates"] if x["window"] == w), 0))
                        for s in st]) for m, st in per.items()}})
    return rows

def case_study(workdir: str, task_id: str | None = None) -> dict[str, Any]:
    """One task's story (the cellulose figure): every harness action on it (step, interface, ops, label, deltas,
    verdict, reason), its mean training reward per draw (the record store) and its oracle score per judged step
    (oracle/oracle.jsonl). Default task: the one with the most accepted actions."""
    records = read_jsonl(os.path.join(workdir, "harness.jsonl"))
    if task_id is None:
        counts: dict[str, int] = {}
        for r in records:
            counts[r["task_id"]] = counts.get(r["task_id"], 0) + (r.get("verdict") == "accepted")
        if not counts:
            raise ValueError(f"{workdir}: harness.jsonl has no action to tell a story from")
        task_id = max(counts, key=lambda t: (counts[t], t))
    actions = [{"step": r["step"], "interface": r.get("interface"),
                "ops": [a.get("op") for a in ((r.get("candidate") or {}).get("actions") or [])],
                "label": r.get("label"), "verdict": r.get("verdict"), "deltas": r.get("deltas") or {},
                "reason": r.get("reason", ""), "changes": r.get("changes") or {}}
               for r in records if r.get("task_id") == task_id]
    rewards: dict[int, float] = {}
    store_path = os.path.join(workdir, "memory", "memory.sqlite")
    if os.path.exists(store_path):

        store = RecordStore(store_path)
        try:
            for d in reversed(store.history(task_id)):
                r = np.asarray(d.rewards, np.float64)
                rewards[d.step] = float(np.nanmean(r)) if np.isfinite(r).any() else math.nan
        finally:
            store.close()
    oracle = {line["step"]: line.get("oracle/task_scores", {}).get(task_id)
              for line in read_jsonl(os.path.join(workdir, "oracle", "oracle.jsonl"))}
    steps = sorted(set(rewards) | {s for s, v in oracle.items() if v is not None})
    timeline = [{"step": s, "reward": rewards.get(s), "oracle": oracle.get(s),
                 "accepted": [f"{a['interface']}:{'+'.join(a['ops'])}" for a in actions
                              if a["step"] == s and a["verdict"] == "accepted"]} for s in steps]
    return {"task_id": task_id, "actions": actions, "timeline": timeline}

def cost_stats(workdir: str) -> dict[str, float]:
    """A run's cost: seconds by stage (time/<stage> summed over steps) and in total, per 100 steps, judge calls
    and tokens (summed, when logged), and the oracle's calls and tokens (oracle/summary.json)."""
    metrics = read_jsonl(os.path.join(workdir, "metrics.jsonl"))
    out: dict[str, float] = {"steps": float(len(metrics))}
    for stage in STAGES + ("step",):
        vals = [float(m[f"time/{stage}"]) for m in metrics if isinstance(m.get(f"time/{stage}"), (int, float))]
        out[f"seconds/{stage}"] = float(sum(vals)) if vals else math.nan
    total = out["seconds/step"]
    out["seconds_per_100_steps"] = 100.0 * total / len(metrics) if metrics and math.isfinite(total) else math.nan
    for k in ("judge_calls", "judge_input_tokens", "judge_output_tokens"):
        vals = [float(m[KEYS[k]]) for m in metrics if isinstance(m.get(KEYS[k]), (int, float))]
        out[k] = float(sum(vals)) if vals else math.nan
    path = os.path.join(workdir, "oracle", "summary.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            store = (json.load(f).get("cost") or {}).get("store") or {}
        out["oracle_calls"] = float(store.get("calls", math.nan))
        out["oracle_input_tokens"] = float(store.get("input_tokens", math.nan))
        out["oracle_output_tokens"] = float(store.get("output_tokens", math.nan))
    return out

def cost_rows(runs: Mapping[str, Sequence[str]]) -> list[dict[str, Any]]:
    """The cost table: per method (mean and range over runs) each stage's hours, the total per 100 steps, and the
    judge's and the oracle's calls and tokens."""
    per = {m: [cost_stats(d) for d in dirs] for m, dirs in runs.items()}
    rows = []
    for stage in STAGES + ("step",):
        rows.append({"cost": "hours, all steps" if stage == "step" else f"hours, {stage}",
                     **{m: _spread([s[f"seconds/{stage}"] / 3600.0 for s in st]) for m, st in per.items()}})
    rows.append({"cost": "hours per 100 steps",
                 **{m: _spread([s["seconds_per_100_steps"] / 3600.0 for s in st]) for m, st in per.items()}})
    for k in ("judge_calls", "judge_input_tokens", "judge_output_tokens", "oracle_calls", "oracle_input_tokens",
              "oracle_output_tokens"):
        rows.append({"cost": k.replace("_", " "), **{m: _spread([s.get(k, math.nan) for s in st])
                                                      for m, st in per.items()}})
    return rows
