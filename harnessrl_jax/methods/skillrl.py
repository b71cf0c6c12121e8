"""SkillRL (Xia et al., arXiv 2602.08234): a skill bank distilled from the policy's own rollouts, retrieved by
embedding similarity and mounted on every rollout of a task, evolving during training.

- A skill is (name, principle, applicability); general skills apply to every task, task-specific ones to its domain.
- Retrieval: every general skill, and the K best task-specific ones whose (name + applicability) has cosine >= delta
  to the task's last user message; a <skills> block after the prompt, which the loss sees too. Evaluation is bare.
- The teacher (the evolver model; a rule stand-in under `harness.proposer='rule'`) distils skills from successful
  responses (reward >= the group's q75) and lessons from failed ones (<= q25): the initial bank from the cold
  start's seed groups (step 0's groups without one), then every E steps from a fixed validation sample per domain
  rolled out under the bank by the frozen policy, for the domains strictly below the median reward; a skill
  distilled again under its name is revised.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
from typing import Any, Sequence

import numpy as np

from harnessrl_jax import methods
from harnessrl_jax.evolver import templates
from harnessrl_jax.evolver.cold_start import groups_path, load_seed_groups
from harnessrl_jax.evolver.text import cut
from harnessrl_jax.harness.transitions import FROZEN_TRANSITIONS
from harnessrl_jax.methods import llm
from harnessrl_jax.methods.base import Method
from harnessrl_jax.methods.embedding import text_embedder
from harnessrl_jax.methods.guidance import PromptBudget, TaskPrompts, after_last_user, load_template
from harnessrl_jax.methods.parts import PartsContext, PromptWriter
from harnessrl_jax.methods.samplers import configured
from harnessrl_jax.methods.updates import achieved
from harnessrl_jax.rubric.judges.llm import render_conversation
from harnessrl_jax.rubric.reward import rubric_reward
from harnessrl_jax.settings import section

log = logging.getLogger(__name__)

DISTILL_SCHEMA = {"type": "object", "properties": {"skills": {"type": "array", "items": {
    "type": "object", "properties": {"name": {"type": "string"}, "principle": {"type": "string"},
                                     "applicability": {"type": "string"}, "general": {"type": "boolean"}},
    "required": ["name", "principle", "applicability"]}}}, "required": ["skills"]}


@dataclasses.dataclass(frozen=True)
class SkillRLConfig:
    """config.skillrl: retrieval, the bank's sizes and its evolution schedule."""

    top_k: int = 6  # K task-specific skills per prompt
    min_cosine: float = 0.4  # delta
    evolve_every: int = 25  # E steps between evolutions
    initial_per_domain: int = 10
    initial_general: int = 10
    max_new_per_domain: int = 5  # the growth cap per domain per evolution
    failures_per_domain: int = 10  # low-reward responses the teacher analyses per domain
    success_quantile: float = 0.75
    failure_quantile: float = 0.25
    embedder: str = "memory"  # 'memory' (the memory's embedder, else lexical) | 'lexical' | a model name or path
    excerpt_chars: int = 400
    # The first bank's groups: the cold start's seed groups (scores and responses); empty: the ones
    # launch/cold_start.py writes next to config.harness.cold_start, else step 0's groups.
    seed_groups: str = ""
    # Validation tasks per domain rolled out (under the bank) at each evolution, a fixed sample of the training
    # tasks; 0: the groups recorded since the last evolution stand in for them.
    validation_per_domain: int = 4

    def __post_init__(self):
        if min(self.top_k, self.evolve_every, self.max_new_per_domain, self.failures_per_domain) < 1:
            raise ValueError("top_k, evolve_every, max_new_per_domain and failures_per_domain must be >= 1")
        if self.validation_per_domain < 0:
            raise ValueError(f"validation_per_domain={self.validation_per_domain}: must be >= 0")
        if not -1.0 <= self.min_cosine <= 1.0:
            raise ValueError(f"min_cosine must lie in [-1, 1], got {self.min_cosine}")
        if not 0.0 <= self.failure_quantile <= self.success_quantile <= 1.0:
            raise ValueError("need 0 <= failure_quantile <= success_quantile <= 1")


@dataclasses.dataclass(frozen=True)
class Skill:
    name: str
    principle: str
    applicability: str
    domain: str | None = None  # None: a general skill
    step: int = 0
    source: str = "rule"

    @property
    def general(self) -> bool:
        return self.domain is None

    @property
    def key_text(self) -> str:
        """What retrieval embeds: the name and when it applies."""
        return f"{self.name}. {self.applicability}"

    def line(self) -> str:
        return f"- {self.name}: {self.principle}"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# ------------------------------------------------------------------------------------------- retrieval

