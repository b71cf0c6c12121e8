"""CoCA's scheme (methods.parts.Scheme): the groups of a step and how it trains on them.

    normal  = scheme.sample(run, H, idx, tasks, ...)    Y_N (bare prompts, n = G_N) and Y_G (rubric C shown, n = G_G,
                                                        seed + 1), both through stages.sample_groups, theta_old
    S, r    = scheme.judge(run, H, tasks, normal)       both groups under the original rubric C, one pooled call;
                                                        the Normal group's S and rewards go on through the step
    ...     the attributor observes the Normal groups, the memory records them (as for every method)
    result  = scheme.train(run, state, ...)             diagnose -> calibrate (C~) -> re-judge the rewritten rows
                                                        -> gate -> advantages -> teacher top-k (theta_old) -> one
                                                        sharded step: L_GRPO + lambda_D * L_OPSD
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections import Counter
from typing import Sequence

import jax
import numpy as np

from harnessrl_jax.evolver import templates
from harnessrl_jax.methods.coca.states import (SATURATED, STATES, TOO_HARD, UNJUDGED, CoCAConfig, achievement,
                                        diagnose, rates as achievement_rates, select_frontiers)
from harnessrl_jax.methods.coca.calibration import STRENGTHEN, WEAKEN, Calibrator
from harnessrl_jax.methods.guidance import PromptBudget, TaskPrompts, after_last_user, load_template
from harnessrl_jax.methods.parts import PartsContext, Scheme, TrainResult
from harnessrl_jax.rl.batch import build_batch, concat_rollouts, round_up
from harnessrl_jax.rubric.reward import rubric_reward
from harnessrl_jax.stages import GroupBatch, compute_advantages, sample_groups, score_responses, train_on_batch


def criteria_block(criteria: Sequence) -> str:
    """Requirements ('Aim to satisfy', with their points) then pitfalls ('Avoid', with their penalties)."""
    pos = [f"- {c.text} (worth {c.points:g} points)" for c in criteria if c.points > 0]
    neg = [f"- {c.text} (penalty {abs(c.points):g} points)" for c in criteria if c.points < 0]
    blocks = (["Aim to satisfy:"] + pos if pos else []) + (["Avoid:"] + neg if neg else [])
    return "\n".join(blocks)


def guided_messages(task, criteria: Sequence, template: str):
    """P_G(x, C): the rubric (with points, requirements and pitfalls apart) after the last user message."""
    return after_last_user(task.prompt, templates.fill(template, criteria=criteria_block(criteria)).strip())


def teacher_messages(task, learnable: Sequence, demo: str | None, template: str):
    """P_T(x, L_x, y_GF): the learnable criteria, then the Guided Frontier as an example when given."""
    demonstration = "" if demo is None else \
        f"An example response that meets them:\n<example>\n{demo}\n</example>\n"
    return after_last_user(task.prompt, templates.fill(template, criteria=criteria_block(learnable),
                                                       demonstration=demonstration).strip())


def fitted(build, items: Sequence, budget: PromptBudget):
    """(messages, shortened) of build(items[:n]) for the largest n >= 1 that fits the budget, or (None, True)."""
    for n in range(len(items), 0, -1):
        m = build(items[:n])
        if budget.fits(m):
            return m, n < len(items)
    return None, True


def guided_prompts(tasks: Sequence, criteria: Sequence[Sequence], template: str,
                   budget: PromptBudget) -> list[TaskPrompts]:
    """P_G of each task under its rubric: the largest prefix of the rubric that fits the budget, or the bare prompt
    (counted over budget) when none does."""
    prompts = []
    for task, crits in zip(tasks, criteria):
        m, cut = fitted(lambda cs, task=task: guided_messages(task, cs, template), list(crits), budget)
        prompts.append(TaskPrompts((tuple(task.prompt) if m is None else m,), guided=m is not None,
                                   shortened=cut and m is not None, over_budget=m is None))
    return prompts


def diagnose_groups(S_normal: Sequence, S_guided: Sequence, criteria: Sequence[Sequence], config: CoCAConfig):
    """(rates, states) per task: (pN, pG) of its two groups under its original rubric and each criterion's state."""
    points = [np.array([c.points for c in cs], np.float64) for cs in criteria]
    rates = [achievement_rates(sn, sg, p) for sn, sg, p in zip(S_normal, S_guided, points)]
    states = [diagnose(pn, pg, rule=config.learnable_rule, regress_margin=config.regress_margin,
                       learnable_margin=config.learnable_margin) for pn, pg in rates]
    return rates, states


