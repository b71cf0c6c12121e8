"""CoCA: capability-aware rubric calibration and frontier-guided on-policy self-distillation (methods.md 1).

Per query, a Normal group (query only, G_N) and a Guided group (the rubric shown, G_G) from the same pre-update
policy, both judged under the original rubric. Achievement rates (polarity-aware: a pitfall is achieved when
avoided) put every criterion in one state:

    unjudged        no valid verdict in one of the groups
    too_hard        pN = pG = 0              -> calibration: weaken (this visit only)
    learnable       pN = 0 < pG              -> the frontier gate
    regressive      pG < pN - m_reg          -> counted (Guided GRPO penalises it when it runs)
    saturated       pN = 1                   -> calibration: strengthen (this visit only)
    discriminative  otherwise                -> Normal GRPO sees it

Both groups are re-scored under the adapted rubric C~ (rN, rG). The gate (1.7): a query is qualified when it has a
learnable criterion and a Guided response achieves all of them and beats the best Normal reward by more than
delta_F; then the Guided Frontier teaches, in the context of the learnable criteria (and itself as a privileged
demonstration), the Current Frontier (the best Normal response) by the top-k forward KL (rl/distill.py); otherwise
the Guided group is trained with GRPO in its own context. Normal GRPO runs on every query:

    L = L_GRPO(Normal rows + Guided rows of unqualified queries) + lambda_D * L_OPSD(qualified queries)

Modules: `states` (settings, diagnosis, the gate: pure), `calibration` (the rewrites of saturated and too-hard
criteria), `scheme` (the step's stages); the description below registers the method.
"""

from __future__ import annotations

import functools

from harnessrl_jax import methods
from harnessrl_jax.harness.transitions import FROZEN_TRANSITIONS
from harnessrl_jax.methods.base import Method
from harnessrl_jax.methods.coca.scheme import CoCAScheme
from harnessrl_jax.methods.coca.states import (DISCRIMINATIVE, LEARNABLE, REGRESSIVE, SATURATED, STATES, TOO_HARD,
                                               UNJUDGED, CoCAConfig, Gate, achievement, diagnose, rates,
                                               select_frontiers, transitions)
from harnessrl_jax.methods.samplers import configured
from harnessrl_jax.settings import section


@methods.register("coca", settings=("coca", CoCAConfig))
def coca(config) -> Method:
    """CoCA: seed rubric, uniform draws, the dual-group scheme with the distillation term (config.coca)."""
    settings = methods.settings(config, "coca")
    return Method(name="coca", sampler=configured(config), transitions=FROZEN_TRANSITIONS,
                  memory=not section(config, "harness").no_memory,
                  scheme=functools.partial(CoCAScheme, settings=settings), distill_coef=settings.distill_coef)


__all__ = ["CoCAConfig", "CoCAScheme", "DISCRIMINATIVE", "Gate", "LEARNABLE", "REGRESSIVE", "SATURATED", "STATES",
           "TOO_HARD", "UNJUDGED", "achievement", "coca", "diagnose", "rates", "select_frontiers", "transitions"]
