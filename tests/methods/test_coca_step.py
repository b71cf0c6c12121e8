"""CoCA's scheme inside the one step on the tiny model: the two groups and their prompts, the train rows, the
teacher's top-k placed at the right student positions (checked against an independent forward of the teacher
sequence), one compile of the train step with and without distillation, and CoCA learning the tiny task."""

import dataclasses
import json

import jax
import numpy as np
import pytest

from harnessrl_jax import build, checks, methods, stages
from harnessrl_jax.eval.evaluate import evaluate
from harnessrl_jax.memory import Memory
from harnessrl_jax.methods.coca import CoCAScheme, scheme as coca_scheme
from harnessrl_jax.methods.coca.scheme import teacher_messages
from harnessrl_jax.models import forward
from harnessrl_jax.rl import distill
from harnessrl_jax.stepper import Stepper

STEPS = 12


@pytest.fixture(scope="module")
def coca_run(tiny_config):
    config = tiny_config("method=coca,tasks=harness")
    config.total_steps = 8
    config = config.copy_and_resolve_references()
    assert checks.check(config) == []
    run = build.setup(config)
    yield run
    run.close()


def captured(monkeypatch):
    """The train batches CoCA's scheme hands the train step, as host arrays (the step still runs)."""
    seen = []

    def capture(run_, state_, batch):
        seen.append(jax.tree.map(lambda x: x if x is None else np.asarray(x), batch))
        return stages.train_on_batch(run_, state_, batch)

    monkeypatch.setattr(coca_scheme, "train_on_batch", capture)
    return seen


def scheme_step(scheme, run, stepper, state, seed):
    """One visit of the scheme's stages on every task of the stepper, outside the step: (groups, train result)."""
    tasks, H = stepper.tasks, stepper.harness
    idx = list(range(len(tasks)))
    groups = scheme.sample(run, H, idx, tasks, step=seed, seed=seed)
    _, rewards, _ = scheme.judge(run, H, tasks, groups)
    result = scheme.train(run, state, step=seed, harness=H, next_harness=H, tasks=tasks, groups=groups,
                          rewards=rewards, u=np.ones(len(tasks)))
    stages.push_weights(run, result.state.params)
    return groups, result


def test_groups_prompts_rows_and_teacher_alignment(coca_run, tmp_path, monkeypatch):
    run = coca_run
    method = methods.describe(run.config)
    stepper = Stepper(run, method, str(tmp_path))
    stepper.start(None)
    scheme = stepper.parts.scheme
    assert (isinstance(scheme, CoCAScheme), method.distill_coef, run.trainer.loss.distill_coef) == (True, 1.0, 1.0)
    state = build.initial_state(run)
    tasks = stepper.tasks
    g_n, g_g = scheme.config.groups
    seen = captured(monkeypatch)

    for seed in range(12):  # until some query passes the gate
        params = state.params
        teacher_params = jax.tree.map(np.asarray, params)  # theta_old, before the update
        normal, result = scheme_step(scheme, run, stepper, state, seed)
        state, metrics = result.state, result.metrics
        v = scheme.visit
        assert normal.rollouts.num_samples == len(tasks) * g_n and v.guided.rollouts.num_samples == len(tasks) * g_g
        bare = run.tokenizer.decode(normal.prompt_ids[0])
        guided = run.tokenizer.decode(v.guided.prompt_ids[0])
        assert "Aim to satisfy" not in bare and "Aim to satisfy:" in guided and tasks[0].criteria[0].text in guided
        batch = seen[-1]
        if batch.distill_mask.any():
            break
    else:
        pytest.fail("no query passed the gate in 12 steps")
    assert metrics["train/distill_tokens"] == batch.distill_mask.sum() > 0
    T = len(tasks)
    normal_rows = T * g_n
    # Guided rows of qualified queries are out of the GRPO term; the Normal rows are all in it
    assert np.isfinite(batch.advantages[:normal_rows]).all()
    for r in np.flatnonzero(batch.distill_mask.any(axis=1)):
        n = r // g_n
        assert r < normal_rows and np.isnan(batch.advantages[normal_rows + n * g_g:normal_rows + (n + 1) * g_g]).all()
        # the teacher sequence rebuilt independently: its prompt, then this row's completion tokens
        gate_line = [line for line in open(tmp_path / "coca.jsonl")][-T + n]
        gl = json.loads(gate_line)
        learnable = [c for c in tasks[n].criteria if c.id in gl["learnable"]]
        demo = v.guided.responses[n][gl["gf_index"]]
        p_t = run.tokenizer.apply_chat_template([dict(m) for m in teacher_messages(tasks[n], learnable, demo,
                                                                                   scheme.teacher_template)],
                                                add_generation_prompt=True, tokenize=True)
        completion = batch.targets[r][batch.loss_mask[r]]
        seq = np.array([list(p_t) + list(completion)], np.int32)
        logits = forward(run.model_config, teacher_params, seq, np.ones_like(seq, bool))
        ids, logp = distill.teacher_topk(logits, k=scheme.config.topk, temperature=run.config.temperature)
        want = slice(len(p_t) - 1, len(p_t) - 1 + len(completion))
        np.testing.assert_array_equal(batch.distill_ids[r][batch.distill_mask[r]], np.asarray(ids[0, want]))
        np.testing.assert_allclose(batch.distill_logp[r][batch.distill_mask[r]], np.asarray(logp[0, want]),
                                   atol=1e-5)
    # a step where no query can pass the gate: zero targets, no teacher forward, and still the same compile
    config = scheme.config
    scheme.config = dataclasses.replace(config, frontier_margin=1e9)
    _, result = scheme_step(scheme, run, stepper, state, 99)
    state, off = result.state, result.metrics
    scheme.config = config
    assert off["train/distill_tokens"] == 0 and not seen[-1].distill_mask.any()
    assert run.trainer.compiles() == 1  # steps with and without distilled rows share one compile
    stepper.close()


