"""The paper's comparison tables from a compare directory (launch/compare.py): every arm's held-out score per
domain, its macro aggregate with the seed standard deviation, and its margin against a reference arm with an
interval and p that count training runs (eval.stats.run_level_test), beside the paper's cell-level bootstrap and
permutation p as labelled columns; the failure shares per arm with their Spearman correlation to the held-out
score (the paper's Fig. 3 and its table).

    compare = json.load(open("runs/compare/compare.json"))
    rows = main_rows(compare, MAIN_ARMS)            # or ABLATION_ARMS, REPLACEMENT_ARMS; arms absent are skipped
    rows = failure_rows(runs_in(dir)); rows = failure_spearman(runs_in(dir), compare)
    print(tables.markdown(rows))
"""

from __future__ import annotations

import math
import os
from typing import Any, Mapping, Sequence

import numpy as np
from scipy import stats as scipy_stats

from harnessrl_jax import methods
from harnessrl_jax.eval.stats import (macro_mean, paired_bootstrap_grid, paired_permutation, run_level_test, seed_sd,
                                      sign_flip_seeds)
from harnessrl_jax.eval.tables import END_WINDOW, read_jsonl
from harnessrl_jax.settings import section

# The rows of the paper's tables, by arm name (launch/compare.py's PAPER_ARMS), with the paper's labels.
MAIN_ARMS = ("grpo", "ruscarl", "skillrl", "evorubric", "amaris", "amaris_pp", "sec", "harnessrl")
ABLATION_ARMS = ("harnessrl", "harnessrl_no_critic", "harnessrl_no_critic_no_memory", "harnessrl_g", "harnessrl_c")
REPLACEMENT_ARMS = ("harnessrl", "harnessrl_sec_sampling", "harnessrl_ruscarl_guidance",
                    "harnessrl_evorubric_rubric")
LABELS = {"grpo": "GRPO", "ruscarl": "RuscaRL", "skillrl": "SkillRL", "evorubric": "EvoRubric", "amaris": "AMARIS",
          "amaris_pp": "AMARIS++", "sec": "SEC (supplementary)", "harnessrl": "HarnessRL",
          "harnessrl_no_critic": "- critic", "harnessrl_no_critic_no_memory": "- critic - memory",
          "harnessrl_g": "HarnessRL_g (guidance only)", "harnessrl_c": "HarnessRL_c (rubric only)",
          "harnessrl_sec_sampling": "sampling <- SEC", "harnessrl_ruscarl_guidance": "guidance <- RuscaRL",
          "harnessrl_evorubric_rubric": "rubric <- EvoRubric"}
CLASSES = ("blind", "saturated", "spurious", "agree")
PICKS = ("final", "best")
METRICS = ("seed_rubric", "oracle")


def rule_fallback(config) -> bool:
    """Whether a config's method has a part its paper runs with a model (HarnessRL's proposer, SkillRL's teacher,
    EvoRubric's generator and verifier, AMARIS's analyst and reviser, CoCA's rewriter) and the config gives it the
    rule fallback instead (harness.proposer='rule'): launch/compare.py records it per arm, the tables label it."""
    return methods.describe(config).uses_evolver_model and section(config, "harness").proposer == "rule"


def _seeds(compare, arm) -> list[str]:
    return sorted(compare["per_step"][arm], key=int)


def score_grid(compare: Mapping[str, Any], arm: str, pick: str = "final", metric: str = "seed_rubric"
               ) -> np.ndarray:
    """[items, seeds] per-task scores of an arm at its final checkpoint (or its best, per seed)."""
    cols = []
    for n, seed in enumerate(_seeds(compare, arm)):
        steps = compare["per_step"][arm][seed]
        step = max(steps, key=int) if pick == "final" else str(compare["steps_to_best"][arm][n])
        cols.append(np.asarray(steps[step][metric], np.float64))
    return np.stack(cols, axis=1)


