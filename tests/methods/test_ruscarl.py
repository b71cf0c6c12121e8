"""RuscaRL's scaffolds against a NumPy re-derivation of its published rule: the share of criteria each rollout of a
group is shown at each step (`scaffold_ratios` as its docstring states it, from outside), the scaffold text, and
the loss in the bare context with the importance correction."""

import dataclasses
import math

import numpy as np
import pytest

from harnessrl_jax import build, methods, stages, toy
from harnessrl_jax.harness import HarnessState
from harnessrl_jax.methods.guidance import PromptBudget
from harnessrl_jax.methods.ruscarl import (AVOID, INCLUDE, RuscaRLConfig, RuscaRLGuidance, scaffold_ratios,
                                           training_progress)
from harnessrl_jax.rubric.schema import Criterion, Task
from harnessrl_jax.stepper import Stepper


def reference_ratios(G, progress, x0=0.2, kappa=125.0):
    """(G-1-i)/(G-1) * 1/(1+exp(kappa (x - x0))), G = 1: the sigmoid alone."""
    s = 1.0 / (1.0 + np.exp(kappa * (progress - x0)))
    if G == 1:
        return np.array([s])
    return np.array([(G - 1 - i) / (G - 1) * s for i in range(G)])


@pytest.mark.parametrize("G", [1, 2, 5, 8])
@pytest.mark.parametrize("progress", [0.0, 0.1, 0.19, 0.2, 0.21, 0.25, 0.5, 1.0])
def test_scaffold_ratios_contract(G, progress):
    np.testing.assert_allclose(scaffold_ratios(G, progress), reference_ratios(G, progress), rtol=1e-12, atol=0)
    np.testing.assert_allclose(scaffold_ratios(G, progress, x0=0.3, kappa=10.0),
                               reference_ratios(G, progress, 0.3, 10.0), rtol=1e-12)


def test_the_released_recipe_halves_at_a_fifth_and_is_gone_by_a_quarter_of_training():
    assert scaffold_ratios(8, 0.2)[0] == pytest.approx(0.5)
    assert scaffold_ratios(8, 0.25)[0] < 0.002 and scaffold_ratios(8, 0.0)[0] > 0.99999
    assert scaffold_ratios(8, 0.0)[-1] == 0.0  # one rollout of every group is bare
    # progress = (t - 1) / (T_total - 1) for 1-based t, the code's 0-based step t - 1
    assert [training_progress(s, 5) for s in range(5)] == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert training_progress(0, 1) == 0.0


def five_criteria_task():
    crits = tuple(Criterion(f"t/c{k}", f"Criterion number {k} holds.", float(k + 1)) for k in range(4)) + (
        Criterion("t/pit", "The response insults the user.", -2.0),)
    return Task(id="t", domain="toy", prompt=({"role": "user", "content": "say q"},), criteria=crits)


def listed(messages, harness):
    """The criteria a scaffolded prompt lists, by text (none for a bare prompt)."""
    if messages[0]["role"] != "system":
        return []
    return [c for c in harness.rubric_of("t") if f"{c.text} (" in messages[0]["content"]]


@pytest.mark.parametrize("rule", ["linear", "binary"])
def test_each_rollout_is_shown_round_K_rho_of_the_criteria_at_each_step(rule):
    task = five_criteria_task()
    H = HarnessState.from_tasks([task])
    K, G, T = 5, 8, 40
    guidance = RuscaRLGuidance(RuscaRLConfig(group_rule=rule, full_reveal=2), group_size=G, total_steps=T)
    budget = PromptBudget(toy.char_tokenizer(), 10_000)
    for step in (0, 6, 7, 8, 9, 10, 39):
        x = step / (T - 1)
        s = 1 / (1 + math.exp(125 * (x - 0.2)))
        lam = [(G - 1 - i) / (G - 1) for i in range(G)] if rule == "linear" else [float(i < 2) for i in range(G)]
        expected = [round(K * l * s) for l in lam]  # Python's round, as RuscaRL's code
        (p,) = guidance.prompts(H, [0], [task], step=step, seed=11, budget=budget)
        assert len(p.messages) == G
        shown = [listed(m, H) for m in p.messages]
        assert [len(x) for x in shown] == expected, step
        for m, crits in zip(p.messages, shown):
            if not crits:
                assert list(m) == [dict(x) for x in task.prompt]  # n_i = 0: no system turn at all
                continue
            text = m[0]["content"]
            assert m[1:] == tuple(dict(x) for x in task.prompt)
            assert (INCLUDE in text) == any(c.points > 0 for c in crits)
            assert (AVOID in text) == any(c.points < 0 for c in crits)
            for c in crits:
                assert (f"(worth {c.points:g} points)" if c.points > 0 else f"(penalty: {-c.points:g} points)") in text
        assert p.guided == any(expected)
    # the draw is a function of (step seed, task row, rollout): the same call draws the same scaffolds
    a = guidance.prompts(H, [0], [task], step=7, seed=3, budget=budget)
    assert a == guidance.prompts(H, [0], [task], step=7, seed=3, budget=budget)