@pytest.mark.slow
def test_coca_learns_the_tiny_task(coca_run, tmp_path):
    """Twelve steps of CoCA on the tiny harness tasks (the 8-rollout budget split (4, 4), so its Normal GRPO sees
    half the groups the other methods' does in their eight): the share of 'say q' responses holding a q rises (the
    seed rubric on bare prompts, the same 128 samples' seed before and after; 44 -> 58 when written)."""
    run = coca_run
    say_q = [t for t in run.tasks if t.id == "say-q"]
    stepper = Stepper(run, methods.describe(run.config), str(tmp_path))
    stepper.start(None)
    state = build.initial_state(run)
    before = float(evaluate(run, say_q, num_samples=128, seed=5).seed_rubric[0])
    history = []
    for step in range(STEPS):
        state, metrics, _ = stepper.step(state, step)
        history.append(metrics)
    run.engine.update_weights(stages.engine_params(state.params))
    after = float(evaluate(run, say_q, num_samples=128, seed=5).seed_rubric[0])
    stepper.close()
    assert after >= before + 5.0, (before, after)
    assert all(np.isfinite(m["train/loss"]) for m in history)
    assert sum(m["coca/opsd_activation"] for m in history) > 0  # the gate opened at least once
    lines = (tmp_path / "coca.jsonl").read_text().splitlines()
    assert len(lines) == STEPS * run.config.tasks_per_step


def test_coca_jsonl_starts_anew_and_is_cut_back_on_resume(coca_run, tmp_path):
    run = coca_run
    (tmp_path / "coca.jsonl").write_text('{"step": 7, "task_id": "old run", "states": {}}\n')
    stepper = Stepper(run, methods.describe(run.config), str(tmp_path))
    stepper.start(None)
    state = build.initial_state(run)
    state, _, _ = stepper.step(state, 0)
    state, _, _ = stepper.step(state, 1)
    extra = stepper.extra()  # as checkpointed after step 1
    state, _, _ = stepper.step(state, 2)
    stepper.close()
    steps = [json.loads(x)["step"] for x in (tmp_path / "coca.jsonl").read_text().splitlines()]
    assert steps == [0, 0, 1, 1, 2, 2]  # the earlier run's line is gone
    again = Stepper(run, methods.describe(run.config), str(tmp_path))
    again.start(extra)
    steps = [json.loads(x)["step"] for x in (tmp_path / "coca.jsonl").read_text().splitlines()]
    assert steps == [0, 0, 1, 1] and extra["method"]["scheme"] == {"steps_done": 2}
    again.step(state, 2)
    assert [json.loads(x)["step"] for x in (tmp_path / "coca.jsonl").read_text().splitlines()][-2:] == [2, 2]
    again.close()


def scheme_steps(run, tmp_path, monkeypatch, seeds, **coca):
    """The scheme's stages run directly for each seed with config.coca updated by `coca`: (captured batches,
    metrics, scheme)."""
    config = run.config.copy_and_resolve_references()
    config.coca.update(coca)
    run = dataclasses.replace(run, config=config)
    stepper = Stepper(run, methods.describe(config), str(tmp_path))
    stepper.start(None)
    state = build.initial_state(run)
    scheme, seen, history = stepper.parts.scheme, captured(monkeypatch), []
    teachers = []  # the teacher sequences the scheme forwards, as text
    real_topk = run.trainer.teacher_topk

    def topk(params, tokens, attention, *args, **kwargs):
        teachers.extend(run.tokenizer.decode(np.asarray(t)[np.asarray(m)].tolist())
                        for t, m in zip(tokens, attention) if np.asarray(m).any())
        return real_topk(params, tokens, attention, *args, **kwargs)
    monkeypatch.setattr(run.trainer, "teacher_topk", topk)
    for seed in seeds:
        _, result = scheme_step(scheme, run, stepper, state, seed)
        state = result.state
        history.append({**result.metrics, **scheme.metrics()})
    stepper.close()
    scheme.teachers = teachers
    return seen, history, scheme