def arm_stats(compare: Mapping[str, Any], *, reference: str, n_boot: int = 10_000, n_perm: int = 10_000,
              seed: int = 0) -> dict[str, dict[str, dict[str, Any]]]:
    """Per pick/metric and arm: `macro` (mean of domain means), `per_domain`, `seed_sd` (the macro aggregate's
    standard deviation over seeds, ddof = 1; None with one seed), `seeds`, and for arms other than `reference`:
    `diff` (arm - reference, macro), `ci95_runs` and `p_runs` (run_level_test: paired t over the seeds' macro
    margins), and the paper's cell-level procedures `ci95_cells` (crossed item x seed bootstrap stratified by
    domain, `n_boot` resamples) and `p_cells` (sign-flip over (item, seed) pairs, `n_perm` permutations)."""
    domains = np.asarray(compare["tasks"]["domains"])
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for pick in PICKS:
        for metric in METRICS:
            ref = score_grid(compare, reference, pick, metric)
            block = {}
            for arm in compare["per_step"]:
                g = score_grid(compare, arm, pick, metric)
                row: dict[str, Any] = {
                    "macro": _num(macro_mean(g, domains)),
                    "per_domain": {d: _num(np.nanmean(g[domains == d])) for d in dict.fromkeys(domains.tolist())},
                    "seed_sd": _num(seed_sd(g, domains)), "seeds": int(g.shape[1])}
                if arm != reference and g.shape == ref.shape:
                    diff, lo, hi, p = run_level_test(ref, g, domains, seed=seed)
                    _, cell_lo, cell_hi = paired_bootstrap_grid(ref, g, domains, n_boot, seed=seed)
                    row.update(diff=_num(diff), ci95_runs=[_num(lo), _num(hi)], p_runs=_num(p),
                               ci95_cells=[_num(cell_lo), _num(cell_hi)],
                               p_cells=_num(paired_permutation(ref, g, n_perm, seed=seed)[1]))
                block[arm] = row
            out[f"{pick}/{metric}"] = block
    return out


def _num(x) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def _fmt(x, digits: int = 1) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def main_rows(compare: Mapping[str, Any], arms: Sequence[str] | None = None, *, pick: str = "final",
              metric: str = "seed_rubric") -> list[dict[str, Any]]:
    """One row per arm present (in `arms` order): the held-out score per domain, the macro aggregate, the seed SD,
    the margin against compare's reference arm with its 95% interval and p counting runs, then the paper's
    cell-level interval and p, labelled as such. An arm whose model-written part ran its rule fallback is labelled
    "(rule fallback)": the row measures that fallback, not the paper's component."""
    stats = compare["stats"][f"{pick}/{metric}"]
    ref = compare["reference"]
    vs = f"vs {LABELS.get(ref, ref)}"
    arms = [a for a in (arms or list(stats)) if a in stats]
    rows = []
    for arm in arms:
        s = stats[arm]
        fallback = (compare.get("arms", {}).get(arm) or {}).get("rule_fallback")
        row: dict[str, Any] = {"arm": LABELS.get(arm, arm) + (" (rule fallback)" if fallback else "")}
        row.update({d: _fmt(v) for d, v in s["per_domain"].items()})
        row["macro"] = _fmt(s["macro"])
        row["seed SD"] = _fmt(s["seed_sd"], 2)
        if arm == ref:
            row.update({f"{vs} [95% CI, runs]": "(reference)", "p (runs)": "",
                        "[95% CI] (cells, paper)": "", "p (cells, paper)": ""})
        elif "diff" in s:
            if "p_runs" not in s:
                raise ValueError(f"compare stats {pick}/{metric} of arm {arm!r} have no run-level interval: the "
                                 "compare.json predates it; run launch/compare.py again on the same --out (it "
                                 "reads the saved scores and trains nothing)")
            lo, hi = s["ci95_runs"]
            cell_lo, cell_hi = s["ci95_cells"]
            row.update({f"{vs} [95% CI, runs]": f"{_fmt(s['diff'])} [{_fmt(lo)}, {_fmt(hi)}]",
                        "p (runs)": _fmt(s["p_runs"], 4),
                        "[95% CI] (cells, paper)": f"[{_fmt(cell_lo)}, {_fmt(cell_hi)}]",
                        "p (cells, paper)": _fmt(s["p_cells"], 4)})
        rows.append(row)
    return rows


