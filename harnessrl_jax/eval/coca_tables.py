"""CoCA's tables from a run directory or a compare directory: state shares early vs late in
training (the paper's state shifts), the state transition matrix across visits, calibration's effect on
discrimination (Table 16 / Fig. 7), the gate (App. E.1, Table 13) and time by stage (Fig. 6). Read from each run's
metrics.jsonl (`coca/*`, `time/*`) and coca.jsonl; rows for `eval.tables.markdown`. launch/coca_probe.py's output
directory reads the same (one line per checkpoint, not per step), and its coca_probe.json gives Best-of-K's rows
(Fig. 4)."""

from __future__ import annotations

import json
import os
from typing import Any, Mapping, Sequence

import numpy as np

from harnessrl_jax.eval.tables import read_jsonl, runs_in
from harnessrl_jax.methods.coca import STATES, transitions


def coca_runs(directory: str) -> dict[str, list[str]]:
    """{arm: run directories} of the runs under `directory` that wrote coca.jsonl: the directory itself (a single
    run, arm 'coca'), or a compare directory's `<arm>-s<seed>` runs."""
    if os.path.isfile(os.path.join(directory, "coca.jsonl")):
        return {"coca": [directory]}
    return {arm: [d for d in dirs if os.path.isfile(os.path.join(d, "coca.jsonl"))]
            for arm, dirs in runs_in(directory).items()
            if any(os.path.isfile(os.path.join(d, "coca.jsonl")) for d in dirs)}


def _window_mean(metrics: Sequence[Mapping[str, Any]], key: str, part: slice) -> float:
    vals = [m[key] for m in metrics[part] if m.get(key) is not None and np.isfinite(m[key])]
    return float(np.mean(vals)) if vals else float("nan")


def state_rows(runs: Mapping[str, Sequence[str]], *, window: int = 25) -> list[dict[str, Any]]:
    """Per arm, each state's share of criteria over the first and the last `window` steps (mean over runs), and
    the change."""
    rows = []
    for arm, dirs in runs.items():
        for s in STATES:
            first, last = [], []
            for d in dirs:
                m = read_jsonl(os.path.join(d, "metrics.jsonl"))
                first.append(_window_mean(m, f"coca/frac_{s}", slice(0, window)))
                last.append(_window_mean(m, f"coca/frac_{s}", slice(-window, None)))
            rows.append({"arm": arm, "state": s, "first": float(np.nanmean(first)), "last": float(np.nanmean(last)),
                         "change": float(np.nanmean(last) - np.nanmean(first))})
    return rows


