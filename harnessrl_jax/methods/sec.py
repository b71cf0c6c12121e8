"""SEC, the Self-Evolving Curriculum (Chen et al., arXiv 2505.14970): task sampling as a non-stationary bandit over
arms of tasks. Used alone (`method='sec'`: GRPO with this sampler) and as HarnessRL's sampling rule
(`harness.sampling_rule='sec'`).

    r_t(c)     = mean over the batch's tasks x of arm c of (1/G) sum_i |A_i(x)|     learning gain of arm c
    Q_{t+1}(c) = alpha r_t(c) + (1 - alpha) Q_t(c)        TD(0), only for arms drawn this step; Q_0 = 0
    p(c)       = softmax(Q / tau)                         Boltzmann over arms; a task uniformly within its arm

A is un-normalised, on the 0..1 scale, and u = 1 by default (`sec.importance`).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
from typing import Any, Mapping, Sequence

import numpy as np

from harnessrl_jax import methods
from harnessrl_jax.evolver.cold_start import groups_path, load_seed_groups
from harnessrl_jax.harness.transitions import FROZEN_TRANSITIONS
from harnessrl_jax.methods.base import Method
from harnessrl_jax.methods.parts import PartsContext, TaskSampler
from harnessrl_jax.rubric.reward import LAMBDA, rubric_reward
from harnessrl_jax.settings import section

ARM_KINDS = ("seed_quintile", "domain_x_tercile", "domain", "task")
SEED_ARMS = ("seed_quintile", "domain_x_tercile")  # arms that need the seed policy's rewards


@dataclasses.dataclass(frozen=True)
class SECConfig:
    """config.sec: the bandit's step size, temperature, arms and importance weights."""

    alpha: float = 0.5  # TD(0) step size (SEC's bandit.lr)
    temperature: float = 1.0  # tau of the Boltzmann draw
    arms: str = "seed_quintile"  # ARM_KINDS: seed-reward quintiles are SEC's difficulty levels
    num_levels: int = 5  # difficulty levels of 'seed_quintile' (3 per domain for 'domain_x_tercile')
    importance: bool = False  # False: u = 1 (SEC re-weights on purpose); True: u = 1 / (N p_i)
    seed_groups: str = ""  # the cold start's .groups.jsonl; empty: next to config.harness.cold_start

    def __post_init__(self):
        if not 0.0 < self.alpha <= 1.0:
            raise ValueError(f"alpha must lie in (0, 1], got {self.alpha}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if self.arms not in ARM_KINDS:
            raise ValueError(f"arms must be one of {ARM_KINDS}, got {self.arms!r}")
        if self.num_levels < 1:
            raise ValueError(f"num_levels must be >= 1, got {self.num_levels}")


# ------------------------------------------------------------------------------------------- the published rule

def update_values(q, arm_rewards: Mapping[int, float], *, alpha: float = 0.5) -> np.ndarray:
    """SEC's TD(0) update, only for arms present in the batch: q[c] = alpha * r + (1 - alpha) * q[c]."""
    q = np.array(q, np.float64)
    for c, r in arm_rewards.items():
        q[int(c)] = alpha * float(r) + (1.0 - alpha) * q[int(c)]
    return q


def arm_probs(q, *, temperature: float = 1.0) -> np.ndarray:
    """softmax(q / temperature)."""
    z = np.asarray(q, np.float64) / temperature
    z = np.exp(z - z.max())
    return z / z.sum()


def learning_gain(rewards) -> np.ndarray:
    """Per group (row of rewards [T, J], reward points) the mean |A| of un-normalised advantages on the 0..1 scale
    over its valid entries (std-normalised, mean |A| is nearly constant); NaN for a group with none."""
    r = np.asarray(rewards, np.float64) / LAMBDA
    out = np.full(r.shape[0], np.nan)
    for n, row in enumerate(r):
        v = row[np.isfinite(row)]
        if v.size:
            out[n] = float(np.abs(v - v.mean()).mean())
    return out


def arm_rewards(arms_of_draws: Sequence[int], rewards) -> dict[int, float]:
    """r_t(c): the mean learning gain of the arm's drawn groups this step (groups without a valid reward left out)."""
    gains = learning_gain(rewards)
    out: dict[int, list[float]] = {}
    for c, g in zip(arms_of_draws, gains):
        if np.isfinite(g):
            out.setdefault(int(c), []).append(float(g))
    return {c: float(np.mean(v)) for c, v in out.items()}


# --------------------------------------------------------------------------------------------------- the arms

def quantile_levels(values: Sequence[float], num_levels: int) -> np.ndarray:
    """Level 0..L-1 of each value by its rank (equal-count bins, ties by order; NaN values go to the middle)."""
    v = np.asarray(values, np.float64)
    fill = np.nanmedian(v) if np.isfinite(v).any() else 0.0
    v = np.where(np.isfinite(v), v, fill)
    ranks = np.argsort(np.argsort(v, kind="stable"), kind="stable")
    return np.minimum((ranks * num_levels) // max(len(v), 1), num_levels - 1).astype(int)


def seed_rewards(path: str) -> dict[str, float]:
    """Per task the seed policy's mean reward over its cold-start groups (evolver.cold_start.load_seed_groups)."""
    out = {}
    for s in load_seed_groups(path):
        r = np.concatenate([rubric_reward(s.points, g) for g in s.groups])
        out[s.task_id] = float(np.nanmean(r)) if np.isfinite(r).any() else float("nan")
    return out


def seed_groups_path(settings: SECConfig, cold_start: str) -> str:
    """sec.seed_groups, or the seed groups launch/cold_start.py writes next to the cold start's file."""
    return settings.seed_groups or (groups_path(cold_start) if cold_start else "")


def assign_arms(tasks: Sequence, kind: str, *, num_levels: int = 5, rewards: Mapping[str, float] | None = None
                ) -> tuple[np.ndarray, list[str]]:
    """(arm index per task, arm names): seed-reward quantiles, domain x tercile, domain, or one arm per task."""
    if kind == "task":
        return np.arange(len(tasks)), [t.id for t in tasks]
    domains = sorted({t.domain for t in tasks})
    if kind == "domain":
        return np.array([domains.index(t.domain) for t in tasks]), domains
    if rewards is None:
        raise ValueError(f"sec.arms={kind!r} needs the seed policy's per-task rewards (a cold start)")
    values = [rewards.get(t.id, float("nan")) for t in tasks]
    if kind == "seed_quintile":
        levels = quantile_levels(values, num_levels)
        return levels, [f"level{k}" for k in range(num_levels)]
    names, arms = [], np.zeros(len(tasks), int)
    for d in domains:
        rows = [n for n, t in enumerate(tasks) if t.domain == d]
        levels = quantile_levels([values[n] for n in rows], 3)
        for n, lv in zip(rows, levels):
            arms[n] = len(names) + lv
        names += [f"{d}/tercile{k}" for k in range(3)]
    return arms, names


# ----------------------------------------------------------------------------------------------- the sampler

class SECSampler(TaskSampler):
    """Task draws from SEC's bandit; `observe` after each step updates Q. State (Q per arm) is checkpointed through
    state_dict."""

    name = "sec"
    follows_harness = False  # p_t plays no part: HarnessRL's sampling interface is replaced

    def __init__(self, num_tasks: int, *, seed: int = 0, config: SECConfig = SECConfig(),
                 arms: Sequence[int] | None = None, arm_names: Sequence[str] | None = None):
        self.num_tasks, self.config = num_tasks, config
        self.arms = np.arange(num_tasks) if arms is None else np.asarray(arms, int)
        self.arm_names = list(arm_names) if arm_names is not None else [str(c) for c in range(self.arms.max() + 1)]
        self.q = np.zeros(len(self.arm_names))
        self.members = [np.flatnonzero(self.arms == c) for c in range(len(self.arm_names))]
        self._last_arms: list[int] = []
        self._last: dict[str, float] = {}

    @classmethod
    def build(cls, ctx: PartsContext, *, settings: SECConfig) -> "SECSampler":
        """From the run's tasks and config.sec (the seed rewards of the cold start for difficulty arms)."""
        rewards = None
        if settings.arms in SEED_ARMS:
            path = seed_groups_path(settings, section(ctx.config, "harness").cold_start)
            if not path or not os.path.isfile(path):
                raise ValueError(cls.check(ctx.config, settings=settings)[0])
            rewards = seed_rewards(path)
        arms, names = assign_arms(ctx.tasks, settings.arms, num_levels=settings.num_levels, rewards=rewards)
        logging.info("SEC: %d arms (%s) over %d tasks", len(names), settings.arms, len(ctx.tasks))
        return cls(len(ctx.tasks), seed=ctx.config.seed, config=settings, arms=arms, arm_names=names)

    @classmethod
    def check(cls, config, *, settings: SECConfig) -> list[str]:
        """Difficulty arms need the seed policy's rewards: the cold start's seed groups."""
        path = seed_groups_path(settings, section(config, "harness").cold_start)
        if settings.arms in SEED_ARMS and not (path and os.path.isfile(path)):
            where = f"--config.sec.seed_groups={path}: no such file (launch/cold_start.py writes it next to " \
                    f"cold_start.json)" if path else "no seed groups"
            return [f"--config.sec.arms={settings.arms!r} needs the seed policy's rewards ({where}): set "
                    f"--config.harness.cold_start (launch/cold_start.py writes it and its seed groups) or "
                    f"--config.sec.seed_groups, or use --config.sec.arms=domain or task"]
        return []

    def probs(self) -> np.ndarray:
        """p(c) over the arms that hold a task."""
        p = arm_probs(self.q, temperature=self.config.temperature)
        p = np.where([len(m) > 0 for m in self.members], p, 0.0)
        return p / p.sum()

    def draw(self, harness, seed: int, batch_size: int) -> tuple[list[int], np.ndarray]:
        """(task indices, u) of one step: per slot an arm from p(c), then an undrawn task of it uniformly."""
        rng = np.random.default_rng(int(seed) % (2**32))
        p = self.probs()
        taken: set[int] = set()
        idx, arms = [], []
        for c in rng.choice(len(p), size=batch_size, p=p):
            members = self.members[c]
            free = [int(i) for i in members if int(i) not in taken]
            i = int(rng.choice(free)) if free else int(rng.choice(members))
            taken.add(i)
            idx.append(i)
            arms.append(int(c))
        self._last_arms = arms
        if self.config.importance:
            pi = np.array([p[c] / len(self.members[c]) for c in arms])
            u = 1.0 / (self.num_tasks * pi)
        else:
            u = np.ones(batch_size)
        return idx, u.astype(np.float32)

    def observe(self, idx: Sequence[int], rewards) -> None:
        """The TD(0) update from this step's groups (rewards [T, J] of the drawn tasks, reward points)."""
        arms = [int(self.arms[i]) for i in idx]
        r = arm_rewards(arms, rewards)
        self.q = update_values(self.q, r, alpha=self.config.alpha)
        p = self.probs()
        self._last = {"sec/arms_drawn": float(len(set(arms))), "sec/q_max": float(self.q.max()),
                      "sec/q_min": float(self.q.min()), "sec/p_max": float(p.max()),
                      "sec/arm_reward_mean": float(np.mean(list(r.values()))) if r else float("nan")}

    def metrics(self) -> dict[str, float]:
        return dict(self._last)

    def state_dict(self) -> dict[str, Any]:
        return {"q": [float(x) for x in self.q], "arms": [int(a) for a in self.arms], "arm_names": self.arm_names}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if not state:
            return
        if list(state.get("arms", [])) != [int(a) for a in self.arms]:
            raise ValueError("the checkpoint's SEC arms differ from this config's")
        self.q = np.asarray(state["q"], np.float64)


@methods.register("sec", settings=("sec", SECConfig))
def sec(config) -> Method:
    """SEC alone: GRPO whose tasks come from SEC's bandit (seed rubric, no guidance)."""
    return Method(name="sec", sampler=functools.partial(SECSampler, settings=methods.settings(config, "sec")),
                  transitions=FROZEN_TRANSITIONS, memory=not section(config, "harness").no_memory)
