"""The testbed's measurements of a run against its world's planted labels (docs/testbed.md), and the comparison's
tables: per arm the reward and oracle curves, the pair classes, the share of each planted class still failing at the
end (a spurious criterion by the net reward its surface feature still earns, `surface_pay`), the attributor's
precision and recall per planted class, the reversal rate and the final oracle score.

    out = run_outcome(workdir, world)      # one run: curves, planted shares, attributor counts, final oracle
    table = compare_outcomes({arm: [outcome per seed]}, reference="grpo")
    print(render(table))
"""

from __future__ import annotations

import collections
import math
import os
import re
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from harnessrl_jax.data.world import World
from harnessrl_jax.eval import cadence, stats, tables
from harnessrl_jax.memory.store import RecordStore
from harnessrl_jax.rubric import rules
from harnessrl_jax.rubric.reward import rubric_reward
from harnessrl_jax.rubric.schema import Criterion

FAILURES = ("blind", "saturated", "spurious")  # the planted classes a method exists to fix
CLASSES = FAILURES + ("agree",)


def _met(c: Criterion, responses: Sequence[str]) -> np.ndarray:
    return np.array([rules.check(c.rule_id, c.rule_kwargs, r) for r in responses], bool)


# -- a surface feature's net pay: a response edited to carry it and to drop it, scored under a rubric

_FILLER = "It is so."  # length padding that no world criterion reads (no fact, no topic, no claim, no repeat)


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]


def feature_sentence(c: Criterion, pool: Sequence[str]) -> str | None:
    """The commonest sentence of `pool` that meets the rule criterion `c` on its own (the feature as the policy
    writes it: "All requirements are met."), or None."""
    counts = collections.Counter(s for y in pool for s in _sentences(y) if rules.check(c.rule_id, c.rule_kwargs, s))
    return counts.most_common(1)[0][0] if counts else None


def feature_pair(c: Criterion, response: str, sentence: str | None) -> tuple[str, str] | None:
    """(without, with): `response` edited to drop and to carry the surface feature the rule criterion `c` pays,
    the rest kept; None when no edit flips `c`. An end phrase is swapped for a full stop; a word-count minimum is
    reached with filler (only a response under it has a `without`); any other rule's feature is a sentence: every
    sentence that meets `c` on its own is dropped, and `sentence` (feature_sentence) appended."""
    def met(y):
        return rules.check(c.rule_id, c.rule_kwargs, y)

    if c.rule_id == "startend:end_checker":
        end, base = str(c.rule_kwargs["end_phrase"]).strip(), response.strip()
        if base.lower().endswith(end.lower()):
            base = base[:len(base) - len(end)]
        base = base.rstrip(".!? ")
        without, with_ = base + ".", base + end
    elif c.rule_id == "length_constraints:number_words" and c.rule_kwargs.get("relation") == "at least":
        without = with_ = response.strip()
        for _ in range(int(c.rule_kwargs["num_words"])):
            if met(with_):
                break
            with_ = f"{with_} {_FILLER}"
    else:
        if sentence is None:
            return None
        without = " ".join(s for s in _sentences(response) if not met(s))
        with_ = f"{without} {sentence}".strip()
    return (without, with_) if met(with_) and not met(without) else None


def _scores(criteria: Sequence[Criterion], response: str) -> np.ndarray:
    return np.array([float(rules.check(c.rule_id, c.rule_kwargs, response)) if c.verifier == "rule" else math.nan
                     for c in criteria])


def surface_pay(planted: Criterion, rubric: Sequence[Criterion], responses: Sequence[str]) -> float:
    """The reward points the surface feature of a planted spurious criterion still earns under `rubric` (every
    criterion with its points, counter-criteria included): the mean over `responses` of the reward with the
    feature minus without it (`feature_pair`); NaN when no response can be edited. Under the world's own rubric
    it is the criterion's share of the positive points; a fix of any kind (delete, reweight, a pitfall that
    cancels it, a rewrite the feature no longer meets) brings it to 0 or below."""
    sentence = feature_sentence(planted, responses)
    pairs = [p for y in responses if (p := feature_pair(planted, y, sentence)) is not None]
    if not pairs or not rubric:
        return math.nan
    points = np.array([c.points for c in rubric], np.float64)
    S = np.stack([np.stack([_scores(rubric, y) for y in pair], 1) for pair in pairs], 0)  # [pairs, K, 2]
    return float(np.mean([np.diff(rubric_reward(points, s))[0] for s in S]))


