"""The stages of one step and the switches that change them, in-process on the tiny HarnessRL config: guidance
reaches the rollouts (fitted to the budget, counted when it cannot be), the critic measures exactly the prompt it
proposes, `loss_context` changes the loss inputs, `advantages_rubric` the advantages, a down-weighted task's u the
batch weights, and mini-batches update twice from the first policy's logprobs."""

import dataclasses
import gc
import os
import subprocess
import sys
import weakref

import jax
import numpy as np
import pytest

from harnessrl_jax import build, methods, stages
from harnessrl_jax.harness import AddField, DownweightTask, apply
from harnessrl_jax.harness.render import fit_fields, render_prompt
from harnessrl_jax.harness.state import GAMMAS, guidance_cap
from harnessrl_jax.rl.batch import build_batch
from harnessrl_jax.stepper import Stepper


@pytest.fixture(autouse=True)
def _config(tiny_config):
    global TINY
    TINY = tiny_config


def stepper(run, tmp_path, **harness):
    config = TINY(**harness)
    s = Stepper(dataclasses.replace(run, config=config), methods.describe(config), str(tmp_path))
    s.start(None)
    return s


class BatchSpy:
    """Records every batch the trainer is given (put_batch), passing it through."""

    def __init__(self, run, monkeypatch):
        self.batches = []
        real = run.trainer.put_batch

        def put(batch):
            self.batches.append(jax.tree.map(np.asarray, batch))
            return real(batch)
        monkeypatch.setattr(run.trainer, "put_batch", put)


# ------------------------------------------------------------------------------------------ rendering, groups

def test_guidance_reaches_the_rollouts_fitted_to_the_budget_or_counted_when_it_cannot(tiny_setup):
    run = tiny_setup
    q, honey = run.tasks  # say-q, say-honey
    long_ref = "say honey. " * 60  # ~600 characters = tokens of the character tokenizer: over the 320 budget
    fields = [(("criterion", "say q twice."),), (("criterion", "say honey."), ("reference", long_ref))]
    g = stages.sample_groups(run, [q, honey], fields, seed=3)
    assert g.guided == [True, True] and g.shortened == [False, True] and g.over_budget == [False, False]
    text = run.tokenizer.decode(g.prompt_ids[0], skip_special_tokens=False)
    assert "<criterion>say q twice.</criterion>" in text
    assert all(len(p) <= run.prompt_limit for p in g.prompt_ids)
    assert g.rollouts.num_samples == 2 * run.config.num_generations and len(g.responses[1]) == 8
    # A set that cannot fit even cut is not mounted: the task is sampled bare and counted.
    bare = render_prompt(run.tokenizer, honey.prompt, tokenize=True)
    tight = dataclasses.replace(run, prompt_limit=len(bare) + 30)
    huge = (("criterion", "say honey. " * 40), ("critique", "none said honey. " * 40))
    g = stages.sample_groups(tight, [honey], [huge], seed=3)
    assert g.over_budget == [True] and g.guided == [False] and g.prompt_ids[0] == bare


def test_the_critics_hooks_refuse_what_cannot_be_sampled_as_proposed(tiny_setup):
    run = tiny_setup
    honey = run.tasks[1]
    bare = render_prompt(run.tokenizer, honey.prompt, tokenize=True)
    tight = dataclasses.replace(run, prompt_limit=len(bare) + 60)
    hooks = stages.critic_hooks(tight, seed=1, timer={"critic": 0.0, "resampled": 0})
    assert hooks.prompt_problem(honey, (("criterion", "say honey."),)) is None
    huge = (("criterion", "say honey. " * 40), ("critique", "none said honey. " * 40))
    assert fit_fields(run.tokenizer, honey.prompt, huge, tight.prompt_limit)[0] is None
    assert "over the budget" in hooks.prompt_problem(honey, huge)


