"""Methods as descriptions of their parts: the registry, the ablation switches, every threshold reaching its part,
and one step of every method (and ablation) run in-process by the one step function, `stepper.Stepper`."""

import dataclasses
import json
import os
import sys

import jax
import numpy as np
import pytest

from harnessrl_jax import build, checks, methods, settings, stages
from harnessrl_jax.harness.transitions import FROZEN_TRANSITIONS
from harnessrl_jax.methods.harnessbandit import BanditSampler
from harnessrl_jax.methods.mixture import ArmGridSampler
from harnessrl_jax.methods.parts import part_class
from harnessrl_jax.methods.samplers import EpochSampler, HarnessSampler
from harnessrl_jax.methods.sec import SECSampler
from harnessrl_jax.stepper import Stepper, build_evolver
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
    assert checks.check(config) == []
    m = methods.describe(config)
    # every method draws tasks as HarnessRL's seed harness does, but SEC and HarnessBandit, whose mechanism is the
    # sampler
    assert isinstance(m, methods.Method) and m.name == name
    mine = {"sec": SECSampler, "harnessbandit": BanditSampler, "mixture": ArmGridSampler, "mixture2": ArmGridSampler}
    assert part_class(m.sampler) is mine.get(name, HarnessSampler)


def test_the_contract_paths_resolve_as_written():
    """The published rules are named by dotted path: registering a method must not rebind its module's name in the
    package (the registry once held `ruscarl`, `sec` and `coca` under the modules' names)."""
    import harnessrl_jax

    for path in ("methods.ruscarl.scaffold_ratios", "methods.sec.update_values", "methods.sec.arm_probs",
                 "methods.coca.diagnose", "methods.harnessbandit.selection_probs"):
        obj = harnessrl_jax
        for part in path.split("."):
            obj = getattr(obj, part)
        # defined in the module the path names, or in one of its package's modules (methods.coca.states)
        assert callable(obj) and obj.__module__.startswith("harnessrl_jax." + path.rsplit(".", 1)[0]), path


def test_grpo_is_the_harness_with_every_interface_frozen_and_the_same_sampler():
    g, h = methods.describe(tiny("grpo")), methods.describe(tiny("harnessrl"))
    assert g.frozen and g.transitions == FROZEN_TRANSITIONS and part_class(g.sampler) is part_class(h.sampler) \
        is HarnessSampler
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
    evolver, cold = build_evolver(config, m, None)
    assert cold is None and evolver.config.interfaces == interfaces and evolver.critic.enabled == critic
    assert evolver.proposer.sign_filter == critic  # no critic: not even its sign test applied in advance
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
    evolver, _ = build_evolver(config, methods.describe(config), None)
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
    # AMARIS++'s own rule down-weights tasks: a sampler that ignores p_t would drop that silently
    (lambda c: c.update(method="amaris_pp") or c.tasks.update(sampler="epoch"), "--config.tasks.sampler"),
    (lambda c: c.update(method="no_such_method"), "--config.method"),
    (lambda c: c.update(method="harnessbandit"), "--config.advantage"),  # a flag, not `:method=`: grpo's advantage
    (lambda c: c.judge.update(kind="openai"), "--config.judge.base_url"),
    (lambda c: c.harness.update(proposer="llm"), "--config.evolver_model.base_url"),
    (lambda c: c.memory.update(embedder="default"), "--config.memory.min_cosine"),
    (lambda c: c.rollout.update(min_batch=0), "--config.rollout.min_batch"),
    (lambda c: c.eval.update(every=2), "--config.eval.heldout"),  # the toy tasks have no held-out split
    (lambda c: c.eval.update(every=100, split="train"), "--config.eval.every"),
    (lambda c: c.eval.update(ood="mmlu=x.jsonl"), "--config.eval.ood"),
    (lambda c: c.eval.update(validation_share=1.0), "--config.eval"),
])
def test_a_wrong_value_is_reported_with_the_key_that_fixes_it(change, key):
    config = tiny()
    if key == "--config.memory.min_cosine":
        config.memory.calibrated_for = "bge-base-en-v1.5"  # the paper's threshold with the bundled MiniLM
    change(config)
    problems = checks.check(config)
    assert problems and any(p.startswith(key) for p in problems), problems


def test_the_epoch_sampler_is_a_choice_where_p_t_is_frozen():
    config = tiny("grpo")
    config.tasks.sampler = "epoch"
    assert checks.check(config) == [] and part_class(methods.describe(config).sampler) is EpochSampler