def retrieve(task_vector, skill_vectors, general, *, top_k: int = 6, min_cosine: float = 0.4) -> list[int]:
    """Indices of the skills mounted for a task: every general skill (in bank order), then the `top_k`
    task-specific skills with cosine >= min_cosine to the task, best first (ties in bank order)."""
    general = np.asarray(general, bool)
    out = [int(i) for i in np.flatnonzero(general)]
    if len(general) == 0:
        return out
    cos = np.asarray(skill_vectors, np.float64) @ np.asarray(task_vector, np.float64)
    specific = [int(i) for i in np.flatnonzero(~general) if cos[i] >= min_cosine]
    specific.sort(key=lambda i: -cos[i])
    return out + specific[:top_k]


def skills_block(skills: Sequence[Skill]) -> str:
    return "<skills>\n" + "\n".join(s.line() for s in skills) + "\n</skills>"


# ------------------------------------------------------------------------------------------- distillation

def split_group(rewards, success_q: float, failure_q: float) -> tuple[list[int], list[int]]:
    """(successes, failures) of a group: rewards >= its success quantile, <= its failure quantile; none for a
    group without contrast."""
    r = np.asarray(rewards, np.float64)
    ok = np.isfinite(r)
    if ok.sum() < 2 or np.nanmax(r) == np.nanmin(r):
        return [], []
    hi, lo = np.nanquantile(r, success_q), np.nanquantile(r, failure_q)
    return [j for j in range(len(r)) if ok[j] and r[j] >= hi], [j for j in range(len(r)) if ok[j] and r[j] <= lo]


def rule_skills(groups: Sequence[tuple[Any, Sequence, Any, Sequence[str]]], *, success_q: float, failure_q: float,
                step: int) -> list[tuple[float, Skill]]:
    """The rule teacher over groups (task, criteria, S, responses): (contrast, skill) for each criterion its
    successes achieve more often than its failures (polarity-aware), general when its text is in several tasks'
    rubrics of the pool."""
    tasks_of: dict[str, set[str]] = {}
    for task, criteria, _, _ in groups:
        for c in criteria:
            tasks_of.setdefault(c.text, set()).add(task.id)
    best: dict[str, tuple[float, Skill]] = {}
    for task, criteria, S, _ in groups:
        S = np.asarray(S, np.float64)
        points = np.array([c.points for c in criteria], np.float64)
        good, bad = split_group(rubric_reward(points, S), success_q, failure_q)
        if not good or not bad:
            continue
        met = achieved(S, points)
        for k, c in enumerate(criteria):
            contrast = float(np.nanmean(met[k, good]) - np.nanmean(met[k, bad]))
            if not np.isfinite(contrast) or contrast <= 0:
                continue
            general = len(tasks_of[c.text]) > 1
            verb = "avoid" if c.points < 0 else "aim for"
            skill = Skill(f"{verb}: {cut(c.text, 80)}",
                          f"{'Avoid this' if c.points < 0 else 'Make sure of this'}: {c.text}",
                          "any task" if general else f"{task.domain} tasks such as: {cut(task.user_text, 160)}",
                          None if general else task.domain, step, "rule")
            if skill.name not in best or contrast > best[skill.name][0]:
                best[skill.name] = (contrast, skill)
    return sorted(best.values(), key=lambda x: -x[0])


def seed_groups_path(settings: SkillRLConfig, cold_start: str) -> str:
    """skillrl.seed_groups, or the seed groups launch/cold_start.py writes next to the cold start's file."""
    return settings.seed_groups or (groups_path(cold_start) if cold_start else "")


