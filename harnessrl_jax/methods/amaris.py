"""AMARIS (Wu et al., arXiv 2605.18592), memory-augmented rubric improvement, and AMARIS++, the HarnessRL authors'
extension of it to all three interfaces without cross-task memory and without a critic. Per drawn group:

  1. analyst    one evolver-model call: notes per rollout (met, missed) and a task summary, kept in the memory
                (DrawRecord.dynamics['amaris_summary'])
  2. retrieval  static: the task's last k_s summaries and update records; dynamic (AMARIS only): the k_d most
                similar summaries of other tasks
  3. reviser    one call writing typed actions (the rubric's six ops; AMARIS++ also task weights and fields),
                checked by the ops' invariants and applied unmeasured from the next step

Without the model (`harness.proposer='rule'`) a verdict summary and a rule reviser stand in for both calls.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Sequence

import numpy as np

from harnessrl_jax import methods
from harnessrl_jax.evolver import templates
from harnessrl_jax.evolver.candidates import Candidate
from harnessrl_jax.evolver.llm_proposer import OPS_DOC
from harnessrl_jax.evolver.text import cut
from harnessrl_jax.evolver.tightening import replace_number, tags_with_kwargs, tightened_thresholds
from harnessrl_jax.harness import ops
from harnessrl_jax.harness.transitions import DEFAULT_TRANSITIONS, FROZEN_TRANSITIONS, apply_rubric
from harnessrl_jax.methods import llm
from harnessrl_jax.methods.base import Method
from harnessrl_jax.methods.embedding import VectorIndex, text_embedder
from harnessrl_jax.methods.guidance import load_template
from harnessrl_jax.methods.parts import HarnessRule, PartsContext
from harnessrl_jax.methods.samplers import configured
from harnessrl_jax.methods.updates import RuleCandidate, RuleInput, RuleProposal, achieved
from harnessrl_jax.rubric.judges.llm import render_conversation
from harnessrl_jax.rubric.reward import rubric_reward
from harnessrl_jax.settings import section
from harnessrl_jax.words import INTERFACES, Interface, Label

ANALYSE_SCHEMA = {"type": "object", "properties": {
    "rollouts": {"type": "array", "items": {"type": "object", "properties": {
        "index": {"type": "integer"}, "notes": {"type": "string"}}, "required": ["index", "notes"]}},
    "summary": {"type": "string"}}, "required": ["summary"]}


def revise_schema(interfaces: Sequence[str]) -> dict:
    opnames = [op for i in interfaces for op in llm_ops(i)]
    action = {"type": "object", "properties": {"op": {"type": "string", "enum": opnames}}, "required": ["op"]}
    return {"type": "object", "properties": {"rationale": {"type": "string"},
                                             "actions": {"type": "array", "items": action}},
            "required": ["rationale", "actions"]}


def llm_ops(interface: str) -> tuple[str, ...]:
    if interface == Interface.SAMPLING:
        return ("downweight_task", "restore_task")
    if interface == Interface.GUIDANCE:
        return ("add_field", "drop_field")
    return ("create_criterion", "rewrite_criterion", "delete_criterion", "reweight_criterion", "merge_criteria",
            "split_criterion")


@dataclasses.dataclass(frozen=True)
class AMARISConfig:
    """config.amaris: retrieval budgets, the embedder of the summaries, the reviser's limits and the rule
    fallback's schedule."""

    static_k: int = 3  # k_s: this task's last summaries and updates
    dynamic_k: int = 4  # k_d: similar summaries of other tasks (AMARIS only)
    embedder: str = "memory"  # 'memory' (the memory's embedder, else lexical) | 'lexical' | a model name or path
    max_actions: int = 4  # per reviser call
    early_share: float = 0.5  # rule reviser: recurring failures before this share of training, saturation after
    reweight_factor: float = 0.5  # rule reviser: points scale of a criterion it de-emphasises
    excerpt_chars: int = 400

    def __post_init__(self):
        if min(self.static_k, self.max_actions) < 1 or self.dynamic_k < 0:
            raise ValueError("static_k and max_actions must be >= 1, dynamic_k >= 0")
        if not 0.0 <= self.early_share <= 1.0 or not 0.0 < self.reweight_factor < 1.0:
            raise ValueError("early_share must lie in [0, 1] and reweight_factor in (0, 1)")


# ------------------------------------------------------------------------------------------- analysis

