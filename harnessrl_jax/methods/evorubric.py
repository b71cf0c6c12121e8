"""EvoRubric (Guan et al., arXiv 2605.29847): prune, regenerate and verify criteria from the policy's own groups.
Used alone (`method='evorubric'`) and as HarnessRL's rubric rule (`harness.rubric_rule='evorubric'`). Per task:

  1. prune       non-anchor criteria of zero verdict variance in each of the task's last P draws (one positive stays)
  2. regenerate  R candidate sets of up to M criteria, from the prompt and the group's best and worst responses
  3. verify      a meta-verifier per criterion, zero-variance ones dropped; set r is kept when the Spearman rho of
                 the rewards under (rubric + r) with the mean of those under the other sets is >= `consensus`
  4. archive     the kept criteria join the rubric (the median positive seed points), up to K_max = 2 x seed size

The generator and meta-verifier are the evolver model, or rule stand-ins under `harness.proposer='rule'`.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Sequence

import numpy as np

from harnessrl_jax import methods
from harnessrl_jax.evolver import templates
from harnessrl_jax.evolver.candidates import Candidate
from harnessrl_jax.evolver.text import content_words, cut, jaccard, words
from harnessrl_jax.evolver.tightening import rule_tags
from harnessrl_jax.harness import ops
from harnessrl_jax.harness.transitions import DEFAULT_TRANSITIONS, FROZEN_TRANSITIONS, apply_rubric
from harnessrl_jax.methods import llm
from harnessrl_jax.methods.base import Method
from harnessrl_jax.methods.guidance import load_template
from harnessrl_jax.methods.parts import HarnessRule, PartsContext
from harnessrl_jax.methods.samplers import configured
from harnessrl_jax.methods.updates import RuleCandidate, RuleInput, RuleProposal
from harnessrl_jax.rubric import rules
from harnessrl_jax.rubric.judges.llm import render_conversation
from harnessrl_jax.rubric.reward import rubric_reward, satisfied, varies
from harnessrl_jax.rubric.schema import Criterion
from harnessrl_jax.settings import section
from harnessrl_jax.words import Interface, Label

ORIGIN = "evorubric"
GENERATE_SCHEMA = {"type": "object", "properties": {"criteria": {"type": "array", "items": {
    "type": "object", "properties": {"text": {"type": "string"}, "pitfall": {"type": "boolean"}},
    "required": ["text"]}}}, "required": ["criteria"]}
VERIFY_SCHEMA = {"type": "object", "properties": {"accept": {"type": "boolean"}, "reason": {"type": "string"}},
                 "required": ["accept"]}


@dataclasses.dataclass(frozen=True)
class EvoRubricConfig:
    """config.evorubric: the prune window, the regeneration sizes, the consensus threshold, the pool cap."""

    prune_window: int = 2  # P: draws of zero variance before a criterion is pruned
    candidate_sets: int = 4  # R
    set_size: int = 3  # M
    consensus: float = 0.5  # minimum Spearman rho of a set's rewards with its peers' leave-one-out mean
    pool_factor: float = 2.0  # K_max = pool_factor x the task's seed criteria
    near_duplicate: float = 0.8  # word-set Jaccard at which the rule meta-verifier calls a criterion a duplicate
    min_word_len: int = 4  # the rule generator's keywords have at least this many letters
    excerpt_chars: int = 800  # response excerpts shown to the generator

    def __post_init__(self):
        if min(self.prune_window, self.candidate_sets, self.set_size) < 1:
            raise ValueError("prune_window, candidate_sets and set_size must be >= 1")
        if not -1.0 <= self.consensus <= 1.0:
            raise ValueError(f"consensus must lie in [-1, 1], got {self.consensus}")
        if self.pool_factor < 1.0:
            raise ValueError(f"pool_factor must be >= 1, got {self.pool_factor}")


@dataclasses.dataclass(frozen=True)
class Draft:
    """A generated criterion before verification."""

    text: str
    points: float
    tags: tuple[str, ...] = ()

    def criterion(self, cid: str) -> Criterion:
        return Criterion(cid, self.text, self.points, self.tags)


# ------------------------------------------------------------------------------------------- the published rule

def zero_variance(row) -> bool:
    """All valid verdicts equal (and at least one valid): the criterion gives the group no advantage."""
    v = np.asarray(row, np.float64)
    v = v[np.isfinite(v)]
    return bool(v.size) and bool(np.all(v == v[0]))


def prunable(criteria: Sequence, S, history: Sequence[dict[str, np.ndarray]] | None, window: int
             ) -> list[tuple[str, Label]]:
    """(criterion id, label) of the non-anchor criteria with zero variance in this group (rows of S) and in each
    of the `window - 1` previous draws of `history` (criterion id -> verdict row, newest first); with `history`
    None (no memory) this group alone decides. Label: blind when no rollout achieves it, else saturated."""
    S = np.asarray(S, np.float64)
    out = []
    for k, c in enumerate(criteria):
        if c.anchor or not zero_variance(S[k]):
            continue
        if history is not None:
            past = [h[c.id] for h in history[: window - 1] if c.id in h]
            if len(past) < window - 1 or not all(zero_variance(r) for r in past):
                continue
        met = satisfied(S[k], float(c.points))
        out.append((c.id, Label.BLIND if np.nansum(met) == 0 else Label.SATURATED))
    return out


def spearman(a, b) -> float:
    """Spearman's rho (Pearson correlation of average ranks); NaN when either side is constant."""
    from scipy.stats import rankdata

    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 2:
        return float("nan")
    ra, rb = rankdata(a[ok]), rankdata(b[ok])
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def consensus(set_rewards: Sequence[np.ndarray | None], threshold: float) -> list[tuple[bool, float]]:
    """Per candidate set (None: nothing survived verification), (kept, rho): rho is the Spearman correlation of
    its rewards with the mean of the other surviving sets' rewards; kept when rho >= threshold. A set without a
    peer has no consensus and is not kept."""
    live = [n for n, r in enumerate(set_rewards) if r is not None]
    out = []
    for n, r in enumerate(set_rewards):
        peers = [set_rewards[m] for m in live if m != n]
        if r is None or not peers:
            out.append((False, float("nan")))
            continue
        rho = spearman(r, np.mean(np.stack(peers), axis=0))
        out.append((bool(np.isfinite(rho) and rho >= threshold), rho))
    return out