def test_rollouts_are_sampled_with_the_mounted_fields(tiny_setup, tmp_path):
    run = tiny_setup
    s = stepper(run, tmp_path)
    s.harness = apply(s.harness, [AddField("say-honey", "criterion", "say honey.", "say-honey/word"),
                                  AddField("say-q", "critique", "no q in the last group.", "say-q/q")])
    state = build.initial_state(run)
    state, metrics, _ = s.step(state, 0)
    # Every group of this step was sampled with its task's fields (both tasks have some).
    assert metrics["guidance/guided_groups"] == run.config.tasks_per_step
    assert metrics["guidance/over_budget"] == 0 and metrics["guidance/fields_per_drawn_task"] > 0
    guided = [r.dynamics["guided"] for r in s.memory.store.history("say-honey") + s.memory.store.history("say-q")]
    assert guided and all(guided)
    # The cap schedule: 3 fields per task, one fewer each quarter of training.
    assert metrics["guidance/cap"] == guidance_cap(1, run.config.total_steps)
    s.close()


# ------------------------------------------------------------------------------------------------ the switches

def _one_step(run, tmp_path, monkeypatch, mounted=(), **harness):
    s = stepper(run, tmp_path, **harness)
    if mounted:
        s.harness = apply(s.harness, list(mounted))
    spy = BatchSpy(run, monkeypatch)
    state, metrics, records = s.step(build.initial_state(run), 0)
    s.close()
    return metrics, spy.batches[0], records


FIELDS = [AddField("say-honey", "criterion", "say honey.", "say-honey/word"),
          AddField("say-q", "criterion", "say q.", "say-q/q")]


def test_loss_context_bare_changes_the_loss_inputs_and_guided_keeps_the_sampled_prompt(tiny_setup, tmp_path,
                                                                                       monkeypatch):
    run = tiny_setup
    m_g, b_g, _ = _one_step(run, tmp_path / "g", monkeypatch, FIELDS, loss_context="guided")
    m_b, b_b, _ = _one_step(run, tmp_path / "b", monkeypatch, FIELDS, loss_context="bare")
    # The same rollouts (same seed, sampled guided in both): the same completion tokens, scored on other prompts.
    comp_g = [t[m] for t, m in zip(b_g.tokens, b_g.loss_mask)]
    comp_b = [t[m] for t, m in zip(b_b.tokens, b_b.loss_mask)]
    assert all(np.array_equal(x, y) for x, y in zip(comp_g, comp_b))
    assert b_g.loss_mask.sum() == b_b.loss_mask.sum()
    assert b_g.attention_mask.sum() > b_b.attention_mask.sum()  # the bare prompts are shorter
    assert not np.array_equal(b_g.tokens, b_b.tokens)
    # On its own prompt the trainer reproduces the engine's logprobs; on the bare one it does not.
    assert m_g["train/engine_gap"] < 1e-4 < m_b["train/engine_gap"]
    assert m_g["reward/graded_mean"] == m_b["reward/graded_mean"]


def test_advantages_rubric_after_regrades_the_group_under_the_accepted_rubric(tiny_setup, tmp_path, monkeypatch):
    run = tiny_setup
    # No memory (the group alone decides) and no critic (accepted unmeasured): the word limit every response meets
    # is tightened at step 0, so the rubric of the drawn tasks changes within the step.
    m_before, b_before, rec = _one_step(run, tmp_path / "a", monkeypatch, no_memory=True, no_critic=True,
                                        advantages_rubric="before")
    m_after, b_after, _ = _one_step(run, tmp_path / "b", monkeypatch, no_memory=True, no_critic=True,
                                    advantages_rubric="after")
    assert any(r["interface"] == "rubric" and r["verdict"] == "accepted" for r in rec)
    assert m_before["reward/graded_mean"] == m_after["reward/graded_mean"]  # the same group, graded the same
    assert m_before["reward/mean"] == pytest.approx(m_before["reward/graded_mean"])
    assert m_after["reward/mean"] != pytest.approx(m_before["reward/mean"])  # the rewards the advantages use
    assert not np.allclose(np.nan_to_num(b_before.advantages), np.nan_to_num(b_after.advantages))


