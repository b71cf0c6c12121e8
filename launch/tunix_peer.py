"""google-tunix (the JAX post-training library) on this project's weights: its Llama model, its GRPO update and its
sampler, for launch/bench_train.py --tunix and launch/bench_sampler.py --tunix (the benchmark environment,
`make bench-env`; tunix is not a dependency of the package).

The model is tunix's own `models.llama3` built by its safetensors loader from the HF checkpoint `models.export`
writes of the same params, so both sides hold the same float32 weights. The update is the jitted train step of
tunix's RL actor trainer (`rl.trainer.Trainer`, a `PeftTrainer`) with the `grpo` policy loss from its function
registry, wired as `GRPOLearner.__init__` wires it; the sampler is `generate.sampler.Sampler` called as tunix's
`VanillaRollout.generate` calls it.
"""

from __future__ import annotations

import tempfile
import time

from harnessrl_jax.timing import CompileTimer


def warm_up(fn, tries: int = 3) -> list[tuple[float, int]]:
    """(seconds, XLA compiles) of calls of `fn` until one compiles nothing (at most `tries`): the warm-up before
    timing, since a jitted step whose first call returns its state with other shardings or layouts than it was
    given compiles again on the second."""
    calls = []
    while len(calls) < tries and (not calls or calls[-1][1]):
        with CompileTimer() as compiles:
            start = time.perf_counter()
            fn()
            calls.append((time.perf_counter() - start, compiles.compiles))
    return calls


def version() -> str:
    from importlib import metadata

    return metadata.version("google-tunix")


def llama_model(config, params):
    """tunix's Llama (models.llama3.Llama3) with the shapes of `config` and the weights of `params`, float32."""
    import jax.numpy as jnp
    from tunix.models.llama3 import model as llama3
    from tunix.models.llama3 import params as llama3_params

    from harnessrl_jax.models.export import export_hf

    if getattr(config, "model_type", "llama") != "llama" or config.qk_norm or config.attention_bias:
        raise ValueError("the tunix peer is set up for plain Llama shapes (SmolLM2): no QK-norm, no attention bias")
    tunix_config = llama3.ModelConfig(
        num_layers=config.num_layers, vocab_size=config.vocab_size, embed_dim=config.hidden_size,
        hidden_dim=config.intermediate_size, num_heads=config.num_heads, head_dim=config.head_dim,
        num_kv_heads=config.num_kv_heads, rope_theta=int(config.rope_theta), norm_eps=config.rms_norm_eps,
        weight_tying=config.tie_embeddings)
    with tempfile.TemporaryDirectory(prefix="tunix_peer_") as directory:
        export_hf(config, params, directory, dtype="float32")
        return llama3_params.create_model_from_safe_tensors(directory, tunix_config, dtype=jnp.float32)