def seeds_note(compare: Mapping[str, Any]) -> str:
    """What the run-level p of this comparison can claim with its number of seeds (the fewest of any arm)."""
    seeds = min(len(v) for v in compare["per_step"].values())
    if seeds < 2:
        return f"{seeds} seed per arm: no run-level interval or p (the variance between runs is not measured)."
    crit = float(scipy_stats.t.ppf(0.975, seeds - 1))
    need = {p: sign_flip_seeds(p) for p in (0.05, 0.01, 0.001)}
    return (f"{seeds} seeds per arm: the run-level 95% interval is the margin +- {crit:.2f} standard errors of the "
            f"per-seed margins (t, {seeds - 1} df), and its p assumes those margins are normal across runs; a test "
            f"that assumes nothing of their shape (an exact sign-flip over runs) cannot go below p = "
            f"{2.0 ** (1 - seeds):.3g} with {seeds} seeds, and reaches p < 0.05, 0.01, 0.001 only with "
            f"{need[0.05]}, {need[0.01]}, {need[0.001]} seeds.")


# ------------------------------------------------------------------------------------------ failure shares

def failure_shares(workdir: str, *, source: str = "oracle", window: int = END_WINDOW) -> dict[str, float]:
    """A run's criterion classes over its last `window` steps' groups, as shares of the classified criteria:
    `oracle` -- the oracle-referenced classes every arm logs (taxonomy/count/*); `attributor` -- the
    attributor's labels (attribution/frac_* weighted by attribution/criteria)."""
    metrics = read_jsonl(os.path.join(workdir, "metrics.jsonl"))[-window:]
    counts = dict.fromkeys(CLASSES, 0.0)
    for m in metrics:
        for c in CLASSES:
            if source == "oracle":
                counts[c] += float(m.get(f"taxonomy/count/{c}", 0.0))
            else:
                v = m.get(f"attribution/frac_{c}")
                if isinstance(v, (int, float)) and math.isfinite(v):
                    counts[c] += v * float(m.get("attribution/criteria", 0.0))
    n = sum(counts.values())
    return {c: counts[c] / n if n else math.nan for c in CLASSES}


def failure_rows(runs: Mapping[str, Sequence[str]], *, source: str = "oracle", window: int = END_WINDOW
                 ) -> list[dict[str, Any]]:
    """Per arm (mean over its runs) the share of each class at the end of training (Fig. 3)."""
    rows = []
    for arm, dirs in runs.items():
        shares = [failure_shares(d, source=source, window=window) for d in dirs]
        rows.append({"arm": LABELS.get(arm, arm), **{c: _fmt(100 * float(np.nanmean([s[c] for s in shares])))
                                                     if any(math.isfinite(s[c]) for s in shares) else "n/a"
                                                     for c in CLASSES}})
    return rows


def run_scores(compare: Mapping[str, Any], *, pick: str = "final", metric: str = "seed_rubric"
               ) -> dict[tuple[str, int], float]:
    """(arm, seed) -> the run's macro held-out score."""
    domains = np.asarray(compare["tasks"]["domains"])
    out = {}
    for arm in compare["per_step"]:
        g = score_grid(compare, arm, pick, metric)
        for n, seed in enumerate(_seeds(compare, arm)):
            out[(arm, int(seed))] = macro_mean(g[:, n], domains)
    return out


def failure_spearman(runs: Mapping[str, Sequence[str]], compare: Mapping[str, Any], *, source: str = "oracle",
                     window: int = END_WINDOW, metric: str = "seed_rubric") -> list[dict[str, Any]]:
    """Per class, Spearman's rho across runs (arms x seeds) between its share at the end of training and the run's
    final held-out score; the paper's sign convention is not explicit, so rho of the share and of 1 - share
    (its negative) are both given, with the number of runs."""
    from scipy.stats import spearmanr

    scores = run_scores(compare, metric=metric)
    shares, held = {c: [] for c in CLASSES}, []
    for arm, dirs in runs.items():
        for d in dirs:
            seed = int(os.path.basename(d).rsplit("-s", 1)[1])
            if (arm, seed) not in scores:
                continue
            s = failure_shares(d, source=source, window=window)
            held.append(scores[(arm, seed)])
            for c in CLASSES:
                shares[c].append(s[c])
    rows = []
    for c in CLASSES:
        x, y = np.asarray(shares[c]), np.asarray(held)
        ok = np.isfinite(x) & np.isfinite(y)
        rho = spearmanr(x[ok], y[ok]).statistic if ok.sum() > 2 and np.ptp(x[ok]) and np.ptp(y[ok]) else math.nan
        rows.append({"class": c, "rho(share, held-out)": _fmt(_num(rho), 2),
                     "rho(1 - share, held-out)": _fmt(_num(-rho), 2), "runs": int(ok.sum())})
    return rows
