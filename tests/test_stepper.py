"""The stepper's harness metrics of one step, from a hand-built evolver result: what the process figures read."""

from types import SimpleNamespace

import numpy as np
import pytest

from harnessrl_jax.evolver import Candidate, EvolverResult, LogEntry
from harnessrl_jax.harness import AddField, HarnessState, apply
from harnessrl_jax.rubric.schema import Criterion, Task
from harnessrl_jax.stepper import Stepper


def test_every_accepted_reference_counts_and_the_tasks_without_fields_are_a_share_of_all_tasks():
    tasks = [Task(f"t{i}", "test", ({"role": "user", "content": "Say hi."},), (Criterion(f"t{i}/c0", "Says hi.", 1.0),))
             for i in range(5)]
    H = HarnessState.from_tasks(tasks)

    def reference(tid, source):
        return Candidate(tid, "guidance", (AddField(tid, "reference", "An answer that meets it: hi.", f"{tid}/c0"),),
                         "blind", (f"{tid}/c0",), reference_source=source)

    both = Candidate("t3", "guidance", (AddField("t3", "criterion", "Say hi.", "t3/c0"),
                                        AddField("t3", "critique", "Nobody said hi.", "t3/c0")), "blind")
    # t1's reference is model-written and quotes no record it was shown: mounted all the same, by no donor.
    accepted = [reference("t0", "donor"), reference("t1", None), reference("t2", "own"), both]
    log = [LogEntry(0, c.task_id, n, "guidance", 0, "blind", "accepted", "", c) for n, c in enumerate(accepted)]
    log.insert(0, LogEntry(0, "t2", 2, "guidance", 0, "blind", "rejected", "", reference("t2", "donor")))
    actions = tuple(a for c in accepted for a in c.actions)
    result = EvolverResult(0, apply(H, actions), actions, tuple(log), ())
    groups = SimpleNamespace(guided=[False] * 4, shortened=[False] * 4, over_budget=[False] * 4)
    m = Stepper._harness_metrics(SimpleNamespace(memory=None), result, H, result.state, np.arange(4), groups,
                                 {"resampled": 0})
    assert (m["guidance/reference_fields_added"], m["guidance/reference_fields_from_donors"]) == (3, 1)
    assert m["guidance/fields_per_task"] == pytest.approx(5 / 5)  # 1 + 1 + 1 + 2 fields over all 5 tasks
    assert m["guidance/tasks_with_fields"] == pytest.approx(4 / 5)
    assert m["guidance/tasks_without_fields"] == pytest.approx(1 / 5)
