"""Each method's part as the one step runs it: every test here fails when the part is mis-wired into the step (a flag
ignored, the wrong rubric, a swapped arm), not only when its descriptor is wrong; and the model-written paths of the
baselines run once against a real model server."""

import dataclasses

import numpy as np
import pytest

from harnessrl_jax import build, methods
from harnessrl_jax.harness import RewriteCriterion, apply
from harnessrl_jax.methods import harnessbandit, schemes
from harnessrl_jax.methods.harnessbandit import learnability
from harnessrl_jax.stepper import Stepper


def stepper_for(run, config, workdir):
    config = config.copy_and_resolve_references()
    run = dataclasses.replace(run, config=config)
    method = methods.describe(config)
    if method.sketch is not None:  # the trainer with the method's sketch, as build.setup makes it
        run = dataclasses.replace(run, trainer=build.make_trainer(config, run.model_config, run.trainer.mesh, method))
    stepper = Stepper(run, method, str(workdir))
    stepper.start(None)
    return stepper, run


@pytest.mark.parametrize("gated", [False, True])
def test_a_replaced_rubric_rule_is_measured_by_the_critic_only_in_the_gated_variant(tiny_setup, tiny_config, tmp_path,
                                                                                    gated):
    config = tiny_config(rubric_rule="evorubric", gate_replaced_rule=gated)
    stepper, run = stepper_for(tiny_setup, config, tmp_path)
    state, records = build.initial_state(run), []
    for step in range(3):
        state, _, lines = stepper.step(state, step)
        records += lines
    stepper.close()
    rule = [r for r in records if r["candidate"] and r["candidate"]["source"].startswith("evorubric")]
    valid = [r for r in rule if r["candidate"]["invalid"] is None and r["candidate"]["actions"]]
    assert valid, "EvoRubric proposed nothing to measure"
    assert all(r["measurement"]["measured"] == gated for r in valid)
    if gated:  # measured as the critic measures a rubric update: delta_c, within its band or rejected
        assert all(r["deltas"].get("delta_c") is not None or r["verdict"] == "rejected" for r in valid)


def test_the_bandits_arm_is_the_one_its_prompts_were_rendered_under_and_its_learnability_the_advantages(
        tiny_setup, tiny_config, tmp_path, monkeypatch):
    config = tiny_config("method=harnessbandit,tasks=harness")
    stepper, run = stepper_for(tiny_setup, config, tmp_path)
    sampler, writer = stepper.parts.sampler, stepper.parts.prompts
    advantages = []
    real = schemes.compute_advantages

    def spy(rewards, estimator):
        out = real(rewards, estimator)
        advantages.append(out[0])
        return out
    monkeypatch.setattr(schemes, "compute_advantages", spy)
    state = build.initial_state(run)
    for step in range(3):
        state, metrics, _ = stepper.step(state, step)
        arm = int(metrics["bandit/arm"])
        assert writer._which == [arm] * config.tasks_per_step == sampler.step_arms
        assert metrics[f"bandit/chosen_{harnessbandit.arm_label(sampler.arm_names[arm])}"] == 1.0
        assert metrics["bandit/learnability_raw"] == pytest.approx(learnability(advantages[-1]), rel=1e-6)
    stepper.close()


def test_a_harness_arm_changes_the_prompt_the_rollouts_are_sampled_in(tiny_setup, tiny_config, tmp_path,
                                                                      monkeypatch):
    """A mixture's rows are sampled in their arm's prompt: the bare prompt for 'plain' only."""
    from harnessrl_jax import stages

    config = tiny_config("method=mixture,tasks=harness")
    stepper, run = stepper_for(tiny_setup, config, tmp_path)
    sampler, writer = stepper.parts.sampler, stepper.parts.prompts
    drawn, groups = [], []
    real_draw, real_sample = sampler.draw, stages.sample_groups

    def draw(*args):
        idx, u = real_draw(*args)
        drawn.extend(idx)
        return idx, u

    def sample(*args, **kwargs):
        groups.append(real_sample(*args, **kwargs))
        return groups[-1]
    monkeypatch.setattr(sampler, "draw", draw)
    monkeypatch.setattr(schemes, "sample_groups", sample)
    seen = set()
    for step in range(6):  # one epoch of the six arms x two tasks grid: every arm comes up, plain included
        drawn.clear()
        stepper.step(build.initial_state(run), step)
        (g,) = groups[-1:]
        bare = stages.render_prompts(run, [stepper.tasks[i] for i in drawn])[0]
        for n, a in enumerate(writer._which):
            plain = writer.names[a] == "plain"
            assert g.guided[n] == (not plain) and (g.prompt_ids[n] == bare[n]) == plain
            seen.add(writer.names[a])
    stepper.close()
    assert seen == set(writer.names)