class GRPOUpdate:
    """One tunix GRPO update (forward, backward, optimiser) on a fixed batch, through its actor trainer's jitted step.

    `tokens` [B, T] int32 hold no pad id; the first `prompt` columns are the prompt, the rest the completion (all
    real tokens), `advantages` [B]. One iteration per batch (old logprobs = the forward's own, detached), no
    reference model (beta = 0), clipping epsilon = `clip` on both sides, `agg` as tunix's loss_agg_mode."""

    def __init__(self, model, optimizer, tokens, advantages, *, prompt: int, pad_id: int, eos_id: int,
                 num_generations: int, clip: float, temperature: float, agg: str = "token-mean"):
        import jax.numpy as jnp
        import numpy as np
        from tunix.rl import function_registry
        from tunix.rl import trainer as rl_trainer
        from tunix.rl.grpo import grpo_learner
        from tunix.sft import peft_trainer

        if np.any(np.asarray(tokens) == pad_id):
            raise ValueError("tunix derives its masks from the pad id: the batch must not contain it")
        self.algo_config = grpo_learner.GRPOConfig(
            num_generations=num_generations, num_iterations=1, beta=0.0, epsilon=clip, loss_agg_mode=agg)
        self.algo_config.temperature = temperature  # GRPOLearner copies it from the rollout config
        policy_loss_fn = function_registry.get_policy_loss_fn(self.algo_config.policy_loss_fn)
        self.trainer = rl_trainer.Trainer(
            model, optimizer, peft_trainer.TrainingConfig(eval_every_n_steps=1 << 30),
            custom_checkpoint_metadata_fn=lambda: {})
        self.trainer.with_loss_fn(
            lambda model, train_example, algo_config: policy_loss_fn(
                model, train_example, algo_config=algo_config, pad_id=pad_id, eos_id=eos_id),
            has_aux=True)
        self.trainer.with_gen_model_input_fn(lambda x: {"train_example": x, "algo_config": self.algo_config})
        # PeftTrainer.train's own jitted step (nnx.jit, the optimiser donated, the graph cached)
        self.train_step, _ = self.trainer.jit_train_and_eval_step(cache_nnx_graph=True)
        tokens = np.asarray(tokens, np.int32)
        prompt_ids, completion_ids = jnp.asarray(tokens[:, :prompt]), jnp.asarray(tokens[:, prompt:])
        self.example = grpo_learner.TrainExample(
            prompt_ids=prompt_ids, prompt_mask=prompt_ids != pad_id, completion_ids=completion_ids,
            completion_mask=completion_ids != pad_id, advantages=jnp.asarray(advantages, jnp.float32),
            ref_per_token_logps=None, old_per_token_logps=None)

    def step(self) -> float:
        """One update; its gradient norm (before clipping)."""
        import jax

        loss, _, grad_norm = self.train_step(self.example)
        jax.block_until_ready((loss, grad_norm))
        return float(grad_norm)


class IdsTokenizer:
    """A tokenizer for tunix's sampler (its TokenizerAdapter's plain protocol) that hands it prompts already as
    this project's token ids, so both samplers start from the same ids: `encode` looks a prompt's key up; no BOS
    is added (the chat template's ids are the whole prompt). tunix takes every pad id in a row for padding (its
    masks and positions come from `tokens != pad_id`), and SmolLM2's pad id is its <|im_end|>, which every chat
    prompt holds: the pad id it is given is the lowest id in no prompt."""

    def __init__(self, tokenizer, prompts: dict[str, list[int]]):
        self._tokenizer = tokenizer
        self._prompts = prompts
        used = {t for ids in prompts.values() for t in ids}
        self._pad_id = tokenizer.pad_id if tokenizer.pad_id not in used else min(set(range(len(used) + 1)) - used)

    def encode(self, text: str, **_) -> list[int]:
        return list(self._prompts[text])

    def decode(self, ids, **_) -> str:
        return self._tokenizer.decode(list(ids))

    def bos_id(self):
        return None

    def eos_id(self) -> int:
        return self._tokenizer.eos_id

    def pad_id(self) -> int:
        return self._pad_id


class Sampler:
    """tunix's sampler over `model`, called as VanillaRollout.generate calls it, with a KV cache of exactly
    prompt_len + new_tokens positions and no stop token (every row decodes `new_tokens`)."""

    def __init__(self, model, config, tokenizer, prompts: list[list[int]], *, prompt_len: int, new_tokens: int):
        from tunix.generate import sampler

        self.keys = [f"prompt {i}" for i in range(len(prompts))]
        self.prompt_len, self.new_tokens = prompt_len, new_tokens
        self.sampler = sampler.Sampler(
            model, IdsTokenizer(tokenizer, dict(zip(self.keys, prompts))),
            sampler.CacheConfig(cache_size=prompt_len + new_tokens, num_layers=config.num_layers,
                                num_kv_heads=config.num_kv_heads, head_dim=config.head_dim))

    def generate(self, sample: bool, seed: int = 0):
        """greedy (tunix's greedy mode) or sampled at temperature 1 over the whole vocabulary (top_p = 1, no
        top-k), with per-token logprobs as a rollout asks for them."""
        out = self.sampler(
            input_strings=self.keys, max_generation_steps=self.new_tokens, max_prompt_length=self.prompt_len,
            echo=False, temperature=1.0 if sample else 0.0, top_p=1.0 if sample else None, top_k=None, seed=seed,
            pad_output=False, eos_tokens=[-1], return_logprobs=True)
        assert all(len(t) == self.new_tokens for t in out.tokens), [len(t) for t in out.tokens]
        return out
