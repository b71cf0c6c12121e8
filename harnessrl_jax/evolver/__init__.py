"""The harness evolver (HarnessRL, sec. 4.3-4.4): attributor -> proposer -> just-in-time critic, and the cold start.

    from harnessrl_jax.evolver import Evolver, Group, CriticHooks
    evolver = Evolver.from_cold_start("cold_start.json")
    result = evolver.step(step, [Group(task, responses, S), ...], H_t, memory=memory,
                          hooks=CriticHooks(regrade=regrade, resample=resample))
    H_t = result.state; result.harness_records(); result.draw_fields(i); result.summary()

Modules: `attributor` (blind | saturated | spurious | agree with evidence), `proposer` (rule and LLM proposers,
typed candidates), `critic` (delta_c, delta_g, delta_w, bands, conditions (i)-(iv)), `cold_start` (gamma levels,
bands, anchors, cold_start.json), `evolver` (the B-round loop and its log). Prompts: `evolver/prompts/*.txt`.
"""

from harnessrl_jax.evolver.attributor import (AGREE, BLIND, LABELS, ROUTES, SATURATED, SPURIOUS, Attribution,
                                              Attributor, AttributorConfig, Evidence, HackingVerdict, LLMHackingCheck,
                                              TaskAttribution, attribute, hacking_signals, wording_check)
from harnessrl_jax.evolver.cold_start import ColdStart, SeedGroups, derive
from harnessrl_jax.evolver.context import TaskContext
from harnessrl_jax.evolver.critic import ACCEPTED, REJECTED, Bands, Critic, CriticHooks, Measurement
from harnessrl_jax.evolver.evolver import (NOOP, Evolver, EvolverConfig, EvolverResult, Group, LogEntry,
                                           task_slice)
from harnessrl_jax.evolver.proposer import (Candidate, LLMProposer, ProposerConfig, Rejection, RuleProposer,
                                            Variant, choose)

__all__ = [
    "ACCEPTED", "AGREE", "Attribution", "Attributor", "AttributorConfig", "BLIND", "Bands", "Candidate", "ColdStart",
    "Critic", "CriticHooks", "Evidence", "Evolver", "EvolverConfig", "EvolverResult", "Group", "HackingVerdict",
    "LABELS", "LLMHackingCheck", "LLMProposer", "LogEntry", "Measurement", "NOOP", "ProposerConfig", "REJECTED",
    "ROUTES", "Rejection", "RuleProposer", "SATURATED", "SPURIOUS", "SeedGroups", "TaskAttribution", "TaskContext",
    "Variant", "attribute", "choose", "derive", "hacking_signals", "task_slice", "wording_check",
]
