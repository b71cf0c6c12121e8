"""Defaults every experiment starts from; not a runnable config by itself.

Experiments call `get_config()` here and override what differs. Parts are chosen by name (model_name, method,
tasks.source, advantage, loss.name) and each part's own settings sit in the sub-dict beside its name. A config's
argument is a comma-separated list of options (`rubric_mix_4b.py:cpu,method=grpo`), parsed by `parse_arg`.
"""

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


def get_config(arg=None):
    del arg
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.method = "grpo"  # harnessrl_jax.methods: grpo (every interface frozen) | harnessrl
    c.total_steps = 500  # HarnessRL: 500 GRPO steps

    # Policy: a preset name or path for load_pretrained, or "tiny" (random, character vocabulary).
    c.model_name = "smollm2-135m-instruct"
    c.model = dict(compute_dtype="float32", remat=False, init_std=0.02)

    # Tasks: "bundled" reads a set shipped with the package (harnessrl_jax/data/<name>/<split>.jsonl), "jsonl"
    # any task file (rubric.schema.load_tasks), "toy" builds the letter tasks in code.
    c.tasks = dict(source="bundled", name="mini", split="train", path="", letters="q", thresholds=(1, 3))

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

    # Mesh over all devices (num_devices 0) or the first num_devices; -1 takes what the others leave.
    c.mesh = dict(data=1, fsdp=-1, tensor=1, num_devices=0)

    # The harness (method=harnessrl); ignored by grpo. Ablations: no_critic (every valid candidate accepted
    # unmeasured), no_memory (no time or semantic index), only_guidance / only_rubric (the other interfaces frozen).
    c.harness = dict(
        no_critic=False, no_memory=False, only_guidance=False, only_rubric=False,
        # 'guided': the loss sees the prompt the rollout was sampled in (the guidance fields included);
        # 'bare': the completion is re-packed after the bare prompt (RuscaRL), so train/engine_gap then measures
        # the context shift between the two.
        loss_context="guided",
        # 'before': this step's advantages use the rubric the rollouts were graded with; 'after': regrade them with
        # the rubric the critic accepted this step before the train step.
        advantages_rubric="before",
        cold_start="",  # path of a cold_start.json (bands, task-saturation threshold); "" = the values below
        guidance_band=(10.2, 28.0), rubric_band=(3.1, 28.0),  # the paper's calibrated bands, reward points
        sampling_gate="previous",  # critic condition (iv): 'previous' (paper) | 'current' | 'off'
        rounds=3,  # B
        embedder="default",  # semantic index: the bundled MiniLM ("default"), a local model path, or "" (none)
        max_guidance_tokens=256,  # prompt budget for mounted fields; a draw over it is rendered bare (counted)
        # 'rule' (the CPU default): thresholds, reference keywords, merges, reweights; 'llm': the evolver model
        # writes guidance and rubric candidates (evolver/prompts/proposer.txt; sampling stays with the rules).
        proposer="rule",
        llm_check=False,  # the attributor's LLM hacking check (evolver/prompts/hacking_check.txt) on the evolver model
    )
    # The evolver's model (proposer='llm', llm_check): an OpenAI-compatible server; an empty base_url and model take
    # config.judge's.
    c.evolver_model = dict(base_url="", model="", api_key_env="", structured_output="", max_tokens=1024)
    # Judge for criteria not tagged verifier:rule. With no base_url they are dropped from the training rubric at
    # start-up (the count is logged and in metrics as judge/dropped_llm_criteria); with one, they go to an
    # OpenAI-compatible server (SGLang, vLLM, llama.cpp); several servers of one model are comma-separated base URLs.
    # Rule criteria always go to the rule checkers.
    c.judge = dict(base_url="", model="", api_key_env="", structured_output="json_schema")

    # Rollout engine: 'jax' (in-process, the CPU default) or 'sglang' (SGLang servers over their native API,
    # rollout/sglang.py). For 'sglang': base_urls, one or several comma-separated server roots; weights_dir, where
    # each weight version is written for /update_weights_from_disk (a path every server can read); export_dtype,
    # the dtype written there.
    c.rollout = dict(engine="jax", base_urls="", weights_dir="", export_dtype="bfloat16", chunk_rows=64,
                     timeout_s=3600.0)

    c.report = True  # write report.html (launch/report.py) into the run directory at the end

    c.checkpoint = dict(every=50, max_to_keep=3, async_save=True)
    return c