def state_fractions(states: Sequence[Sequence[str]]) -> dict[str, float]:
    """coca/frac_<state>: each state's share of the judged criteria of a step's queries."""
    counts = Counter(s for ss in states for s in ss if s != UNJUDGED)
    judged = sum(counts.values())
    return {f"coca/frac_{s}": counts[s] / max(judged, 1) for s in STATES}


def visit_line(step: int, task, criteria: Sequence, states: Sequence[str], rates, rewrites: Sequence,
               r_normal, r_guided, r_normal_original, gate) -> dict:
    """One query's coca.jsonl line: its states, rates, rewrites, rewards under C~ (and the Normal ones under C)
    and its gate, keyed by criterion id."""
    ids = [c.id for c in criteria]
    return {"step": step, "task_id": task.id, "states": dict(zip(ids, states)),
            "p_normal": dict(zip(ids, _floats(rates[0]))), "p_guided": dict(zip(ids, _floats(rates[1]))),
            "rewrites": [r.to_dict() for r in rewrites],
            "reward_normal": _floats(r_normal), "reward_guided": _floats(r_guided),
            "reward_normal_original": _floats(r_normal_original), "qualified": gate.qualified,
            "gf_index": gate.gf_index, "cf_index": gate.cf_index, "learnable": [ids[k] for k in gate.learnable]}


def both_groups(judge, tasks, normal, guided, criteria):
    """((S, rewards) of the Normal groups, (S, rewards) of the Guided ones, metrics): one pooled judge call when
    the groups are the same size, one per group otherwise (its rewards are one [T, J] array per call)."""
    T = len(tasks)
    if len(normal[0]) == len(guided[0]):
        S, rewards, metrics = score_responses(judge, list(tasks) * 2, list(normal) + list(guided),
                                              list(criteria) * 2)
        return (S[:T], rewards[:T]), (S[T:], rewards[T:]), metrics
    S_n, r_n, m_n = score_responses(judge, tasks, normal, criteria)
    S_g, r_g, m_g = score_responses(judge, tasks, guided, criteria)
    share = len(normal[0]) / (len(normal[0]) + len(guided[0]))
    metrics = {"reward/judge_failures": m_n["reward/judge_failures"] + m_g["reward/judge_failures"],
               "reward/judged_fraction": share * m_n["reward/judged_fraction"]
               + (1 - share) * m_g["reward/judged_fraction"]}
    return (S_n, r_n), (S_g, r_g), metrics


@dataclasses.dataclass
class Visit:
    """What one step keeps between its stages."""

    tasks: list
    criteria: list  # per task, the original rubric C
    normal: GroupBatch
    guided: GroupBatch
    S_normal: list
    S_guided: list
    r_normal: np.ndarray  # [T, G_N] under C
    r_guided: np.ndarray


