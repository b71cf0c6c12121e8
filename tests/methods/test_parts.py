"""The published methods as parts of the one step: their descriptions, every threshold of config.<method> reaching
its part, HarnessRL's interface replacements (with the critic gating what it gated before, or not), the rules'
updates recorded as the evolver's are. What each mechanism does to the training groups is tested on the planted
world against a GRPO control (tests/methods/test_testbed_learns.py)."""

import dataclasses
import os
import sys

import numpy as np
import pytest

from harnessrl_jax import build, checks, methods
from harnessrl_jax.methods.amaris import AMARISRule
from harnessrl_jax.methods.evorubric import EvoRubricRule
from harnessrl_jax.methods.parts import MethodParts, PartsContext, part_class
from harnessrl_jax.methods.ruscarl import RuscaRLGuidance
from harnessrl_jax.methods.samplers import HarnessSampler
from harnessrl_jax.methods.sec import SECSampler
from harnessrl_jax.methods.skillrl import Skill, SkillRLGuidance
from harnessrl_jax.stepper import Stepper, build_evolver
from harnessrl_jax.words import INTERFACES, Interface

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from experiments import base, tiny_cpu  # noqa: E402

NEW = ("ruscarl", "skillrl", "evorubric", "amaris", "amaris_pp", "sec")


def tiny_cpu_task():
    from harnessrl_jax import toy

    return toy.harness_tasks()[0]


def tiny(arg="method=harnessrl", **harness):
    config = tiny_cpu.get_config(f"{arg},tasks=harness")
    config.harness.update(harness)
    return config


def built(method, config, tasks=(), **ctx):
    """The parts of `method` for a run of `config` over `tasks`."""
    return MethodParts(method, PartsContext(config, list(tasks), method, **ctx))


def test_each_method_is_its_parts():
    d = {name: methods.describe(tiny(f"method={name}")) for name in NEW}
    r = built(d["ruscarl"], tiny("method=ruscarl"))
    assert isinstance(r.prompts, RuscaRLGuidance) and r.scheme.loss_context == "bare" and d["ruscarl"].frozen
    s = built(d["skillrl"], tiny("method=skillrl"))
    assert isinstance(s.prompts, SkillRLGuidance) and s.scheme.loss_context == "guided"
    assert (part_class(d["evorubric"].rule), d["evorubric"].rule_interfaces, d["evorubric"].anchors) == \
        (EvoRubricRule, (Interface.RUBRIC,), False)
    assert (part_class(d["amaris"].rule), d["amaris"].rule_interfaces) == (AMARISRule, (Interface.RUBRIC,))
    a = built(d["amaris_pp"], tiny("method=amaris_pp"))
    assert (a.rule.plus, set(a.rule.interfaces), d["amaris_pp"].rule_interfaces, d["amaris_pp"].critic) == \
        (True, set(INTERFACES), INTERFACES, False)
    assert part_class(d["sec"].sampler) is SECSampler and d["sec"].frozen
    for name, m in d.items():  # the evolver itself only observes (attributes) for every published method
        assert m.interfaces == () and not m.rule_gated, name


@pytest.mark.parametrize("switch, interfaces, extra", [
    ({"sampling_rule": "sec"}, (Interface.GUIDANCE, Interface.RUBRIC), {"sampler": SECSampler}),
    ({"guidance_rule": "ruscarl"}, (Interface.SAMPLING, Interface.RUBRIC),
     {"prompts": RuscaRLGuidance, "loss_context": "bare", "tis_cap": 0.0}),  # as released: uncorrected
    ({"rubric_rule": "evorubric"}, (Interface.SAMPLING, Interface.GUIDANCE),
     {"rule": EvoRubricRule, "rule_gated": False, "anchors": True}),  # the published rule, ungated
    ({"rubric_rule": "evorubric", "gate_replaced_rule": True}, (Interface.SAMPLING, Interface.GUIDANCE),
     {"rule_gated": True}),  # the labelled variant: the critic measures it
    ({"rubric_rule": "evorubric", "no_critic": True}, (Interface.SAMPLING, Interface.GUIDANCE), {"critic": False}),
])
def test_interface_replacement_swaps_one_interface_and_keeps_the_other_two(switch, interfaces, extra):
    config = tiny(**switch)
    assert checks.check(config) == []
    m = methods.describe(config)
    assert m.interfaces == interfaces and m.memory
    evolver, _ = build_evolver(config, m, None)
    assert evolver.config.interfaces == interfaces  # the replaced interface leaves the evolver
    p = built(m, config.copy_and_resolve_references(), critic=evolver.critic)
    found = {"sampler": type(p.sampler), "prompts": type(p.prompts), "rule": type(p.rule),
             "loss_context": p.scheme.loss_context, "tis_cap": m.tis_cap, "rule_gated": m.rule_gated,
             "anchors": m.anchors, "critic": m.critic}
    assert {k: found[k] for k in extra} == extra
    assert p.critic is evolver.critic and p.critic.enabled == (not switch.get("no_critic", False))
    if "sampler" not in extra:  # the two kept interfaces keep HarnessRL's parts
        assert type(p.sampler) is HarnessSampler


@pytest.mark.parametrize("ablation", ["sec_sampling", "ruscarl_guidance", "evorubric_rubric"])
def test_the_replacement_rows_are_configs(ablation):
    from experiments import smollm2_cpu

    config = smollm2_cpu.get_config(f"method=harnessrl,ablation={ablation}")
    assert all(config.harness[k] == v for k, v in base.ABLATIONS[ablation].items())
    assert checks.check(config) == []