def transition_rows(runs: Mapping[str, Sequence[str]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(P(to | from) rows, joint-count rows) per arm, pooled over its runs."""
    cond_rows, joint_rows = [], []
    for arm, dirs in runs.items():
        lines = []
        for n, d in enumerate(dirs):  # task ids repeat across runs: keep each run's revisits apart
            lines += [{**x, "task_id": f"{n}/{x['task_id']}"} for x in read_jsonl(os.path.join(d, "coca.jsonl"))]
        joint, cond = transitions(lines)
        for a in STATES:
            cond_rows.append({"arm": arm, "from": a, **{b: cond.get(a, {}).get(b, float("nan")) for b in STATES}})
            joint_rows.append({"arm": arm, "from": a, **{b: joint[(a, b)] for b in STATES}})
    return cond_rows, joint_rows


def calibration_rows(runs: Mapping[str, Sequence[str]]) -> list[dict[str, Any]]:
    """Per arm: rewrites per step by outcome, the share of rewritten criteria that became discriminative, the
    discriminative share and within-group reward std before and after calibration, zero-variance groups
    restored."""
    keys = ["rewrites_strengthen", "rewrites_weaken", "rewrites_invalid", "rewrites_failed", "rewrites_skipped",
            "rewrite_became_discriminative", "discriminative_frac_before", "discriminative_frac_after",
            "group_reward_std_before", "group_reward_std_after", "zero_variance_before", "zero_variance_after",
            "zero_variance_restored"]
    rows = []
    for arm, dirs in runs.items():
        per_run = [{k: _window_mean(read_jsonl(os.path.join(d, "metrics.jsonl")), f"coca/{k}", slice(None))
                    for k in keys} for d in dirs]
        row = {"arm": arm, **{k: float(np.nanmean([r[k] for r in per_run])) for k in keys}}
        before = row["group_reward_std_before"]
        row["std_change_%"] = 100 * (row["group_reward_std_after"] - before) / before if before else float("nan")
        rows.append(row)
    return rows


def gate_rows(runs: Mapping[str, Sequence[str]]) -> list[dict[str, Any]]:
    """Per arm: OPSD activation (qualified queries / queries), Guided GRPO queries per step, frontier gain,
    mean KL per distilled token, rewards of both groups under the adapted rubric and the Normal one under the
    original."""
    keys = {"opsd_activation": "coca/opsd_activation", "guided_grpo_queries": "coca/guided_grpo_queries",
            "frontier_gain": "coca/frontier_gain", "distill_kl": "train/distill_kl",
            "reward_normal": "coca/reward_normal", "reward_guided": "coca/reward_guided",
            "reward_normal_original": "coca/reward_normal_original"}
    rows = []
    for arm, dirs in runs.items():
        ms = [read_jsonl(os.path.join(d, "metrics.jsonl")) for d in dirs]
        rows.append({"arm": arm, **{k: float(np.nanmean([_window_mean(m, v, slice(None)) for m in ms]))
                                    for k, v in keys.items()}})
    return rows


def time_rows(runs: Mapping[str, Sequence[str]]) -> list[dict[str, Any]]:
    """Per arm: mean seconds per step by stage, and the teacher's and the train step's share of the step."""
    stages = ["rollout_normal", "rollout_guided", "judge", "calibration", "teacher", "train_step", "step"]
    rows = []
    for arm, dirs in runs.items():
        ms = [read_jsonl(os.path.join(d, "metrics.jsonl"))[1:] or read_jsonl(os.path.join(d, "metrics.jsonl"))
              for d in dirs]  # the first step compiles
        row = {"arm": arm, **{s: float(np.nanmean([_window_mean(m, f"time/{s}", slice(None)) for m in ms]))
                              for s in stages}}
        row["teacher_share"] = row["teacher"] / row["step"] if row["step"] else float("nan")
        rows.append(row)
    return rows


def probe_summary(directory: str) -> dict[str, Any] | None:
    """launch/coca_probe.py's coca_probe.json in `directory` (None when there is none)."""
    path = os.path.join(directory, "coca_probe.json")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def best_of_k_rows(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per arm and K from coca_probe.json: the expected best of K (macro over domains, every seed), its SD
    over seeds, and the margin against the reference arm with its 95% interval and p counting runs
    (eval.stats.run_level_test; n/a with fewer than two paired seeds)."""
    ref = summary.get("reference")
    vs = f"vs {ref} [95% CI, runs]" if ref else None
    rows = []
    for arm, per_k in (summary.get("best_of_k") or {}).items():
        for r in per_k:
            row: dict[str, Any] = {"arm": arm, "K": r["k"], "best of K": _fmt(r["macro"]), "seeds": r["seeds"],
                                   "seed SD": _fmt(r["seed_sd"], 2)}
            if vs and arm == ref:
                row.update({vs: "(reference)", "p (runs)": ""})
            elif vs and "diff" in r:
                lo, hi = r["ci95_runs"]
                row.update({vs: f"{_fmt(r['diff'])} [{_fmt(lo)}, {_fmt(hi)}]", "p (runs)": _fmt(r["p_runs"], 4)})
            rows.append(row)
    return rows


def _fmt(x, digits: int = 1) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.{digits}f}"


__all__ = ["best_of_k_rows", "calibration_rows", "coca_runs", "gate_rows", "probe_summary", "state_rows", "time_rows",
           "transition_rows"]
