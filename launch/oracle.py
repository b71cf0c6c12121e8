"""Judges a run's recorded rollout groups with the pairwise oracle: reward-oracle agreement, the pair classes and
oracle scores per step (harnessrl_jax.eval.oracle; analysis only, never seen by training).

    ANTHROPIC_API_KEY=... python launch/oracle.py --workdir=runs/harnessrl-s0              # Claude, the default
    python launch/oracle.py --workdir=runs/grpo-s0 --kind=openai --base_url=http://127.0.0.1:30000/v1 \
        --model=gemma-4-31b-it --steps=476-500

Reads the groups every run keeps in <workdir>/memory (step, task, responses, rewards) and the tasks from its
config.json; judges all C(J, 2) pairs of each group in both orders, and each response against the seed policy's
responses to the same task (--anchors=seed, sampled once and cached; 'first_draw' uses each task's first recorded
group; 'none' skips oracle scores). Answers are stored in <workdir>/oracle/oracle.sqlite, so an interrupted run
resumes without repeating a call. Writes <workdir>/oracle/oracle.jsonl (per step: oracle/agreement,
oracle/pair_*, oracle/score_mean, per-task scores) and oracle/summary.json (totals, the last 25 steps, calls and
tokens), and prints the summary.
"""

from __future__ import annotations

import json
import os
import sys

from absl import flags, logging

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harnessrl_jax import cli, failures  # noqa: E402
from harnessrl_jax.errors import UserError  # noqa: E402

flags.DEFINE_string("workdir", None, "The run directory (its memory/ and config.json).")
flags.DEFINE_enum("kind", "anthropic", ["anthropic", "openai"], "Anthropic's Messages API or an OpenAI-compatible "
                  "server.")
flags.DEFINE_string("model", "claude-sonnet-5", "The oracle model.")
flags.DEFINE_string("base_url", "", "Server URL (OpenAI-compatible: with /v1; Anthropic: a proxy or stand-in).")
flags.DEFINE_string("api_key_env", "", "Environment variable holding the API key (default: ANTHROPIC_API_KEY for "
                    "Anthropic, none for an OpenAI-compatible server).")
flags.DEFINE_string("structured_output", "", "The client's structured-output mode (default: its own).")
flags.DEFINE_string("steps", "", "Steps to judge: 'a-b', a comma list or 'last:N' (default: every recorded step).")
flags.DEFINE_enum("anchors", "seed", ["seed", "first_draw", "none"], "Anchor responses of the oracle score.")
flags.DEFINE_integer("max_workers", 8, "Calls in flight at once.")
flags.DEFINE_float("timeout_s", 120.0, "Per-request timeout.")
flags.DEFINE_float("max_failed_fraction", 0.02, "A step whose share of unanswered calls (through the client's "
                   "retries) exceeds this has them asked again after --outage_pause_s ...")
flags.DEFINE_float("outage_pause_s", 30.0, "... seconds, ...")
flags.DEFINE_integer("outage_retries", 3, "... up to this many times; an oracle still down stops the script (the "
                     "answered calls are kept: rerun to go on).")
flags.mark_flags_as_required(["workdir"])
FLAGS = flags.FLAGS


def main(argv):
    del argv
    from harnessrl_jax.eval import oracle as lib
    from harnessrl_jax.eval.oracle_run import oracle_run, parse_steps, recorded_steps

    settings = {"timeout_s": FLAGS.timeout_s}
    if FLAGS.api_key_env:
        settings["api_key_env"] = FLAGS.api_key_env
    if FLAGS.structured_output:
        settings["structured_output"] = FLAGS.structured_output
    client = lib.make_client(FLAGS.kind, FLAGS.model, base_url=FLAGS.base_url or None, **settings)
    store = os.path.join(FLAGS.workdir, "oracle", "oracle.sqlite")
    oracle = lib.PairwiseOracle(client, store, max_workers=FLAGS.max_workers)
    outage = failures.OutagePolicy(FLAGS.max_failed_fraction, FLAGS.outage_pause_s, FLAGS.outage_retries, "--")
    try:
        steps = parse_steps(FLAGS.steps, recorded_steps(FLAGS.workdir) if FLAGS.steps.startswith("last:") else ())
        summary = oracle_run(FLAGS.workdir, oracle, steps=steps, anchors=FLAGS.anchors, progress=logging.info,
                             outage=outage)
    except failures.ModelOutage as e:
        raise UserError(f"{e}. The answered calls are kept in {store}: once the server answers again, rerun the "
                        f"same command to go on from there") from None
    finally:
        oracle.close()
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    cli.run(main)
