"""HarnessBandit and the mixtures as methods: the arms, the config checks, one arm per step through the one step
function, and an exact resume of the scheduler."""

import dataclasses
import json
import os
import sys

import numpy as np
import pytest

from harnessrl_jax import build, checks, methods, stages
from harnessrl_jax.harness import HarnessState
from harnessrl_jax.methods import arms as arms_lib
from harnessrl_jax.methods.arms import ArmsGuidance, uniform_choice
from harnessrl_jax.methods.harnessbandit import BanditSampler
from harnessrl_jax.methods.parts import MethodParts, PartsContext, part_class
from harnessrl_jax.methods.mixture import ArmGridSampler
from harnessrl_jax.stepper import Stepper
from harnessrl_jax.rubric.schema import Criterion, Task

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from experiments import tiny_cpu  # noqa: E402

TASK = Task(id="t1", domain="medicine", prompt=({"role": "user", "content": "What helps a cold?"},),
            criteria=(Criterion(id="c1", text="Mentions rest.", points=2.0, tags=()),))


def tiny(method="harnessbandit"):
    return tiny_cpu.get_config(f"method={method},tasks=harness")


# --------------------------------------------------------------------------------------------------- arms

def test_prompt_arms_render_where_their_paper_reading_says():
    crit = TASK.criteria
    assert arms_lib.arm("plain").messages(TASK, crit) == TASK.prompt
    system = arms_lib.arm("sys_expert").messages(TASK, crit)
    assert system[0]["role"] == "system" and "expert in medicine" in system[0]["content"] and system[1:] == TASK.prompt
    for name, phrase in (("structured", "bullet points"), ("concise", "concise"), ("plan_first", "key points")):
        m = arms_lib.arm(name).messages(TASK, crit)
        assert len(m) == 1 and m[0]["content"].startswith("What helps a cold?\n\n") and phrase in m[0]["content"]
    hint = arms_lib.arm("rubric_hint").messages(TASK, crit)
    assert "Mentions rest. (+2)" in hint[0]["content"]
    assert arms_lib.HELDOUT_ARM not in arms_lib.DEFAULT_ARMS and len(arms_lib.DEFAULT_ARMS) == 6
    # every prompt arm keeps the run's rubric
    assert all(arms_lib.arm(n).rubric(TASK, crit) == crit for n in arms_lib.ARMS)


def test_a_saved_harnessrl_harness_is_an_arm_with_its_fields_and_rubric(tmp_path):
    from harnessrl_jax.harness.state import MountedField

    H = HarnessState.from_tasks([TASK])
    fields = list(H.guidance.fields)
    row = list(fields[0])
    row[0] = MountedField("Say to rest and drink fluids.", "c1")  # the <criterion> field
    fields[0] = tuple(row)
    rubric = dataclasses.replace(H.rubric, criteria=((dataclasses.replace(H.rubric.criteria[0][0], points=5.0),),))
    H = H.replace(guidance=dataclasses.replace(H.guidance, fields=tuple(fields)), rubric=rubric)
    path = tmp_path / "harness.json"
    path.write_text(json.dumps({"harness": H.to_dict()}))  # a checkpoint extra's harness, as it is saved
    spec = arms_lib.arm(f"snapshot:{path}")
    prompts = arms_lib.arm_prompts(spec, [TASK], [TASK.criteria], None)
    assert prompts[0].guided and "<criterion>Say to rest and drink fluids.</criterion>" in \
        prompts[0].messages[0][-1]["content"]
    assert [c.points for c in arms_lib.arm_criteria(spec, [TASK], [TASK.criteria])[0]] == [5.0]
    other = dataclasses.replace(TASK, id="t2")  # a task the snapshot does not hold: bare, the run's rubric
    assert arms_lib.arm_prompts(spec, [other], [other.criteria], None)[0].messages[0] == other.prompt
    guidance = ArmsGuidance(["plain", f"snapshot:{path}"], lambda idx, seed: [1] * len(idx))
    guidance.prompts(HarnessState.from_tasks([TASK]), [0], [TASK], step=0, seed=0, budget=None)
    assert [c.points for c in guidance.criteria(HarnessState.from_tasks([TASK]), [TASK])[0]] == [5.0]


def test_mixture_rows_draw_arms_uniformly_from_the_step_seed():
    choose = uniform_choice(6)
    a = choose(range(6000), 12)
    assert list(a) == list(choose(range(6000), 12))  # a resumed step draws the same
    counts = np.bincount(a, minlength=6)
    assert (abs(counts - 1000) < 120).all()


