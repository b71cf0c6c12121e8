"""RuscaRL (Zhou et al., arXiv 2508.16949): rubric criteria shown as scaffolds in the rollout prompt, differing
within a group and decaying over training; the loss sees the bare prompt. Rollout i = 0..G-1 at 1-based step t of
T_total lists n_i of the task's K current criteria c_t in a system turn (prompts/ruscarl_scaffold.txt):

    lambda_i = (G - 1 - i) / (G - 1)                      'linear' group rule; 'binary': 1 for the first f, else 0
    S(x)     = 1 / (1 + exp(kappa (x - x0))),  x = (t - 1) / (T_total - 1)      the 'step_sigmoid' decay
    rho_i    = lambda_i S(x);  n_i = round(K rho_i)       criteria drawn uniformly without replacement
    w_t      = min(pi(y_t | x, y_<t) / pi(y_t | x, s, y_<t), C)     per-token truncated importance weight

with x0 = 0.2, kappa = 125 (the released recipe) and C = `ruscarl.tis_cap` (0: uncorrected, as the released code
and the paper row; C > 0 is the labelled variant `ruscarl_tis`). The scaffold lists the harness's current criteria:
the seed rubric alone, HarnessRL's evolving rubric when it replaces HarnessRL's guidance interface.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Sequence

import numpy as np

from harnessrl_jax import methods
from harnessrl_jax.evolver import templates
from harnessrl_jax.harness.transitions import FROZEN_TRANSITIONS
from harnessrl_jax.methods.base import Method
from harnessrl_jax.methods.guidance import PromptBudget, TaskPrompts, load_template, with_system
from harnessrl_jax.methods.parts import PartsContext, PromptWriter
from harnessrl_jax.methods.samplers import configured
from harnessrl_jax.methods.schemes import GRPOScheme
from harnessrl_jax.settings import section

GROUP_RULES = ("linear", "binary")
INCLUDE, AVOID = "IMPORTANT POINTS TO INCLUDE:", "IMPORTANT POINTS TO AVOID:"


@dataclasses.dataclass(frozen=True)
class RuscaRLConfig:
    """config.ruscarl: the decay, the group rule, the importance cap and the scaffold template."""

    sigmoid_start: float = 0.2  # x0 (released HealthBench recipe; the code's default is 0.3)
    sigmoid_steepness: float = 125.0  # kappa (the code's default is 10)
    group_rule: str = "linear"  # 'linear' | 'binary'
    full_reveal: int = 1  # 'binary': rollouts shown every drawn criterion
    tis_cap: float = 0.0  # 0: no correction (RuscaRL as released, the paper row); C > 0: the corrected variant
    template: str = "ruscarl_scaffold"  # methods/prompts/<name>.txt or a path, with a {criteria} placeholder

    def __post_init__(self):
        if self.group_rule not in GROUP_RULES:
            raise ValueError(f"group_rule must be one of {GROUP_RULES}, got {self.group_rule!r}")
        if not 0.0 <= self.sigmoid_start <= 1.0 or self.sigmoid_steepness < 0:
            raise ValueError("sigmoid_start must lie in [0, 1] and sigmoid_steepness be >= 0")
        if self.full_reveal < 0 or self.tis_cap < 0:
            raise ValueError("full_reveal and tis_cap must be >= 0")


def training_progress(step: int, total_steps: int) -> float:
    """x = (t - 1) / (T_total - 1) for the 0-based `step` (t = step + 1), in [0, 1]; 0 for a one-step run."""
    if total_steps <= 1:
        return 0.0
    return min(1.0, max(0.0, step / (total_steps - 1)))


def step_sigmoid(progress: float, *, x0: float = 0.2, kappa: float = 125.0) -> float:
    """S(x) = 1 / (1 + exp(kappa (x - x0))): the share of a task's criteria the fullest scaffold shows."""
    z = kappa * (progress - x0)
    return 0.0 if z > 700 else 1.0 / (1.0 + math.exp(z))


def group_weights(group_size: int, rule: str = "linear", full_reveal: int = 1) -> np.ndarray:
    """lambda_i for i = 0..G-1: (G-1-i)/(G-1) ('linear'; 1 for G = 1) or 1 for the first f rollouts ('binary')."""
    i = np.arange(group_size, dtype=np.float64)
    if rule == "binary":
        return (i < full_reveal).astype(np.float64)
    if group_size == 1:
        return np.ones(1)
    return (group_size - 1 - i) / (group_size - 1)


def scaffold_ratios(group_size: int, progress: float, *, x0: float = 0.2, kappa: float = 125.0,
                    rule: str = "linear", full_reveal: int = 1) -> np.ndarray:
    """The share of a task's criteria shown to each rollout i = 0..G-1 of a group: lambda_i * S(progress)."""
    return group_weights(group_size, rule, full_reveal) * step_sigmoid(progress, x0=x0, kappa=kappa)


