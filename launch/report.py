"""report.html of a run directory: plots per step and the table of the harness's accepted and rejected actions.

    python launch/report.py --workdir=DIR        # reads DIR/metrics.jsonl and DIR/harness.jsonl

Plots (inline SVG, no plotting library): reward and oracle score, the attributor's failure fractions, actions
proposed / accepted / rejected by interface, mounted guidance fields, sampling levels, step time by stage.
launch/train.py calls `write_report` at the end of every run (config.report).
"""

from __future__ import annotations

import html
import json
import math
import os
import sys
from typing import Sequence

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # a checkout runs uninstalled

from harnessrl_jax import cli  # noqa: E402

from harnessrl_jax.eval.tables import END_WINDOW, INTERFACES, read_jsonl, stats_from_records  # noqa: E402

COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


def svg_lines(title: str, steps: Sequence[int], series: dict[str, Sequence[float | None]], *, width: int = 460,
              height: int = 220, y_label: str = "") -> str:
    """A line plot as an SVG string; None / NaN points are gaps."""
    pad_l, pad_r, pad_t, pad_b = 48, 10, 26, 34
    values = [v for s in series.values() for v in s if _finite(v)]
    if not steps or not values:
        return f'<div class="plot"><b>{html.escape(title)}</b><p>no data</p></div>'
    lo, hi = min(values + [0.0]), max(values)
    hi = hi if hi > lo else lo + 1.0
    x0, x1 = min(steps), max(steps)
    x1 = x1 if x1 > x0 else x0 + 1

    def x(s):
        return pad_l + (s - x0) / (x1 - x0) * (width - pad_l - pad_r)

    def y(v):
        return height - pad_b - (v - lo) / (hi - lo) * (height - pad_t - pad_b)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" class="plot">',
           f'<text x="{width / 2}" y="16" text-anchor="middle" font-size="13" font-weight="bold">'
           f'{html.escape(title)}</text>',
           f'<line x1="{pad_l}" y1="{height - pad_b}" x2="{width - pad_r}" y2="{height - pad_b}" stroke="#444"/>',
           f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{height - pad_b}" stroke="#444"/>']
    for v in (lo, (lo + hi) / 2, hi):
        out.append(f'<text x="{pad_l - 4}" y="{y(v) + 4:.1f}" text-anchor="end" font-size="10">{v:.3g}</text>')
    for s in sorted({x0, (x0 + x1) // 2, x1}):
        out.append(f'<text x="{x(s):.1f}" y="{height - pad_b + 14}" text-anchor="middle" font-size="10">{s}</text>')
    out.append(f'<text x="{width / 2}" y="{height - 4}" text-anchor="middle" font-size="10">step</text>')
    if y_label:
        out.append(f'<text x="12" y="{height / 2}" font-size="10" transform="rotate(-90 12 {height / 2})" '
                   f'text-anchor="middle">{html.escape(y_label)}</text>')
    for n, (name, vals) in enumerate(series.items()):
        color = COLORS[n % len(COLORS)]
        segment: list[str] = []
        for s, v in zip(steps, vals):
            if _finite(v):
                segment.append(f"{x(s):.1f},{y(v):.1f}")
                out.append(f'<circle cx="{x(s):.1f}" cy="{y(v):.1f}" r="2" fill="{color}"/>')
            elif segment:
                out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{" ".join(segment)}"/>')
                segment = []
        if segment:
            out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{" ".join(segment)}"/>')
        out.append(f'<rect x="{pad_l + 8 + 110 * (n % 3)}" y="{pad_t + 2 + 12 * (n // 3)}" width="8" height="8" '
                   f'fill="{color}"/><text x="{pad_l + 19 + 110 * (n % 3)}" y="{pad_t + 10 + 12 * (n // 3)}" '
                   f'font-size="10">{html.escape(name)}</text>')
    out.append("</svg>")
    return "".join(out)


PLOTS = (
    ("Reward and oracle score", "points (0-100)", {"reward": "reward/mean", "oracle": "oracle/score_mean"}),
    ("Reward-oracle agreement", "fraction of all rollout pairs (ties in the denominator)",
     {"agreement": "oracle/agreement", "reward tie": "oracle/pair_reward_tie",
      "wrong direction": "oracle/pair_wrong_direction"}),
    ("Failure fractions (attributor)", "share of criteria", {
        "blind": "attribution/frac_blind", "saturated": "attribution/frac_saturated",
        "spurious": "attribution/frac_spurious", "agree": "attribution/frac_agree"}),
    ("Accepted actions by interface", "actions", {
        "sampling": "actions/accepted/sampling", "guidance": "actions/accepted/guidance",
        "rubric": "actions/accepted/rubric"}),
    ("Rejected actions by interface", "actions", {
        "sampling": "actions/rejected/sampling", "guidance": "actions/rejected/guidance",
        "rubric": "actions/rejected/rubric"}),
    ("Guidance", "fields", {"fields per task": "guidance/fields_per_task", "cap": "guidance/cap"}),
    ("Sampling levels", "share of tasks", {
        "level 0 (w=1)": "sampling/level_0", "level 1": "sampling/level_1", "level 2": "sampling/level_2",
        "level 3": "sampling/level_3"}),
    ("Step time by stage", "seconds", {
        "rollout": "time/rollout", "judge": "time/judge", "evolver": "time/evolver", "critic": "time/critic",
        "train": "time/train"}),
)


def summary_rows(metrics: list[dict], records: list[dict]) -> list[tuple[str, str]]:
    """(name, value) pairs of the run's headline numbers (harnessrl_jax.eval.tables; the demo prints them)."""
    s = stats_from_records(metrics, records)
    if not s["steps"]:
        return [("steps", "0")]
    k = int(s["k"])

    def pct(x):
        return "n/a" if not math.isfinite(x) else f"{x:.1%}"

    return [
        ("steps", str(int(s["steps"]))),
        (f"reward, first {k} -> last {k} steps", f"{s['reward_first']:.1f} -> {s['reward_last']:.1f}"),
        (f"oracle score, first {k} -> last {k}", f"{s['oracle_first']:.1f} -> {s['oracle_last']:.1f}"),
        (f"reward-oracle agreement, all pairs of the last {min(END_WINDOW, int(s['steps']))} steps",
         f"{pct(s['oracle_agreement'])} of {int(s['oracle_pairs'])} pairs"),
        ("pair classes: agree / reward tie / wrong direction / oracle tie",
         " / ".join(pct(s[f"pair_{c}"]) for c in ("agree", "reward_tie", "wrong_direction", "oracle_tie"))),
        ("zero-variance groups (mean)", f"{s['zero_variance']:.2f}"),
        ("candidates measured / accepted / rejected",
         f"{int(s['measured'])} / {int(s['accepted'])} / {int(s['measured'] - s['accepted'])}"),
        ("accepted by interface", ", ".join(f"{i} {int(s[f'accepted_{i}'])}" for i in INTERFACES)),
        ("critic acceptance rate", "n/a" if not math.isfinite(s["acceptance_rate"]) else
         f"{s['acceptance_rate']:.2f}"),
        ("reversal rate (undone within two draws)", pct(s["reversal_rate"])),
        ("<reference> fields supplied by donors", pct(s["donor_share"])),
        ("guidance fields per task (end)", f"{0.0 if math.isnan(s['guidance_fields']) else s['guidance_fields']:.2f}"),
        ("down-weighted tasks (end)",
         f"{0.0 if math.isnan(s['downweighted_share']) else s['downweighted_share']:.2f}"),
        ("evolver share of step time", pct(s["evolver_share"])),
        ("wall time of the steps", f"{s['step_seconds']:.0f} s"),
    ]


def _action_name(r: dict) -> str:
    c = r.get("candidate") or {}
    acts = c.get("actions") or []
    ops = ", ".join(a.get("op", "?") for a in acts)
    return c.get("variant") or ops or "-"


def action_table(records: list[dict]) -> str:
    measured = [r for r in records if r["verdict"] in ("accepted", "rejected")]
    head = ("step", "task", "interface", "round", "label", "candidate", "deltas", "verdict", "reason")
    rows = []
    for r in measured:
        deltas = ", ".join(f"{k}={v:.1f}" for k, v in (r.get("deltas") or {}).items() if _finite(v))
        cells = (r["step"], r["task_id"], r["interface"], r["round"], r.get("label") or "", _action_name(r), deltas,
                 r["verdict"], r.get("reason", ""))
        rows.append(f'<tr class="{r["verdict"]}">' + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells)
                    + "</tr>")
    if not rows:
        return "<p>No candidate was measured (a frozen harness, or nothing to propose).</p>"
    return ("<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>" + "".join(rows) + "</table>")


def render_html(workdir: str) -> str:
    metrics = read_jsonl(os.path.join(workdir, "metrics.jsonl"))
    records = read_jsonl(os.path.join(workdir, "harness.jsonl"))
    steps = [m["step"] for m in metrics]
    plots = [svg_lines(title, steps, {name: [m.get(key) for m in metrics] for name, key in series.items()},
                       y_label=y_label) for title, y_label, series in PLOTS]
    summary = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>"
                      for k, v in summary_rows(metrics, records))
    config = ""
    config_path = os.path.join(workdir, "config.json")
    if os.path.exists(config_path):
        with open(config_path) as f:
            c = json.load(f)
        config = (f"method <b>{html.escape(str(c.get('method')))}</b>, model {html.escape(str(c.get('model_name')))}, "
                  f"{c.get('tasks_per_step')} tasks x {c.get('num_generations')} rollouts per step")
    style = ("body{font-family:sans-serif;margin:20px}table{border-collapse:collapse;font-size:12px}"
             "td,th{border:1px solid #ccc;padding:3px 6px;vertical-align:top}tr.accepted{background:#e8f6e8}"
             "tr.rejected{background:#fbeaea}.plots{display:flex;flex-wrap:wrap;gap:8px}")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>run report</title><style>{style}</style>"
            f"</head><body><h1>Run report</h1><p>{html.escape(os.path.abspath(workdir))}<br>{config}</p>"
            f"<h2>Summary</h2><table>{summary}</table><h2>Per step</h2><div class='plots'>{''.join(plots)}</div>"
            f"<h2>Accepted and rejected actions</h2>{action_table(records)}</body></html>")


def write_report(workdir: str) -> str:
    """Writes DIR/report.html; returns its path."""
    path = os.path.join(workdir, "report.html")
    with open(path, "w") as f:
        f.write(render_html(workdir))
    return path


def main(argv):
    from absl import flags

    del argv
    print(write_report(flags.FLAGS.workdir))


if __name__ == "__main__":
    from absl import flags

    flags.DEFINE_string("workdir", None, "Run directory with metrics.jsonl and harness.jsonl.")
    flags.mark_flags_as_required(["workdir"])
    cli.run(main)