def test_every_threshold_of_a_method_reaches_its_part():
    config = tiny("method=ruscarl")
    config.ruscarl.update(sigmoid_start=0.3, sigmoid_steepness=10.0, group_rule="binary", full_reveal=2)
    config.skillrl.update(top_k=3, min_cosine=0.5, evolve_every=7, max_new_per_domain=2)
    config.evorubric.update(prune_window=3, candidate_sets=5, set_size=2, consensus=0.6, pool_factor=3.0)
    config.amaris.update(static_k=2, dynamic_k=5, early_share=0.25, reweight_factor=0.7)
    config.sec.update(alpha=0.3, temperature=0.4, importance=True)
    config = config.copy_and_resolve_references()
    g = built(methods.describe(config), config).prompts
    assert (g.config.sigmoid_start, g.config.sigmoid_steepness, g.config.group_rule, g.config.full_reveal) == \
        (0.3, 10.0, "binary", 2)
    for name, field, value in (("skillrl", "top_k", 3), ("evorubric", "prune_window", 3),
                               ("amaris", "early_share", 0.25), ("sec", "temperature", 0.4)):
        assert getattr(methods.settings(config, name), field) == value
    s = built(methods.describe(tiny("method=skillrl")), tiny("method=skillrl")).prompts
    assert s.config.evolve_every == 2  # the tiny config's
    for name in ("skillrl", "evorubric", "amaris", "sec"):
        config.method = name
        p = built(methods.describe(config), config, [tiny_cpu_task()])
        if name == "skillrl":
            assert (p.prompts.config.top_k, p.prompts.config.min_cosine, p.prompts.config.evolve_every) == (3, 0.5, 7)
        if name == "evorubric":
            assert (p.rule.config.candidate_sets, p.rule.config.consensus) == (5, 0.6)
        if name == "amaris":
            assert (p.rule.config.static_k, p.rule.config.dynamic_k, p.rule.config.reweight_factor) == (2, 5, 0.7)
        if name == "sec":
            assert (p.sampler.config.alpha, p.sampler.config.importance) == (0.3, True)


@pytest.mark.parametrize("key, value", [("ruscarl.group_rule", "quadratic"), ("sec.alpha", 0.0),
                                        ("skillrl.min_cosine", 2.0), ("evorubric.consensus", 1.5),
                                        ("amaris.reweight_factor", 1.0), ("harness.rubric_rule", "amaris")])
def test_a_wrong_method_setting_is_reported_with_its_key(key, value):
    config = tiny()
    section, name = key.split(".")
    config[section][name] = value
    problems = checks.check(config)
    assert any(p.startswith(f"--config.{section}") for p in problems), problems


@pytest.mark.parametrize("name", ["evorubric", "amaris_pp"])
def test_the_rules_updates_are_recorded_in_the_memory_as_the_evolvers_are(tiny_setup, tmp_path, name):
    config = tiny(f"method={name}").copy_and_resolve_references()
    run = dataclasses.replace(tiny_setup, config=config)
    stepper = Stepper(run, methods.describe(config), str(tmp_path))
    stepper.start(None)
    state = build.initial_state(run)
    lines = []
    for step in range(3):
        state, metrics, records = stepper.step(state, step)
        lines += records
    accepted = [r for r in lines if r["verdict"] == "accepted"]
    assert accepted and all(r["candidate"]["source"].startswith(name.split("_")[0]) for r in lines)
    stored = [a for _, _, a in stepper.memory.store.actions()]
    n_actions = sum(len(r["candidate"]["actions"]) for r in accepted)
    assert sum(a.verdict == "accepted" for a in stored) == n_actions
    assert all(a.changes for a in stored if a.verdict == "accepted")  # so reversals are found as for HarnessRL
    assert metrics["harness/accepted_total"] == n_actions and np.isfinite(metrics["harness/reversal_rate"])
    if name == "amaris_pp":  # its summaries are in the memory, per draw
        draws = list(stepper.memory.store.draws())
        assert all(d.dynamics.get("amaris_summary") for d in draws if d.step == 0)
    stepper.close()


@pytest.mark.parametrize("name", ["skillrl", "sec"])
def test_a_resumed_run_restores_the_methods_state(tiny_setup, tmp_path, name):
    """SkillRL's bank and SEC's values go into the checkpoint's extra and come back from it."""
    config = tiny(f"method={name}").copy_and_resolve_references()
    run = dataclasses.replace(tiny_setup, config=config)
    stepper = Stepper(run, methods.describe(config), str(tmp_path))
    stepper.start(None)
    if name == "skillrl":  # the tiny world has one domain, which no evolution (strictly below the median) reaches
        stepper.parts.prompts.merge([Skill("say it", "Answer with the letter asked for.", "one-letter tasks", "toy")])
    state = build.initial_state(run)
    for step in range(3):
        state, _, _ = stepper.step(state, step)
    extra = stepper.extra()
    stepper.close()
    again = Stepper(run, methods.describe(config), str(tmp_path))
    again.start(extra)
    assert again.parts.state_dict() == extra["method"] and again.sampler.state_dict() == extra["sampler"]
    if name == "skillrl":
        assert extra["method"]["guidance"]["skills"] and again.parts.prompts.skills == stepper.parts.prompts.skills
    else:
        assert np.any(np.asarray(extra["sampler"]["q"]) != 0)
    again.close()