def test_a_scaffold_over_the_budget_lists_fewer_criteria_and_is_counted():
    task = five_criteria_task()
    H = HarnessState.from_tasks([task])
    tok = toy.char_tokenizer()
    bare = len(tok.apply_chat_template(list(task.prompt), add_generation_prompt=True, tokenize=True))
    guidance = RuscaRLGuidance(RuscaRLConfig(), group_size=4, total_steps=10)
    (p,) = guidance.prompts(H, [0], [task], step=0, seed=0, budget=PromptBudget(tok, bare + 300))
    assert p.shortened and not p.over_budget and all(PromptBudget(tok, bare + 300).fits(m) for m in p.messages)
    assert 0 < len(listed(p.messages[0], H)) < 5
    (p,) = guidance.prompts(H, [0], [task], step=0, seed=0, budget=PromptBudget(tok, bare + 5))
    assert p.over_budget and all(m == tuple(dict(x) for x in task.prompt) for m in p.messages)


def test_a_task_with_a_system_turn_gets_the_scaffold_prepended_to_it():
    task = dataclasses.replace(five_criteria_task(), prompt=({"role": "system", "content": "Be brief."},
                                                             {"role": "user", "content": "say q"}))
    guidance = RuscaRLGuidance(RuscaRLConfig(), group_size=2, total_steps=10)
    (p,) = guidance.prompts(HarnessState.from_tasks([task]), [0], [task], step=0, seed=0,
                            budget=PromptBudget(toy.char_tokenizer(), 10_000))
    first = p.messages[0]
    assert len(first) == 2 and first[0]["content"].endswith("\n\nBe brief.") and INCLUDE in first[0]["content"]


def test_ruscarl_trains_on_the_bare_prompt_with_the_importance_correction(tiny_setup, tiny_config, tmp_path):
    released = tiny_config("method=ruscarl,tasks=harness")
    assert build.loss_settings(released).tis_cap == 0.0  # the paper row: RuscaRL as released, no correction
    released.loss.tis_cap = 1.5  # and no correction whatever config.loss says: the method fixes it
    assert build.loss_settings(released).tis_cap == 0.0
    assert build.loss_settings(tiny_config("method=grpo,tasks=harness")).tis_cap == 0.0
    config = tiny_config("method=ruscarl,tasks=harness")
    config.ruscarl.tis_cap = 2.0  # the labelled variant with the correction
    config = config.copy_and_resolve_references()
    m = methods.describe(config)
    assert (m.scheme.keywords["loss_context"], m.tis_cap, m.prompts.func, m.frozen) == \
        ("bare", 2.0, RuscaRLGuidance, True)
    assert build.loss_settings(config).tis_cap == 2.0

    run = build.setup(config)  # its train step has the correction (the shared tiny set-up's has none)
    assert run.trainer.loss.tis_cap == 2.0 and run.prompt_limit == tiny_setup.prompt_limit
    stepper = Stepper(run, m, str(tmp_path))
    stepper.start(None)
    state = build.initial_state(run)
    seed = stages.step_seed(state, 0)
    idx, _ = stepper.sampler.draw(stepper.harness, seed, config.tasks_per_step)
    tasks = [stepper.tasks[i] for i in idx]
    prompts = stepper.parts.prompts.prompts(stepper.harness, idx, tasks, step=0, seed=seed,
                                            budget=PromptBudget(run.tokenizer, run.prompt_limit))
    groups = stages.sample_groups(run, tasks, seed=seed, prompts=prompts)
    J = config.num_generations
    assert len(groups.prompt_ids) == len(tasks) * J and groups.rollouts.num_samples == len(tasks) * J
    bare = stages.bare_context(run, tasks, groups.rollouts)
    own = stages.render_prompts(run, tasks)[0]
    for r in range(bare.num_samples):  # row r continues its own task's bare prompt, not prompt r
        assert bare.prompt_ids[bare.prompt_index[r]] == own[r // J]
        assert bare.completion(r) == groups.rollouts.completion(r)
    assert groups.prompt_ids[0] != own[0] and groups.prompt_ids[J - 1] == own[0]  # full scaffold ... bare
    _, metrics, _ = stepper.step(state, 0)
    stepper.close()
    run.close()
    # the trainer's logprobs are under the bare prompt, the engine's under the scaffold: the gap is the context
    # shift, and the truncated importance weights are at most the cap
    assert metrics["train/engine_gap"] > 1e-3 and 0 < metrics["train/tis_weight"] <= 2.0
    assert metrics["ruscarl/step_share"] > 0.99 and metrics["guidance/guided_groups"] == len(tasks)
