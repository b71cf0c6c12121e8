"""The paper's tables from run directories: one run's headline numbers, methods over seeds, and the compare table.

    stats = run_stats("runs/compare/harnessrl-s0")              from metrics.jsonl, harness.jsonl (and eval.json)
    rows = method_table({"grpo": [dirs...], "harnessrl": [dirs...]})   mean and range over seeds per statistic
    rows = compare_rows(json.load(open("runs/compare/compare.json")))  held-out scores with paired intervals
    print(markdown(rows))

Statistics of a run (NaN where the run has none, e.g. critic numbers of a GRPO run):
- reward_first / reward_last, oracle_first / oracle_last: mean training reward and oracle score over the first and
  last k steps (k = steps // 3, 1 to 3);
- oracle_agreement: the reward-oracle agreement over every rollout pair of the last `END_WINDOW` steps' groups
  (the paper's "end of training"; ties in the denominator: 48.9% vs 38.4%), and the pair classes over the same
  pairs: pair_agree, pair_reward_tie (with its blind / saturated split), pair_wrong_direction, pair_oracle_tie
  (eval.agreement); oracle_agreement_all: the same over every step;
- zero_variance: mean share of groups whose rewards are all equal;
- measured / accepted: candidates the critic measured and accepted; acceptance_rate = accepted / measured;
  accepted_<interface> per interface;
- reversal_rate: the last step's share of updates undone within two draws of their task (the paper's 1.6%);
- donor_share: of the <reference> fields accepted over the run, the share donors supplied (the paper's 58%);
- guidance_fields, downweighted_share: at the last step;
- evolver_share: time in the evolver over step time; step_seconds: the steps' wall time;
- heldout / heldout_oracle: eval.json's seed-rubric and oracle means, when the run was evaluated (launch/eval.py).
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Mapping, Sequence

import numpy as np

from harnessrl_jax.eval import agreement
from harnessrl_jax.words import INTERFACES

END_WINDOW = 25  # "at the end of training": the last 25 steps (methods.md, AMB-4.11)



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
    """A run's statistics (module docstring) from its metrics.jsonl and harness.jsonl records."""
    if not metrics:
        return {"steps": 0.0}
    k = max(1, min(3, len(metrics) // 3))
    first, last = metrics[:k], metrics[-k:]
    measured = [r for r in records if r.get("verdict") in ("accepted", "rejected")]
    accepted = [r for r in measured if r["verdict"] == "accepted"]
    step_time = sum(float(m.get("time/step", 0.0)) for m in metrics)
    evolver_time = sum(float(m.get("time/evolver", 0.0)) for m in metrics)
    end = metrics[-1]
    out = {"steps": float(end["step"]), "k": float(k),
           "reward_first": _mean(first, "reward/mean"), "reward_last": _mean(last, "reward/mean"),
           "oracle_first": _mean(first, "oracle/score_mean"), "oracle_last": _mean(last, "oracle/score_mean"),
           **pair_stats(metrics[-END_WINDOW:]),
           "oracle_agreement_all": pair_stats(metrics)["oracle_agreement"],
           "zero_variance": _mean(metrics, "reward/zero_variance_fraction"),
           "measured": float(len(measured)), "accepted": float(len(accepted)),
           "acceptance_rate": len(accepted) / len(measured) if measured else math.nan,
           "reversal_rate": float(end.get("harness/reversal_rate", math.nan)),
           "guidance_fields": float(end.get("guidance/fields_per_task", math.nan)),
           "downweighted_share": float(end.get("sampling/downweighted_share", math.nan)),
           "donor_share": _ratio(metrics, "guidance/reference_fields_from_donors", "guidance/reference_fields_added"),
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


def _ratio(metrics: Sequence[Mapping[str, Any]], num: str, den: str) -> float:
    n = sum(float(m.get(num, 0.0)) for m in metrics)
    d = sum(float(m.get(den, 0.0)) for m in metrics)
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