def new_points(task) -> float:
    """Points of a generated criterion: the median positive points of the task's seed criteria (1 if none)."""
    pos = [c.points for c in task.criteria if c.points > 0]
    return float(np.median(pos)) if pos else 1.0


# ---------------------------------------------------------------------------------- generator and meta-verifier

def rule_drafts(task, responses: Sequence[str], rewards, points: float, *, size: int, seed: Sequence[int],
                min_word_len: int = 4) -> list[Draft]:
    """The rule generator (no model): rule-checked criteria the best response meets and part of the group does
    not -- a word it uses, a word count the better half reaches -- `size` of them drawn with `seed`."""
    r = np.asarray(rewards, np.float64)
    if not len(responses) or not np.isfinite(r).any():
        return []
    best = responses[int(np.nanargmax(r))]
    pool: list[Draft] = []
    for w in sorted(content_words(best)):
        if len(w) >= min_word_len and w.isalpha():
            kw = {"keywords": [w]}
            met = [rules.check("keywords:existence", kw, y) for y in responses]
            if 0 < sum(met) < len(met):
                pool.append(Draft(f"The response uses the word '{w}'.", points,
                                  rule_tags("keywords:existence", kw)))
    counts = sorted(len(words(y)) for y in responses)
    n = counts[len(counts) // 2] + 1
    if len(words(best)) >= n > 1:
        kw = {"num_words": n, "relation": "at least"}
        pool.append(Draft(f"The response has at least {n} words.", points,
                          rule_tags("length_constraints:number_words", kw)))
    if not pool:
        return []
    rng = np.random.default_rng([int(s) % (2**32) for s in seed])
    picked = rng.choice(len(pool), size=min(size, len(pool)), replace=False)
    return [pool[int(k)] for k in sorted(picked)]


def rule_meta_check(draft: Draft, existing: Sequence[str], *, near_duplicate: float = 0.8) -> str | None:
    """Why the rule meta-verifier rejects a draft (None: accepted): too short to be a check, a near-duplicate of
    a criterion the task has, or a rule criterion whose checker or kwargs do not validate."""
    if len(words(draft.text)) < 3:
        return "too short to be a check"
    for t in existing:
        if jaccard(draft.text, t) >= near_duplicate:
            return f"near-duplicate of {t!r}"
    c = draft.criterion("draft")
    if c.verifier == "rule":
        try:
            rules.validate_kwargs(c.rule_id, c.rule_kwargs)
        except (KeyError, ValueError) as e:
            return f"not checkable: {e}"
    return None


class EvoRubricRule(HarnessRule):
    """The rule as a harness update after the evolver (methods.updates); `client` is the evolver model's, or None
    for the rule generator and meta-verifier."""

    name = "evorubric"
    interfaces = (Interface.RUBRIC,)
    uses_evolver_model = True

    def __init__(self, config: EvoRubricConfig = EvoRubricConfig(), client=None):
        self.config, self.client = config, client
        if client is not None:
            self.generate_template = load_template("evorubric_generate")
            self.verify_template = load_template("evorubric_verify")

    @classmethod
    def build(cls, ctx: PartsContext, *, settings: EvoRubricConfig):
        return cls(settings, client=ctx.client)

    # -- the model's part, or the rules' ---------------------------------------------------------------------

    def drafts(self, task, criteria, responses, rewards, points: float, r: int, seed: Sequence[int]) -> list[Draft]:
        c = self.config
        if self.client is None:
            return rule_drafts(task, responses, rewards, points, size=c.set_size, seed=seed,
                               min_word_len=c.min_word_len)
        order = np.argsort(-np.nan_to_num(np.asarray(rewards, np.float64), nan=-1e9))
        best, worst = responses[int(order[0])], responses[int(order[-1])]
        prompt = templates.fill(
            self.generate_template, conversation=render_conversation(task), set_index=r + 1,
            sets=c.candidate_sets, size=c.set_size,
            rubric="\n".join(f"- [{x.points:+g}] {x.text}" for x in criteria) or "(none)",
            best=cut(best, c.excerpt_chars), worst=cut(worst, c.excerpt_chars))
        obj = llm.ask(self.client, prompt, GENERATE_SCHEMA, "criteria")
        out = []
        for d in (obj or {}).get("criteria", [])[: c.set_size]:
            if isinstance(d, dict) and isinstance(d.get("text"), str) and d["text"].strip():
                out.append(Draft(d["text"].strip(), -points if d.get("pitfall") else points))
        return out

    def meta_check(self, task, draft: Draft, existing: Sequence[str]) -> str | None:
        why = rule_meta_check(draft, existing, near_duplicate=self.config.near_duplicate)
        if why is not None or self.client is None:
            return why
        prompt = templates.fill(self.verify_template, conversation=render_conversation(task), criterion=draft.text)
        obj = llm.ask(self.client, prompt, VERIFY_SCHEMA, "accept")
        if obj is None:
            return "the meta-verifier gave no answer"
        return None if obj.get("accept") is True else f"meta-verifier: {obj.get('reason', 'rejected')}"

    # -- one step --------------------------------------------------------------------------------------------

    def propose(self, inp: RuleInput) -> RuleProposal:
        c, H = self.config, inp.state
        out = RuleProposal()
        m = dict(pruned=0, generated=0, meta_rejected=0, flat_dropped=0, sets_kept=0, sets_rejected=0, created=0)
        plans = []
        for n in inp.first_draws():
            g = inp.draws[n]
            task, tid, S = g.task, g.task.id, np.asarray(g.S, np.float64)
            criteria = H.rubric_of(tid)
            history = None
            if inp.memory is not None:
                history = [dict(zip(d.criterion_ids, np.asarray(d.scores, np.float64)))
                           for d in inp.memory.history(tid, before_step=inp.step, limit=c.prune_window - 1)]
            # 1. prune, keeping every action valid in order (a task keeps a positive criterion)
            scratch, deletes, labels = H, [], []
            for cid, label in prunable(criteria, S, history, c.prune_window):
                a = ops.DeleteCriterion(tid, cid)
                if a.is_valid(scratch):
                    scratch = DEFAULT_TRANSITIONS.apply(scratch, a)
                    deletes.append(a)
                    labels.append(label)
            kept = [k for k, x in enumerate(criteria) if x.id not in {a.criterion_id for a in deletes}]
            m["pruned"] += len(deletes)
            rewards = rubric_reward(H.points(tid), S)
            points = new_points(task)
            existing = [criteria[k].text for k in kept]
            sets = []
            for r in range(c.candidate_sets):  # 2. regenerate, 3a. meta-verify
                drafts = self.drafts(task, [criteria[k] for k in kept], g.responses, rewards, points, r,
                                     (inp.step, n, r))
                m["generated"] += len(drafts)
                ok = []
                for d in drafts:
                    if self.meta_check(task, d, existing + [x.text for x in ok]) is None:
                        ok.append(d)
                    else:
                        m["meta_rejected"] += 1
                sets.append(ok)
            plans.append((n, task, criteria, kept, S, deletes, labels, sets, points))
        # 3b. judge every surviving draft on its group: one batch for the step
        requests, owners = [], []
        for p, (n, task, _, _, _, _, _, sets, _) in enumerate(plans):
            for r, drafts in enumerate(sets):
                if drafts:
                    requests.append((task, tuple(inp.draws[n].responses),
                                     tuple(d.criterion(f"{task.id}/evo{r}.{k}") for k, d in enumerate(drafts))))
                    owners.append((p, r))
        graded = dict(zip(owners, inp.hooks.regrade_many(requests))) if requests else {}
        for p, (n, task, criteria, kept, S, deletes, labels, sets, _) in enumerate(plans):
            tid = task.id
            if deletes:
                reason = (f"evorubric: zero variance across the group in the task's last {c.prune_window} draws"
                          if inp.memory is not None else "evorubric: zero variance across the group")
                out.candidates.append(RuleCandidate(n, Candidate(
                    tid, Interface.RUBRIC, tuple(deletes), labels[0], tuple(a.criterion_id for a in deletes), (),
                    reason, "evorubric:prune", "prune", 1.0, self.source), reason))
            base_points = np.array([criteria[k].points for k in kept], np.float64)
            base_S = S[kept]
            set_rewards, varying = [], []
            for r, drafts in enumerate(sets):
                rows = graded.get((p, r))
                live = [(d, row) for d, row in zip(drafts, rows if rows is not None else [])
                        if varies(np.asarray(row, np.float64)[None])[0]]
                m["flat_dropped"] += len(drafts) - len(live)
                varying.append(live)
                if not live:
                    set_rewards.append(None)
                    continue
                pts = np.concatenate([base_points, [d.points for d, _ in live]])
                set_rewards.append(rubric_reward(pts, np.vstack([base_S] + [np.asarray(row)[None] for _, row in live])))
            verdicts = consensus(set_rewards, c.consensus)
            room = int(np.floor(c.pool_factor * len(task.criteria))) - len(kept)
            creates, rhos, texts = [], [], set()
            for (keep, rho), live in zip(verdicts, varying):
                if not live:
                    continue
                m["sets_kept" if keep else "sets_rejected"] += 1
                if keep:
                    rhos.append(rho)
                    for d, _ in live:
                        if d.text not in texts and len(creates) < room:
                            texts.add(d.text)
                            creates.append(ops.CreateCriterion(tid, d.text, d.points, d.tags, ORIGIN))
            if creates:
                m["created"] += len(creates)
                reason = (f"evorubric: {len(creates)} criteria passed the meta-verifier, split the group and come "
                          f"from sets agreeing with their peers (Spearman rho {', '.join(f'{x:.2f}' for x in rhos)} "
                          f">= {c.consensus:g})")
                out.candidates.append(RuleCandidate(n, Candidate(
                    tid, Interface.RUBRIC, tuple(creates), None, (), (), reason,
                    "evorubric:regenerate", "regenerate", 1.0, self.source), reason))
        out.metrics = {f"evorubric/{k}": float(v) for k, v in m.items()}
        return out

    @property
    def source(self) -> str:
        return "evorubric-llm" if self.client is not None else "evorubric-rule"


@methods.register("evorubric", settings=("evorubric", EvoRubricConfig))
def evorubric(config) -> Method:
    """EvoRubric alone: its prune-regenerate-verify rule on the rubric, no anchors (it has none), no critic (its own
    verification replaces it); sampling and guidance frozen."""
    return Method(name="evorubric", sampler=configured(config),
                  transitions=dataclasses.replace(FROZEN_TRANSITIONS, rubric=apply_rubric), critic=False,
                  memory=not section(config, "harness").no_memory,
                  rule=functools.partial(EvoRubricRule, settings=methods.settings(config, "evorubric")),
                  rule_interfaces=(Interface.RUBRIC,), anchors=False)