def rule_analysis(criteria: Sequence, S, rewards) -> dict[str, Any]:
    """The analyst without a model: per-rollout notes (criteria met / missed, polarity-aware) and a summary naming
    the criteria every rollout met and those none met; ids in `saturated` / `unreached`."""
    S = np.asarray(S, np.float64)
    points = np.array([c.points for c in criteria], np.float64)
    met = achieved(S, points)
    notes = []
    for j in range(S.shape[1]):
        got = [c.id for k, c in enumerate(criteria) if met[k, j] == 1]
        miss = [c.id for k, c in enumerate(criteria) if met[k, j] == 0]
        notes.append(f"rollout {j}: reward {rewards[j]:.1f}; met {got or 'none'}; missed {miss or 'none'}")
    valid = np.isfinite(met)
    rates = np.where(valid.any(axis=1), np.where(valid, met, 0.0).sum(axis=1) / np.maximum(valid.sum(axis=1), 1),
                     np.nan)
    sat = [c.id for k, c in enumerate(criteria) if rates[k] == 1.0]
    unr = [c.id for k, c in enumerate(criteria) if rates[k] == 0.0]
    split = [f"{c.text} ({rates[k]:.2f})" for k, c in enumerate(criteria) if 0.0 < rates[k] < 1.0]
    text = {c.id: c.text for c in criteria}
    r = np.asarray(rewards, np.float64)
    summary = (f"mean reward {np.nanmean(r) if np.isfinite(r).any() else float('nan'):.1f}. "
               f"Met by every rollout: {'; '.join(text[i] for i in sat) or 'none'}. "
               f"Met by none: {'; '.join(text[i] for i in unr) or 'none'}. "
               f"Split (pass rate): {'; '.join(split) or 'none'}.")
    return {"notes": notes, "summary": summary, "saturated": sat, "unreached": unr}


def recurring(current: Sequence[str], past: Sequence[Sequence[str]]) -> list[str]:
    """Ids in `current` and in every one of the `past` draws' lists (at least one past draw)."""
    if not past:
        return []
    return [i for i in current if all(i in p for p in past)]