def test_a_downweighted_tasks_importance_weight_reaches_the_batch(tiny_setup, tmp_path, monkeypatch):
    run = tiny_setup
    s = stepper(run, tmp_path)
    s.harness = apply(s.harness, [DownweightTask("say-q")] * 3)  # level 3: weight gamma3
    spy = BatchSpy(run, monkeypatch)
    seed = stages.step_seed(build.initial_state(run), 0)
    idx, _ = s.sampler.draw(s.harness, seed, run.config.tasks_per_step)
    _, metrics, _ = s.step(build.initial_state(run), 0)
    s.close()
    # u = 1 / (N p_i) with p = weights / sum: written out from the paper's gammas.
    w = np.array([GAMMAS[2], 1.0])
    u = 1.0 / (2 * w / w.sum())
    J = run.config.num_generations
    weights = spy.batches[0].weights[: len(idx) * J]
    np.testing.assert_allclose(weights, np.repeat(u[idx], J), rtol=1e-6)
    assert metrics["sampling/u_max"] == pytest.approx(u[idx].max(), rel=1e-6)


def test_mini_batches_update_twice_from_the_first_policys_logprobs(tiny_setup):
    run = tiny_setup
    tasks = list(run.tasks)
    g = stages.sample_groups(run, tasks, seed=5)
    adv = np.random.default_rng(0).standard_normal((2, run.config.num_generations)).astype(np.float32)
    u = np.array([1.7, 0.6], np.float32)
    config = run.config.copy_and_resolve_references()
    config.mini_batches = 2
    two = dataclasses.replace(run, config=config)
    state, metrics = stages.train_on_rollouts(two, build.initial_state(run), g.rollouts, adv, u)
    assert int(jax.device_get(state.step)) == 2 and np.isfinite(metrics["train/loss"])
    # The same two updates by hand: each block's old logprobs from the policy before the first update.
    t = run.trainer
    s0 = build.initial_state(run)
    batch = build_batch(g.rollouts, adv.reshape(-1), np.repeat(u, run.config.num_generations), seq_len=run.seq_len,
                        pad_id=run.engine.pad_id, num_rows=run.rows)
    half = run.rows // 2
    blocks = [t.put_batch(batch.rows(slice(i * half, (i + 1) * half))) for i in range(2)]
    olds = [np.asarray(t.logprobs(s0.params, b)) for b in blocks]
    ref = build.initial_state(run)
    for b, old in zip(blocks, olds):
        ref, _ = t.step(ref, b._replace(old_logprobs=old), run.ref_params)
    for a, b in zip(jax.tree.leaves(state.params), jax.tree.leaves(ref.params)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-6)
    # And it is not the same as one update on the whole batch.
    one, _ = stages.train_on_rollouts(run, build.initial_state(run), g.rollouts, adv, u)
    assert not all(np.allclose(np.asarray(a), np.asarray(b)) for a, b in
                   zip(jax.tree.leaves(one.params), jax.tree.leaves(state.params)))


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEAP = """
import ctypes, sys
from harnessrl_jax import stages
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD: the blocks below are served from the heap, not mapped one by one

def rss_mb():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024

# 256 MB in 32 KB blocks, each followed by a small block that stays: the freed ones cannot merge into the heap's
# top, so free() alone gives nothing back.
pairs = [(libc.malloc(32 << 10), libc.malloc(64)) for _ in range(8192)]
for block, _ in pairs:
    ctypes.memset(block, 1, 32 << 10)  # touched, so resident
for block, _ in pairs:
    libc.free(block)
before = rss_mb()
stages.release_free_heap()
print(before, rss_mb())
"""


