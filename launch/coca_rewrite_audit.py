"""Audits the rubric rewrites of a CoCA run with an LLM that is not the rewriter: the intent preservation rate
(IPR) and the difficulty direction accuracy (DDA) of the paper's Table 15 (harnessrl_jax.eval.coca_audit).

    python launch/coca_rewrite_audit.py --workdir=runs/coca --kind=openai \\
        --base_url=http://127.0.0.1:30000/v1 --model=gemma-4-31b-it --sample=500
    ANTHROPIC_API_KEY=... python launch/coca_rewrite_audit.py --workdir=runs/coca --sample=500

Reads <workdir>/coca.jsonl (valid rewrites only), samples --sample of them (--seed), writes
<workdir>/coca_audit.json (the rates and every answer) and prints the rates.
"""

from __future__ import annotations

import json
import os
import sys

from absl import flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harnessrl_jax import cli  # noqa: E402
from harnessrl_jax.errors import UserError  # noqa: E402

flags.DEFINE_string("workdir", None, "The CoCA run directory (its coca.jsonl).")
flags.DEFINE_enum("kind", "anthropic", ["anthropic", "openai"], "Anthropic's Messages API or an OpenAI-compatible "
                  "server.")
flags.DEFINE_string("model", "claude-sonnet-5", "The auditor model (not the rewriter).")
flags.DEFINE_string("base_url", "", "Server URL (OpenAI-compatible: with /v1).")
flags.DEFINE_string("api_key_env", "", "Environment variable holding the API key.")
flags.DEFINE_integer("sample", 500, "Rewrites to audit (0: all).")
flags.DEFINE_integer("seed", 0, "Seed of the sample.")
flags.DEFINE_integer("max_workers", 8, "Calls in flight at once.")
FLAGS = flags.FLAGS


def main(argv):
    del argv
    from harnessrl_jax.eval import coca_audit
    from harnessrl_jax.eval.oracle import make_client

    path = os.path.join(FLAGS.workdir or "", "coca.jsonl")
    if not os.path.isfile(path):
        raise UserError(f"--workdir={FLAGS.workdir}: no coca.jsonl there (a CoCA run writes it)")
    settings = {"api_key_env": FLAGS.api_key_env} if FLAGS.api_key_env else {}
    client = make_client(FLAGS.kind, FLAGS.model, base_url=FLAGS.base_url or None, **settings)
    try:
        result = coca_audit.audit(coca_audit.valid_rewrites(path), client, sample=FLAGS.sample, seed=FLAGS.seed,
                                  max_workers=FLAGS.max_workers)
    finally:
        client.close()
    with open(os.path.join(FLAGS.workdir, "coca_audit.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    print(json.dumps({k: result[k] for k in ("ipr", "dda", "answered", "asked")}))


if __name__ == "__main__":
    flags.mark_flag_as_required("workdir")
    cli.run(main)
