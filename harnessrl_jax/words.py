"""Words with a fixed meaning in the papers, defined once (HarnessRL, sec. 3-4).

Each is a `StrEnum`: a member compares equal to its value (`Label.BLIND == "blind"`), prints as it and is written
to JSON as it, so logs, the memory and checkpoints keep plain strings.
"""

from __future__ import annotations

import enum


class Interface(enum.StrEnum):
    """The three interfaces of the harness H_t = (p_t, g_t, c_t)."""

    SAMPLING = "sampling"
    GUIDANCE = "guidance"
    RUBRIC = "rubric"


INTERFACES = tuple(Interface)


class Label(enum.StrEnum):
    """The attributor's label of a criterion (and, `SATURATED` only, of a task)."""

    BLIND = "blind"  # no rollout meets it, persistently: routed to guidance
    SATURATED = "saturated"  # every rollout meets it, persistently: routed to sampling (task) and the rubric
    SPURIOUS = "spurious"  # it splits the group by surface form, not quality: routed to the rubric
    AGREE = "agree"  # it works as a reward: no action


LABELS = tuple(Label)
# The interface each failure label routes to (sec. 3).
ROUTES = {Label.BLIND: Interface.GUIDANCE, Label.SATURATED: Interface.SAMPLING, Label.SPURIOUS: Interface.RUBRIC,
          Label.AGREE: None}


class Verdict(enum.StrEnum):
    """What became of a proposed update: measured and accepted or rejected, or an explicit no-op."""

    ACCEPTED = "accepted"
    REJECTED = "rejected"
    NOOP = "noop"


VERDICTS = tuple(Verdict)


class CriterionState(enum.StrEnum):
    """CoCA's state of a criterion on one visit, from its achievement rates in the query-only (pN) and the
    rubric-guided (pG) group (methods.coca.diagnose)."""

    UNJUDGED = "unjudged"  # no valid verdict in one of the groups
    TOO_HARD = "too_hard"  # pN = pG = 0: calibrated easier
    LEARNABLE = "learnable"  # pN = 0 < pG: guidance reveals it; the frontier gate
    REGRESSIVE = "regressive"  # pG < pN: guidance makes it worse
    SATURATED = "saturated"  # pN = 1: calibrated harder
    DISCRIMINATIVE = "discriminative"  # otherwise: the query-only group is split
