"""Multi-turn tool use on the shipped workspace tasks, on the CPU: HarnessBandit over six agent harnesses.

    python launch/train.py --config=experiments/agentic_cpu.py:method=harnessbandit --workdir=/tmp/agentic_hb
    python launch/train.py --config=experiments/agentic_cpu.py:method=mixture --workdir=/tmp/agentic_mix6
    python launch/train.py --config=experiments/agentic_cpu.py:method=mixture2 --workdir=/tmp/agentic_mix2
    python launch/train.py --config=experiments/agentic_cpu.py:method=grpo --workdir=/tmp/agentic_grpo
    python launch/agentic_compare.py --workdir=/tmp/agentic_compare      # the four arms x 3 seeds, and the table

Options: `method=NAME` (grpo, harnessbandit, mixture, mixture2); `smoke` (2 steps, a few held-out tasks: the test
suite's run). The policy is the tiny random model over a character vocabulary with tool-call characters
(`tiny_agentic`, the tiny CPU configs' model); `--config.model_name=smollm2-135m-instruct` runs the same on SmolLM2
(minutes per step here). The six training harnesses are agentic.harnesses.TRAIN_HARNESSES; `native_cli` is held out
and only evaluated, at the last step, on the 72 held-out tasks (agentic_eval.json: mean, pass@3, pass^3).
"""

from experiments import base
from harnessrl_jax import methods
from harnessrl_jax.agentic.harnesses import HELDOUT_HARNESS, PAIR, TRAIN_HARNESSES


def get_config(arg=None):
    opts = base.parse_arg(arg, method="harnessbandit", smoke=False)
    c = base.get_config()
    c.method = opts.method
    c.total_steps = 40
    c.model_name = "tiny_agentic"
    c.tasks.source = "agentic"
    c.tasks.split = "train"
    c.tasks_per_step = 4
    c.num_generations = 4

    c.agentic.max_turns = 3
    c.agentic.turn_tokens = 32
    # An episode's opening (system prompt, tool schema, task: at most 275 characters) fits in max_prompt_len; the
    # rest (policy turns and tool results) in max_new_tokens, the train step's completion window.
    c.max_prompt_len = 288
    c.max_new_tokens = 320

    c.bandit.arms = TRAIN_HARNESSES
    c.bandit.heldout_arm = HELDOUT_HARNESS
    c.bandit.warmup = 6  # one round-robin pass over the six harnesses
    c.bandit.sketch_dim = 4096
    c.mixture.pair = PAIR

    c.loss.kl_coef = 0.0
    c.optim.lr = 3e-3
    c.mesh.num_devices = 1
    c.checkpoint.every = 20
    c.memory.embedder = ""
    if opts.smoke:
        c.total_steps = 2
        c.tasks_per_step = 2
        c.num_generations = 2
        c.agentic.max_turns = 2
        c.agentic.turn_tokens = 16
        c.agentic.eval_tasks = 2
        c.agentic.eval_k = 3
        c.bandit.warmup = 1
    return methods.apply_defaults(c)