class CoCAScheme(Scheme):
    """CoCA's dual groups, calibration, gate and distillation (see the module docstring); `client` is the evolver
    model's (LLM criteria's rewriter) or None; `workdir` gets coca.jsonl; `memory` (the run's, or None) holds the
    task's earlier responses, the ones a rule criterion's threshold is moved on (never the responses it then
    re-scores)."""

    name = "coca"
    writes_prompts = True
    uses_evolver_model = True  # the rewriter of LLM criteria

    def __init__(self, config: CoCAConfig, *, client=None, workdir: str | None = None, memory=None):
        self.config, self.workdir, self.memory = config, workdir, memory
        self.calibrator = Calibrator(client, length_factor=config.rewrite_length_factor)
        self.guided_template = load_template(config.guided_template)
        self.teacher_template = load_template(config.teacher_template)
        self.visit: Visit | None = None
        self.steps_done = 0
        self._append = False  # a fresh run starts coca.jsonl anew; a resumed one appends after its cut
        self._metrics: dict[str, float] = {}
        self._timings: dict[str, float] = {}

    @classmethod
    def build(cls, ctx: PartsContext, *, settings: CoCAConfig):
        return cls(settings, client=ctx.client, workdir=ctx.workdir, memory=ctx.memory)

    @classmethod
    def check(cls, config, *, settings: CoCAConfig) -> list[str]:
        out = []
        if sum(settings.groups) != int(config.num_generations):
            out.append(f"--config.coca.groups={settings.groups} splits the rollout budget --config.num_generations="
                       f"{config.num_generations} per query into (G_N, G_G): their sum must equal it")
        if int(config.mini_batches) != 1:
            out.append(f"--config.mini_batches={config.mini_batches}: CoCA's teacher targets are taken for one "
                       f"update per batch (theta_old = the current params); use 1")
        return out

    # ------------------------------------------------------------------------------------------- rollouts

    def sample(self, run, harness, idx: Sequence[int], tasks: Sequence, *, step: int, seed: int) -> GroupBatch:
        """Y_N and Y_G from the engine's (pre-update) params under the harness's rubric C; returns the Normal
        groups."""
        criteria = [harness.criteria(t.id) for t in tasks]
        g_n, g_g = self.config.groups
        start = time.perf_counter()
        normal = sample_groups(run, tasks, None, seed=seed, n=g_n)
        t_normal = time.perf_counter() - start
        prompts = guided_prompts(tasks, criteria, self.guided_template, PromptBudget(run.tokenizer, run.prompt_limit))
        start = time.perf_counter()
        guided = sample_groups(run, tasks, seed=seed + 1, n=g_g, prompts=prompts)
        self._timings = {"time/rollout_normal": t_normal, "time/rollout_guided": time.perf_counter() - start}
        self.visit = Visit(list(tasks), [list(c) for c in criteria], normal, guided, [], [], np.zeros(0),
                           np.zeros(0))
        return normal

    def judge(self, run, harness, tasks: Sequence, groups: GroupBatch):
        """Both groups under the original rubric in one pooled call; returns (S, rewards, metrics) of the Normal
        groups."""
        v = self.visit
        (v.S_normal, v.r_normal), (v.S_guided, v.r_guided), metrics = both_groups(
            run.judge, v.tasks, v.normal.responses, v.guided.responses, v.criteria)
        return v.S_normal, v.r_normal, metrics

    # ---------------------------------------------------------------------------------------------- train

    def train(self, run, state, *, step: int, harness, next_harness, tasks: Sequence, groups: GroupBatch,
              rewards: np.ndarray, u: np.ndarray) -> TrainResult:
        """Diagnosis, calibration, gate, advantages and the one train step; the rewards given back are rN [T, G_N]
        under C~ (what the sampler observes)."""
        cfg, v = self.config, self.visit
        T = len(v.tasks)
        timings = dict(self._timings)
        points = [np.array([c.points for c in cs], np.float64) for cs in v.criteria]

        # --- diagnosis on the original rubric
        rates, states = diagnose_groups(v.S_normal, v.S_guided, v.criteria, cfg)

        # --- calibration (this visit only) and re-judging of the rewritten rows on both groups
        start = time.perf_counter()
        adapted = [list(cs) for cs in v.criteria]
        rewrites = [[] for _ in range(T)]
        S_n, S_g = [s.copy() for s in v.S_normal], [s.copy() for s in v.S_guided]
        if cfg.calibrate:
            todo = [n for n in range(T) if {SATURATED, TOO_HARD} & set(states[n])]
            out = self.calibrator.calibrate_many([(v.tasks[n], v.criteria[n], states[n], rates[n][0], rates[n][1],
                                                   self.earlier_responses(v.tasks[n], step)) for n in todo])
            for n, (new, rw) in zip(todo, out):
                adapted[n], rewrites[n] = list(new), rw
            changed = [(n, [r.index for r in rewrites[n] if r.valid]) for n in todo]
            changed = [(n, ks) for n, ks in changed if ks]
            if changed:
                (new_n, _), (new_g, _), _ = both_groups(
                    run.judge, [v.tasks[n] for n, _ in changed], [v.normal.responses[n] for n, _ in changed],
                    [v.guided.responses[n] for n, _ in changed], [[adapted[n][k] for k in ks] for n, ks in changed])
                for j, (n, ks) in enumerate(changed):
                    S_n[n][ks], S_g[n][ks] = new_n[j], new_g[j]
        timings["time/calibration"] = time.perf_counter() - start
        rN = np.stack([rubric_reward(p, s) for p, s in zip(points, S_n)])
        rG = np.stack([rubric_reward(p, s) for p, s in zip(points, S_g)])

        # --- the gate, and the advantages of each group (or pooled over both)
        gates = [select_frontiers(states[n], achievement(S_g[n], points[n]), rN[n], rG[n],
                                    margin=cfg.frontier_margin) for n in range(T)]
        qualified = np.array([g.qualified for g in gates])
        g_n, g_g = cfg.groups
        if cfg.pooled_baseline:
            adv, adv_metrics = compute_advantages(np.concatenate([rN, rG], axis=1), run.config.advantage)
            A_n, A_g = adv[:, :g_n], adv[:, g_n:].copy()
        else:
            A_n, adv_metrics = compute_advantages(rN, run.config.advantage)
            A_g, _ = compute_advantages(rG, run.config.advantage)
            A_g = A_g.copy()
        if cfg.guided_gate == "dynamic":
            A_g[qualified] = np.nan  # Guided GRPO only where the gate failed
        elif cfg.guided_gate == "never":  # the "- L_GGRPO" ablation
            A_g[:] = np.nan

        # --- the train rows: Normal in the bare prompt, Guided in the guided prompt
        rollouts = concat_rollouts(v.normal.rollouts, v.guided.rollouts)
        student_rows = self._student_rows(gates, g_n, g_g, T)
        if cfg.distill_on == "guided_frontier":  # the Guided Frontier's row goes after its bare prompt
            index = rollouts.prompt_index.copy()
            for n, rows in student_rows.items():
                index[rows] = v.normal.rollouts.prompt_index[n * g_n]
            rollouts = dataclasses.replace(rollouts, prompt_index=index)
        u = np.asarray(u, np.float32)
        weights = np.concatenate([np.repeat(u, g_n), np.repeat(u, g_g)])
        batch = build_batch(rollouts, np.concatenate([A_n.reshape(-1), A_g.reshape(-1)]), weights,
                            seq_len=run.seq_len, pad_id=run.engine.pad_id, num_rows=run.rows)

        # --- the teacher's top-k under theta_old, placed at the student rows (on device)
        start = time.perf_counter()
        batch, teacher_info = self._distill_targets(run, state, batch, rollouts, gates, student_rows)
        timings["time/teacher"] = time.perf_counter() - start

        start = time.perf_counter()
        state, train_metrics = train_on_batch(run, state, batch)
        timings["time/train_step"] = time.perf_counter() - start

        self._metrics = self._step_metrics(states, rewrites, v, rN, rG, gates, student_rows, teacher_info, S_n,
                                           points)
        tokens = train_metrics.get("train/distill_tokens", 0.0)
        self._metrics["coca/kl"] = train_metrics.get("train/distill_kl", float("nan")) if tokens else float("nan")
        self._write_lines(step, v, states, rates, rewrites, rN, rG, gates)
        self.steps_done = step + 1
        return TrainResult(state, train_metrics, adv_metrics, timings, rN)

    def earlier_responses(self, task, step: int) -> tuple[str, ...]:
        """The task's responses at its latest earlier visit (the memory's time index), where a rule criterion's
        threshold is chosen: held out from the groups it re-scores, so a rewrite that splits them was not fitted to
        them. Empty on a first visit or without a memory: its rule criteria then stay as they are this visit."""
        if self.memory is None:
            return ()
        last = self.memory.history(task.id, before_step=step, limit=1)
        return tuple(last[0].responses) if last else ()

    def _student_rows(self, gates, g_n: int, g_g: int, T: int) -> dict[int, list[int]]:
        """Per qualified query, the batch rows distilled into."""
        out = {}
        for n, g in enumerate(gates):
            if not g.qualified:
                continue
            if self.config.distill_on == "current_frontier":
                out[n] = [n * g_n + g.cf_index]
            elif self.config.distill_on == "all_normal":
                out[n] = list(range(n * g_n, (n + 1) * g_n))
            else:
                out[n] = [T * g_n + n * g_g + g.gf_index]
        return out

    def teacher_rows(self, run) -> int:
        """The fixed number of teacher sequences per step (one compile of the teacher forward)."""
        per = self.config.groups[0] if self.config.distill_on == "all_normal" else 1
        return round_up(run.config.tasks_per_step * per, run.trainer.data_parallel * run.trainer.micro_batches)

    def _distill_targets(self, run, state, batch, rollouts, gates, student_rows):
        """The batch with distill_ids / distill_logp / distill_mask; always present (zero mask when nothing
        qualified) so the train step compiles once."""
        v, cfg = self.visit, self.config
        D, L = self.teacher_rows(run), run.seq_len
        t_len = round_up(run.prompt_limit + 2 * run.config.max_new_tokens, 8)
        budget = PromptBudget(run.tokenizer, run.prompt_limit + run.config.max_new_tokens)
        tokens = np.full((D, t_len), run.engine.pad_id, np.int32)
        attention = np.zeros((D, t_len), bool)
        positions = np.zeros((D, L), np.int32)
        rows = np.full(D, -1, np.int32)
        mask = np.zeros(batch.loss_mask.shape, bool)
        d, over = 0, 0
        for n, srows in student_rows.items():
            g = gates[n]
            task = v.tasks[n]
            learnable = [v.criteria[n][k] for k in g.learnable]
            demo = v.guided.responses[n][g.gf_index] if cfg.teacher_demo else None
            m, _ = fitted(lambda cs: teacher_messages(task, cs, demo, self.teacher_template), learnable, budget)
            if m is None:
                over += 1
                continue
            p_t = run.tokenizer.apply_chat_template([dict(x) for x in m], add_generation_prompt=True, tokenize=True)
            for r in srows:
                p_s = len(rollouts.prompt_ids[rollouts.prompt_index[r]])
                c = int(rollouts.lengths[r])
                tokens[d, :len(p_t)] = p_t
                tokens[d, len(p_t):len(p_t) + c] = rollouts.tokens[r, :c]
                attention[d, :len(p_t) + c] = True
                positions[d] = np.clip(np.arange(L) + (len(p_t) - p_s), 0, t_len - 1)
                rows[d] = r
                mask[r] = batch.loss_mask[r]
                d += 1
        info = {"teacher_rows": d, "teacher_over_budget": over}
        if d and run.trainer.loss.distill_coef > 0:  # lambda_D = 0 (the "- L_FrontierOPSD" row): no teacher needed
            ids, logp = run.trainer.teacher_topk(run.trainer.policy_params(state), tokens, attention, positions,
                                                 rows, k=cfg.topk, num_rows=batch.num_rows)
            jax.block_until_ready(logp)
        else:  # nothing to distil this step: zero targets, the same shapes, no teacher forward
            mask[:] = False
            ids = np.zeros((batch.num_rows, L, cfg.topk), np.int32)
            logp = np.zeros((batch.num_rows, L, cfg.topk), np.float32)
        return batch._replace(distill_ids=ids, distill_logp=logp, distill_mask=mask), info

    # ------------------------------------------------------------------------------------------------ logs

    def _step_metrics(self, states, rewrites, v, rN, rG, gates, student_rows, teacher_info, S_n, points):
        out = state_fractions(states)
        rw = [r for rs in rewrites for r in rs]
        out["coca/rewrites_strengthen"] = float(sum(r.valid and r.direction == STRENGTHEN for r in rw))
        out["coca/rewrites_weaken"] = float(sum(r.valid and r.direction == WEAKEN for r in rw))
        out["coca/rewrites_invalid"] = float(sum(r.outcome.startswith("invalid") for r in rw))
        out["coca/rewrites_failed"] = float(sum(r.outcome == "failed" for r in rw))
        out["coca/rewrites_skipped"] = float(sum(r.outcome == "skipped" for r in rw))
        # rewritten criteria that now split the Normal group (achieved by some, not all)
        became = []
        for n, rs in enumerate(rewrites):
            a = achievement(S_n[n], points[n])
            for r in rs:
                if r.valid:
                    row = a[r.index][~np.isnan(a[r.index])]
                    became.append(bool(row.size) and 0 < row.mean() < 1)
        out["coca/rewrite_became_discriminative"] = float(np.mean(became)) if became else float("nan")
        # criteria that split the Normal group (0 < pN < 1) under C and under C~
        def split_share(S_list):
            p = np.concatenate([achievement_rates(s, s, pts)[0] for s, pts in zip(S_list, points)])
            p = p[~np.isnan(p)]
            return float(np.mean((p > 0) & (p < 1))) if p.size else float("nan")
        out["coca/discriminative_frac_before"] = split_share(v.S_normal)
        out["coca/discriminative_frac_after"] = split_share(S_n)
        std_before, std_after = np.nanstd(v.r_normal, axis=1), np.nanstd(rN, axis=1)
        out["coca/group_reward_std_before"] = float(np.nanmean(std_before))
        out["coca/group_reward_std_after"] = float(np.nanmean(std_after))
        flat_before, flat_after = std_before == 0, std_after == 0
        out["coca/zero_variance_before"] = float(flat_before.mean())
        out["coca/zero_variance_after"] = float(flat_after.mean())
        out["coca/zero_variance_restored"] = float((flat_before & ~flat_after).sum() / max(flat_before.sum(), 1))
        q = [g for g in gates if g.qualified]
        out["coca/opsd_activation"] = len(q) / max(len(gates), 1)
        out["coca/guided_grpo_queries"] = float({"always": len(gates), "never": 0}.get(
            self.config.guided_gate, len(gates) - len(q)))
        out["coca/frontier_gain"] = float(np.mean([g.gain for g in q])) if q else float("nan")
        out["coca/distilled_rows"] = float(sum(len(r) for r in student_rows.values()))
        out["coca/teacher_over_budget"] = float(teacher_info["teacher_over_budget"])
        out["coca/reward_normal"] = float(np.nanmean(rN))
        out["coca/reward_guided"] = float(np.nanmean(rG))
        out["coca/reward_normal_original"] = float(np.nanmean(v.r_normal))
        out["coca/length_normal"] = float(v.normal.rollouts.lengths.mean())
        out["coca/length_guided"] = float(v.guided.rollouts.lengths.mean())
        out["coca/guided_over_budget"] = float(sum(v.guided.over_budget))
        return out

    def _write_lines(self, step, v, states, rates, rewrites, rN, rG, gates):
        if not self.workdir or jax.process_index() != 0:
            return
        mode, self._append = ("a" if self._append else "w"), True
        with open(os.path.join(self.workdir, "coca.jsonl"), mode, encoding="utf-8") as f:
            for n, task in enumerate(v.tasks):
                f.write(json.dumps(visit_line(step, task, v.criteria[n], states[n], rates[n], rewrites[n], rN[n],
                                              rG[n], v.r_normal[n], gates[n])) + "\n")

    def metrics(self) -> dict[str, float]:
        return dict(self._metrics)

    def state_dict(self) -> dict:
        return {"steps_done": self.steps_done}

    def load_state_dict(self, state) -> None:
        """Resumed at `steps_done`: coca.jsonl lines of later steps belong to steps that will run again (a
        checkpoint without the scheme's state, taken part-way through a step, keeps the file as it is)."""
        self._append = True
        if state is None:
            return
        self.steps_done = int(state.get("steps_done", 0))
        path = os.path.join(self.workdir or "", "coca.jsonl")
        if self.workdir and os.path.isfile(path) and jax.process_index() == 0:
            with open(path, encoding="utf-8") as f:
                keep = [line for line in f if line.strip() and json.loads(line)["step"] < self.steps_done]
            with open(path, "w", encoding="utf-8") as f:
                f.writelines(keep)


def _floats(x) -> list:
    return [None if not np.isfinite(v) else float(v) for v in np.asarray(x, np.float64).reshape(-1)]


__all__ = ["CoCAScheme", "both_groups", "criteria_block", "diagnose_groups", "guided_messages", "guided_prompts",
           "state_fractions", "teacher_messages", "visit_line"]