class SkillRLGuidance(PromptWriter):
    """The skill bank as a prompt writer (methods.parts): one prompt per drawn task, shared by its group."""

    name = "skillrl"
    uses_evolver_model = True

    def __init__(self, config: SkillRLConfig = SkillRLConfig(), *, tasks: Sequence = (), client=None, memory=None,
                 embed=None):
        self.config, self.client = config, client
        self.tasks = {t.id: t for t in tasks}  # the run's tasks, for the groups the memory recorded
        self.embed = embed or text_embedder(config.embedder, memory)
        self.skills: list[Skill] = []
        self.vectors = np.zeros((0, 0), np.float32)
        self.task_vectors: dict[str, np.ndarray] = {}
        self.last_evolution = -1
        self._metrics: dict[str, float] = {}
        self._budget: PromptBudget | None = None  # the run's, as the last prompts() call was given it
        if client is not None:
            self.template = load_template("skillrl_distill")

    @classmethod
    def build(cls, ctx: PartsContext, *, settings: SkillRLConfig):
        writer = cls(settings, tasks=ctx.tasks, client=ctx.client, memory=ctx.memory)
        path = seed_groups_path(settings, section(ctx.config, "harness").cold_start)
        if path and os.path.isfile(path):
            writer.first_bank(path)
        return writer

    @classmethod
    def check(cls, config, *, settings: SkillRLConfig) -> list[str]:
        if settings.seed_groups and not os.path.isfile(settings.seed_groups):
            return [f"--config.skillrl.seed_groups={settings.seed_groups}: no such file (launch/cold_start.py "
                    f"writes it next to cold_start.json)"]
        return []

    # -- the bank --------------------------------------------------------------------------------------------

    def add(self, skills: Sequence[Skill]) -> int:
        """Adds skills whose name is new; returns how many."""
        return self.merge(skills)[0]

    def merge(self, skills: Sequence[Skill]) -> tuple[int, int]:
        """(added, revised): a skill whose name is new is added; one under an existing name with another principle
        or applicability replaces it (the teacher revised it)."""
        index = {s.name: n for n, s in enumerate(self.skills)}
        new, revised = [], 0
        for s in skills:
            n = index.get(s.name)
            if n is None:
                index[s.name] = len(self.skills) + len(new)
                new.append(s)
            elif n < len(self.skills) and (s.principle, s.applicability) != (self.skills[n].principle,
                                                                           self.skills[n].applicability):
                self.skills[n] = s
                self.vectors[n] = np.asarray(self.embed([s.key_text]), np.float32)[0]
                revised += 1
        if new:
            v = np.asarray(self.embed([s.key_text for s in new]), np.float32)
            self.vectors = v if not len(self.skills) else np.vstack([self.vectors, v])
            self.skills += new
        return len(new), revised

    def first_bank(self, path: str) -> None:
        """The initial bank from the seed policy's groups in the cold start's file, before step 0, so step 0's
        rollouts already carry skills; a file without responses (an older cold start) leaves it to step 0."""
        groups = []
        for seed in load_seed_groups(path):
            task = self.tasks.get(seed.task_id)
            if task is None or not seed.responses:
                continue
            rows = {cid: k for k, cid in enumerate(seed.criterion_ids)}
            if seed.criterion_ids and all(c.id in rows for c in task.criteria):
                S = seed.groups[0][[rows[c.id] for c in task.criteria]]
            elif len(task.criteria) == seed.groups[0].shape[0]:
                S = seed.groups[0]
            else:
                continue
            groups.append((task, task.criteria, S, seed.responses))
        if not groups:
            log.warning("%s: no seed group with responses for this run's tasks: the first skill bank comes from "
                        "step 0's groups", path)
            return
        c = self.config
        added, _ = self.distill(0, groups, per_domain=c.initial_per_domain, general=c.initial_general)
        self.last_evolution = 0
        self._metrics["skillrl/added"] = float(added)

    def task_vector(self, task) -> np.ndarray:
        if task.id not in self.task_vectors:
            self.task_vectors[task.id] = np.asarray(self.embed([task.user_text]), np.float32)[0]
        return self.task_vectors[task.id]

    def mounted(self, task) -> list[Skill]:
        if not self.skills:
            return []
        idx = retrieve(self.task_vector(task), self.vectors, [s.general for s in self.skills],
                       top_k=self.config.top_k, min_cosine=self.config.min_cosine)
        return [self.skills[i] for i in idx]

    # -- guidance rule ---------------------------------------------------------------------------------------

    def prompts(self, harness, idx, tasks, *, step: int, seed: int, budget: PromptBudget) -> list[TaskPrompts]:
        out, counts = [], []
        for task in tasks:
            skills, shortened = self.mounted(task), False
            m = tuple(dict(x) for x in task.prompt)
            while skills:  # over the budget: the last (least similar) skills go first
                m = after_last_user(task.prompt, skills_block(skills))
                if budget.fits(m):
                    break
                skills, shortened, m = skills[:-1], True, tuple(dict(x) for x in task.prompt)
            counts.append(len(skills))
            out.append(TaskPrompts((m,), guided=bool(skills), shortened=shortened,
                                   over_budget=shortened and not skills))
        self._budget = budget
        self._metrics.update({"skillrl/bank_size": float(len(self.skills)),
                              "skillrl/general_skills": float(sum(s.general for s in self.skills)),
                              "skillrl/skills_per_prompt": float(np.mean(counts)) if counts else 0.0})
        return out

    # -- distillation and evolution ---------------------------------------------------------------------------

    def observe(self, step: int, draws: Sequence, harness, memory=None, hooks=None) -> None:
        """The step's judged groups, under the harness's rubric of each task (see `learn`); at an evolution, with
        `hooks` (the frozen policy and the judge), the validation sample is rolled out under the bank."""
        validate = None
        if hooks is not None and hooks.sample_prompts is not None and self.config.validation_per_domain > 0:
            def validate():
                return self.validation_groups(harness, hooks, step)
        self.learn(step, [(g.task, harness.rubric_of(g.task.id), g.S, g.responses) for g in draws], memory,
                   validate=validate)

    def validation_tasks(self) -> list:
        """A fixed sample of `validation_per_domain` training tasks per domain (the same at every evolution)."""
        by: dict[str, list] = {}
        for t in self.tasks.values():
            by.setdefault(t.domain, []).append(t)
        rng = np.random.default_rng(0)
        out = []
        for domain in sorted(by):
            pool = sorted(by[domain], key=lambda t: t.id)
            pick = rng.choice(len(pool), min(self.config.validation_per_domain, len(pool)), replace=False)
            out += [pool[i] for i in sorted(pick)]
        return out

    def validation_groups(self, harness, hooks, step: int) -> list[tuple[Any, Sequence, Any, Sequence[str]]]:
        """The validation sample rolled out by the frozen policy under the current bank and judged under the
        harness's rubric: (task, criteria, S, responses) per task."""
        tasks = self.validation_tasks()
        if not tasks or self._budget is None:
            return []
        prompts = self.prompts(harness, [harness.index(t.id) for t in tasks], tasks, step=step, seed=0,
                               budget=self._budget)
        responses = hooks.sample_prompts(tasks, prompts)
        criteria = [harness.rubric_of(t.id) for t in tasks]
        scores = hooks.regrade_many([(t, r, [c.to_criterion() for c in cs])
                                     for t, r, cs in zip(tasks, responses, criteria)])
        self._metrics["skillrl/validation_rollouts"] = float(sum(len(r) for r in responses))
        return [(t, cs, S, r) for t, cs, S, r in zip(tasks, criteria, scores, responses)]

    def learn(self, step: int, groups: Sequence[tuple[Any, Sequence, Any, Sequence[str]]], memory=None, *,
              validate=None) -> None:
        """After the step's judging (`groups`: this step's (task, criteria, S, responses)): the initial bank from
        step 0's groups when the seed groups gave none, then an evolution every E steps on the validation sample
        (`validate()` rolls it out under the current bank), or, without one, on the groups recorded since the last
        evolution."""
        c = self.config
        self._metrics.update({"skillrl/added": 0.0, "skillrl/revised": 0.0, "skillrl/evolved_domains": 0.0})
        if self.last_evolution < 0:
            added, revised = self.distill(step, groups, per_domain=c.initial_per_domain, general=c.initial_general)
        elif step - self.last_evolution >= c.evolve_every:
            pool = validate() if validate is not None else []
            if not pool:
                pool = list(groups)
                if memory is not None:
                    tasks = {**self.tasks, **{g[0].id: g[0] for g in groups}}
                    for d in memory.store.draws(range(self.last_evolution + 1, step)):
                        task = tasks.get(d.task_id)
                        if task is not None:
                            pool.append((task, _Crit.of(d), d.scores, d.responses))
            added, revised = self.evolve(step, pool)
        else:
            return
        self.last_evolution = step
        self._metrics.update({"skillrl/added": float(added), "skillrl/revised": float(revised)})

    def distill(self, step, groups, *, per_domain: int, general: int) -> tuple[int, int]:
        """(added, revised) by the teacher over `groups`."""
        c = self.config
        if self.client is None:
            ranked = rule_skills(groups, success_q=c.success_quantile, failure_q=c.failure_quantile, step=step)
            gen = [s for _, s in ranked if s.general][:general]
            spec: dict[str, list[Skill]] = {}
            for _, s in ranked:
                if not s.general and len(spec.setdefault(s.domain, [])) < per_domain:
                    spec[s.domain].append(s)
            return self.merge(gen + [s for v in spec.values() for s in v])
        added = revised = 0
        for domain, gs in _by_domain(groups).items():
            a, r = self.merge(self.teach(domain, gs, per_domain, step, general_ok=True))
            added, revised = added + a, revised + r
        return added, revised

    def evolve(self, step, groups) -> tuple[int, int]:
        """(added, revised): skills for the domains whose mean reward is strictly below the median over domains, at
        most max_new_per_domain each, new or revising existing ones."""
        c = self.config
        by = _by_domain(groups)
        means = {d: float(np.nanmean([np.nanmean(rubric_reward(np.array([x.points for x in cr]), np.asarray(S)))
                                      for _, cr, S, _ in gs])) for d, gs in by.items()}
        if not means:
            return 0, 0
        median = float(np.median(list(means.values())))
        added = revised = 0
        for d, gs in by.items():
            if not means[d] < median:
                continue
            self._metrics["skillrl/evolved_domains"] += 1.0
            if self.client is None:
                ranked = rule_skills(gs, success_q=c.success_quantile, failure_q=c.failure_quantile, step=step)
                a, r = self.merge([s for _, s in ranked][: c.max_new_per_domain])
            else:
                a, r = self.merge(self.teach(d, gs, c.max_new_per_domain, step, general_ok=False))
            added, revised = added + a, revised + r
        return added, revised

    def teach(self, domain: str, groups, limit: int, step: int, *, general_ok: bool) -> list[Skill]:
        """The teacher model's skills for one domain from its successes and failures."""
        c = self.config
        good, bad = [], []
        for task, criteria, S, responses in groups:
            r = rubric_reward(np.array([x.points for x in criteria]), np.asarray(S, np.float64))
            g, b = split_group(r, c.success_quantile, c.failure_quantile)
            good += [(task, responses[j], r[j]) for j in g]
            bad += [(task, responses[j], r[j]) for j in b]
        bad = sorted(bad, key=lambda x: x[2])[: c.failures_per_domain]
        if not good and not bad:
            return []

        def show(items):
            return "\n".join(f"--- {t.id} (reward {r:.1f}) ---\n{cut(render_conversation(t), 300)}\n>>> "
                             f"{cut(y, c.excerpt_chars)}" for t, y, r in items[: c.failures_per_domain]) or "(none)"

        known = "\n".join(f"- {s.name}" for s in self.skills if s.general or s.domain == domain) or "(none)"
        obj = llm.ask(self.client, templates.fill(self.template, domain=domain, successes=show(good),
                                                  failures=show(bad), known=known, limit=limit),
                      DISTILL_SCHEMA, "skills")
        out = []
        for d in (obj or {}).get("skills", [])[:limit]:
            if isinstance(d, dict) and all(isinstance(d.get(k), str) and d[k].strip()
                                           for k in ("name", "principle", "applicability")):
                out.append(Skill(d["name"].strip(), d["principle"].strip(), d["applicability"].strip(),
                                 None if (general_ok and d.get("general")) else domain, step, "llm"))
        return out

    # -- state -----------------------------------------------------------------------------------------------

    def metrics(self) -> dict[str, float]:
        return dict(self._metrics)

    def state_dict(self) -> dict[str, Any]:
        return {"skills": [s.to_dict() for s in self.skills], "last_evolution": self.last_evolution}

    def load_state_dict(self, state) -> None:
        if not state:
            return
        self.skills, self.vectors = [], np.zeros((0, 0), np.float32)
        self.add([Skill(**s) for s in state.get("skills", [])])
        self.last_evolution = int(state.get("last_evolution", -1))


@dataclasses.dataclass(frozen=True)
class _Crit:
    """A recorded criterion (id, text, points) as the distillers read it."""

    id: str
    text: str
    points: float

    @staticmethod
    def of(record) -> list["_Crit"]:
        crits = (record.harness or {}).get("criteria", {})
        return [_Crit(cid, t, float(crits.get(cid, {}).get("points", 1.0)))
                for cid, t in zip(record.criterion_ids, record.criterion_texts)]


def _by_domain(groups):
    out: dict[str, list] = {}
    for g in groups:
        out.setdefault(g[0].domain, []).append(g)
    return out


@methods.register("skillrl", settings=("skillrl", SkillRLConfig))
def skillrl(config) -> Method:
    """SkillRL alone: seed rubric, Cat(p_t) draws (uniform), skills mounted on every rollout, the loss in the
    skill-augmented context."""
    return Method(name="skillrl", sampler=configured(config), transitions=FROZEN_TRANSITIONS,
                  memory=not section(config, "harness").no_memory,
                  prompts=functools.partial(SkillRLGuidance, settings=methods.settings(config, "skillrl")))
