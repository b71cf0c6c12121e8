"""HarnessBandit's figures and table from run directories (experiments/notebooks/harnessbandit.ipynb):

    h = history(run_dir)                  per step: the drawn arm, p, Q, n, raw and normalised signals, cosines
    cosine_matrices(h, windows=3)         the directed-cosine matrix (row: the drawn arm, column: the peer whose EMA
                                          it was compared with) averaged over each of `windows` spans of steps
    final_state(h)                        the terminal p, Q, n (App. F)
    comparison_rows(root)                 per method, the arm evaluations (launch/bandit_compare.py's
                                          arms_eval.json) over seeds: mean, pass@J, pass^J per arm
    svg_heatmap(title, labels, M)         a directed-cosine matrix as SVG (no plotting library needed)
"""

from __future__ import annotations

import html
import json
import os
from typing import Any, Sequence

import numpy as np
from harnessrl_jax.methods.harnessbandit import arm_label

SIGNALS = ("learnability_raw", "transferability_raw", "learnability_norm", "transferability_norm", "value")


def _lines(path: str) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]

def history(run_dir: str) -> dict[str, Any]:
    """The `bandit/*` metrics of a run as arrays over its steps; `labels` in the order of config.bandit.arms."""

    with open(os.path.join(run_dir, "config.json")) as f:
        labels = [arm_label(a) for a in json.load(f)["bandit"]["arms"]]
    rows = [m for m in _lines(os.path.join(run_dir, "metrics.jsonl")) if "bandit/arm" in m]

    def col(key):
        return np.array([np.nan if r.get(key) is None else float(r[key]) for r in rows])

    def per_arm(prefix):
        return np.stack([col(f"bandit/{prefix}_{a}") for a in labels], axis=1) if rows else np.zeros((0, len(labels)))

    return {"labels": labels, "steps": np.array([r["step"] for r in rows]),
            "arm": col("bandit/arm").astype(int) if rows else np.zeros(0, int), "warmup": col("bandit/warmup"),
            "p": per_arm("p"), "Q": per_arm("Q"), "n": per_arm("n"), "cos": per_arm("cos"),
            **{s: col(f"bandit/{s}") for s in SIGNALS}, "reward": col("reward/mean")}

def cosine_matrices(h: dict[str, Any], windows: int = 3) -> list[tuple[tuple[int, int], np.ndarray]]:
    """[((first step, last step), M)]: M[a, b] the mean cos(sketch of a step on arm a, EMA of arm b) over the
    window's steps on a (NaN where there was none)."""
    H, steps = len(h["labels"]), h["steps"]
    out = []
    for chunk in np.array_split(np.arange(len(steps)), max(1, min(windows, len(steps)))):
        M = np.full((H, H), np.nan)
        for a in range(H):
            rows = chunk[h["arm"][chunk] == a]
            if rows.size:
                vals = h["cos"][rows]
                ok = np.isfinite(vals).any(axis=0)
                M[a, ok] = np.nanmean(vals[:, ok], axis=0)
        if chunk.size:
            out.append(((int(steps[chunk[0]]), int(steps[chunk[-1]])), M))
    return out

def final_state(h: dict[str, Any]) -> list[dict[str, Any]]:
    """Per arm the terminal selection probability, value and visits, by descending p."""
    if not len(h["steps"]):
        return []
    rows = [{"arm": a, "p": float(h["p"][-1, k]), "Q": float(h["Q"][-1, k]), "visits": int(h["n"][-1, k])}
            for k, a in enumerate(h["labels"])]
    return sorted(rows, key=lambda r: -r["p"])

def arm_signal_means(h: dict[str, Any]) -> list[dict[str, Any]]:
    """Per arm the mean normalised learnability and transferability of its steps (the paper's App. F columns)."""
    out = []
    for k, a in enumerate(h["labels"]):
        on = h["arm"] == k
        out.append({"arm": a, "steps": int(on.sum()),
                    **{s: float(np.nanmean(h[s][on])) if on.any() and np.isfinite(h[s][on]).any() else float("nan")
                       for s in ("learnability_norm", "transferability_norm", "learnability_raw",
                                 "transferability_raw")}})
    return out

ARMS_EVAL = "arms_eval.json"


def comparison_rows(root: str) -> list[dict[str, Any]]:
    """Per method (runs `<method>-s<seed>` under root, each with arms_eval.json) and per evaluated arm: the mean over
    seeds of the mean score, pass@J and pass^J, with their spread over seeds; the untrained policy as 'base'."""
    runs: dict[str, list[dict]] = {}
    base: dict[str, dict] = {}  # one untrained policy per seed
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name, ARMS_EVAL)
        if os.path.isfile(path) and "-s" in name:
            with open(path) as f:
                data = json.load(f)
            method, seed = name.rsplit("-s", 1)
            runs.setdefault(method, []).append(data["final"])
            if "base" in data:
                base.setdefault(seed, data["base"])
    if base:
        runs["base"] = list(base.values())
    rows = []
    for method, evals in runs.items():
        row: dict[str, Any] = {"method": method, "seeds": len(evals)}
        for arm in evals[0]:
            for key in ("mean", "pass_at_j", "pass_all_j"):
                vals = [e[arm][key] for e in evals if e.get(arm) and e[arm][key] is not None]
                row[f"{arm} {key}"] = {"mean": float(np.mean(vals)), "min": float(np.min(vals)),
                                       "max": float(np.max(vals))} if vals else None
        rows.append(row)
    return rows

# --------------------------------------------------------------------------------------------------- figures

def svg_heatmap(title: str, labels: Sequence[str], M: np.ndarray, *, cell: int = 34, lim: float | None = None) -> str:
    """A diverging heat map (blue < 0 < red) of M with its values written in; NaN cells grey."""
    H = len(labels)
    lim = lim or max(1e-9, float(np.nanmax(np.abs(M))) if np.isfinite(M).any() else 1.0)
    left, top = 96, 40
    w, h = left + cell * H + 10, top + cell * H + 10
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" class="plot">',
           f'<text x="{w / 2}" y="14" text-anchor="middle" font-size="12" font-weight="bold">{html.escape(title)}'
           f'</text>']
    for k, a in enumerate(labels):
        out.append(f'<text x="{left - 4}" y="{top + cell * k + cell / 2 + 4}" text-anchor="end" font-size="9">'
                   f'{html.escape(a)}</text>')
        out.append(f'<text x="{left + cell * k + cell / 2}" y="{top - 4}" text-anchor="middle" font-size="8">'
                   f'{html.escape(a[:7])}</text>')
    for i in range(H):
        for j in range(H):
            v = M[i, j]
            if np.isfinite(v):
                s = min(1.0, abs(v) / lim)
                r, g, b = (255, int(255 * (1 - s)), int(255 * (1 - s))) if v > 0 else \
                    (int(255 * (1 - s)), int(255 * (1 - s)), 255)
                fill, text = f"rgb({r},{g},{b})", f"{v:.2f}"
            else:
                fill, text = "#ddd", ""
            out.append(f'<rect x="{left + cell * j}" y="{top + cell * i}" width="{cell}" height="{cell}" '
                       f'fill="{fill}" stroke="#fff"/><text x="{left + cell * j + cell / 2}" '
                       f'y="{top + cell * i + cell / 2 + 3}" text-anchor="middle" font-size="8">{text}</text>')
    out.append("</svg>")
    return "".join(out)
