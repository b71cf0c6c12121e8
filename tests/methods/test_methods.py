"""Methods as descriptions of their parts: the registry, the ablation switches, every threshold reaching its part,
and one step of every method (and ablation) run in-process by the one step function, `loop.Stepper`."""

import dataclasses
import os
import sys

import jax
import numpy as np
import pytest

from harnessrl_jax import build, configs, loop, methods
from harnessrl_jax.harness.transitions import FROZEN_TRANSITIONS
from harnessrl_jax.words import INTERFACES, Interface

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from experiments import tiny_cpu  # noqa: E402


def tiny(method="harnessrl", **harness):
    config = tiny_cpu.get_config(f"method={method},tasks=harness")
    config.harness.update(harness)
    return config


# ------------------------------------------------------------------------------------------ the descriptions

@pytest.mark.parametrize("name", sorted(methods.METHODS))
def test_every_registered_method_describes_itself_from_the_tiny_config(name):
    config = tiny(name)
    assert configs.check(config) == []
    m = methods.describe(config)
    assert isinstance(m, methods.Method) and m.name == name and m.sampler == "harness"


def test_grpo_is_the_harness_with_every_interface_frozen_and_the_same_sampler():
    g, h = methods.describe(tiny("grpo")), methods.describe(tiny("harnessrl"))
    assert g.frozen and g.transitions == FROZEN_TRANSITIONS and g.sampler == h.sampler == "harness"
    assert h.interfaces == INTERFACES and not h.frozen and h.critic and h.memory


ABLATIONS = [
    ({}, INTERFACES, True, True),
    ({"no_critic": True}, INTERFACES, False, True),
    ({"no_memory": True}, INTERFACES, True, False),
    ({"no_critic": True, "no_memory": True}, INTERFACES, False, False),  # the paper's cumulative row
    ({"only_guidance": True}, (Interface.GUIDANCE,), True, True),
    ({"only_rubric": True}, (Interface.RUBRIC,), True, True),
    ({"only_sampling": True}, (Interface.SAMPLING,), True, True),
]


@pytest.mark.parametrize("switch, interfaces, critic, memory", ABLATIONS)
def test_ablation_switches_map_to_the_description_and_the_evolver(switch, interfaces, critic, memory):
    config = tiny(**switch)
    m = methods.describe(config)
    assert (m.interfaces, m.critic, m.memory) == (interfaces, critic, memory)
    evolver, cold = loop.build_evolver(config, m, None)
    assert cold is None and evolver.config.interfaces == interfaces and evolver.critic.enabled == critic
    assert evolver.critic.bands.guidance == (10.2, 28.0) and evolver.critic.bands.rubric == (3.1, 28.0)
    assert evolver.config.reversal_within == 0  # the hard reversal filter is off unless asked for


def test_every_threshold_in_the_config_reaches_its_part():
    config = tiny(rounds=2, reversal_filter=2, sampling_gate="current")
    config.harness.attributor.saturation_window = 3
    config.harness.attributor.blind_window = 4
    config.harness.attributor.length_auc = 0.8
    config.harness.rules.reweight_factor = 0.3
    config.harness.rules.max_rescale = 1.5
    config.memory.min_cosine, config.memory.top_k = 0.7, 2
    evolver, _ = loop.build_evolver(config, methods.describe(config), None)
    a = evolver.attributor.config
    assert (a.saturation_window, a.blind_window, a.length_auc) == (3, 4, 0.8)
    assert (evolver.proposer.config.reweight_factor, evolver.proposer.config.max_rescale) == (0.3, 1.5)
    assert evolver.proposer.min_cosine == 0.7
    e = evolver.config
    assert (e.rounds, e.reversal_within, e.min_cosine, e.donors_k) == (2, 2, 0.7, 2)
    assert evolver.critic.sampling_gate == "current"


