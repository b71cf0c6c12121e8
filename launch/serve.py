"""Serve a JAX policy behind SGLang's native HTTP API (/generate, /update_weights_from_disk, ...).

    python launch/serve.py --model=/models/Qwen3.5-4B --port=30000
    python launch/serve.py --model=smollm2-135m-instruct --port=30000 --deterministic

The in-process JAX engine (rollout/jax_engine.py) behind the routes and JSON shapes an SGLang client sends and
reads (rollout/server.py), so `SGLangEngine` and other SGLang clients run against it: on a CPU machine for tests,
or on a TPU where SGLang itself does not run. --model is anything `load_pretrained` takes (a preset name, a .gguf
file, a local HF directory); weights pushed with /update_weights_from_disk must have the same shapes.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags, logging  # noqa: E402

flags.DEFINE_string("model", None, "Preset name, .gguf file or HF directory.")
flags.DEFINE_string("host", "127.0.0.1", "Address to listen on.")
flags.DEFINE_integer("port", 30000, "Port to listen on.")
flags.DEFINE_string("weight_version", "default", "The weight version reported before the first update.")
flags.DEFINE_bool("deterministic", False, "Honour sampling_seed (SGLang's --enable-deterministic-inference).")
flags.DEFINE_integer("context_length", 0, "Context length (0: the model's).")
flags.DEFINE_integer("prompt_bucket", 64, "Prompts are padded to a multiple of this, shorter ones to a multiple "
                     "of 16 (one compile per bucket).")
flags.DEFINE_integer("min_batch", 1, "Calls with fewer rows pad up to this many (a power of two), so they run the "
                     "program of a bigger call instead of compiling their own.")
flags.DEFINE_list("stop_ids", [], "Stop token ids besides the tokenizer's EOS (required without a tokenizer).")
flags.DEFINE_integer("pad_id", -1, "Padding id when the model has no tokenizer (-1: the first stop id).")
flags.DEFINE_string("compute_dtype", "", "Override the compute dtype (float32, bfloat16).")
flags.mark_flag_as_required("model")
FLAGS = flags.FLAGS


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    from harnessrl_jax.models import load_pretrained
    from harnessrl_jax.rollout import JaxEngine
    from harnessrl_jax.rollout.server import NativeServer

    overrides = {"compute_dtype": FLAGS.compute_dtype} if FLAGS.compute_dtype else {}
    config, params, tokenizer = load_pretrained(FLAGS.model, **overrides)
    stop_ids = [int(s) for s in FLAGS.stop_ids]
    if tokenizer is None and not stop_ids:
        raise app.UsageError(f"{FLAGS.model} has no tokenizer files: pass --stop_ids (and --pad_id)")
    if tokenizer is not None:
        stop_ids = [tokenizer.eos_id] + [s for s in stop_ids if s != tokenizer.eos_id]
    pad_id = FLAGS.pad_id if FLAGS.pad_id >= 0 else (stop_ids[0] if tokenizer is None else tokenizer.pad_id)
    engine = JaxEngine(config, params, tokenizer, stop_ids=stop_ids, pad_id=pad_id, prompt_bucket=FLAGS.prompt_bucket,
                       max_context=FLAGS.context_length or None, min_batch=FLAGS.min_batch)
    server = NativeServer(engine, host=FLAGS.host, port=FLAGS.port, model_path=os.path.abspath(FLAGS.model)
                          if os.path.exists(FLAGS.model) else FLAGS.model, weight_version=FLAGS.weight_version,
                          deterministic=FLAGS.deterministic)
    logging.info("serving %s (%s) at %s", FLAGS.model, type(config).__name__, server.url)
    print(f"serving at {server.url}", flush=True)
    try:
        server.serve_forever()
    finally:
        server.close()


if __name__ == "__main__":
    app.run(main)