def test_the_paper_config_lists_everything_it_still_needs_with_the_flags():
    config = settings.load(os.path.join(REPO, "experiments", "rubric_mix_4b.py"))
    problems = checks.check(config) + checks.needs(config)
    text = "\n".join(problems)
    for flag in ("--config.tasks.path", "--config.judge.base_url", "--config.model_name", "--config.memory.embedder",
                 "--config.rollout.base_urls", "--config.rollout.weights_dir", "--config.eval.heldout"):
        assert flag in text, text
    assert methods.describe(config).interfaces == INTERFACES
    assert config.harness.proposer == "llm" and config.harness.llm_check and config.judge.kind == "openai"


def test_training_tasks_drop_llm_criteria_without_a_judge_and_never_keep_dataset_references():
    from harnessrl_jax import data

    tasks = data.load_split("mini", "train")
    assert any(t.reference for t in tasks)
    kept, dropped = build.training_tasks(tiny(), tasks)
    n_llm = sum(c.verifier != "rule" for t in tasks for c in t.criteria)
    assert dropped == n_llm > 0 and all(c.verifier == "rule" for t in kept for c in t.criteria)
    assert not any(t.reference for t in kept)
    config = tiny(use_dataset_reference=True)
    assert any(t.reference for t in build.training_tasks(config, tasks)[0])


# ------------------------------------------------------------------------------------------ one step of each

@pytest.fixture()
def run(tiny_setup):
    """One set-up shared by every method below (the run does not depend on the method beyond the prompt budget,
    which the harnessrl config sets to its largest)."""
    return tiny_setup


def stepper_for(run, config, workdir):
    config = config.copy_and_resolve_references()
    run = dataclasses.replace(run, config=config)
    if methods.describe(config).sketch is not None:  # HarnessBandit: the step returns the gradient sketch too
        run = with_sketch(run, config)
    stepper = Stepper(run, methods.describe(config), str(workdir))
    stepper.start(None)
    return stepper


def with_sketch(run, config):
    """The run with a trainer whose step also returns config.bandit's gradient sketch (as build.setup makes it)."""
    from harnessrl_jax.rl.step import Trainer

    t = run.trainer
    trainer = Trainer(t.model_config, t.optimizer, t.mesh, t.loss, schedule=t.schedule, micro_batches=t.micro_batches,
                      sketch_spec=methods.describe(config).sketch(config, run.model_config))
    return dataclasses.replace(run, trainer=trainer)


STEP_CONFIGS = [(name, {}) for name in sorted(methods.METHODS)] + [
    ("harnessrl", {"no_critic": True, "no_memory": True}), ("harnessrl", {"only_sampling": True}),
    ("harnessrl", {"sampling_rule": "sec", "guidance_rule": "ruscarl", "rubric_rule": "evorubric"})]


@pytest.mark.parametrize("name, switch", STEP_CONFIGS, ids=[f"{n}{'-' + '-'.join(s) if s else ''}"
                                                            for n, s in STEP_CONFIGS])
def test_one_step_of_every_method(run, tmp_path, name, switch):
    config = tiny(name, **switch)
    stepper = stepper_for(run, config, tmp_path)
    state = build.initial_state(run)
    H0 = stepper.harness
    seen = []  # the memory the evolver and the method's rule are handed each step
    evolver_step, after_judge = stepper.evolver.step, stepper.parts.after_judge
    stepper.evolver.step = lambda *a, memory, **kw: seen.append(memory) or evolver_step(*a, memory=memory, **kw)
    stepper.parts.after_judge = lambda *a, memory, **kw: seen.append(memory) or after_judge(*a, memory=memory, **kw)
    for step in range(2):
        state, metrics, records = stepper.step(state, step)
        assert np.isfinite(metrics["train/loss"])
        # float32 engine and trainer agree on the sampling context; a bare-context loss measures the shift
        bare = getattr(stepper.parts.scheme, "loss_context", "guided") == "bare"  # CoCA's rows are all in context
        assert (metrics["train/engine_gap"] < 1e-4) == (not bare)
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
    # Every run keeps its record store (the reversal rate, launch/oracle.py); without the method's memory the
    # evolver and the parts are shown none of it.
    assert stepper.memory.store.positions()["step"] == 1 and np.isfinite(metrics["harness/accepted_total"])
    assert all(mem is (stepper.memory if m.memory else None) for mem in seen) and len(seen) == 4
    extra = stepper.extra()
    assert set(extra) == {"harness", "sampler", "memory", "method"}
    stepper.close()


# ------------------------------------------------------------------------------ through launch/train.py, once