def still_failing(planted: str, criterion: Criterion, responses: Sequence[str], kept: bool, pay: float) -> bool:
    """Whether a planted criterion still fails at the end, from the task's last draw (its responses; `kept`: the
    criterion is still in the task's rubric with its world wording; `pay`: its surface feature's net pay under
    the final rubric, `surface_pay`). blind: no response meets it (judged by its own rule, whatever the rubric
    became); saturated: every response meets it and it is still kept (a reward term that cannot separate);
    spurious: its feature still earns reward (pay > 0, whichever criteria pay it); agree: it was rewritten or
    removed (a working criterion lost)."""
    if planted == "blind":
        return not _met(criterion, responses).any()
    if planted == "saturated":
        return kept and bool(_met(criterion, responses).all())
    if planted == "spurious":  # no edit possible (pay NaN): the criterion kept and met, as nothing else is known
        return bool(pay > 1e-9) if math.isfinite(pay) else kept and bool(_met(criterion, responses).any())
    if planted == "agree":
        return not kept
    raise ValueError(f"planted class {planted!r}: expected one of {CLASSES}")


def _last_draws(store: RecordStore) -> dict[str, Any]:
    last: dict[str, Any] = {}
    for r in store.draws():
        if r.task_id not in last or r.step >= last[r.task_id].step:
            last[r.task_id] = r
    return last


def final_rubric(record) -> list[Criterion]:
    """A task's rubric at the end: its last draw's rubric with that draw's accepted rubric updates applied."""
    criteria = {cid: dict(c) for cid, c in record.harness.get("criteria", {}).items()}
    for a in record.actions:
        if a.verdict != "accepted":
            continue
        for path, (_, after) in a.changes.items():
            head, _, rest = path.partition(".")
            if head != "criteria":
                continue
            cid, _, leaf = rest.rpartition(".")
            if cid in criteria and leaf in criteria[cid]:
                criteria[cid][leaf] = after
            elif after is None:
                criteria.pop(rest, None)
            else:
                criteria[rest] = dict(after)
    return [Criterion(cid, c["text"], float(c["points"]), tuple(c["tags"])) for cid, c in criteria.items()]


def planted_outcomes(store: RecordStore, world: World) -> dict[str, Any]:
    """Per planted criterion whether it still fails at the end (`failing`: {class: {task/criterion: 0|1}}) and
    each spurious one's surface pay (`pay`: {task/criterion: reward points}), and the attributor's labels against
    the planted ones over every draw (`labels`: {planted class: {label: count}}; `surface_labels`: the spurious
    ones' by surface feature, {surface: {label: count}}), counting draws whose rubric still holds the criterion
    in its world wording."""
    last = _last_draws(store)
    pool: dict[str, list[str]] = collections.defaultdict(list)
    for r in store.draws():
        pool[r.task_id].extend(r.responses)
    failing: dict[str, dict[str, int]] = {c: {} for c in CLASSES}
    pay: dict[str, float] = {}
    for task in world.tasks:
        r = last.get(task.id)
        if r is None:
            continue
        wording = dict(zip(r.criterion_ids, r.criterion_texts))
        rubric = final_rubric(r)
        for c in task.criteria:
            cls = world.planted[(task.id, c.id)]
            if cls == "spurious":
                pay[c.id] = surface_pay(c, rubric, pool[task.id])
            failing[cls][c.id] = int(still_failing(cls, c, r.responses, wording.get(c.id) == c.text,
                                                   pay.get(c.id, math.nan)))
    labels: dict[str, dict[str, int]] = {c: {} for c in CLASSES}
    by_surface: dict[str, dict[str, int]] = {}
    texts = {(t.id, c.id): c.text for t in world.tasks for c in t.criteria}
    for r in store.draws():
        for cid, text in zip(r.criterion_ids, r.criterion_texts):
            cls = world.class_of(r.task_id, cid)
            if cls is None or texts[(r.task_id, cid)] != text:
                continue
            label = r.labels.get(cid, "agree")
            labels[cls][label] = labels[cls].get(label, 0) + 1
            if cls == "spurious":
                counts = by_surface.setdefault(world.surface[(r.task_id, cid)], {})
                counts[label] = counts.get(label, 0) + 1
    return {"failing": failing, "pay": pay, "labels": labels, "surface_labels": by_surface}


