"""`make demo`: load SmolLM2-135M-Instruct from its GGUF and sample answers to a few prompts on the CPU.

    python launch/demo.py [--n=2] [--max_new_tokens=48]

This grows into the end-to-end HarnessRL run as the trainer and harness land.
"""

from __future__ import annotations

import time

from absl import app, flags, logging

flags.DEFINE_integer("n", 2, "Samples per prompt.")
flags.DEFINE_integer("max_new_tokens", 48, "Token budget per sample.")
flags.DEFINE_float("temperature", 0.7, "Sampling temperature.")
FLAGS = flags.FLAGS

PROMPTS = [
    "In two sentences, why do cows digest cellulose while humans cannot?",
    "Write a short, friendly reminder to drink water. Use no commas.",
    "List three safety tips for using a kitchen knife, as bullet points.",
]


def main(argv):
    del argv
    from harnessrl_jax.models import load_pretrained
    from harnessrl_jax.rollout import JaxEngine

    start = time.perf_counter()
    config, params, tokenizer = load_pretrained("smollm2-135m-instruct")
    logging.info("loaded SmolLM2-135M-Instruct (%.1fM params) in %.1fs", config.num_params() / 1e6,
                 time.perf_counter() - start)
    engine = JaxEngine(config, params, tokenizer)
    prompts = [tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=True) for p in PROMPTS]
    for attempt in ("compile + sample", "sample"):
        start = time.perf_counter()
        out = engine.generate(prompts, n=FLAGS.n, max_new_tokens=FLAGS.max_new_tokens,
                              temperature=FLAGS.temperature, seed=int(start))
        seconds = time.perf_counter() - start
        logging.info("%s: %d samples, %d new tokens in %.1fs (%.1f tok/s)", attempt, out.num_samples,
                     int(out.lengths.sum()), seconds, out.lengths.sum() / seconds)
    for row in range(out.num_samples):
        print(f"\n[{PROMPTS[out.prompt_index[row]]}] ({out.finish_reason[row]}, {out.lengths[row]} tokens, "
              f"mean logprob {out.logprobs[row, :out.lengths[row]].mean():.2f})\n{out.texts[row]}")


if __name__ == "__main__":
    app.run(main)
