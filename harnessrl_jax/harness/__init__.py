"""The training-time harness H_t = (p_t, g_t, c_t): state pytrees, typed actions, pure transitions, rendering.

Rendering lives in `harnessrl_jax.harness.render` (`render_prompt`, `fit_fields`, `task_fields`).
"""

from harnessrl_jax.harness.ops import (AddField, CreateCriterion, DeleteCriterion, DownweightTask, DropField,
                                       InvalidAction, MergeCriteria, Noop, RestoreTask, ReweightCriterion,
                                       RewriteCriterion, SplitCriterion, action_from_dict)
from harnessrl_jax.harness.state import (FIELDS, GAMMAS, GuidanceState, HarnessState, MountedField, RubricCriterion,
                                         RubricState, SamplingState, anchor_share, guidance_cap, sample_tasks)
from harnessrl_jax.harness.transitions import (DEFAULT_TRANSITIONS, FROZEN_TRANSITIONS, Transitions,
                                               advance_schedule, apply)

__all__ = [
    "AddField", "CreateCriterion", "DEFAULT_TRANSITIONS", "DeleteCriterion", "DownweightTask", "DropField", "FIELDS",
    "FROZEN_TRANSITIONS", "GAMMAS", "GuidanceState", "HarnessState", "InvalidAction", "MergeCriteria", "MountedField",
    "Noop", "RestoreTask", "ReweightCriterion", "RewriteCriterion", "RubricCriterion", "RubricState", "SamplingState",
    "SplitCriterion", "Transitions", "action_from_dict", "advance_schedule", "anchor_share", "apply", "guidance_cap",
    "sample_tasks",
]