def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def test_harnessrl_tiny_run_proposes_measures_accepts_and_rejects(harnessrl_run):
    workdir, log = harnessrl_run
    assert "harness:" in log and "step 6/6" in log
    metrics = read_jsonl(os.path.join(workdir, "metrics.jsonl"))
    assert [m["step"] for m in metrics] == list(range(1, 7))
    for key in ("attribution/frac_blind", "attribution/frac_spurious", "critic/acceptance_rate", "critic/over_budget",
                "guidance/cap", "guidance/guided_groups", "guidance/over_budget", "guidance/reference_fields_added",
                "sampling/downweighted_share", "harness/reversal_rate", "oracle/agreement", "oracle/pair_reward_tie",
                "oracle/count/pairs", "time/evolver", "time/critic", "train/engine_gap", "reward/mean"):
        assert all(key in m for m in metrics), key
    records = read_jsonl(os.path.join(workdir, "harness.jsonl"))
    for r in records:
        assert {"step", "task_id", "draw", "interface", "round", "label", "verdict", "reason", "criterion_ids",
                "evidence_ids", "with_evidence", "candidate", "deltas", "measurement", "changes"} <= set(r)
        assert r["verdict"] in ("accepted", "rejected", "noop") and r["interface"] in INTERFACES
    measured = [r for r in records if r["verdict"] in ("accepted", "rejected") and r["measurement"]["measured"]]
    assert measured and all(any(v is not None for v in r["deltas"].values()) for r in measured)
    assert {r["verdict"] for r in measured} == {"accepted", "rejected"}
    # The blind word gets guidance, measured on a group resampled in exactly the proposed prompt (it fits).
    honey = [r for r in measured if r["task_id"] == "say-honey" and r["interface"] == "guidance"]
    assert honey and all(r["label"] == "blind" and r["measurement"]["conditions"].get("fits", True) for r in honey)
    assert any(r["interface"] == "rubric" and r["verdict"] == "accepted" for r in records)
    assert sum(m["critic/accepted"] for m in metrics) == sum(r["verdict"] == "accepted" for r in records)
    assert sum(m["critic/rejected"] for m in metrics) == sum(r["verdict"] == "rejected" for r in records)
    assert sum(m["critic/over_budget"] for m in metrics) == 0 and sum(m["guidance/over_budget"] for m in metrics) == 0
    report = open(os.path.join(workdir, "report.html")).read()
    assert report.count("<svg") >= 6 and "Accepted and rejected actions" in report
    assert 'class="accepted"' in report and 'class="rejected"' in report


