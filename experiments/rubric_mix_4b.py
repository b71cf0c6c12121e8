"""HarnessRL at the paper's scale: Qwen3.5-4B on Rubric-Mix-10k, 512 tasks x J = 8 per step, 500 steps, rollouts
and judging on SGLang servers.

    python launch/plan.py --config=experiments/rubric_mix_4b.py --devices=128          # memory / FLOPs per device
    python launch/cold_start.py --config=experiments/rubric_mix_4b.py --out=$RUN/cold_start.json \\
        --config.model_name=/models/Qwen3.5-4B --config.tasks.path=/data/rubric_mix_10k.jsonl \\
        --config.rollout.base_urls=http://gen0:30000,http://gen1:30000 --config.rollout.weights_dir=/shared/w \\
        --config.judge.base_url=http://judge0:30000/v1,http://judge1:30000/v1 \\
        --config.memory.embedder=/models/bge-base-en-v1.5
    python launch/train.py --config=experiments/rubric_mix_4b.py --workdir=$RUN \\
        --config.model_name=/models/Qwen3.5-4B --config.tasks.path=/data/rubric_mix_10k.jsonl \\
        --config.rollout.base_urls=http://gen0:30000,http://gen1:30000 --config.rollout.weights_dir=/shared/w \\
        --config.judge.base_url=http://judge0:30000/v1,http://judge1:30000/v1 \\
        --config.memory.embedder=/models/bge-base-en-v1.5 --config.harness.cold_start=$RUN/cold_start.json
    python launch/train.py --config=experiments/rubric_mix_4b.py:method=grpo ...         # the GRPO baseline
    python launch/train.py --config=experiments/rubric_mix_4b.py:ablation=no_critic_no_memory ...   # an ablation row
    python launch/train.py --config=experiments/rubric_mix_4b.py:cpu --workdir=/tmp/rm4b  # every setting, on a CPU

Options: `method=NAME` (harnessrl by default), `ablation=NAME` (base.ABLATIONS), `cpu`: every setting above except
what cannot run on a CPU (a tiny random Qwen3.5, the bundled mini tasks, 2 tasks x J = 4 with 32 new tokens, float32,
the in-process engine, 8 fake CPU devices, rule criteria and the rule proposer, the bundled MiniLM with its own
threshold). Nothing is downloaded: model_name is a local HF directory, tasks.path a local JSONL; the judge and the
evolver model are SGLang servers of gemma-4-31B-it; third_party/sglang/README.md starts them on 16 x 8 H100.
"""

from experiments import base


def get_config(arg=None):
    opts = base.parse_arg(arg, method="harnessrl", ablation="", cpu=False)
    c = base.get_config()
    c.method = opts.method
    c.total_steps = 500
    c.model_name = "qwen3.5-4b"  # shapes only: point it at a local Qwen3.5-4B directory to train
    c.model.update(compute_dtype="bfloat16", remat=True)
    c.tasks.source = "jsonl"
    c.tasks.path = ""  # Rubric-Mix-10k (or any task JSONL): --config.tasks.path=...

    c.tasks_per_step = 512
    c.num_generations = 8
    c.max_prompt_len = 1024
    c.max_new_tokens = 2048
    c.temperature = 1.0

    c.optim.lr = 1e-6
    c.loss.kl_coef = 0.001
    c.micro_batches = 16  # 2 rows x 3584 tokens per device per slice: the 248k-vocabulary logits dominate
    c.mesh.update(data=1, fsdp=-1, tensor=1, num_devices=0)
    c.harness.max_guidance_tokens = 512
    c.harness.proposer = "llm"
    c.harness.llm_check = True
    # The paper's embedder and its threshold: --config.memory.embedder=/path/to/bge-base-en-v1.5
    c.memory.embedder = "bge-base-en-v1.5"
    c.memory.min_cosine = 0.82
    c.memory.calibrated_for = "bge-base-en-v1.5"
    c.checkpoint.update(every=25, max_to_keep=4, async_save=True)

    # Rollouts on SGLang servers (one per H100); weights reach them through a shared directory.
    c.rollout.update(engine="sglang", export_dtype="bfloat16", chunk_rows=64, timeout_s=3600.0)
    # The judge: SGLang servers of the judge model (OpenAI-compatible, comma-separated base URLs); a task's calls
    # go to one server so its prefix cache holds the task's prompt; max_concurrency is calls in flight in total.
    c.judge.update(kind="openai", model="gemma-4-31b-it", structured_output="json_schema", max_concurrency=512)
    if opts.cpu:
        cpu(c)
    return base.apply_ablation(base.apply_method_defaults(c), opts.ablation)


def cpu(c):
    """The same experiment sized for a CPU machine (see the module docstring); shared by rubric_mix_9b.py."""
    c.total_steps = 4
    c.model_name = "qwen3.5-tiny"
    c.model.update(compute_dtype="float32", remat=True)
    c.tasks.source = "bundled"
    c.tasks.name = "mini"
    c.tasks.split = "train"
    c.tasks.path = ""
    c.tasks_per_step = 2
    c.num_generations = 4
    c.max_prompt_len = 128  # the mini set's longest prompt is ~105 tokens under SmolLM2's chat template
    c.max_new_tokens = 32
    c.micro_batches = 1
    c.mesh.update(data=1, fsdp=-1, tensor=1, num_devices=0)
    c.harness.max_guidance_tokens = 128
    c.checkpoint.update(every=2, max_to_keep=2, async_save=False)
    c.rollout.engine = "jax"
    # No model server here: rule criteria, the rule proposer and rule-only hacking signals, and the bundled MiniLM
    # with the threshold calibrated for it.
    c.judge.update(kind="rule", base_url="", model="")
    c.harness.proposer, c.harness.llm_check = "rule", False
    c.memory.update(embedder="default", min_cosine=0.82, calibrated_for="all-MiniLM-L6-v2")
    return c