def test_ruscarls_scaffolds_list_the_harness_current_rubric(tiny_setup, tiny_config, tmp_path, monkeypatch):
    """As HarnessRL's guidance rule, RuscaRL scaffolds the rubric the harness holds now: criteria the evolver
    rewrote are listed in their new wording, never in the seed rubric's."""
    config = tiny_config(guidance_rule="ruscarl")
    stepper, run = stepper_for(tiny_setup, config, tmp_path)
    H = stepper.harness
    rewrites = [RewriteCriterion(t.id, c.id, f"Evolved: {c.text}") for t in stepper.tasks
                for c in H.rubric_of(t.id) if not c.anchor]
    assert rewrites
    stepper.harness = apply(H, rewrites)
    current = {c.text for t in stepper.tasks for c in stepper.harness.rubric_of(t.id)}
    written = []
    real = stepper.parts.prompts.prompts

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        written.append(out)
        return out
    monkeypatch.setattr(stepper.parts.prompts, "prompts", spy)
    stepper.step(build.initial_state(run), 0)
    stepper.close()
    (prompts,) = written
    listed = {line.split(": ", 1)[1].rsplit(" (", 1)[0] for p in prompts for m in p.messages
              for line in m[0]["content"].splitlines() if line.startswith("Criterion ")}
    assert listed and listed <= current and any(text.startswith("Evolved: ") for text in listed)


@pytest.mark.slow
def test_the_model_written_paths_of_skillrl_evorubric_and_amaris_run_against_a_real_model_server(llama_server,
                                                                                                tiny_config):
    """SkillRL's teacher, EvoRubric's generator and meta-verifier, AMARIS's analyst and reviser, each called once
    with the evolver model a run builds (SmolLM2 served by llama.cpp): the request reaches the server and the
    answer is parsed into the part's own records or dropped with its reason, never an exception."""
    from harnessrl_jax.evolver import Attributor
    from harnessrl_jax.harness import HarnessState
    from harnessrl_jax.methods.amaris import AMARISConfig, AMARISRule
    from harnessrl_jax.methods.evorubric import Draft, EvoRubricConfig, EvoRubricRule
    from harnessrl_jax.methods.skillrl import SkillRLConfig, SkillRLGuidance
    from harnessrl_jax.methods.updates import RuleInput
    from harnessrl_jax.evolver.evolver import Group
    from harnessrl_jax.rubric.schema import Criterion, Task

    config = tiny_config("method=skillrl,tasks=harness")
    config.harness.proposer = "llm"
    config.evolver_model.update(base_url=llama_server.base_url, model=llama_server.model,
                                structured_output="json_object", max_tokens=48)
    client = build.build_evolver_client(config)
    task = Task("t", "medical", ({"role": "user", "content": "How do I treat a cold?"},),
                (Criterion("t/rest", "Recommends rest.", 2.0), Criterion("t/doc", "Says when to see a doctor.", 1.0)))
    responses = ["Rest and fluids.", "Rest, fluids, and a doctor if it lasts.", "Eat soup.", "Sleep."]
    S = np.array([[1, 1, 0, 1], [0, 1, 0, 0]], float)
    try:
        skills = SkillRLGuidance(SkillRLConfig(embedder="lexical"), tasks=[task], client=client).teach(
            "medical", [(task, task.criteria, S, responses)], 2, 0, general_ok=True)
        assert client.stats["calls"] == 1 and all(s.source == "llm" for s in skills)
        evo = EvoRubricRule(EvoRubricConfig(), client=client)
        drafts = evo.drafts(task, task.criteria, responses, [100.0, 100.0, 0.0, 66.7], 1.0, 0, (0, 0))
        assert all(isinstance(d, Draft) and d.text for d in drafts)
        why = evo.meta_check(task, Draft("Names a fever threshold in degrees.", 1.0), [c.text for c in task.criteria])
        assert why is None or isinstance(why, str)
        amaris = AMARISRule(AMARISConfig(), plus=True, client=client, total_steps=10)
        H = HarnessState.from_tasks([task])
        draws = [Group(task, tuple(responses), S)]
        attributions = [Attributor()(task, H.rubric_of("t"), S, responses)]
        proposal = amaris.propose(RuleInput(0, draws, H, attributions))
        assert client.stats["calls"] >= 5  # teacher, generator, verifier, analyst, reviser: each asked the server
        for rc in proposal.candidates:
            assert rc.candidate.invalid is None or isinstance(rc.candidate.invalid, str)
    finally:
        client.close()
