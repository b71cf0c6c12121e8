"""Defaults every experiment starts from; not a runnable config by itself.

Experiments call `get_config()` here and override what differs. Parts are chosen by name (model_name, method,
tasks.source, advantage, loss.name) and each part's own settings sit in the sub-dict beside its name. A config's
argument is a comma-separated list of options (`rubric_mix_4b.py:cpu,method=grpo`), parsed by `parse_arg`.
"""

import dataclasses

import ml_collections


def parse_arg(arg, **defaults):
    """The options of a config argument: 'cpu,method=grpo' -> {cpu: True, method: 'grpo', ...defaults}.

    `name=value` sets an option, a bare `name` sets it to True; values are converted to the type of the option's
    default (bool from true/false/1/0). An option without a default is an error naming the known ones.
    """
    opts = ml_collections.ConfigDict(dict(defaults))
    for part in filter(None, (p.strip() for p in (arg or "").split(","))):
        name, eq, value = part.partition("=")
        name = name.strip()
        if name not in defaults:
            raise ValueError(f"unknown config option {name!r} in {arg!r}; known: {', '.join(sorted(defaults))}")
        default = defaults[name]
        if not eq:
            if not isinstance(default, bool):
                raise ValueError(f"config option {name!r} needs a value ({name}=...), in {arg!r}")
            opts[name] = True
        elif isinstance(default, bool):
            if value.lower() not in ("true", "false", "1", "0"):
                raise ValueError(f"config option {name}={value!r}: expected true or false")
            opts[name] = value.lower() in ("true", "1")
        else:
            opts[name] = type(default)(value) if default is not None else value
    return opts


# The paper's ablation rows (methods.md 3.9) as config.harness switches; `no_critic_no_memory` is the cumulative
# row ("- critic - memory"); `no_memory` alone is a supplementary row, not one of the paper's.
ABLATIONS = {
    "": {},
    "no_critic": {"no_critic": True},
    "no_critic_no_memory": {"no_critic": True, "no_memory": True},
    "no_memory": {"no_memory": True},
    "only_guidance": {"only_guidance": True},
    "only_rubric": {"only_rubric": True},
    "only_sampling": {"only_sampling": True},
    # Interface replacement (3.9.4): one interface runs a published rule, the other two HarnessRL's mechanism.
    "sec_sampling": {"sampling_rule": "sec"},
    "ruscarl_guidance": {"guidance_rule": "ruscarl"},
    "evorubric_rubric": {"rubric_rule": "evorubric"},
}


BANDIT_METHODS = ("harnessbandit", "mixture", "mixture2")


def apply_method_defaults(c):
    """What a method's paper fixes beyond its parts: HarnessBandit and its mixtures train with Dr.GRPO's
    leave-one-out baseline (methods.md 2.3, 'rloo'); returns the config."""
    if c.method in BANDIT_METHODS:
        c.advantage = "rloo"
    return c


def apply_ablation(c, name: str):
    """Sets the config.harness switches of ablation `name` (ABLATIONS); returns the config."""
    if name not in ABLATIONS:
        raise ValueError(f"ablation={name!r}: known ablations {', '.join(sorted(k for k in ABLATIONS if k))}")
    c.harness.update(ABLATIONS[name])
    return c