SEEDS = range(8)


@pytest.mark.parametrize("coca, check", [
    ({"guided_gate": "always"}, "guided_all"), ({"guided_gate": "never"}, "guided_none"),
    ({"distill_on": "guided_frontier"}, "gf_rows"), ({"distill_on": "all_normal"}, "all_normal"),
    ({"teacher_demo": False}, "no_demo"), ({"calibrate": False}, "no_calibration"),
    ({"pooled_baseline": True}, "pooled"), ({"groups": (5, 3)}, "groups")])
def test_each_variant_changes_what_it_names(coca_run, tmp_path, monkeypatch, coca, check):
    batches, history, scheme = scheme_steps(coca_run, tmp_path, monkeypatch, SEEDS, **coca)
    g_n, g_g = scheme.config.groups
    T = coca_run.config.tasks_per_step
    normal = T * g_n
    assert all(np.isfinite(m["train/loss"]) for m in history)
    distilled = [np.flatnonzero(b.distill_mask.any(axis=1)) for b in batches]
    qualified = [m["coca/opsd_activation"] * T for m in history]
    if check == "guided_all":
        assert all(np.isfinite(b.advantages[normal:normal + T * g_g]).all() for b in batches)
    elif check == "guided_none":
        assert all(np.isnan(b.advantages[normal:normal + T * g_g]).all() for b in batches)
    elif check == "gf_rows":  # the Guided Frontier's own row, re-packed after the bare prompt, out of GRPO
        rows = np.concatenate(distilled)
        assert rows.size and (rows >= normal).all()
        for b, rs in zip(batches, distilled):
            for r in rs:
                prompt = b.tokens[r][:np.flatnonzero(b.loss_mask[r])[0] + 1]
                assert "Aim to satisfy" not in coca_run.tokenizer.decode(prompt.tolist())
                assert np.isnan(b.advantages[r])
    elif check == "all_normal":
        assert sum(len(r) for r in distilled) == g_n * sum(qualified) > 0
        assert all((r < normal).all() for r in distilled)
    elif check == "no_demo":  # the teacher's context holds the learnable criteria but no demonstration
        lines = [json.loads(x) for x in (tmp_path / "coca.jsonl").read_text().splitlines()]
        assert any(x["qualified"] for x in lines) and scheme.teachers
        assert all("<example>" not in t and "Aim to satisfy" in t for t in scheme.teachers)
    elif check == "no_calibration":
        assert all(m["coca/rewrites_weaken"] + m["coca/rewrites_strengthen"] + m["coca/rewrites_skipped"] == 0
                   for m in history)
        assert all(m["coca/reward_normal"] == m["coca/reward_normal_original"] for m in history)
    elif check == "pooled":  # one baseline over both groups: the Normal rows' advantages no longer sum to 0
        assert any(abs(np.nansum(b.advantages[:g_n])) > 1e-3 for b in batches)
    elif check == "groups":
        assert all(np.isfinite(b.advantages[:T * 5]).all() for b in batches) and (g_n, g_g) == (5, 3)


def test_a_rule_threshold_is_moved_on_the_tasks_earlier_responses_not_on_the_groups_it_rescores(coca_run, tmp_path,
                                                                                                monkeypatch):
    """Calibration picks a rule criterion's new threshold on the task's responses at its previous visit (the
    memory's), so the rewrite is then judged on groups it was not fitted to; a first visit moves nothing."""
    run = coca_run
    stepper = Stepper(run, methods.describe(run.config), str(tmp_path))
    stepper.start(None)
    scheme = stepper.parts.scheme
    seen = {}
    real = scheme.calibrator.calibrate_many

    def spy(items):
        seen.setdefault(stepper_step[0], []).extend(items)
        return real(items)
    monkeypatch.setattr(scheme.calibrator, "calibrate_many", spy)
    stepper_step = [0]
    state = build.initial_state(run)
    for step in range(3):
        stepper_step[0] = step
        state, _, _ = stepper.step(state, step)
    stepper.close()
    assert seen.get(0) and all(item[5] == () for item in seen[0])  # nothing earlier to calibrate on
    later = [(step, item) for step in (1, 2) for item in seen.get(step, [])]
    assert later, "no task was calibrated again"
    memory = Memory.open(str(tmp_path / "memory"), embedder=None)
    for step, (task, *_, responses) in later:
        previous = memory.history(task.id, before_step=step, limit=1)
        assert previous and tuple(responses) == tuple(previous[0].responses)
    memory.close()