def precision_recall(labels: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, float]]:
    """Per failure class the attributor's precision (of the draws it labelled so, the share planted so) and recall
    (of the draws planted so, the share it labelled so); NaN where nothing is counted."""
    out = {}
    for cls in FAILURES:
        tp = labels.get(cls, {}).get(cls, 0)
        predicted = sum(labels.get(p, {}).get(cls, 0) for p in CLASSES)
        actual = sum(labels.get(cls, {}).values())
        out[cls] = {"precision": tp / predicted if predicted else math.nan,
                    "recall": tp / actual if actual else math.nan, "labelled": predicted, "planted": actual}
    return out


def run_outcome(workdir: str, world: World) -> dict[str, Any]:
    """One run's testbed record: its curves (reward/mean and the oracle's score per step), tables.run_stats, the
    planted outcomes and the final evaluation's oracle score per world task (bare prompts, every split)."""
    metrics = tables.read_jsonl(os.path.join(workdir, "metrics.jsonl"))
    curves = {"step": [int(m["step"]) for m in metrics],
              "reward": [float(m.get(tables.KEYS["reward"], math.nan)) for m in metrics],
              "oracle": [float(m.get(tables.KEYS["oracle_score"], math.nan)) for m in metrics]}
    store = RecordStore(os.path.join(workdir, "memory", RecordStore.FILE))
    try:
        planted = planted_outcomes(store, world)
    finally:
        store.close()
    evals = cadence.read_evals(workdir)
    final: dict[str, float] = {}
    if evals:
        for line in evals[max(evals)].values():
            if "oracle" in line:
                final.update({t: float(o) for t, o in zip(line["task_ids"], line["oracle"])})
    run = tables.run_stats(workdir)
    k = max(1, len(metrics) // 3)
    end_classes = {c: float(np.nanmean([m.get(f"taxonomy/frac_{c}", math.nan) for m in metrics[-k:]]))
                   if metrics else math.nan for c in CLASSES}
    keep = ("reward_first", "reward_last", "oracle_first", "oracle_last", "oracle_agreement", "pair_agree",
            "pair_reward_tie_blind", "pair_reward_tie_saturated", "pair_wrong_direction", "pair_oracle_tie",
            "reversal_rate", "accepted", "measured")
    return {"curves": curves, "stats": {k: run.get(k, math.nan) for k in keep}, "end_classes": end_classes, **planted,
            "final_oracle": {t.id: final.get(t.id, math.nan) for t in world.tasks}}


def _grid(outcomes: Sequence[Mapping[str, Any]], get) -> np.ndarray:
    """[items, seeds] from each seed's {item: value}."""
    items = sorted(get(outcomes[0]))
    return np.array([[get(o)[i] for o in outcomes] for i in items], np.float64)


def _mean_pay(outcomes: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """[seeds]: each run's mean surface pay over its planted spurious criteria (NaN for a run without any)."""
    return np.array([np.nanmean(list(o["pay"].values())) if o.get("pay") else math.nan for o in outcomes])


def _pooled(counts: Iterable[Mapping[str, Mapping[str, int]]]) -> dict[str, dict[str, int]]:
    """{key: {label: count}} summed over runs."""
    out: dict[str, dict[str, int]] = {}
    for run in counts:
        for key, labels in run.items():
            into = out.setdefault(key, {})
            for label, k in labels.items():
                into[label] = into.get(label, 0) + k
    return out


def compare_outcomes(runs: Mapping[str, Sequence[Mapping[str, Any]]], reference: str = "grpo", *,
                     n: int = 10_000) -> dict[str, Any]:
    """Per arm (its seeds' run_outcome records, seeds in the same order in every arm): the mean curves, the mean
    statistics, the planted shares still failing, the attributor's precision/recall (draws pooled over seeds) and
    the final oracle score, each share and the final score with its run-level interval against `reference`
    (eval.stats.run_level_test: items the planted criteria or the tasks, columns the seeds)."""
    out: dict[str, Any] = {"reference": reference, "arms": {}}
    ref = runs[reference]
    for arm, outcomes in runs.items():
        row: dict[str, Any] = {"seeds": len(outcomes)}
        steps = outcomes[0]["curves"]["step"]
        for key in ("reward", "oracle"):
            row[key] = {"step": steps, "mean": np.nanmean([o["curves"][key] for o in outcomes], 0).tolist()}
        row["stats_seeds"] = {k: [float(o["stats"][k]) for o in outcomes] for k in outcomes[0]["stats"]}
        row["stats_seeds"].update({f"end_{c}": [o["end_classes"][c] for o in outcomes] for c in CLASSES})
        row["stats"] = {k: float(np.nanmean(v)) if np.isfinite(v).any() else math.nan
                        for k, v in row["stats_seeds"].items()}
        for cls in CLASSES:
            grid = _grid(outcomes, lambda o, c=cls: o["failing"][c])
            entry = {"share": float(grid.mean()) if grid.size else math.nan}
            if arm != reference and grid.size:
                d, lo, hi, p = stats.run_level_test(_grid(ref, lambda o, c=cls: o["failing"][c]), grid, n=n)
                entry.update(diff=d, low=lo, high=hi, p=p)
            row[f"failing_{cls}"] = entry
        pays, ref_pays = _mean_pay(outcomes), _mean_pay(ref)
        row["pay"] = {"mean": float(np.nanmean(pays)) if np.isfinite(pays).any() else math.nan}
        if arm != reference and np.isfinite(pays).all() and np.isfinite(ref_pays).all():
            d, lo, hi, p = stats.run_level_test(ref_pays[None, :], pays[None, :], n=n)
            row["pay"].update(diff=d, low=lo, high=hi, p=p)
        row["attributor"] = precision_recall(_pooled(o["labels"] for o in outcomes))
        surfaces = _pooled(o.get("surface_labels", {}) for o in outcomes)
        row["attributor_by_surface"] = {srf: {"recall": counts.get("spurious", 0) / sum(counts.values()),
                                              "planted": sum(counts.values()), "labels": counts}
                                        for srf, counts in sorted(surfaces.items()) if counts}
        grid = _grid(outcomes, lambda o: o["final_oracle"])
        per_seed = np.nanmean(grid, 0)
        mean, lo, hi = stats.bootstrap_mean(per_seed, n=n)
        row["final_oracle"] = {"mean": mean, "low": lo, "high": hi}
        if arm != reference:
            d, lo, hi, p = stats.run_level_test(_grid(ref, lambda o: o["final_oracle"]), grid, n=n)
            row["final_oracle"].update(diff=d, diff_low=lo, diff_high=hi, p=p)
        out["arms"][arm] = row
    return out


def _seed_diff(table, key: str, arm: str, base: str | None = None, n: int = 10_000) -> tuple[float, float, float]:
    """(diff, low, high): arm's per-seed statistic minus base's (paired by seed, run-level interval), or, with no
    base, arm's own last-minus-first change of `key` ('reward' or 'oracle')."""
    a = np.array(table["arms"][arm]["stats_seeds"][f"{key}_last" if base is None else key], np.float64)
    b = np.array(table["arms"][arm]["stats_seeds"][f"{key}_first"] if base is None
                 else table["arms"][base]["stats_seeds"][key], np.float64)
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        return math.nan, math.nan, math.nan
    d, lo, hi, _ = stats.run_level_test(b[None, :], a[None, :], n=n)
    return d, lo, hi


def _verdict(direction: int, lo: float, hi: float, d: float) -> str:
    if not np.isfinite(d):
        return "not measured"
    if not np.isfinite(lo):  # run_level_test: the same nonzero margin in every run, no variance to count
        return ("held in every run (the same margin each seed: no interval)" if d * direction > 0
                else "not held (wrong direction in every run)")
    if (direction > 0 and lo > 0) or (direction < 0 and hi < 0):
        return "held"
    if d * direction > 0:
        return "not held (right direction, interval includes 0)"
    return "not held (wrong direction)" if d != 0 else "not held (no difference)"


def expectations(table: Mapping[str, Any], n: int = 10_000) -> list[dict[str, str]]:
    """The expectations docs/testbed.md wrote down before the first comparison, each with its estimate, its 95%
    run-level interval and held / not held (held: the interval excludes 0 in the expected direction)."""
    arms, ref = table["arms"], table["reference"]
    rows = []

    def add(name, direction, est, scale=1.0):
        d, lo, hi = est
        rows.append({"expectation": name, "estimate": f"{_f(scale * d)} [{_f(scale * lo)}, {_f(scale * hi)}]",
                     "verdict": _verdict(direction, lo, hi, d)})

    def planted(arm, cls):
        e = arms[arm][f"failing_{cls}"]
        return (e.get("diff", math.nan), e.get("low", math.nan), e.get("high", math.nan))

    if ref in arms:
        add(f"{ref}: reward rises (last - first steps, points)", +1, _seed_diff(table, "reward", ref, n=n))
        d, lo, hi = _seed_diff(table, "oracle", ref, n=n)
        rows.append({"expectation": f"{ref}: oracle falls or stalls (last - first, points; held: upper bound < "
                                    f"the reward's rise)",
                     "estimate": f"{_f(d)} [{_f(lo)}, {_f(hi)}]",
                     "verdict": "held" if np.isfinite(hi) and hi < _seed_diff(table, "reward", ref, n=n)[1]
                     else "not held"})
        share = arms[ref]["failing_blind"]["share"]
        rows.append({"expectation": f"{ref}: blind criteria stay unmet (share failing at the end >= 90%)",
                     "estimate": f"{_f(100 * share, 0)}%", "verdict": "held" if share >= 0.9 else "not held"})
    for arm, cls, direction, what in (("ruscarl", "blind", -1, "lowers blind"),
                                      ("ruscarl", "saturated", +1, "raises saturated"),
                                      ("evorubric", "spurious", -1, "lowers spurious"),
                                      ("amaris_pp", "spurious", -1, "lowers spurious"),
                                      ("harnessrl", "blind", -1, "lowers blind"),
                                      ("harnessrl", "saturated", -1, "lowers saturated"),
                                      ("harnessrl", "spurious", -1, "lowers spurious")):
        if arm in arms and arm != ref:
            add(f"{arm} {what} (planted share failing vs {ref}, points)", direction, planted(arm, cls), 100.0)
    for arm in ("evorubric", "amaris_pp"):
        if arm in arms and arm != ref:
            add(f"{arm} raises blind (failure transfer: end share of blind criteria of the whole rubric vs {ref}, "
                f"points)", +1, _seed_diff(table, "end_blind", arm, ref, n=n), 100.0)
    if "harnessrl" in arms and "harnessrl_no_critic" in arms:
        add("removing the critic raises reversals (no_critic - harnessrl, points)", +1,
            _seed_diff(table, "reversal_rate", "harnessrl_no_critic", "harnessrl", n=n), 100.0)
    return rows


def _f(x, digits=1) -> str:
    return "nan" if x is None or not np.isfinite(x) else f"{x:.{digits}f}"


def _labels(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{label} {k}" for label, k in sorted(counts.items(), key=lambda x: -x[1]))


def _interval(e: Mapping[str, float], scale=100.0) -> str:
    if "diff" not in e:
        return "(ref)"
    return f"{_f(scale * e['diff'], 0)} [{_f(scale * e['low'], 0)}, {_f(scale * e['high'], 0)}]"


def render(table: Mapping[str, Any], *, points: int = 6) -> str:
    """The comparison's tables as markdown text."""
    arms = table["arms"]
    ref = table["reference"]
    parts = []
    # curves: reward and oracle at `points` evenly spaced steps
    steps = next(iter(arms.values()))["reward"]["step"]
    at = sorted({int(round(x)) for x in np.linspace(0, len(steps) - 1, min(points, len(steps)))})
    rows = []
    for arm, r in arms.items():
        row = {"arm": arm}
        for i in at:
            row[f"step {steps[i]}"] = f"{_f(r['reward']['mean'][i], 0)} / {_f(r['oracle']['mean'][i], 0)}"
        rows.append(row)
    parts.append("Reward / oracle score per step (training groups, mean over seeds):\n" + tables.markdown(rows))
    rows = []
    for arm, r in arms.items():
        s = r["stats"]
        rows.append({"arm": arm, "agreement": _f(100 * s["oracle_agreement"]),
                     "agree": _f(100 * s["pair_agree"]), "tie blind": _f(100 * s["pair_reward_tie_blind"]),
                     "tie saturated": _f(100 * s["pair_reward_tie_saturated"]),
                     "wrong direction": _f(100 * s["pair_wrong_direction"]),
                     "oracle tie": _f(100 * s["pair_oracle_tie"]),
                     "reversal %": _f(100 * s["reversal_rate"]), "accepted": _f(s["accepted"], 0)})
    parts.append("Pair classes against the hidden oracle (% of rollout pairs, last 25 steps), reversal rate, "
                 "accepted updates:\n" + tables.markdown(rows))
    rows = []
    for arm, r in arms.items():
        row = {"arm": arm}
        for cls in CLASSES:
            e = r[f"failing_{cls}"]
            row[cls if cls != "agree" else "agree lost"] = f"{_f(100 * e['share'], 0)}  {_interval(e)}"
        row["spurious pay (points)"] = f"{_f(r['pay']['mean'])}  {_interval(r['pay'], 1.0)}"
        rows.append(row)
    parts.append(f"Share of each planted class still failing at the end (%; spurious: its surface feature still "
                 f"earns reward under the final rubric), and the mean net pay of the planted surface features "
                 f"(reward points); difference from {ref} with its run-level 95% interval:\n"
                 + tables.markdown(rows))
    rows = []
    for arm, r in arms.items():
        row = {"arm": arm}
        for cls in FAILURES:
            a = r["attributor"][cls]
            row[cls] = f"P {_f(100 * a['precision'], 0)} R {_f(100 * a['recall'], 0)} (n {a['planted']})"
        rows.append(row)
    parts.append("Attributor precision / recall per planted class (%, draws pooled over seeds):\n"
                 + tables.markdown(rows))
    surfaces = sorted({srf for r in arms.values() for srf in r.get("attributor_by_surface", {})})
    if surfaces:
        rows = []
        for arm, r in arms.items():
            row = {"arm": arm}
            for srf in surfaces:
                a = r["attributor_by_surface"].get(srf)
                row[srf] = "-" if a is None else \
                    f"R {_f(100 * a['recall'], 0)} (n {a['planted']}; {_labels(a['labels'])})"
            rows.append(row)
        parts.append("Attributor recall on the planted spurious criteria per surface feature (%, draws pooled over "
                     "seeds; what the draws were labelled):\n" + tables.markdown(rows))
    rows = []
    for arm, r in arms.items():
        e = r["final_oracle"]
        row = {"arm": arm, "final oracle": f"{_f(e['mean'])} [{_f(e['low'])}, {_f(e['high'])}]"}
        row[f"vs {ref}"] = (f"{_f(e['diff'])} [{_f(e['diff_low'])}, {_f(e['diff_high'])}] p={_f(e['p'], 3)}"
                            if "diff" in e else "(ref)")
        rows.append(row)
    parts.append("Final oracle score (bare prompts, every world task; seed bootstrap, and the run-level interval "
                 "of the difference):\n" + tables.markdown(rows))
    return "\n\n".join(parts)


__all__ = ["CLASSES", "FAILURES", "compare_outcomes", "expectations", "feature_pair", "feature_sentence",
           "final_rubric", "planted_outcomes",
           "precision_recall", "render", "run_outcome", "still_failing", "surface_pay"]
