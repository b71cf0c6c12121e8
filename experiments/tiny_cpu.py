"""Tiny random model learning a toy rule task on the CPU; seconds per step.

    python launch/train.py --config=experiments/tiny_cpu.py --workdir=/tmp/tiny_cpu
    python launch/train.py --config=experiments/tiny_cpu.py:method=harnessrl,tasks=harness --workdir=/tmp/tiny_h

Options: `method=NAME` (any registered method, grpo by default); `ablation=NAME` (base.ABLATIONS); `tasks=letters`
(the learnable letter task, the default) or `tasks=harness` (`toy.harness_tasks()`: a varying, a saturated and a
blind criterion, 6 steps, so every evolver path runs in seconds). The memory is the record store only (no
embedding model).

A 2-layer model over a character vocabulary (harnessrl_jax.toy) is asked "say q"; its rubric gives a point for at
least one 'q' and a point for at least three in 8 tokens. Reward starts low (uniform sampling) and passes 0.8
within 30 steps (tests/test_train.py holds it to that).
"""

from experiments import base
from harnessrl_jax import methods


def get_config(arg=None):
    opts = base.parse_arg(arg, method="grpo", tasks="letters", ablation="")
    c = base.get_config()
    c.method = opts.method
    c.total_steps = 40
    c.model_name = "tiny"
    c.tasks.source = "toy"
    c.tasks.letters = "q"
    c.tasks.thresholds = (1, 3)

    c.tasks_per_step = 4
    c.num_generations = 8
    c.max_prompt_len = 16
    c.max_new_tokens = 8

    # A random model needs a large step size; the KL anchor to a random reference would only slow it.
    c.loss.kl_coef = 0.0
    c.optim.lr = 3e-3
    c.mesh.num_devices = 1
    c.checkpoint.every = 10
    c.memory.embedder = ""  # the time index only: no embedding model in the fast tests
    c.sec.arms = "task"  # no cold start here: SEC's arms are the tasks themselves
    c.skillrl.evolve_every = 2  # the bank evolves within a short run
    c.bandit.warmup = 6  # one round-robin pass over the six arms, then the bandit selects
    c.bandit.sketch_dim = 4096
    # One token per character: a <criterion> and a <critique> take ~130 tokens, a <reference> up to 600 more (cut
    # to fit by render.fit_fields), so guidance is sampled as proposed rather than dropped for length.
    c.harness.max_guidance_tokens = 320
    if opts.tasks == "harness":
        c.total_steps = 6
        c.tasks.source = "toy_harness"
        c.tasks_per_step = 2
    elif opts.tasks != "letters":
        raise ValueError(f"tiny_cpu.py: tasks={opts.tasks!r}; known: letters, harness")
    # CoCA's rollout budget split evenly between its query-only and rubric-guided groups (for every method, so a
    # comparison's arm can switch to coca without changing the budget)
    c.coca.groups = (c.num_generations // 2, c.num_generations - c.num_generations // 2)
    return base.apply_ablation(methods.apply_defaults(c), opts.ablation)
