"""How well the evolver diagnoses and repairs failures it is known to face: a benchmark no paper has.

    python launch/bench_evolver.py [--config=experiments/smollm2_cpu.py:method=harnessrl] [--tasks=12]
        [--num_generations=8] [--groups=runs/bench_evolver/groups.json] [--seed=0]

The config's policy answers `--tasks` tasks of the mini set in two groups; one blind, one saturated and one spurious
criterion is injected into each task's rubric, chosen from the recorded responses so the ground truth holds. The
first group goes into a fresh memory and the config's evolver runs on the second. Per failure kind: recall,
precision, the share of detected injections an accepted update acted on, and false alarms on seed criteria (which
may be real failures, so they bound precision). docs/design.md (Measurements) gives how the injections are chosen.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

from absl import flags, logging
from ml_collections import config_flags

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from harnessrl_jax import cli  # noqa: E402

config_flags.DEFINE_config_file("config", os.path.join(REPO, "experiments", "smollm2_cpu.py:method=harnessrl"),
                                "Experiment config (policy, judge, evolver thresholds).", lock_config=False)
flags.DEFINE_integer("tasks", 12, "Training tasks of the config's set, a seeded random choice.")
flags.DEFINE_integer("num_generations", 8, "J: responses per group.")
flags.DEFINE_string("groups", "", "A JSON file of sampled groups: read when it exists, written after sampling.")
flags.DEFINE_integer("seed", 0, "Seed of the task choice and the sampling.")
flags.DEFINE_string("records", "", "Write the evolver's log (harness.jsonl lines) and the labels here, to inspect.")
FLAGS = flags.FLAGS

KINDS = ("blind", "saturated", "spurious")
_WORDS_RE = r"[a-z]{4,}"


def words_of(text: str) -> set[str]:
    import re

    return set(re.findall(_WORDS_RE, text.lower()))


def inject(task, groups, oracle, rng):
    """(task with three injected criteria, {criterion id: kind}) for one task's two recorded groups, or None when
    a kind cannot be built from these responses."""
    import dataclasses

    import numpy as np

    from harnessrl_jax.rubric.schema import Criterion

    responses = [r for g in groups for r in g]
    sets = [words_of(r) for r in responses]
    union, common = set().union(*sets), set.intersection(*sets)
    made = {}
    # As heavy as the task's heaviest criterion, so a repair can move the group's reward as far as the critic's
    # bands ask (a light criterion could never pass delta_g >= 10.2 even met by every rollout).
    points = max(c.points for c in task.criteria)

    def kw(kind, word, text):
        cid = f"{task.id}/inj-{kind}"
        made[cid] = kind
        return Criterion(cid, text, points, ("verifier:rule", "rule:keywords:existence",
                                            "rule_kwargs:" + json.dumps({"keywords": [rf"\b{word}\b"]})))

    new = []
    # blind: a word from other tasks' vocabulary that no response here uses
    pool = sorted(w for w in ("photosynthesis", "parliament", "glacier", "violin", "telescope", "volcano",
                              "algebra", "harbour") if w not in union)
    if not pool:
        return None
    word = pool[rng.integers(len(pool))]
    new.append(kw("blind", word, f"Mentions {word}."))
    # saturated: a word every response uses, else a limit every response meets
    if common:
        w = sorted(common)[rng.integers(len(common))]
        new.append(kw("saturated", w, f'Uses the word "{w}".'))
    else:
        cid = f"{task.id}/inj-saturated"
        made[cid] = "saturated"
        new.append(Criterion(cid, "The response is under 2000 words.", points, (
            "verifier:rule", "rule:length_constraints:number_words",
            "rule_kwargs:" + json.dumps({"num_words": 2000, "relation": "less than"}))))
    # spurious: a word part of both groups use, uncorrelated with the oracle score
    J = len(groups[0])
    best = None
    for w in sorted(union - common):
        has = np.array([w in s for s in sets], float)
        if not (0 < has[:J].sum() < J and 0 < has[J:].sum() < J):
            continue
        o = np.asarray(oracle, float).ravel()
        ok = np.isfinite(o)
        r = 0.0 if ok.sum() < 3 or o[ok].std() == 0 else abs(float(np.corrcoef(has[ok], o[ok])[0, 1]))
        if r <= 0.3 and (best is None or abs(has.mean() - 0.5) < abs(best[1] - 0.5)):
            best = (w, has.mean())
    if best is None:
        return None
    new.append(kw("spurious", best[0], f'Uses the word "{best[0]}".'))
    return dataclasses.replace(task, criteria=tuple(task.criteria) + tuple(new)), made


def main(argv):
    del argv
    import numpy as np

    from harnessrl_jax import build, checks, methods, stages
    from harnessrl_jax.settings import section
    from harnessrl_jax.stepper import build_evolver
    from harnessrl_jax.eval.oracle import rule_oracle_scores
    from harnessrl_jax.evolver import Group
    from harnessrl_jax.harness import HarnessState
    from harnessrl_jax.memory import DrawRecord, Memory
    from harnessrl_jax.words import Verdict

    config = FLAGS.config
    config.num_generations = FLAGS.num_generations
    checks.validate(config)
    method = methods.describe(config)
    t0 = time.perf_counter()
    run = build.setup(config)
    tasks, _ = build.training_tasks(config, run.tasks)
    rng = np.random.default_rng(FLAGS.seed)
    tasks = [tasks[i] for i in sorted(rng.choice(len(tasks), min(FLAGS.tasks, len(tasks)), replace=False))]

    # --- two real groups per task (cached)
    cached = {}
    if FLAGS.groups and os.path.exists(FLAGS.groups):
        with open(FLAGS.groups, encoding="utf-8") as f:
            cached = json.load(f)
    missing = [t for t in tasks if t.id not in cached]
    if missing:
        logging.info("sampling 2 groups x J=%d for %d tasks", config.num_generations, len(missing))
        for k in range(2):
            g = stages.sample_groups(run, missing, seed=FLAGS.seed * 1000 + k)
            for t, rs in zip(missing, g.responses):
                cached.setdefault(t.id, []).append([str(r) for r in rs])
        if FLAGS.groups:
            os.makedirs(os.path.dirname(os.path.abspath(FLAGS.groups)), exist_ok=True)
            with open(FLAGS.groups, "w", encoding="utf-8") as f:
                json.dump(cached, f)

    # --- inject
    injected, kinds = [], {}
    for t in tasks:
        groups = cached[t.id]
        oracle = rule_oracle_scores([t, t], groups)
        out = inject(t, groups, oracle, rng)
        if out is None:
            logging.info("task %s: no injection possible from its responses, skipped", t.id)
            continue
        injected.append(out[0])
        kinds.update(out[1])
    H = HarnessState.from_tasks(injected)
    logging.info("%d tasks, %d injected criteria", len(injected), len(kinds))

    # --- step 0 recorded, the evolver on step 1
    with tempfile.TemporaryDirectory() as tmp:
        memory = Memory.open(tmp, embedder=section(config, "memory").embedder_name()) if method.memory else None
        if memory is not None and memory.semantic is not None:
            memory.add_criteria((t.id, c.id, c.text) for t in injected for c in t.criteria)
        first = [cached[t.id][0] for t in injected]
        S0, R0, _ = stages.score_responses(run.judge, injected, first, [H.criteria(t.id) for t in injected])
        if memory is not None:
            from harnessrl_jax.evolver import task_slice

            memory.append_step(0, [DrawRecord(0, t.id, tuple(c.id for c in H.rubric_of(t.id)),
                                              tuple(c.text for c in H.rubric_of(t.id)), tuple(r), s, rw,
                                              harness=task_slice(H, t.id))
                                   for t, r, s, rw in zip(injected, first, S0, R0)])
        second = [cached[t.id][1] for t in injected]
        S1, _, _ = stages.score_responses(run.judge, injected, second, [H.criteria(t.id) for t in injected])
        evolver, _ = build_evolver(config, method, memory)
        timer = {"critic": 0.0, "resampled": 0}
        result = evolver.step(1, [Group(t, tuple(r), s) for t, r, s in zip(injected, second, S1)], H,
                              memory=memory, hooks=stages.critic_hooks(run, FLAGS.seed + 1, timer))
        if memory is not None:
            memory.close()
    run.close()

    # --- score the diagnoses and the repairs
    labels = {a.criterion_id: str(a.label) for att in result.attributions for a in att.criteria}
    if FLAGS.records:
        with open(FLAGS.records, "w", encoding="utf-8") as f:
            for line in result.harness_records():
                f.write(json.dumps({**line, "injected": {c: kinds.get(c) for c in line["criterion_ids"]}}) + "\n")
            f.write(json.dumps({"labels": labels, "injected": kinds}) + "\n")
    acted = set()
    for e in result.log:
        if e.verdict == Verdict.ACCEPTED and e.candidate is not None:
            acted.update(e.candidate.criterion_ids)
            if e.interface == "sampling":  # a down-weight acts on the task's saturated criteria
                acted.update(c for c, k in kinds.items() if k == "saturated" and c.startswith(e.task_id + "/"))
    untouched = [c for c in labels if c not in kinds]
    rows = []
    for kind in KINDS:
        mine = [c for c, k in kinds.items() if k == kind]
        hit = [c for c in mine if labels.get(c) == kind]
        flagged = [c for c, lab in labels.items() if lab == kind]
        false = [c for c in untouched if labels[c] == kind]
        rows.append((kind, len(mine), len(hit) / len(mine) if mine else float("nan"),
                     len([c for c in flagged if kinds.get(c) == kind]) / len(flagged) if flagged else float("nan"),
                     len([c for c in hit if c in acted]) / len(hit) if hit else float("nan"),
                     len(false), len(untouched)))
    measured = [e for e in result.log if e.verdict in (Verdict.ACCEPTED, Verdict.REJECTED)]
    print(f"\nevolver diagnoses on {len(injected)} tasks of real {config.model_name} groups (J={config.num_generations},"
          f" one earlier draw in the time index), {time.perf_counter() - t0:.0f} s")
    print(f"{'failure':<10}{'injected':>9}{'recall':>8}{'precision':>10}{'fixed':>7}{'false alarms (untouched)':>27}")
    for kind, n, rec, prec, fixed, false, n_untouched in rows:
        def pct(x):
            return "  n/a" if x != x else f"{x:5.0%}"
        print(f"{kind:<10}{n:>9}{pct(rec):>8}{pct(prec):>10}{pct(fixed):>7}{false:>16} of {n_untouched}")
    print(f"candidates measured {len(measured)}, accepted {sum(e.verdict == Verdict.ACCEPTED for e in measured)}; "
          f"critic time {timer['critic']:.0f} s, {timer['resampled']} rollouts resampled")
    verdict = "ok" if all(r[2] == r[2] and r[2] > 0 for r in rows) else "some kind is never detected"
    print(f"verdict: {verdict}")


if __name__ == "__main__":
    cli.run(main)