def test_release_free_heap_gives_freed_heap_pages_back_to_the_system():
    if stages._malloc_trim() is None:
        pytest.skip("the C library has no malloc_trim (not glibc)")
    # A fresh process: a test worker's heap state (what earlier tests left, its mmap threshold) is not this test's.
    out = subprocess.run([sys.executable, "-c", HEAP], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    before, after = map(float, out.stdout.split())
    assert before - after > 200, (before, after)


class _Cycle:
    def __init__(self):
        self.me = self


def test_collection_after_pauses_the_collector_and_collects_once_at_the_end():
    assert gc.isenabled()
    timings = {}
    with stages.collection_after(timings):
        assert not gc.isenabled()
        cycle = _Cycle()
        alive = weakref.ref(cycle)
        del cycle
        assert alive() is not None  # nothing frees a cycle inside the block
    assert alive() is None and gc.isenabled() and timings["time/gc"] >= 0.0
    # a caller that turned the collector off keeps it off, and nothing is collected or timed
    gc.disable()
    try:
        timings = {}
        with stages.collection_after(timings):
            cycle = _Cycle()
            alive = weakref.ref(cycle)
            del cycle
        assert alive() is not None and not gc.isenabled() and timings == {}
    finally:
        gc.enable()
    # an error inside still collects and turns the collector back on
    with pytest.raises(KeyError):
        with stages.collection_after(timings):
            raise KeyError("x")
    assert gc.isenabled() and "time/gc" in timings


def test_step_1_embeds_the_seed_criteria_before_the_evolver_reads_the_memory(tiny_setup, tmp_path, monkeypatch):
    """The seeds Stepper.start wrote without vectors are embedded before the evolver runs, so the wait for the
    embedding model's background load is counted as the memory's time, not the evolver's. The step runs with the
    garbage collector paused (the evolver sees it off) and collects once at its end, timed."""
    run = tiny_setup
    config = TINY()
    config.memory.embedder = "default"  # the bundled MiniLM: a semantic index, which the tiny config leaves out
    s = Stepper(dataclasses.replace(run, config=config), methods.describe(config), str(tmp_path))
    s.start(None)
    assert s.memory.semantic._deferred
    owed_at_evolver = []
    real = s.evolver.step

    def spy(*args, **kwargs):
        owed_at_evolver.append((s.memory.semantic._deferred, gc.isenabled()))
        return real(*args, **kwargs)
    monkeypatch.setattr(s.evolver, "step", spy)
    _, metrics, _ = s.step(build.initial_state(run), 0)
    assert owed_at_evolver == [(False, False)] and metrics["time/memory"] > 0
    assert gc.isenabled() and metrics["time/gc"] > 0
    assert s.memory.semantic.size >= len({c.text for t in run.tasks for c in t.criteria})
    s.close()


def test_advantages_of_an_estimator_without_the_std_are_on_the_papers_0_1_reward_scale():
    """Rewards arrive in reward points (0-100); Dr.GRPO's leave-one-out baseline is taken on the 0-1 scale the papers
    use (so its size against the KL term and the clip is theirs), a std-normalised estimator on either."""
    rewards = np.array([[0.0, 50.0, 100.0, 100.0], [20.0, 20.0, np.nan, 80.0]])
    rloo, _ = stages.compute_advantages(rewards, "rloo")
    for row, want_row in zip(rewards / 100.0, rloo):
        valid = ~np.isnan(row)
        for j in np.flatnonzero(valid):  # r_j minus the mean of the row's other valid rewards, by hand
            others = row[valid & (np.arange(len(row)) != j)]
            assert want_row[j] == pytest.approx(row[j] - others.mean(), abs=1e-6)
    assert np.isnan(rloo[1, 2])
    dr, _ = stages.compute_advantages(rewards, "dr_grpo")
    np.testing.assert_allclose(dr[0], rewards[0] / 100 - np.mean(rewards[0] / 100), atol=1e-6)
    grpo, _ = stages.compute_advantages(rewards, "grpo")
    centred = rewards[0] - rewards[0].mean()
    np.testing.assert_allclose(grpo[0], centred / (centred.std() + 1e-6), rtol=1e-5)