def test_cold_start_launcher_measures_the_seed_policy_and_training_reads_it(tmp_path, train_script):
    """launch/cold_start.py on the tiny config: the bands re-derived with NumPy from its saved score matrices, the
    rule judge's zero grading noise replaced by the paper's 3.1 with a warning, and a run that starts from the
    file's anchors and bands."""
    import itertools
    import subprocess

    out = tmp_path / "cold_start.json"
    cmd = [sys.executable, os.path.join(REPO, "launch", "cold_start.py"),
           "--config=experiments/tiny_cpu.py:method=harnessrl,tasks=harness", f"--out={out}", "--groups=8",
           "--regradings=1"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    cs = json.loads(out.read_text())
    records = read_jsonl(tmp_path / "cold_start.groups.jsonl")
    n = len(records)
    assert "guidance band" in proc.stdout and f"cold start: {n}/{n} tasks" in proc.stderr
    assert n == cs["meta"]["tasks"] >= 2 and all(len(r["groups"]) == 8 and len(r["regradings"]) == 1 for r in records)
    means, ranges = [], []
    for r in records:
        points = np.array(r["points"])
        rewards = [100 * points @ np.array(g) / points.clip(0).sum() for g in r["groups"]]
        m = [x.mean() for x in rewards]
        means += [abs(a - b) for a, b in itertools.combinations(m, 2)]
        ranges += [x.max() - x.min() for x in rewards]
        assert r["regradings"][0] == r["groups"][0]  # rule checkers: the same verdicts when graded again
    # The upper bound is the median within-group range (the paper's 28.0 when the median group has no spread).
    hi = np.median(ranges) if np.median(ranges) > 0 else 28.0
    assert cs["bands"]["guidance"] == pytest.approx([np.percentile(means, 95), hi])
    # The grading null measured 0: the paper's 3.1, said in the file and by the launcher.
    assert cs["bands"]["rubric"] == pytest.approx([3.1, hi])
    assert cs["band_sources"]["rubric_low"].startswith("default") and "warning: the rubric band" in proc.stdout
    config = tiny(cold_start=str(out))
    evolver, cold = build_evolver(config, methods.describe(config), None)
    assert evolver.critic.bands.guidance == pytest.approx(tuple(cs["bands"]["guidance"]))
    workdir = str(tmp_path / "run")
    train_script(workdir, "--config=experiments/tiny_cpu.py:method=harnessrl,tasks=harness",
                 "--config.total_steps=1", "--config.report=False", f"--config.harness.cold_start={out}")
    with open(os.path.join(workdir, "checkpoints", "1", "extra", "metadata")) as f:
        harness = json.load(f)["harness"]
    anchors = {tid: sorted(c["id"] for c in crit if c["anchor"])
               for tid, crit in zip(harness["task_ids"], harness["rubric"]["criteria"])}
    assert anchors == {tid: sorted(ids) for tid, ids in cs["anchors"].items()} and any(anchors.values())


@pytest.mark.slow
def test_llm_proposer_and_hacking_check_run_against_a_real_model_server(tmp_path, llama_server, train_script):
    """proposer='llm' and llm_check through launch/train.py, the evolver model being SmolLM2 served by llama.cpp:
    every guidance or rubric candidate comes from the model, sampling ones from the rule fallback, and output that
    does not validate into typed actions is logged as rejected with the reason."""
    workdir = str(tmp_path / "run")
    # One step, one task, one round and short answers: each evolver call is a SmolLM2 generation of a ~1,000-token
    # prompt on the test machine's CPU, and one task routes one guidance and one rubric call.
    train_script(workdir, "--config=experiments/tiny_cpu.py:method=harnessrl,tasks=harness",
                     "--config.total_steps=1", "--config.tasks_per_step=1", "--config.report=False",
                     "--config.harness.proposer=llm",
                     "--config.harness.rounds=1", "--config.harness.llm_check=True",
                     "--config.memory.embedder=", f"--config.evolver_model.base_url={llama_server.base_url}",
                     f"--config.evolver_model.model={llama_server.model}",
                     "--config.evolver_model.structured_output=json_object", "--config.evolver_model.max_tokens=48",
                     # no memory: the group alone decides, so step 0 already routes blind / saturated criteria
                     "--config.harness.no_memory=True")
    records = read_jsonl(os.path.join(workdir, "harness.jsonl"))
    candidates = [r["candidate"] for r in records if r["candidate"]]
    assert candidates and any(c["interface"] in ("guidance", "rubric") for c in candidates)
    for r in records:
        c = r["candidate"]
        if c is None:
            continue
        assert c["source"] == ("rule" if c["interface"] == "sampling" else "llm")
        if c["invalid"] is not None:
            assert r["verdict"] == "rejected" and r["reason"] and c["actions"] == []
    metrics = read_jsonl(os.path.join(workdir, "metrics.jsonl"))
    assert len(metrics) == 1 and np.isfinite(metrics[0]["train/loss"])


@pytest.mark.parametrize("ablation", ["no_critic", "no_critic_no_memory", "no_memory", "only_guidance",
                                      "only_rubric", "only_sampling"])
def test_the_ablation_rows_are_configs(ablation):
    from experiments import base, smollm2_cpu

    config = smollm2_cpu.get_config(f"method=harnessrl,ablation={ablation}")
    assert all(config.harness[k] == v for k, v in base.ABLATIONS[ablation].items())
    m = methods.describe(config)
    assert m.critic == ("no_critic" not in ablation) and m.memory == ("no_memory" not in ablation)
    with pytest.raises(ValueError, match="known ablations"):
        smollm2_cpu.get_config("ablation=no_evolver")


def test_the_guidance_metrics_count_what_did_not_fit(tiny_setup, tmp_path):
    from harnessrl_jax.harness import AddField, apply
    from harnessrl_jax.harness.render import render_prompt

    config = tiny()
    bare = max(len(render_prompt(tiny_setup.tokenizer, t.prompt, tokenize=True)) for t in tiny_setup.tasks)
    run = dataclasses.replace(tiny_setup, config=config, prompt_limit=bare + 60)
    stepper = Stepper(run, methods.describe(config), str(tmp_path))
    stepper.start(None)
    huge = "say honey. " * 40
    stepper.harness = apply(stepper.harness, [AddField("say-honey", "criterion", huge, "say-honey/word"),
                                              AddField("say-honey", "critique", huge, "say-honey/word"),
                                              AddField("say-q", "criterion", "say q.", "say-q/q")])
    seed = stages.step_seed(build.initial_state(run), 0)
    idx, _ = stepper.sampler.draw(stepper.harness, seed, config.tasks_per_step)
    _, metrics, _ = stepper.step(build.initial_state(run), 0)
    stepper.close()
    honey = sum(i == 1 for i in idx)
    assert metrics["guidance/over_budget"] == honey and metrics["guidance/guided_groups"] == len(idx) - honey