@pytest.mark.parametrize("change, key", [
    (lambda c: c.harness.attributor.update(bogus=1), "--config.harness.attributor.bogus"),
    (lambda c: c.harness.attributor.update(saturation_window=0), "--config.harness.attributor"),
    (lambda c: c.harness.rules.update(max_rescale=0.5), "--config.harness.rules"),
    (lambda c: c.harness.update(only_guidance=True, only_rubric=True), "--config.harness.only_*"),
    (lambda c: c.harness.update(guidance_band=(30.0, 10.0)), "--config.harness.guidance_band"),
    (lambda c: c.harness.update(loss_context="sideways"), "--config.harness.loss_context"),
    (lambda c: c.tasks.update(sampler="epoch"), "--config.tasks.sampler"),  # harnessrl moves p_t
    (lambda c: c.update(method="amaris_pp"), "--config.method"),
    (lambda c: c.judge.update(kind="openai"), "--config.judge.base_url"),
    (lambda c: c.harness.update(proposer="llm"), "--config.evolver_model.base_url"),
    (lambda c: c.memory.update(embedder="default"), "--config.memory.min_cosine"),
])
def test_a_wrong_value_is_reported_with_the_key_that_fixes_it(change, key):
    config = tiny()
    if key == "--config.memory.min_cosine":
        config.memory.calibrated_for = "bge-base-en-v1.5"  # the paper's threshold with the bundled MiniLM
    change(config)
    problems = configs.check(config)
    assert problems and any(p.startswith(key) for p in problems), problems


def test_the_epoch_sampler_is_a_choice_where_p_t_is_frozen():
    config = tiny("grpo")
    config.tasks.sampler = "epoch"
    assert configs.check(config) == [] and methods.describe(config).sampler == "epoch"


def test_the_paper_config_lists_everything_it_still_needs_with_the_flags():
    config = configs.load(os.path.join(REPO, "experiments", "rubric_mix_4b.py"))
    problems = configs.check(config) + configs.needs(config)
    text = "\n".join(problems)
    for flag in ("--config.tasks.path", "--config.judge.base_url", "--config.judge.model", "--config.model_name",
                 "--config.memory.embedder"):
        assert flag in text, text
    assert methods.describe(config).interfaces == INTERFACES
    assert config.harness.proposer == "llm" and config.harness.llm_check and config.judge.kind == "openai"


def test_training_tasks_drop_llm_criteria_without_a_judge_and_never_keep_dataset_references():
    from harnessrl_jax import data

    tasks = data.load_split("mini", "train")
    assert any(t.reference for t in tasks)
    kept, dropped = loop.training_tasks(tiny(), tasks)
    n_llm = sum(c.verifier != "rule" for t in tasks for c in t.criteria)
    assert dropped == n_llm > 0 and all(c.verifier == "rule" for t in kept for c in t.criteria)
    assert not any(t.reference for t in kept)
    config = tiny(use_dataset_reference=True)
    assert any(t.reference for t in loop.training_tasks(config, tasks)[0])


# ------------------------------------------------------------------------------------------ one step of each

@pytest.fixture()
def run(tiny_setup):
    """One set-up shared by every method below (the run does not depend on the method beyond the prompt budget,
    which the harnessrl config sets to its largest)."""
    return tiny_setup


def stepper_for(run, config, workdir):
    config = config.copy_and_resolve_references()
    stepper = loop.Stepper(dataclasses.replace(run, config=config), methods.describe(config), str(workdir))
    stepper.start(None)
    return stepper


STEP_CONFIGS = [(name, {}) for name in sorted(methods.METHODS)] + [
    ("harnessrl", {"no_critic": True, "no_memory": True}), ("harnessrl", {"only_sampling": True})]


@pytest.mark.parametrize("name, switch", STEP_CONFIGS, ids=[f"{n}{'-' + '-'.join(s) if s else ''}"
                                                            for n, s in STEP_CONFIGS])
def test_one_step_of_every_method(run, tmp_path, name, switch):
    config = tiny(name, **switch)
    stepper = stepper_for(run, config, tmp_path)
    state = build.initial_state(run)
    H0 = stepper.harness
    for step in range(2):
        state, metrics, records = stepper.step(state, step)
        assert np.isfinite(metrics["train/loss"]) and metrics["train/engine_gap"] < 1e-4
        # The attributor observes every method, so failure shares are measured the same way for all.
        fracs = [metrics[f"attribution/frac_{label}"] for label in ("blind", "saturated", "spurious", "agree")]
        assert sum(fracs) == pytest.approx(1.0) and metrics["attribution/criteria"] > 0
        assert 0.0 <= metrics["oracle/agreement"] <= 1.0 and metrics["oracle/pairs"] > 0
    assert int(jax.device_get(state.step)) == 2
    m = methods.describe(config)
    if m.frozen:  # nothing moves but the guidance cap's schedule (with nothing mounted under it)
        after, before = stepper.harness.to_dict(), H0.to_dict()
        assert records == [] and after["rubric"] == before["rubric"] and after["sampling"] == before["sampling"]
        assert after["guidance"]["fields"] == before["guidance"]["fields"]
    assert (stepper.memory is not None) == m.memory
    extra = stepper.extra()
    assert set(extra) == {"harness", "sampler", "memory"}
    stepper.close()