@pytest.mark.parametrize("change, key", [
    (lambda c: c.bandit.update(arms=("plain", "no_such_arm")), "--config.bandit.arms"),
    (lambda c: c.bandit.update(heldout_arm="plain"), "--config.bandit"),
    (lambda c: c.bandit.update(floor=1.5), "--config.bandit"),
    (lambda c: c.bandit.update(temperature=0.0), "--config.bandit"),
    (lambda c: c.bandit.update(bogus=1), "--config.bandit.bogus"),
    (lambda c: c.bandit.update(arms=("plain", "snapshot:/no/such/file.json")), "--config.bandit.arms"),
    (lambda c: c.mixture.update(pair=("plain",)), "--config.mixture"),
    (lambda c: c.update(method="grpo") or c.tasks.update(sampler="bandit"), "--config.tasks.sampler"),
])
def test_a_wrong_bandit_value_is_reported_with_its_key(change, key):
    config = tiny()
    assert checks.check(config) == []
    change(config)
    problems = checks.check(config)
    assert problems and any(p.startswith(key) for p in problems), problems


def test_the_method_descriptions():
    hb, mix, mix2 = (methods.describe(tiny(n)) for n in ("harnessbandit", "mixture", "mixture2"))
    assert part_class(hb.sampler) is BanditSampler and hb.sketch is not None and hb.frozen
    assert part_class(mix.sampler) is part_class(mix2.sampler) is ArmGridSampler and mix.sketch is None and mix.frozen
    assert part_class(hb.prompts) is part_class(mix.prompts) is part_class(mix2.prompts) is ArmsGuidance
    assert tiny("harnessbandit").advantage == "rloo"  # Dr.GRPO's leave-one-out baseline (HarnessBandit, sec. 3)
    from harnessrl_jax.methods.mixture import mixture_arms

    assert mixture_arms(tiny("mixture"), "mixture") == arms_lib.DEFAULT_ARMS
    assert mixture_arms(tiny("mixture2"), "mixture2") == ("plain", "structured")


# ------------------------------------------------------------------------------------------ through the step

def make_stepper(run, config, workdir):
    from test_methods import with_sketch  # tests/methods/test_methods.py

    config = config.copy_and_resolve_references()
    run = with_sketch(dataclasses.replace(run, config=config), config)
    return Stepper(run, methods.describe(config), str(workdir)), run


def test_resumed_scheduler_draws_the_same_arms(tiny_setup, tmp_path):
    """Four steps straight, and two steps + a JSON checkpoint extra + two more in a new Stepper: the same arms,
    values and EMAs; the warm-up ends after step 1, so steps 2-3 are the bandit's own draws."""
    config = tiny()
    config.bandit.warmup = 2
    config.harness.no_memory = True
    stepper, run = make_stepper(tiny_setup, config, tmp_path / "a")
    stepper.start(None)
    state = build.initial_state(run)
    straight = []
    for step in range(4):
        state, metrics, _ = stepper.step(state, step)
        straight.append(metrics)
    final = stepper.sampler.state_dict()
    assert [m["bandit/warmup"] for m in straight] == [1.0, 1.0, 0.0, 0.0]
    assert [m["bandit/arm"] for m in straight[:2]] == [0.0, 1.0]
    # every step trains on one arm: all its groups rendered under it
    assert all(sum(m[f"bandit/chosen_{a}"] for a in arms_lib.DEFAULT_ARMS) == 1.0 for m in straight)
    assert np.isfinite(straight[1]["bandit/transferability_raw"]) and np.isnan(straight[0]["bandit/transferability_raw"])
    stepper.close()

    first, run = make_stepper(tiny_setup, config, tmp_path / "b")
    first.start(None)
    state = build.initial_state(run)
    for step in range(2):
        state, _, _ = first.step(state, step)
    extra = json.loads(json.dumps(first.extra()))  # as the checkpoint stores it
    first.close()
    second, _ = make_stepper(tiny_setup, config, tmp_path / "b")
    second.start(extra)
    resumed = []
    for step in range(2, 4):
        state, metrics, _ = second.step(state, step)
        resumed.append(metrics)
    assert [m["bandit/arm"] for m in resumed] == [m["bandit/arm"] for m in straight[2:]]
    for key in ("bandit/value", "bandit/learnability_raw", "bandit/transferability_raw"):
        assert [m[key] for m in resumed] == pytest.approx([m[key] for m in straight[2:]], rel=1e-5), key
    got = second.sampler.state_dict()
    np.testing.assert_allclose(got["state"]["q"], final["state"]["q"], rtol=1e-5)
    assert got["state"]["n"] == final["state"]["n"] and got["state"]["pool_pos"] == final["state"]["pool_pos"]
    second.close()


