"""HarnessRL at the paper's scale with Qwen3.5-9B: the 4B experiment (rubric_mix_4b.py) with the larger policy.

    python launch/plan.py --config=experiments/rubric_mix_9b.py --devices=128          # memory / FLOPs per device
    python launch/train.py --config=experiments/rubric_mix_9b.py --workdir=$RUN \\
        --config.model_name=/models/Qwen3.5-9B --config.tasks.path=/data/rubric_mix_10k.jsonl \\
        --config.rollout.base_urls=http://gen0:30000,http://gen1:30000 --config.rollout.weights_dir=/shared/w \\
        --config.judge.base_url=http://judge0:30000/v1,http://judge1:30000/v1
    python launch/train.py --config=experiments/rubric_mix_9b.py:cpu --workdir=/tmp/rm9b  # every setting, on a CPU

Options as rubric_mix_4b.py: `method=NAME`, `ablation=NAME`, `cpu` (the same tiny random Qwen3.5 and CPU sizes). Every setting is the
4B config's except the policy (Qwen3.5-9B: hidden 4096, an untied lm_head).
"""

from experiments import base, rubric_mix_4b


def get_config(arg=None):
    opts = base.parse_arg(arg, method="harnessrl", ablation="", cpu=False)
    c = rubric_mix_4b.get_config(f"method={opts.method},ablation={opts.ablation}")
    c.model_name = "qwen3.5-9b"  # shapes only: point it at a local Qwen3.5-9B directory to train
    if opts.cpu:
        rubric_mix_4b.cpu(c)
    return c