def shown_counts(num_criteria: int, ratios: Sequence[float]) -> np.ndarray:
    """n_i = round(K rho_i), halves to even as Python's round (RuscaRL's `round(total * ratio)`)."""
    return np.rint(num_criteria * np.asarray(ratios, np.float64)).astype(int)


def drawn_criteria(num_criteria: int, count: int, seed: Sequence[int]) -> list[int]:
    """`count` of the K criteria drawn uniformly without replacement, in rubric order; the Generator is seeded by
    (step seed, task row, rollout), so a resumed run draws the same scaffolds."""
    if count <= 0:
        return []
    if count >= num_criteria:
        return list(range(num_criteria))
    rng = np.random.default_rng([int(s) % (2**32) for s in seed])
    return sorted(int(k) for k in rng.choice(num_criteria, count, replace=False))


def scaffold_text(criteria: Sequence, template: str) -> str:
    """The scaffold listing `criteria` (anything with .text and .points): requirements with their points, then
    pitfalls with their penalties, each numbered within its list."""
    pos = [c for c in criteria if c.points > 0]
    neg = [c for c in criteria if c.points < 0]
    blocks = []
    if pos:
        blocks.append("\n".join([INCLUDE] + [f"Criterion {n}: {c.text} (worth {c.points:g} points)"
                                             for n, c in enumerate(pos, 1)]))
    if neg:
        blocks.append("\n".join([AVOID] + [f"Criterion {n}: {c.text} (penalty: {abs(c.points):g} points)"
                                           for n, c in enumerate(neg, 1)]))
    return templates.fill(template, criteria="\n\n".join(blocks))


class RuscaRLGuidance(PromptWriter):
    """The scaffold schedule as a prompt writer (methods.parts): J prompts per drawn task."""

    name = "ruscarl"

    def __init__(self, config: RuscaRLConfig, *, group_size: int, total_steps: int):
        self.config, self.group_size, self.total_steps = config, group_size, total_steps
        self.template = load_template(config.template)
        self._metrics: dict[str, float] = {}

    @classmethod
    def build(cls, ctx: PartsContext, *, settings: RuscaRLConfig):
        return cls(settings, group_size=ctx.config.num_generations, total_steps=ctx.config.total_steps)

    def ratios(self, step: int) -> np.ndarray:
        c = self.config
        return scaffold_ratios(self.group_size, training_progress(step, self.total_steps), x0=c.sigmoid_start,
                               kappa=c.sigmoid_steepness, rule=c.group_rule, full_reveal=c.full_reveal)

    def prompts(self, harness, idx: Sequence[int], tasks: Sequence, *, step: int, seed: int,
                budget: PromptBudget) -> list[TaskPrompts]:
        ratios = self.ratios(step)
        out, shown, cut = [], [], 0
        for row, task in enumerate(tasks):
            criteria = harness.rubric_of(task.id)
            bare = tuple(dict(x) for x in task.prompt)
            counts = shown_counts(len(criteria), ratios)
            messages, shortened, over = [], False, False
            for j, n in enumerate(counts):
                picked = [criteria[k] for k in drawn_criteria(len(criteria), int(n), (seed, row, j))]
                m = bare
                while picked:  # over the budget: list fewer of the drawn criteria (the last ones go first)
                    m = with_system(task.prompt, scaffold_text(picked, self.template))
                    if budget.fits(m):
                        break
                    picked, shortened, m = picked[:-1], True, bare
                if n > 0 and not picked:
                    over = True
                cut += int(len(picked) < n)
                shown.append(len(picked) / max(len(criteria), 1))
                messages.append(m)
            out.append(TaskPrompts(tuple(messages), guided=any(m != bare for m in messages), shortened=shortened,
                                   over_budget=over))
        progress = training_progress(step, self.total_steps)
        c = self.config
        self._metrics = {"ruscarl/step_share": step_sigmoid(progress, x0=c.sigmoid_start, kappa=c.sigmoid_steepness),
                         "ruscarl/shown_share_mean": float(np.mean(shown)) if shown else 0.0,
                         "ruscarl/scaffolded_rollouts": float(sum(s > 0 for s in shown)),
                         "ruscarl/cut_rollouts": float(cut)}
        return out

    def metrics(self) -> dict[str, float]:
        return dict(self._metrics)


@methods.register("ruscarl", settings=("ruscarl", RuscaRLConfig))
def ruscarl(config) -> Method:
    """RuscaRL alone: seed rubric, Cat(p_t) draws (uniform), scaffolded rollouts, the bare-context loss (with the
    importance correction only in the variant config.ruscarl.tis_cap > 0)."""
    settings = methods.settings(config, "ruscarl")
    return Method(name="ruscarl", sampler=configured(config), transitions=FROZEN_TRANSITIONS,
                  memory=not section(config, "harness").no_memory,
                  prompts=functools.partial(RuscaRLGuidance, settings=settings),
                  scheme=functools.partial(GRPOScheme, loss_context="bare"), tis_cap=settings.tis_cap)
