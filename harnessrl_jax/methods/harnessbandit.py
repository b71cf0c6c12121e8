"""HarnessBandit (arXiv 2609.13739): one harness per optimizer step, chosen by learnability and transferability.
Host-side numpy, pure functions over a frozen `BanditState`; `BanditSampler` is the part that wraps it.

    arm, p, q   = select(state, rng, config)          round-robin for the first R draws, then UCB-softmax + floor
    l_t         = learnability(advantages)            token-masked mean |A|, equal weight per prompt group
    state, rec  = observe(state, arm, l_t, s_t, config)
                  T_t = mean cos(s_t, E_h') over the peers' EMAs (before E_arm is updated), pooled-window min-max
                  normalisation of (l_t, T_t), v_t = alpha ln + (1 - alpha) Tn, Q_arm <- (1 - eta) Q_arm + eta v_t

    Qhat_h = Q_h if n_h > 0 else max over visited Q (0 if none)         selection_probs
    p_h    = (1 - eps) softmax((Qhat + c / sqrt(n + 1)) / tau)_h + eps / H
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
import logging
import os
from typing import Any, Mapping, Sequence

import numpy as np

from harnessrl_jax import methods
from harnessrl_jax.harness.transitions import FROZEN_TRANSITIONS
from harnessrl_jax.methods.arms import DEFAULT_ARMS, HELDOUT_ARM, SNAPSHOT, ArmsGuidance
from harnessrl_jax.methods.base import Method
from harnessrl_jax.methods.parts import PartsContext, TaskSampler
from harnessrl_jax.rl.sketch import make_sketch_spec
from harnessrl_jax.settings import section

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class BanditConfig:
    """config.bandit: the arms and every constant of the scheduler (HarnessBandit's defaults)."""

    arms: tuple[str, ...] = DEFAULT_ARMS  # methods.arms names, or snapshot:<path of a HarnessState JSON>
    heldout_arm: str = HELDOUT_ARM  # evaluated, never trained on
    warmup: int = 30  # R: round-robin draws before the bandit selects
    window: int = 32  # pooled (l, T) observations normalised over
    alpha: float = 0.5  # fusion weight of learnability
    ema_decay: float = 0.9  # beta of each arm's gradient-sketch EMA
    value_step: float = 0.3  # eta of the exponentially weighted value
    bonus: float = 0.5  # c of c / sqrt(n + 1)
    temperature: float = 0.5  # tau of the softmax
    floor: float = 0.1  # eps: every arm keeps p >= eps / H
    degenerate_value: float = 0.5  # normalised value when the window's max equals its min
    sketch_dim: int = 131_072  # d coordinates of the gradient sketch (capped at the pool's size)
    sketch_blocks: int = 4  # K: the last K transformer blocks
    sketch_seed: int = 0  # fixes the sketch coordinates
    pass_threshold: float = 80.0  # a response passes at reward >= this (pass@J, pass^J)

    def __post_init__(self):
        if len(self.arms) < 2:
            raise ValueError(f"arms: at least two arms, got {list(self.arms)}")
        if len(set(self.arms)) != len(self.arms):
            raise ValueError(f"arms: names repeat in {list(self.arms)}")
        if self.heldout_arm in self.arms:
            raise ValueError(f"heldout_arm={self.heldout_arm!r} is also a training arm")
        for name, lo, hi in (("alpha", 0.0, 1.0), ("ema_decay", 0.0, 1.0), ("floor", 0.0, 1.0),
                             ("degenerate_value", 0.0, 1.0)):
            if not lo <= getattr(self, name) <= hi:
                raise ValueError(f"{name} must lie in [{lo}, {hi}], got {getattr(self, name)}")
        if not 0.0 < self.value_step <= 1.0:
            raise ValueError(f"value_step must lie in (0, 1], got {self.value_step}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if self.bonus < 0:
            raise ValueError(f"bonus must be >= 0, got {self.bonus}")
        for name in ("warmup",):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("window", "sketch_dim", "sketch_blocks"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")


# ------------------------------------------------------------------------------------------- pure functions

def selection_probs(q, n, *, bonus: float, temperature: float, floor: float) -> np.ndarray:
    """p over arms: Qhat = q where visited (n > 0), else the max q over visited arms (0 if none);
    score = Qhat + bonus / sqrt(n + 1); p = (1 - floor) softmax(score / temperature) + floor / H."""
    return _selection(q, n, bonus=bonus, temperature=temperature, floor=floor)[0]


def _selection(q, n, *, bonus, temperature, floor) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(p, softmax before the floor, bonus) of selection_probs."""
    q, n = np.asarray(q, np.float64), np.asarray(n, np.float64)
    visited = n > 0
    qhat = np.where(visited, q, q[visited].max() if visited.any() else 0.0)
    bonuses = bonus / np.sqrt(n + 1.0)
    z = (qhat + bonuses) / temperature
    z = np.exp(z - z.max())
    soft = z / z.sum()
    return (1.0 - floor) * soft + floor / len(q), soft, bonuses


def learnability(advantages, mask=None) -> float:
    """l_t: per trajectory the token-masked mean |A| (advantages [T, J] per sequence, or [T, J, L] per token with
    `mask` [T, J, L]), averaged within each prompt group, then over groups with equal weight. Groups with no valid
    entry (every reward failed) are skipped; NaN when none is left."""
    a = np.abs(np.asarray(advantages, np.float64))
    if a.ndim == 3:
        m = np.ones_like(a, bool) if mask is None else np.asarray(mask, bool)
        m = m & np.isfinite(a)
        tokens = m.sum(-1)
        a = np.where(tokens > 0, np.where(m, a, 0.0).sum(-1) / np.maximum(tokens, 1), np.nan)
    elif a.ndim != 2:
        raise ValueError(f"advantages must be [T, J] or [T, J, L], got shape {a.shape}")
    groups = [row[np.isfinite(row)].mean() for row in a if np.isfinite(row).any()]
    return float(np.mean(groups)) if groups else float("nan")


def cosine(a, b) -> float:
    """a.b / (|a| |b| + 1e-12)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-12))


def directed_cosines(sketch, emas, present, arm: int) -> np.ndarray:
    """cos(s_t, E_h') for every peer h' != arm with an EMA; NaN elsewhere."""
    out = np.full(len(present), np.nan)
    for h in range(len(present)):
        if h != arm and present[h]:
            out[h] = cosine(sketch, emas[h])
    return out


def transferability(sketch, emas, present, arm: int) -> float:
    """T_t: the mean cosine of this step's sketch to the other arms' EMAs; NaN when no peer has one yet."""
    c = directed_cosines(sketch, emas, present, arm)
    return float(np.nanmean(c)) if np.isfinite(c).any() else float("nan")


def window_normalise(value: float, window: Sequence[float], *, degenerate: float = 0.5) -> float:
    """Min-max position of `value` among the window's defined values (`value` among them); `degenerate` when they
    span nothing (max == min, e.g. one observation); NaN when `value` is undefined."""
    if not np.isfinite(value):
        return float("nan")
    w = np.asarray([x for x in window if np.isfinite(x)], np.float64)
    lo, hi = w.min(), w.max()
    if hi <= lo:
        return float(degenerate)
    return float((value - lo) / (hi - lo))


def fuse(l_norm: float, t_norm: float, alpha: float = 0.5) -> float:
    """v_t = alpha l_norm + (1 - alpha) t_norm, or l_norm when transferability is undefined."""
    return float(l_norm) if not np.isfinite(t_norm) else float(alpha * l_norm + (1.0 - alpha) * t_norm)


# ----------------------------------------------------------------------------------------------- the state

@dataclasses.dataclass(frozen=True, eq=False)
class BanditState:
    """Everything the scheduler knows: values Q [H], visits n [H], the pooled window of (l, T) observations, the
    per-arm sketch EMAs [H, d] and which exist, the draws so far `t`, and each arm's task-pool pass and position."""

    q: np.ndarray
    n: np.ndarray
    window: tuple[tuple[float, float], ...]
    emas: np.ndarray
    present: np.ndarray
    t: int = 0
    pool_pass: tuple[int, ...] = ()
    pool_pos: tuple[int, ...] = ()

    @classmethod
    def create(cls, num_arms: int, sketch_dim: int) -> "BanditState":
        return cls(np.zeros(num_arms), np.zeros(num_arms, np.int64), (), np.zeros((num_arms, sketch_dim), np.float32),
                   np.zeros(num_arms, bool), 0, (0,) * num_arms, (0,) * num_arms)

    @property
    def num_arms(self) -> int:
        return len(self.q)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able; the EMAs as base64 float32 with their sha256, so they live and rotate with the checkpoint."""
        raw = np.ascontiguousarray(self.emas, np.float32).tobytes()
        return {"q": [float(x) for x in self.q], "n": [int(x) for x in self.n],
                "window": [[_json_float(a), _json_float(b)] for a, b in self.window],
                "present": [bool(x) for x in self.present], "t": int(self.t),
                "pool_pass": list(self.pool_pass), "pool_pos": list(self.pool_pos),
                "ema_shape": list(self.emas.shape), "ema_sha256": hashlib.sha256(raw).hexdigest(),
                "emas": base64.b64encode(raw).decode("ascii")}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "BanditState":
        raw = base64.b64decode(d["emas"])
        if hashlib.sha256(raw).hexdigest() != d["ema_sha256"]:
            raise ValueError("the checkpoint's bandit EMAs do not match their sha256")
        emas = np.frombuffer(raw, np.float32).reshape(d["ema_shape"]).copy()
        window = tuple((_from_json(a), _from_json(b)) for a, b in d["window"])
        return cls(np.asarray(d["q"], np.float64), np.asarray(d["n"], np.int64), window, emas,
                   np.asarray(d["present"], bool), int(d["t"]), tuple(d["pool_pass"]), tuple(d["pool_pos"]))


def _json_float(x: float):
    return float(x) if np.isfinite(x) else None


def _from_json(x) -> float:
    return float("nan") if x is None else float(x)


def select(state: BanditState, rng: np.random.Generator, config: BanditConfig
           ) -> tuple[int, np.ndarray, np.ndarray, bool]:
    """(arm, p, softmax before the floor, warm-up?) of the next draw: arm t mod H for the first R draws (p is
    still reported), then a draw from selection_probs."""
    p, soft, _ = _selection(state.q, state.n, bonus=config.bonus, temperature=config.temperature,
                            floor=config.floor)
    if state.t < config.warmup:
        return state.t % state.num_arms, p, soft, True
    return int(rng.choice(state.num_arms, p=p)), p, soft, False


def observe(state: BanditState, arm: int, l_t: float, sketch, config: BanditConfig
            ) -> tuple[BanditState, dict[str, Any]]:
    """The update after the train step for the drawn `arm`: T_t against the peers' EMAs, then this arm's EMA, the
    pooled window, the fused value and the value update. Returns the new state and the observation's record."""
    sketch = np.asarray(sketch, np.float32)
    cos = directed_cosines(sketch, state.emas, state.present, arm)
    t_t = float(np.nanmean(cos)) if np.isfinite(cos).any() else float("nan")
    emas, present = state.emas.copy(), state.present.copy()
    b = config.ema_decay
    emas[arm] = sketch if not present[arm] else b * emas[arm] + (1.0 - b) * sketch
    present[arm] = True
    window = (state.window + ((float(l_t), t_t),))[-config.window:]
    l_norm = window_normalise(l_t, [w[0] for w in window], degenerate=config.degenerate_value)
    t_norm = window_normalise(t_t, [w[1] for w in window], degenerate=config.degenerate_value)
    v = fuse(l_norm, t_norm, config.alpha)
    q, n = state.q.copy(), state.n.copy()
    if np.isfinite(v):  # an all-failed batch (l undefined) leaves the value alone; the visit still counts
        q[arm] = v if n[arm] == 0 else (1.0 - config.value_step) * q[arm] + config.value_step * v
    n[arm] += 1
    new = dataclasses.replace(state, q=q, n=n, window=window, emas=emas, present=present, t=state.t + 1)
    return new, {"arm": arm, "learnability_raw": float(l_t), "transferability_raw": t_t,
                 "learnability_norm": l_norm, "transferability_norm": t_norm, "value": v, "cosines": cos,
                 "sketch_norm": float(np.linalg.norm(sketch))}


def pool_draw(state: BanditState, arm: int, batch_size: int, num_tasks: int, seed: int
              ) -> tuple[BanditState, list[int]]:
    """The next `batch_size` tasks of `arm`'s own pool: a permutation seeded by (seed, arm, pass), reshuffled per
    pass; the pools hold the same tasks."""
    passes, positions = list(state.pool_pass), list(state.pool_pos)
    picked: list[int] = []
    while len(picked) < batch_size:
        order = np.random.default_rng((seed, arm, passes[arm])).permutation(num_tasks)
        take = order[positions[arm]:positions[arm] + batch_size - len(picked)]
        picked.extend(int(i) for i in take)
        positions[arm] += len(take)
        if positions[arm] >= num_tasks:
            passes[arm], positions[arm] = passes[arm] + 1, 0
    return dataclasses.replace(state, pool_pass=tuple(passes), pool_pos=tuple(positions)), picked


# ------------------------------------------------------------------------------------------------- the parts

def arm_label(name: str) -> str:
    """A metric-key form of an arm name (a snapshot arm by its file's stem)."""
    if name.startswith(SNAPSHOT):
        return "snapshot_" + os.path.splitext(os.path.basename(name[len(SNAPSHOT):]))[0]
    return name


class BanditSampler(TaskSampler):
    """The scheduler as a task sampler: `draw` picks the step's arm (round-robin, then UCB-softmax with the floor,
    from a generator seeded by the step seed) and takes the next tasks of that arm's pool; `after_update(advantages,
    sketch)` after the train step observes the arm. The whole BanditState is checkpointed through state_dict."""

    name = "bandit"
    follows_harness = False  # p_t plays no part: the bandit draws arms, each arm its own pool

    def __init__(self, num_tasks: int, *, seed: int = 0, config: BanditConfig = BanditConfig()):
        self.num_tasks, self.seed, self.config = num_tasks, int(seed), config
        self.arm_names = list(config.arms)
        self.labels = [arm_label(n) for n in self.arm_names]
        self.state = BanditState.create(len(self.arm_names), 0)  # the EMAs take the sketch's size when one comes
        self.arm: int | None = None  # the arm of the step under way, for every task drawn (step_arms)
        self.step_arms: list[int] = []
        self._draw: dict[str, Any] = {}
        self._last: dict[str, float] = {}

    @classmethod
    def build(cls, ctx: PartsContext, *, settings: BanditConfig) -> "BanditSampler":
        return cls(len(ctx.tasks), seed=ctx.config.seed, config=settings)

    def draw(self, harness, seed: int, batch_size: int) -> tuple[list[int], np.ndarray]:
        """(task indices, u = 1) of one harness-pure step; sets `arm`."""
        arm, p, soft, warm = select(self.state, np.random.default_rng(int(seed) % (2**32)), self.config)
        self.state, idx = pool_draw(self.state, arm, batch_size, self.num_tasks, self.seed)
        self.arm, self.step_arms = arm, [arm] * batch_size
        self._draw = {"p": p, "soft": soft, "warm": warm,
                      "bonus": self.config.bonus / np.sqrt(self.state.n + 1.0)}
        return idx, np.ones(batch_size, np.float32)

    def after_update(self, advantages, sketch) -> None:
        """Learnability of this step's advantages [T, J] and the update's gradient sketch, folded into the arm's
        value; the step's `bandit/*` metrics."""
        if self.arm is None:
            raise RuntimeError("after_update before draw")
        if sketch is None:
            raise ValueError("the bandit observes the update's gradient sketch: the method needs Method.sketch")
        sketch = np.asarray(sketch, np.float32).reshape(-1)
        state = self.state
        if state.emas.shape[1] != sketch.size:
            if state.present.any():
                raise ValueError(f"the gradient sketch has {sketch.size} entries; the bandit's EMAs "
                                 f"{state.emas.shape[1]} (--config.bandit.sketch_dim changed on resume?)")
            state = dataclasses.replace(state, emas=np.zeros((state.num_arms, sketch.size), np.float32))
        self.state, rec = observe(state, self.arm, learnability(advantages), sketch, self.config)
        out = {"bandit/arm": float(self.arm), "bandit/warmup": float(self._draw["warm"]),
               **{f"bandit/{k}": float(rec[k]) for k in ("learnability_raw", "transferability_raw",
                                                          "learnability_norm", "transferability_norm", "value",
                                                          "sketch_norm")}}
        for h, label in enumerate(self.labels):
            out[f"bandit/p_{label}"] = float(self._draw["p"][h])
            out[f"bandit/q_{label}"] = float(self._draw["soft"][h])
            out[f"bandit/bonus_{label}"] = float(self._draw["bonus"][h])
            out[f"bandit/Q_{label}"] = float(self.state.q[h])
            out[f"bandit/n_{label}"] = float(self.state.n[h])
            out[f"bandit/cos_{label}"] = float(rec["cosines"][h])  # this step's sketch to each peer's EMA
            out[f"bandit/chosen_{label}"] = float(h == self.arm)
        self._last = out

    def probs(self) -> np.ndarray:
        """The selection probabilities of the next draw after warm-up (the final state's p, App. F)."""
        return selection_probs(self.state.q, self.state.n, bonus=self.config.bonus,
                               temperature=self.config.temperature, floor=self.config.floor)

    def metrics(self) -> dict[str, float]:
        return dict(self._last)

    def state_dict(self) -> dict[str, Any]:
        return {"arms": self.arm_names, "seed": self.seed, "sketch_dim": self.config.sketch_dim,
                "sketch_seed": self.config.sketch_seed, "state": self.state.to_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if not state:
            return
        if list(state["arms"]) != self.arm_names:
            raise ValueError(f"the checkpoint's bandit arms {state['arms']} differ from this config's "
                             f"--config.bandit.arms {self.arm_names}")
        if (state["sketch_dim"], state["sketch_seed"]) != (self.config.sketch_dim, self.config.sketch_seed):
            raise ValueError("the checkpoint's gradient sketch (--config.bandit.sketch_dim / sketch_seed) differs "
                             "from this config's")
        self.state = BanditState.from_dict(state["state"])


def check_rloo(config) -> list[str]:
    """HarnessBandit and its mixtures train with Dr.GRPO's leave-one-out baseline (HarnessBandit, sec. 3)."""
    if config.advantage != "rloo":
        return [f"--config.advantage={config.advantage!r}: {config.method} trains with Dr.GRPO's leave-one-out "
                f"baseline (HarnessBandit, sec. 3): set --config.advantage=rloo (the `:method={config.method}` config "
                f"argument sets it)"]
    return []


def sketch_spec(config, model_config):
    """The gradient sketch's coordinates for config.bandit (the last K blocks, d coordinates, a fixed seed)."""
    b = methods.settings(config, "bandit")
    return make_sketch_spec(model_config, b.sketch_dim, last_blocks=b.sketch_blocks, seed=b.sketch_seed)


@methods.register("harnessbandit", settings=("bandit", BanditConfig), check=check_rloo,
                  defaults={"advantage": "rloo"})
def harnessbandit_method(config) -> Method:
    """HarnessBandit: harness-pure steps, the arm scheduled by the bandit; the harness itself frozen (the seed
    rubric, no evolver), the train step returning the gradient sketch."""
    bandit = methods.settings(config, "bandit")
    return Method(name="harnessbandit", sampler=functools.partial(BanditSampler, settings=bandit),
                  prompts=functools.partial(ArmsGuidance, names=bandit.arms, key="bandit.arms",
                                            heldout=bandit.heldout_arm, follow_sampler=True),
                  transitions=FROZEN_TRANSITIONS, memory=not section(config, "harness").no_memory,
                  sketch=sketch_spec)
