"""The harness evolver (HarnessRL, sec. 4.3-4.4): attributor -> proposer -> just-in-time critic, and the cold start.

    from harnessrl_jax.evolver import Evolver, Group, CriticHooks
    result = evolver.step(step, [Group(task, responses, S), ...], H_t, memory=memory,
                          hooks=CriticHooks(regrade_batch=..., resample_batch=...))
    H_t = result.state; result.harness_records(); result.draw_fields(i); result.summary()

Modules: `attributor` (with `hacking`, `text`), `rule_proposer` (with `fields`, `tightening`) and `llm_proposer`,
`candidates`, `critic`, `context` (what proposer and critic see of a task), `evolver` (the B-round loop),
`cold_start`; the prompts sent to models are `evolver/prompts/*.txt`.
"""

from harnessrl_jax.evolver.attributor import (Attribution, Attributor, AttributorConfig, Evidence, TaskAttribution,
                                              attribute, satisfied)
from harnessrl_jax.evolver.candidates import Candidate, Rejection, Variant, choose
from harnessrl_jax.evolver.cold_start import ColdStart, SeedGroups, derive
from harnessrl_jax.evolver.context import TaskContext, task_slice
from harnessrl_jax.evolver.critic import Bands, Critic, CriticHooks, Measurement
from harnessrl_jax.evolver.evolver import Evolver, EvolverConfig, EvolverResult, Group, LogEntry
from harnessrl_jax.evolver.hacking import HackingVerdict, LLMHackingCheck, hacking_signals, wording_check
from harnessrl_jax.evolver.llm_proposer import LLMProposer
from harnessrl_jax.evolver.rule_proposer import ProposerConfig, RuleProposer

__all__ = [
    "Attribution", "Attributor", "AttributorConfig", "Bands", "Candidate", "ColdStart", "Critic", "CriticHooks",
    "Evidence", "Evolver", "EvolverConfig", "EvolverResult", "Group", "HackingVerdict", "LLMHackingCheck",
    "LLMProposer", "LogEntry", "Measurement", "ProposerConfig", "Rejection", "RuleProposer", "SeedGroups",
    "TaskAttribution", "TaskContext", "Variant", "attribute", "choose", "derive", "hacking_signals", "satisfied",
    "task_slice", "wording_check",
]