class AMARISRule(HarnessRule):
    """AMARIS (interfaces: the rubric; dynamic retrieval) or AMARIS++ (all three; static retrieval only) as a
    harness update after the evolver (methods.updates)."""

    uses_evolver_model = True

    def __init__(self, config: AMARISConfig = AMARISConfig(), *, plus: bool = False, client=None,
                 total_steps: int = 1):
        self.config, self.plus, self.client, self.total_steps = config, plus, client, max(int(total_steps), 1)
        self.name = "amaris_pp" if plus else "amaris"
        self.interfaces = INTERFACES if plus else (Interface.RUBRIC,)
        self.index: VectorIndex | None = None
        self.texts: dict[tuple[str, int], str] = {}  # (task id, step) -> summary, for the dynamic retrieval
        if client is not None:
            self.analyse_template = load_template("amaris_analyse")
            self.revise_template = load_template("amaris_revise")

    @classmethod
    def build(cls, ctx: PartsContext, *, settings: AMARISConfig, plus: bool = False):
        rule = cls(settings, plus=plus, client=ctx.client, total_steps=ctx.config.total_steps)
        rule.start(ctx.memory)
        return rule

    @property
    def dynamic(self) -> bool:
        return not self.plus and self.config.dynamic_k > 0

    @property
    def source(self) -> str:
        return f"{self.name}-{'llm' if self.client is not None else 'rule'}"

    def start(self, memory) -> None:
        """The summary index, rebuilt from the summaries the memory holds (a resumed run finds its past)."""
        if not self.dynamic:
            return
        self.index = VectorIndex(text_embedder(self.config.embedder, memory))
        if memory is not None:
            keys, texts = [], []
            for d in memory.store.draws():
                s = (d.dynamics or {}).get("amaris_summary")
                if s:
                    keys.append((d.task_id, d.step))
                    texts.append(s)
            self.index.add(keys, texts)
            self.texts.update(zip(keys, texts))

    # -- the model's part, or the rules' ---------------------------------------------------------------------

    def analyse(self, task, criteria, S, responses, rewards) -> dict[str, Any]:
        base = rule_analysis(criteria, S, rewards)
        if self.client is None:
            return base
        S = np.asarray(S, np.float64)
        rubric = "\n".join(f"- {c.id} [{c.points:+g}] {c.text}" for c in criteria)
        group = "\n".join(f"--- rollout {j} (reward {rewards[j]:.1f}; verdicts "
                          f"{ {c.id: (None if np.isnan(S[k, j]) else int(S[k, j])) for k, c in enumerate(criteria)} })"
                          f" ---\n{cut(y, self.config.excerpt_chars)}" for j, y in enumerate(responses))
        obj = llm.ask(self.client, templates.fill(self.analyse_template, conversation=render_conversation(task),
                                                  rubric=rubric, group=group), ANALYSE_SCHEMA, "summary")
        if obj is None or not str(obj.get("summary", "")).strip():
            return base  # no answer: the verdict summary stands in, and says so
        notes = [f"rollout {d.get('index')}: {d.get('notes')}" for d in obj.get("rollouts", []) if isinstance(d, dict)]
        return {**base, "notes": notes or base["notes"], "summary": str(obj["summary"]).strip()}

    def revise(self, inp: RuleInput, n: int, analysis, past, updates, similar) -> tuple[list[ops.Action], str,
                                                                                        str | None]:
        """(actions, rationale, why invalid or None) for draw n."""
        if self.client is None:
            return self.rule_revise(inp, n, analysis, past), "rule reviser", None
        g, H = inp.draws[n], inp.state
        tid = g.task.id
        rubric = "\n".join(f"- {c.id} [{c.points:+g} points{', ANCHOR: reweight only' if c.anchor else ''}] "
                           f"{c.text}  tags={list(c.tags)}" for c in H.rubric_of(tid))
        fields = "\n".join(f"- <{name}> {cut(f.text, 200)}" for name, f in H.fields(tid)) or "(none)"
        hist = "\n".join(f"- step {d.step}: {(d.dynamics or {}).get('amaris_summary', '(no summary)')}"
                         for d in past) or "(none)"
        upd = "\n".join(f"- step {u.step}: {u.record.interface} {u.record.op} {list(u.record.criterion_ids)} -> "
                        f"{u.record.verdict}{' (later undone)' if u.undone else ''}" for u in updates
                        if u.record.op != "noop") or "(none)"
        sim = "\n".join(f"- task {k[0]}, step {k[1]} (cosine {c:.2f}): {t}" for c, k, t in similar) or "(none)"
        prompt = templates.fill(
            self.revise_template, conversation=render_conversation(g.task), rubric=rubric, fields=fields,
            cap=int(H.guidance.cap), level=int(H.sampling.level[H.index(tid)]), summary=analysis["summary"],
            notes="\n".join(analysis["notes"]), history=hist, updates=upd, similar=sim,
            ops="\n".join(OPS_DOC[i] if i != Interface.SAMPLING else
                          '{"op": "downweight_task"}\n{"op": "restore_task"}' for i in self.interfaces),
            max_actions=self.config.max_actions)
        obj = llm.ask(self.client, prompt, revise_schema(self.interfaces), "actions")
        if obj is None:
            return [], "", "no answer from the reviser model"
        actions, why = llm.parse_actions(obj.get("actions"), tid, self.interfaces)
        return actions[: self.config.max_actions], str(obj.get("rationale", "")), why

    def rule_revise(self, inp: RuleInput, n: int, analysis, past) -> list[ops.Action]:
        """The rule reviser: recurring failures early in training, recurring saturation later; every action valid in
        order on H_t."""
        c, H, g = self.config, inp.state, inp.draws[n]
        tid = g.task.id
        crits = {x.id: x for x in H.rubric_of(tid)}
        past_sat = [(d.dynamics or {}).get("amaris_saturated", []) for d in past]
        past_unr = [(d.dynamics or {}).get("amaris_unreached", []) for d in past]
        wanted: list[ops.Action] = []
        if inp.step / self.total_steps < c.early_share:
            for cid in recurring(analysis["unreached"], past_unr):
                x = crits[cid]
                if not x.anchor:  # the anchors' share is fixed: scaling one would only rescale the others
                    wanted.append(ops.ReweightCriterion(tid, cid, x.points * c.reweight_factor))
                if self.plus:
                    wanted.append(ops.AddField(tid, "criterion", f"Make sure your answer meets this: {x.text}", cid))
        else:
            sat = recurring(analysis["saturated"], past_sat)
            for cid in sat:
                x = crits[cid]
                tighter = tightened_thresholds(x, list(g.responses), prompt=g.task.user_text) \
                    if x.points > 0 and not x.anchor else []
                if tighter:
                    kw, _, old, new = tighter[0]
                    wanted.append(ops.RewriteCriterion(tid, cid, replace_number(x.text, old, new),
                                                       tags_with_kwargs(x, kw)))
                elif not x.anchor:
                    wanted.append(ops.ReweightCriterion(tid, cid, x.points * c.reweight_factor))
            positive = [i for i, x in crits.items() if x.points > 0]
            if self.plus and positive and all(i in sat for i in positive):  # the task as a whole first
                wanted.insert(0, ops.DownweightTask(tid))
        out, state = [], H
        for a in wanted:
            if len(out) >= c.max_actions:
                break
            if a.is_valid(state):
                state = DEFAULT_TRANSITIONS.apply(state, a)
                out.append(a)
        return out

    # -- one step --------------------------------------------------------------------------------------------

    def propose(self, inp: RuleInput) -> RuleProposal:
        c, H = self.config, inp.state
        out = RuleProposal()
        added_keys, added_texts = [], []
        counts = {"analysed": 0, "actions": 0, "retrieved_static": 0, "retrieved_dynamic": 0}
        for n in inp.first_draws():
            g = inp.draws[n]
            tid = g.task.id
            criteria = H.rubric_of(tid)
            rewards = rubric_reward(H.points(tid), np.asarray(g.S, np.float64))
            analysis = self.analyse(g.task, criteria, g.S, g.responses, rewards)
            counts["analysed"] += 1
            past, updates = [], []
            if inp.memory is not None:
                past = inp.memory.history(tid, before_step=inp.step, limit=c.static_k)
                updates = inp.memory.updates(tid, before_step=inp.step)[: c.static_k * 4]
            similar = []
            if self.dynamic and self.index is not None and len(self.index):
                similar = [(cos, key, self.texts.get(key, "")) for cos, key in
                           self.index.search(analysis["summary"], c.dynamic_k, exclude=lambda k, tid=tid: k[0] == tid)]
            counts["retrieved_static"] += len(past)
            counts["retrieved_dynamic"] += len(similar)
            actions, rationale, invalid = self.revise(inp, n, analysis, past, updates, similar)
            out.dynamics[n] = {"amaris_summary": analysis["summary"], "amaris_saturated": analysis["saturated"],
                               "amaris_unreached": analysis["unreached"]}
            added_keys.append((tid, inp.step))
            added_texts.append(analysis["summary"])
            if invalid is None and actions:
                try:
                    DEFAULT_TRANSITIONS.apply(H, actions)
                except ops.InvalidAction as e:
                    invalid = e.reason
            evidence = tuple(f"draw:{d.draw_id}" for d in past if d.draw_id is not None)
            by_iface = {i: [a for a in actions if a.interface == i] for i in INTERFACES}
            if invalid is not None:
                iface = actions[0].interface if actions else self.interfaces[0]
                out.candidates.append(RuleCandidate(n, Candidate(tid, Interface(iface), tuple(actions), None, (),
                                                                 evidence, rationale, f"{self.name}:revise",
                                                                 "revise", 1.0, self.source, invalid)))
                continue
            for iface, acts in by_iface.items():
                if not acts:
                    continue
                counts["actions"] += len(acts)
                label = Label.SATURATED if inp.step / self.total_steps >= c.early_share else Label.BLIND
                cids = tuple(dict.fromkeys(x for a in acts for x in
                                           ([a.criterion_id] if getattr(a, "criterion_id", None) else [])))
                out.candidates.append(RuleCandidate(n, Candidate(
                    tid, iface, tuple(acts), label if self.client is None else None, cids, evidence,
                    f"{rationale} | summary: {analysis['summary']}"[:2000], f"{self.name}:revise", "revise", 1.0,
                    self.source), f"{self.name}: applied unmeasured (no critic)"))
        if self.dynamic and self.index is not None:
            self.index.add(added_keys, added_texts)
            self.texts.update(zip(added_keys, added_texts))
        out.metrics = {f"{self.name}/{k}": float(v) for k, v in counts.items()}
        return out


@methods.register("amaris", settings=("amaris", AMARISConfig))
def amaris(config) -> Method:
    """AMARIS: the analyst-reviser loop on the rubric with static and dynamic retrieval, applied unmeasured."""
    return Method(name="amaris", sampler=configured(config),
                  transitions=dataclasses.replace(FROZEN_TRANSITIONS, rubric=apply_rubric), critic=False,
                  memory=not section(config, "harness").no_memory,
                  rule=functools.partial(AMARISRule, settings=methods.settings(config, "amaris")),
                  rule_interfaces=(Interface.RUBRIC,))


@methods.register("amaris_pp", settings=("amaris", AMARISConfig))
def amaris_pp(config) -> Method:
    """AMARIS++: the reviser over all three interfaces, static (same-task) retrieval only, no critic."""
    return Method(name="amaris_pp", sampler=configured(config), critic=False,
                  memory=not section(config, "harness").no_memory,
                  rule=functools.partial(AMARISRule, settings=methods.settings(config, "amaris"), plus=True),
                  rule_interfaces=INTERFACES)
