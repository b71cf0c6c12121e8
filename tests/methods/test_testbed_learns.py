"""The methods' mechanisms on the testbed world (docs/testbed.md), each against a GRPO control on the same seed and
the same compiled run (one module set-up, STEPS steps per arm): RuscaRL's scaffolds and HarnessRL's guidance
fields raise the blind criterion's rate above GRPO's (the reader copies the quoted word they show), HarnessRL's
rubric updates remove the planted spurious features' net pay (eval.testbed.surface_pay), and HarnessRL's sampling
interface moves draws off the wholly saturated tasks."""

import dataclasses
import types

import numpy as np
import pytest

from experiments import testbed as testbed_config
from harnessrl_jax import build, methods
from harnessrl_jax.data.world import load_world
from harnessrl_jax.eval import testbed
from harnessrl_jax.rubric import rules
from harnessrl_jax.stepper import Stepper

# one worker builds the module's set-up: `--dist loadgroup` would otherwise spread the tests over both, each building it
pytestmark = pytest.mark.xdist_group("testbed_learns")

STEPS = 6  # seed 0: a wholly saturated task's third draw (the down-weight's earliest) comes at step 4


def _run(setup, workdir, method: str, steps: int, ablation: str = ""):
    config = testbed_config.get_config(f"method={method},ablation={ablation},steps={steps}")
    config.tasks_per_step = setup.config.tasks_per_step
    config = config.copy_and_resolve_references()
    run = dataclasses.replace(setup, config=config)
    stepper = Stepper(run, methods.describe(config), str(workdir))
    stepper.start(None)
    state = build.initial_state(run)
    for step in range(steps):
        state, _, _ = stepper.step(state, step)
    out = types.SimpleNamespace(draws=list(stepper.memory.store.draws()), harness=stepper.harness,
                                sampler=stepper.sampler)
    stepper.close()
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    config = testbed_config.get_config(f"method=harnessrl,steps={STEPS}")
    config.tasks_per_step = 4
    setup = build.setup(config.copy_and_resolve_references())
    tmp = tmp_path_factory.mktemp("learns")
    out = {"grpo": _run(setup, tmp / "grpo", "grpo", STEPS),
           "harnessrl": _run(setup, tmp / "harnessrl", "harnessrl", STEPS),
           "sampling": _run(setup, tmp / "sampling", "harnessrl", STEPS, "only_sampling"),
           "ruscarl": _run(setup, tmp / "ruscarl", "ruscarl", 1)}
    yield out
    setup.close()


@pytest.fixture(scope="module")
def world():
    return load_world()


def _blind(world):
    return {t.id: c for t in world.tasks for c in t.criteria if world.planted[(t.id, c.id)] == "blind"}


def _blind_rate(draws, blind) -> float:
    hits = [rules.check(blind[d.task_id].rule_id, blind[d.task_id].rule_kwargs, r)
            for d in draws if d.task_id in blind for r in d.responses]
    return float(np.mean(hits)) if hits else float("nan")


@pytest.mark.slow
def test_ruscarl_scaffolds_raise_the_blind_rate_above_grpos(runs, world):
    # RuscaRL's first step is fully scaffolded (S(0) ~ 1), so its rollouts see the blind criterion's word; the
    # same seed's GRPO step draws the same tasks
    blind = _blind(world)
    grpo = [d for d in runs["grpo"].draws if d.step == 0]
    assert [d.task_id for d in grpo] == [d.task_id for d in runs["ruscarl"].draws]
    assert _blind_rate(grpo, blind) == 0.0
    assert _blind_rate(runs["ruscarl"].draws, blind) >= 0.2, _blind_rate(runs["ruscarl"].draws, blind)


@pytest.mark.slow
def test_harnessrl_fields_raise_the_blind_rate_above_grpos(runs, world):
    # the draws whose harness mounted a field for the task's blind criterion, against GRPO's draws of the same task
    # at the same step (the sampling interface moved nothing before them: the same draws)
    blind = _blind(world)
    guided = [d for d in runs["harnessrl"].draws if d.task_id in blind and any(
        f["criterion_id"] == blind[d.task_id].id for f in d.harness["fields"].values())]
    assert guided, "HarnessRL mounted no field for a blind criterion"
    keys = {(d.step, d.task_id) for d in guided}
    control = [d for d in runs["grpo"].draws if (d.step, d.task_id) in keys]
    assert {(d.step, d.task_id) for d in control} == keys
    rate, base = _blind_rate(guided, blind), _blind_rate(control, blind)
    assert rate >= base + 0.15, (rate, base, sorted(keys))


@pytest.mark.slow
def test_harnessrl_rubric_updates_remove_the_spurious_features_pay(runs, world):
    # the planted spurious criteria of the tasks HarnessRL drew, each feature on the same responses (both arms'),
    # scored under each arm's final rubric: GRPO keeps the world's rubric (the feature earns its share of the points)
    pool = {}
    for d in runs["grpo"].draws + runs["harnessrl"].draws:
        pool.setdefault(d.task_id, []).extend(d.responses)
    drawn = {d.task_id for d in runs["harnessrl"].draws}
    spurious = [(t.id, c) for t in world.tasks for c in t.criteria
                if t.id in drawn and world.planted[(t.id, c.id)] == "spurious"]
    pay = {arm: np.array([testbed.surface_pay(c, runs[arm].harness.criteria(tid), pool[tid]) for tid, c in spurious])
           for arm in ("grpo", "harnessrl")}
    assert np.isfinite(pay["grpo"]).all() and (pay["grpo"] > 20).all(), pay["grpo"]
    assert np.isfinite(pay["harnessrl"]).all(), pay["harnessrl"]
    assert pay["harnessrl"].min() <= 0, pay  # some feature earns nothing any more
    assert pay["harnessrl"].mean() <= pay["grpo"].mean() - 3, pay
    # the comparison reads the final rubric from each task's last draw: the same rubric as the final harness
    last = {d.task_id: d for d in runs["harnessrl"].draws}
    for tid, d in last.items():
        got = {c.id: round(c.points, 6) for c in testbed.final_rubric(d)}
        assert got == {c.id: round(c.points, 6) for c in runs["harnessrl"].harness.criteria(tid)}, tid


@pytest.mark.slow
def test_harnessrl_downweight_moves_draws_off_the_wholly_saturated_tasks(runs, world):
    # HarnessRL's sampling interface alone (only_sampling: prompts and rubric as GRPO's), the same seed; the draws
    # of the next steps from each arm's final harness, through its own sampler, with the same step seeds
    saturated = world.wholly_saturated()

    def share(arm):
        H = runs[arm].harness
        idx = {H.index(t) for t in saturated}
        drawn = [i for seed in range(300) for i in runs[arm].sampler.draw(H, seed, 4)[0]]
        return float(np.mean([i in idx for i in drawn])), float(sum(H.sampling.probs()[i] for i in idx))

    (grpo, p_grpo), (sampling, p_sampling) = share("grpo"), share("sampling")
    assert p_grpo == pytest.approx(len(saturated) / len(world.tasks))
    assert p_sampling < p_grpo - 0.02, (p_sampling, p_grpo)
    assert sampling < grpo - 0.01, (sampling, grpo)
