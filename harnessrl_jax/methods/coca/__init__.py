"""CoCA (arXiv 2610.38566): capability-aware rubric calibration and frontier-guided on-policy self-distillation.
Per query, a Normal group (query only, G_N) and a Guided group (the rubric shown, G_G) from the same pre-update
policy; achievement rates put each criterion in one state (`states.diagnose`); saturated and too-hard criteria are
rewritten for this visit (`calibration`); a learnable one opens the frontier gate (`states.select_frontiers`):

    L = L_GRPO(Normal rows + Guided rows of unqualified queries) + lambda_D * L_OPSD(qualified queries)

`scheme` runs the step's stages; the description below registers the method.
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
