"""The planted-failure testbed: the reader policy on a world file (docs/testbed.md); about a second a step.

    python launch/testbed.py --world=harnessrl_jax/data/worlds/default.jsonl --out=runs/testbed
    python launch/train.py --config=experiments/testbed.py:method=harnessrl --workdir=runs/tb_h

Options: `method=NAME` (any registered method, grpo by default), `ablation=NAME` (base.ABLATIONS), `world=PATH` (a
world file, data.world; default: the shipped default world), `steps=N`. The memory is the record store only (no
embedding model), the judge the rule checkers; the oracle is each task's hidden rule rubric, read by the analysis
only (the rule stand-in, metrics.jsonl's oracle/*).
"""

from experiments import base
from harnessrl_jax import methods


def get_config(arg=None):
    opts = base.parse_arg(arg, method="grpo", ablation="", world="", steps=12)
    c = base.get_config()
    c.method = opts.method
    c.total_steps = opts.steps
    c.model_name = "reader"
    c.tasks.source = "world"
    c.tasks.path = opts.world

    c.tasks_per_step = 4
    c.num_generations = 8
    c.max_prompt_len = 16
    c.max_new_tokens = 40

    # A small policy trained from scratch: a large step size; no KL anchor (GRPO's own clip keeps steps small).
    c.loss.kl_coef = 0.0
    c.optim.lr = 5e-4
    c.mesh.num_devices = 1
    c.checkpoint.every = opts.steps
    c.memory.embedder = ""  # the time index only
    c.sec.arms = "task"
    c.skillrl.evolve_every = 2
    # One token per word: a RuscaRL scaffold of a world task's four criteria is ~90 tokens.
    c.harness.max_guidance_tokens = 112
    c.coca.groups = (c.num_generations // 2, c.num_generations - c.num_generations // 2)
    # the policy on every world task, bare prompts, at step 0 and the last step
    c.eval.every = opts.steps
    c.eval.split = "train"
    c.eval.num_samples = 8
    return base.apply_ablation(methods.apply_defaults(c), opts.ablation)
