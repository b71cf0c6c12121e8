"""Defaults every experiment starts from; not a runnable config by itself.

Experiments call `get_config()` here and override what differs. Parts are chosen by name (model_name, method,
tasks.source, advantage, loss.name) and each part's own settings sit in the sub-dict beside its name. A config's
argument is a comma-separated list of options (`rubric_mix_4b.py:cpu,method=grpo`), parsed by `parse_arg`.
"""

import ml_collections

from harnessrl_jax import methods, settings


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


# The paper's ablation rows as config.harness switches; `no_critic_no_memory` is the cumulative
# row ("- critic - memory"); `no_memory` alone is a supplementary row, not one of the paper's.
ABLATIONS = {
    "": {},
    "no_critic": {"no_critic": True},
    "no_critic_no_memory": {"no_critic": True, "no_memory": True},
    "no_memory": {"no_memory": True},
    "only_guidance": {"only_guidance": True},
    "only_rubric": {"only_rubric": True},
    "only_sampling": {"only_sampling": True},
    # Interface replacement: one interface runs a published rule, the other two HarnessRL's mechanism.
    "sec_sampling": {"sampling_rule": "sec"},
    "ruscarl_guidance": {"guidance_rule": "ruscarl"},
    "evorubric_rubric": {"rubric_rule": "evorubric"},
}


def apply_ablation(c, name: str):
    """Sets the config.harness switches of ablation `name` (ABLATIONS); returns the config."""
    if name not in ABLATIONS:
        raise ValueError(f"ablation={name!r}: known ablations {', '.join(sorted(k for k in ABLATIONS if k))}")
    c.harness.update(ABLATIONS[name])
    return c


def get_config(arg=None):
    del arg
    c = ml_collections.ConfigDict()
    c.seed = 0
    # A registered method's name (harnessrl_jax.methods: grpo, harnessrl, ruscarl, skillrl, evorubric, amaris,
    # amaris_pp, sec, coca, harnessbandit, mixture, mixture2) or a module path (my_lab.my_method).
    c.method = "grpo"
    c.total_steps = 500  # HarnessRL: 500 GRPO steps

    # Policy: a preset name or path for load_pretrained, or "tiny" (random, character vocabulary); config.model says
    # how it computes.
    c.model_name = "smollm2-135m-instruct"
    c.model = settings.as_dict(settings.ModelSection())
    c.tasks = settings.as_dict(settings.TasksSection())

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
    c.loss = settings.as_dict(settings.SECTIONS["loss"]())
    c.optim = settings.as_dict(settings.SECTIONS["optim"]())
    c.optim.total_steps = c.get_ref("total_steps")
    c.mini_batches = 1  # optimiser updates per rollout batch; > 1 makes later updates off-policy (clipped ratio)
    c.micro_batches = 1  # slices per update, gradients summed: memory, not maths
    # train batch width: 0 pads every row to the prompt budget + max_new_tokens (one compile of the step); n > 0
    # to the step's longest row rounded up to a multiple of n (one compile per width; less padding to run over)
    c.train_seq_bucket = 0
    c.mesh = settings.as_dict(settings.MeshSection())

    # The harness and its evolver (harnessrl_jax/settings.py HarnessSection: every threshold and switch), the
    # memory, the evolver model, the judge, the rollout engine and checkpoints: each section's fields and defaults
    # are its dataclass's.
    c.harness = settings.as_dict(settings.HarnessSection())
    c.memory = settings.as_dict(settings.MemorySection())
    c.evolver_model = settings.as_dict(settings.EvolverModelSection())
    c.judge = settings.as_dict(settings.JudgeSection())
    c.rollout = settings.as_dict(settings.RolloutSection())
    c.checkpoint = settings.as_dict(settings.CheckpointSection())
    c.eval = settings.as_dict(settings.EvalSection())  # evaluation during training (evals.jsonl)
    # Each method's own settings (harnessrl_jax/methods/<name>.py), as its module registered them.
    for key, cls in sorted(methods.SETTINGS.items()):
        c[key] = settings.as_dict(cls())

    c.report = True  # write report.html (launch/report.py) into the run directory at the end
    # also write every metrics.jsonl scalar to <workdir>/tensorboard/ (harnessrl_jax.tensorboard_log; the
    # `tensorboard` extra); a config key, not a train.py flag, so compare.py's runs (train.train) get it too
    c.tensorboard = False
    return c