def test_mini_batched_updates_return_the_mean_of_their_sketches(tiny_setup):
    from harnessrl_jax.rl.batch import build_batch
    from harnessrl_jax.rl.step import to_host

    config = tiny().copy_and_resolve_references()
    config.mini_batches = 2
    _, run = make_stepper(tiny_setup, config, "unused")
    run = dataclasses.replace(run, config=config)
    tasks = list(run.tasks)
    g = stages.sample_groups(run, tasks, seed=5)
    adv = np.random.default_rng(0).standard_normal((len(tasks), config.num_generations)).astype(np.float32)
    u = np.ones(len(tasks), np.float32)
    state, metrics, sketch = stages.train_on_rollouts(run, build.initial_state(run), g.rollouts, adv, u,
                                                    return_sketch=True)
    assert sketch.shape == (run.trainer.sketch_spec.d,) and np.isfinite(metrics["train/loss"])
    # by hand: each block's update from the policy before it, old logprobs from the first policy
    t, s = run.trainer, build.initial_state(run)
    batch = build_batch(g.rollouts, adv.reshape(-1), np.repeat(u, config.num_generations), seq_len=run.seq_len,
                        pad_id=run.engine.pad_id, num_rows=run.rows)
    half = run.rows // 2
    blocks = [t.put_batch(batch.rows(slice(i * half, (i + 1) * half))) for i in range(2)]
    blocks = [b._replace(old_logprobs=t.logprobs(s.params, b)) for b in blocks]
    each = []
    for b in blocks:
        s, _, sk = t.step(s, b, run.ref_params, return_sketch=True)
        each.append(np.asarray(to_host(sk)))
    assert not np.allclose(each[0], each[1])
    np.testing.assert_allclose(sketch, (each[0] + each[1]) / 2, rtol=1e-5, atol=1e-7)


def test_every_bandit_setting_reaches_its_part():
    from harnessrl_jax.models import preset_config

    config = tiny()
    config.bandit.update(warmup=4, window=9, alpha=0.3, ema_decay=0.8, value_step=0.2, bonus=0.7, temperature=0.9,
                         floor=0.05, degenerate_value=0.4, sketch_dim=777, sketch_blocks=1, sketch_seed=5,
                         pass_threshold=60.0, arms=("plain", "concise", "rubric_hint"), heldout_arm="sys_expert")
    config = config.copy_and_resolve_references()
    assert checks.check(config) == []
    hb = methods.describe(config)
    parts = MethodParts(hb, PartsContext(config, [TASK] * 3, hb))
    sampler = parts.sampler
    c = sampler.config
    assert (c.warmup, c.window, c.alpha, c.ema_decay, c.value_step, c.bonus, c.temperature, c.floor,
            c.degenerate_value, c.pass_threshold) == (4, 9, 0.3, 0.8, 0.2, 0.7, 0.9, 0.05, 0.4, 60.0)
    assert sampler.arm_names == ["plain", "concise", "rubric_hint"]
    assert parts.prompts.names == sampler.arm_names
    spec = hb.sketch(config, preset_config("tiny"))
    assert (spec.d, spec.seed, spec.last_blocks) == (777, 5, 1)
    assert methods.describe(tiny("mixture").copy_and_resolve_references()).sketch is None
    mix = tiny("mixture2")
    mix.mixture.pair = ("sys_expert", "concise")
    mix = mix.copy_and_resolve_references()
    m2 = methods.describe(mix)
    assert MethodParts(m2, PartsContext(mix, [TASK], m2)).prompts.names == ["sys_expert", "concise"]


def test_the_mixtures_walk_epochs_of_the_task_x_arm_grid_and_render_each_row_under_its_arm(tiny_setup, tmp_path,
                                                                                          monkeypatch):
    """Six steps of two tasks under six arms cover the 12 (task, arm) rows of the grid once each, as the bandit's
    per-arm pools cover the tasks, and the prompt writer renders every drawn task under the arm drawn with it."""
    config = tiny("mixture").copy_and_resolve_references()
    run = dataclasses.replace(tiny_setup, config=config)
    stepper = Stepper(run, methods.describe(config), str(tmp_path))
    stepper.start(None)
    sampler, writer = stepper.parts.sampler, stepper.parts.prompts
    rows, rendered = [], []
    real = sampler.draw

    def draw(*args):
        idx, u = real(*args)
        rows.extend(zip(idx, sampler.step_arms))
        assert (u == 1).all()
        return idx, u
    monkeypatch.setattr(sampler, "draw", draw)
    state = build.initial_state(run)
    steps = 6
    for step in range(steps):
        state, metrics, _ = stepper.step(state, step)
        rendered.extend(writer._which)
    stepper.close()
    assert sorted(rows) == [(t, a) for t in range(2) for a in range(6)]  # one epoch of the grid, each row once
    assert rendered == [a for _, a in rows]
    again = MethodParts(stepper.method, PartsContext(config, stepper.tasks, stepper.method)).sampler
    again.load_state_dict(sampler.state_dict())
    assert (again.epoch, again.index) == (1, 0)