def get_config(arg=None):
    from harnessrl_jax.evolver import AttributorConfig, ProposerConfig
    from harnessrl_jax.methods.amaris import AMARISConfig
    from harnessrl_jax.methods.coca import CoCAConfig
    from harnessrl_jax.methods.evorubric import EvoRubricConfig
    from harnessrl_jax.methods.harnessbandit import BanditConfig
    from harnessrl_jax.methods.mixture import MixtureConfig
    from harnessrl_jax.methods.ruscarl import RuscaRLConfig
    from harnessrl_jax.methods.sec import SECConfig
    from harnessrl_jax.methods.skillrl import SkillRLConfig

    del arg
    c = ml_collections.ConfigDict()
    c.seed = 0
    # harnessrl_jax.methods: grpo (every interface frozen) | harnessrl; each method is a description of parts.
    c.method = "grpo"  # or ruscarl | skillrl | evorubric | amaris | amaris_pp | sec (methods.md 3) | coca (1)
    c.total_steps = 500  # HarnessRL: 500 GRPO steps

    # Policy: a preset name or path for load_pretrained, or "tiny" (random, character vocabulary).
    c.model_name = "smollm2-135m-instruct"
    # scan_layers False: the layers unrolled (llama family), ~10% faster updates without remat at a compile time
    # that grows with depth (models/llama.py ModelConfig.scan_layers); keep it True with remat.
    c.model = dict(compute_dtype="float32", remat=False, scan_layers=True, init_std=0.02)

    # Tasks: "bundled" reads a set shipped with the package (harnessrl_jax/data/<name>/<split>.jsonl), "jsonl"
    # any task file (rubric.schema.load_tasks), "toy" builds the letter tasks in code. `sampler`: 'harness' draws
    # i.i.d. from the harness's Cat(p_t) (every method, so methods differ only in their parts); 'epoch' draws
    # uniformly without replacement per epoch (only where the sampling interface is frozen). `domain` keeps one
    # domain's tasks; `subset` n > 0 trains on a seeded random n of them (a short run then draws each several times).
    c.tasks = dict(source="bundled", name="mini", split="train", path="", letters="q", thresholds=(1, 3),
                   sampler="harness", domain="", subset=0)

    # Rollouts (HarnessRL: 512 tasks x J = 8 per step, temperature 1.0).
    c.tasks_per_step = 512
    c.num_generations = 8
    c.max_prompt_len = 512
    c.max_new_tokens = 512
    c.temperature = 1.0
    c.top_p = 1.0
    c.top_k = 0

    # GRPO.
    c.advantage = "grpo"  # grpo | dr_grpo | rloo (rl.grpo.ADVANTAGE_FNS)
    c.loss = dict(name="grpo", clip_low=0.2, clip_high=0.2, kl_coef=0.001, agg="token-mean", tis_cap=0.0,
                  log_ratio_clip=20.0)  # tis_cap 0: truncated importance sampling off
    c.optim = dict(lr=1e-6, schedule="constant", warmup_steps=0, end_lr_factor=0.0, b1=0.9, b2=0.999, eps=1e-8,
                   weight_decay=0.0, max_grad_norm=1.0)
    c.optim.total_steps = c.get_ref("total_steps")
    c.mini_batches = 1  # optimiser updates per rollout batch; > 1 makes later updates off-policy (clipped ratio)
    c.micro_batches = 1  # slices per update, gradients summed: memory, not maths
    # train batch width: 0 pads every row to the prompt budget + max_new_tokens (one compile of the step); n > 0
    # to the step's longest row rounded up to a multiple of n (one compile per width; less padding to run over)
    c.train_seq_bucket = 0

    # Mesh over all devices (num_devices 0) or the first num_devices; -1 takes what the others leave.
    c.mesh = dict(data=1, fsdp=-1, tensor=1, num_devices=0)

    # The harness and its evolver. Which interfaces move is the method's (grpo: none; harnessrl: all three, or one
    # with only_guidance / only_rubric / only_sampling); the attributor runs for every method (failure shares are
    # measured the same way for all). Ablations: no_critic (every valid candidate accepted unmeasured), no_memory
    # (no time or semantic index: the attributor judges each group alone, no donors, no update history).
    c.harness = dict(
        no_critic=False, no_memory=False, only_guidance=False, only_rubric=False, only_sampling=False,
        # 'guided': the loss sees the prompt the rollout was sampled in (the guidance fields included);
        # 'bare': the completion is re-packed after the bare prompt (RuscaRL), so train/engine_gap then measures
        # the context shift between the two.
        loss_context="guided",
        # 'before': this step's advantages use the rubric the rollouts were graded with; 'after': regrade them with
        # the rubric the critic accepted this step before the train step.
        advantages_rubric="before",
        # Dataset reference responses describe the corpus only (paper sec. 5.1): nothing reads them unless this is
        # on (never in a paper config).
        use_dataset_reference=False,
        cold_start="",  # path of a cold_start.json (bands, gammas, anchors, task-saturation threshold)
        guidance_band=(10.2, 28.0), rubric_band=(3.1, 28.0),  # the paper's calibrated bands, reward points
        sampling_gate="previous",  # critic condition (iv): 'previous' (paper) | 'current' | 'off'
        rounds=3,  # B
        # A hard filter rejecting, unmeasured, a candidate that would undo an update accepted within this many of
        # the task's last draws; 0 (default) leaves reversals to the proposer (which sees the update history) and
        # the critic, so the reversal rate measures them.
        reversal_filter=0,
        max_guidance_tokens=256,  # prompt budget for mounted fields (render.fit_fields shortens, else bare)
        # 'rule' (the CPU default): thresholds, keywords, merges, reweights; 'llm': the evolver model writes
        # guidance and rubric candidates (evolver/prompts/proposer.txt; sampling stays with the rules). The same
        # switch gives every other method's LLM component (SkillRL's teacher, EvoRubric's generator and
        # meta-verifier, AMARIS's analyst and reviser) the evolver model, or their rule fallbacks (AMB-3.1).
        proposer="rule",
        llm_check=False,  # the attributor's LLM hacking check (evolver/prompts/hacking_check.txt) on the evolver model
        attributor=dataclasses.asdict(AttributorConfig()),  # evolver.attributor.AttributorConfig, every threshold
        rules=dataclasses.asdict(ProposerConfig()),  # evolver.rule_proposer.ProposerConfig
        # Interface replacement (methods.md 3.9.4): a published rule in place of HarnessRL's on one interface.
        sampling_rule="harnessrl",  # 'harnessrl' | 'sec'
        guidance_rule="harnessrl",  # 'harnessrl' | 'ruscarl'
        rubric_rule="harnessrl",  # 'harnessrl' | 'evorubric'
        # True: the critic measures the replaced rule's harness actions, as it measured that interface's before
        # (the reading; only EvoRubric's rubric updates are actions); False: the rule runs as published
        # (AMB-3.18).
        gate_replaced_rule=True,
    )
    # The published methods' own settings (harnessrl_jax/methods/<name>.py; every threshold, methods.md 3.2-3.7).
    c.ruscarl = dataclasses.asdict(RuscaRLConfig())
    c.sec = dataclasses.asdict(SECConfig())
    c.skillrl = dataclasses.asdict(SkillRLConfig())
    c.evorubric = dataclasses.asdict(EvoRubricConfig())
    c.amaris = dataclasses.asdict(AMARISConfig())
    # CoCA (methods.md 1.11): groups (G_N, G_G) split config.num_generations (the paper's 12 rollouts: (6, 6));
    # learnable_rule / regress_margin / learnable_margin the five states (AMB-1.2); frontier_margin delta_F (reward
    # points, strict >); topk k and distill_coef lambda_D of the distillation term; distill_on 'current_frontier'
    # (AMB-1.5) | 'guided_frontier' | 'all_normal'; teacher_demo (the Guided Frontier in the teacher's context);
    # guided_gate 'dynamic' | 'always' (D.4); pooled_baseline (AMB-1.8); calibrate False: "- calibration".
    c.coca = dataclasses.asdict(CoCAConfig())
    # HarnessBandit (methods.md 2): the arms (methods.arms: six prompt harnesses, or snapshot:PATH of a frozen
    # HarnessRL harness), the held-out arm, every scheduler constant, the gradient sketch and the pass threshold of
    # its evaluation; the mixture baselines' arms (empty: bandit.arms) and pair (AMB-2.4).
    c.bandit = dataclasses.asdict(BanditConfig())
    c.mixture = dataclasses.asdict(MixtureConfig())
    # The memory: record store (time index) and semantic index over criterion texts. `min_cosine` is the donor
    # threshold and the near-duplicate threshold of the rule proposer; it is calibrated per embedder
    # (`calibrated_for` names the one it was set for: the paper's 0.82 is bge-base-en-v1.5's; 0.82 for the bundled
    # all-MiniLM-L6-v2 was set on this project's paraphrase / near-miss pairs, tests/memory/test_semantic.py).
    c.memory = dict(embedder="default", min_cosine=0.82, calibrated_for="all-MiniLM-L6-v2", top_k=4, examples=2)
    # The evolver's model (proposer='llm', llm_check): an OpenAI-compatible server; an empty base_url and model take
    # config.judge's.
    # `api_key_env` names the environment variable that holds the key (never the key: config.json records it).
    # A failed call is asked again after outage_pause_s seconds, up to outage_retries times; a model still down
    # then stops the run with a checkpoint (harnessrl_jax.failures).
    c.evolver_model = dict(base_url="", model="", api_key_env="", structured_output="", max_tokens=1024,
                           outage_pause_s=30.0, outage_retries=3)
    # The judge. Criteria tagged verifier:rule always go to the rule checkers; the others go to `kind`: 'rule' (no
    # LLM judge: they are dropped from the training rubric at start-up, counted in judge/dropped_llm_criteria),
    # 'openai' (an OpenAI-compatible server at base_url: SGLang, vLLM, llama.cpp) or 'anthropic' (the Messages API;
    # base_url optional, key from api_key_env); several servers of one model are comma-separated base URLs.
    # `api_key_env` names the environment variable holding the key, never the key. Outages (harnessrl_jax.failures):
    # a batch of LLM-judged cells (a step's scoring, a critic regrade) with more than max_failed_fraction of them
    # unanswered (error, timeout) is asked again after outage_pause_s seconds, up to outage_retries times; a judge
    # still down stops the run with a checkpoint of the last complete step. Unparsed answers are counted, not retried.
    # max_retries, timeout_s and max_concurrency are the HTTP client's own: retries of one request (with backoff),
    # its read timeout, and calls in flight at once.
    c.judge = dict(kind="rule", base_url="", model="", api_key_env="", structured_output="",
                   max_retries=3, timeout_s=60.0, max_concurrency=8,
                   max_failed_fraction=0.02, outage_pause_s=30.0, outage_retries=3)

    # Rollout engine: 'jax' (in-process, the CPU default) or 'sglang' (SGLang servers over their native API,
    # rollout/sglang.py). For 'sglang': base_urls, one or several comma-separated server roots; weights_dir, where
    # each weight version is written for /update_weights_from_disk (a path every server can read); export_dtype,
    # the dtype written there. For 'jax': min_batch, the fewest prompts a call is padded to (batch buckets are
    # powers of two from it; see rollout/jax_engine.py).
    c.rollout = dict(engine="jax", base_urls="", weights_dir="", export_dtype="bfloat16", chunk_rows=64,
                     timeout_s=3600.0, min_batch=1)

    c.report = True  # write report.html (launch/report.py) into the run directory at the end

    # min_free_mb: the free space the workdir's file system must have at start-up (checkpoints, memory, logs).
    c.checkpoint = dict(every=50, max_to_keep=3, async_save=True, min_free_mb=1024.0)
    return c
