"""CoCA and its ablations and variants as options of one config; SmolLM2-135M-Instruct on the bundled
mini set on the CPU by default, the paper's 12-rollout budget split (6, 6).

    python launch/train.py --config=experiments/coca.py --workdir=/tmp/coca
    python launch/train.py --config=experiments/coca.py:variant=no_calibration --workdir=/tmp/coca_nocal
    python launch/train.py --config=experiments/coca.py:tiny,variant=gspo --workdir=/tmp/coca_tiny_gspo
    python launch/compare.py --base_config=experiments/coca.py:tiny --seeds=0,1,2 --out=runs/coca_compare \
        --eval_split=train --arm=grpo --arm=coca --arm=no_calibration=method=coca,coca.calibrate=false \
        --arm=guided_always=method=coca,coca.guided_gate=always --arm=gspo=method=coca,loss.name=gspo

Options: `variant=NAME` (VARIANTS below: the paper's Table 4 ablation rows, D.3 distillation-trajectory and teacher
rows, D.4 gate row, Table 10 allocations, Table 14 loss swaps); `tiny`: the tiny random model on the letter task
(experiments/tiny_cpu.py), seconds per step, with the budget of 8 rollouts split (4, 4). Every CoCA number is in
`config.coca` (experiments/base.py documents each).
"""

from experiments import base

# name -> (config.coca overrides, other overrides as (dotted key, value))
VARIANTS = {
    "": ({}, ()),
    "no_calibration": ({"calibrate": False}, ()),  # Table 4: - rubric calibration
    # Table 4's "- L_FrontierOPSD", as read here: lambda_D = 0 with the gate kept, so a qualified query's Guided rows
    # stay out of the GRPO term too (the frontier's signal is removed whole); the paper does not say. The other
    # reading, the term removed and Guided GRPO on every query, is `no_opsd_guided_all`.
    "no_opsd": ({"distill_coef": 0.0}, ()),
    "no_opsd_guided_all": ({"distill_coef": 0.0, "guided_gate": "always"}, ()),
    "no_guided_grpo": ({"guided_gate": "never"}, ()),  # Table 4: - L_GGRPO
    "gf_trajectory": ({"distill_on": "guided_frontier"}, ()),  # D.3: distil on the Guided Frontier's own tokens
    "no_demo": ({"teacher_demo": False}, ()),  # D.3: no privileged demonstration in the teacher's context
    "guided_always": ({"guided_gate": "always"}, ()),  # D.4: Guided GRPO on every query
    "groups_8_4": ({"groups": (8, 4)}, ()),  # Table 10: the 12-rollout budget as (8, 4)
    "budget_8": ({"groups": (4, 4)}, (("num_generations", 8),)),  # Table 10: CoCA with 8 rollouts
    "gspo": ({}, (("loss.name", "gspo"), ("loss.clip_low", 3e-4), ("loss.clip_high", 4e-4),
                  ("loss.agg", "sequence-mean-token-mean"))),  # Table 14 (GSPO's published clip range)
    "dapo": ({}, (("loss.name", "dapo"), ("loss.clip_high", 0.28), ("loss.kl_coef", 0.0))),  # Table 14
}


def get_config(arg=None):
    opts = base.parse_arg(arg, variant="", tiny=False)
    if opts.variant not in VARIANTS:
        raise ValueError(f"variant={opts.variant!r}: known variants {', '.join(sorted(k for k in VARIANTS if k))}")
    if opts.tiny:
        from experiments import tiny_cpu

        c = tiny_cpu.get_config("method=coca")
    else:
        from experiments import smollm2_cpu

        c = smollm2_cpu.get_config("method=coca")
        c.num_generations = 12
        c.coca.groups = (6, 6)
        c.micro_batches = 4  # 24 rows of SmolLM2's 49k-token logits
    coca, other = VARIANTS[opts.variant]
    c.coca.update(coca)
    for key, value in other:
        section, _, name = key.rpartition(".")
        (c[section] if section else c)[name] = value
    if opts.tiny and "groups" in coca:  # the tiny budget is 8 rollouts: keep the variant's proportions
        g_n = c.num_generations * coca["groups"][0] // sum(coca["groups"])
        c.coca.groups = (g_n, c.num_generations - g_n)
    if opts.tiny and opts.variant == "budget_8":
        c.coca.groups = (4, 4)
    return c
