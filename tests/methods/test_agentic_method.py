"""Methods on the workspace tasks: the arms methods and GRPO get the multi-turn scheme; nothing else runs there."""

import pytest

from experiments import agentic_cpu
from harnessrl_jax import methods
from harnessrl_jax.agentic.harnesses import HELDOUT_HARNESS, TRAIN_HARNESSES
from harnessrl_jax.errors import ConfigError
from harnessrl_jax.methods.agentic import AgentScheme
from harnessrl_jax.methods.harnessbandit import BanditSampler
from harnessrl_jax.methods.mixture import ArmGridSampler
from harnessrl_jax.methods.parts import part_class


@pytest.mark.parametrize("name", ["grpo", "harnessbandit", "mixture", "mixture2"])
def test_the_arms_methods_and_grpo_run_episodes_on_the_workspace_tasks(name):
    """A describe that ignored tasks.source would leave GRPO's single-turn scheme here."""
    method = methods.describe(agentic_cpu.get_config(f"method={name}"))
    assert part_class(method.scheme) is AgentScheme and not part_class(method.prompts).writes_prompts
    assert (method.sketch is not None) == (name == "harnessbandit")


def test_a_method_that_evolves_the_harness_is_refused_on_the_workspace_tasks():
    config = agentic_cpu.get_config("method=grpo")
    config.method = "harnessrl"
    with pytest.raises(ConfigError, match="only .*grpo.*harnessbandit"):
        methods.describe(config)


def test_the_scheme_takes_each_tasks_harness_from_the_samplers_arms_and_refuses_the_heldout_one():
    """HarnessBandit's one arm per step and the mixture's arm per row reach the episodes; GRPO keeps its harness."""
    settings = methods.settings(agentic_cpu.get_config(), "agentic")
    bandit = BanditSampler(10)
    bandit.arm_names, bandit.step_arms = list(TRAIN_HARNESSES), [4, 4, 4]
    assert [h.name for h in AgentScheme(bandit, settings=settings).harnesses(3)] == ["cli_direct"] * 3
    grid = ArmGridSampler(10, ["json_direct", "xml_direct"])
    grid.step_arms = [1, 0]
    assert [h.name for h in AgentScheme(grid, settings=settings).harnesses(2)] == ["xml_direct", "json_direct"]
    plain = type("Plain", (), {})()
    assert [h.name for h in AgentScheme(plain, settings=settings).harnesses(2)] == [settings.train_harness] * 2
    grid.arm_names = ["json_direct", HELDOUT_HARNESS]
    with pytest.raises(ValueError, match="held-out harness"):
        AgentScheme(grid, settings=settings)
    grid.arm_names = ["json_direct", "plain"]
    with pytest.raises(ValueError, match="unknown harness 'plain'"):
        AgentScheme(grid, settings=settings)
