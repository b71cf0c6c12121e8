"""lm-evaluation-harness model adapter: lm-eval evaluates this codebase's JAX model on any of its tasks.

    import harnessrl_jax.eval.lm_eval                     # registers the model name "harnessrl_jax"
    lm_eval.simple_evaluate(model="harnessrl_jax", model_args="pretrained=smollm2-135m-instruct", tasks=[...])
    lm_eval.simple_evaluate(model="harnessrl_jax", model_args="pretrained=smollm2-135m-instruct,workdir=runs/x",
                            tasks=[...])              # a run's checkpoint: latest by default, step=0 the seed policy
    python -m harnessrl_jax.eval.lm_eval run --model harnessrl_jax --model_args pretrained=... --tasks ...

Requests are lm-eval's TemplateLM ones; a continuation's log-likelihood is the sum of its float32 log-softmax values
over the last max_length tokens. lm-eval 0.4.13 discovers no plugins, so the `python -m` form runs lm-eval's own CLI
with the adapter registered; setup.py also declares it under the `lm_eval.models` entry points.
"""

from __future__ import annotations

import functools
import json
import logging
import os

import jax
import jax.numpy as jnp
import numpy as np
import lm_eval.models  # noqa: F401 - lm-eval's own models first: it fills its registry lazily only while empty
from lm_eval.api.model import TemplateLM
from lm_eval.api.registry import register_model
import ml_collections

from harnessrl_jax import build
from harnessrl_jax.eval.evaluate import restore_policy
from harnessrl_jax.models import forward, load_pretrained
from harnessrl_jax.rollout import JaxEngine

NAME = "harnessrl_jax"


def _int_or_none(v) -> int | None:
    return None if v is None or v == "" else int(v)


def _batch_size(batch_size, max_batch_size) -> int:
    """lm-eval's batch_size ("8", 8, "auto", "auto:4") as a number of sequences per forward pass."""
    text = str(batch_size).strip().lower()
    if text.startswith("auto"):
        return _int_or_none(max_batch_size) or 16
    n = int(float(text))
    if n < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size!r}")
    return min(n, _int_or_none(max_batch_size) or n)


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def load_policy(pretrained: str, workdir: str | None = None, step: int | None = None):
    """(model_config, params, tokenizer): the pretrained model, or the run's checkpoint `step` (None: the latest,
    0: the seed policy)."""
    if not workdir:
        return load_pretrained(pretrained)
    with open(os.path.join(workdir, "config.json"), encoding="utf-8") as f:
        config = ml_collections.ConfigDict(json.load(f))
    if pretrained and pretrained != config.model_name:
        raise ValueError(f"pretrained={pretrained!r} but the run in {workdir} trained {config.model_name!r}")
    run = build.setup(config)
    try:
        restore_policy(run, workdir, step)
        params = jax.device_get(run.engine.params)
        return run.model_config, params, run.tokenizer
    finally:
        run.close()


@register_model(NAME)
class HarnessrlJaxLM(TemplateLM):
    """lm-eval's LM over harnessrl_jax.models: `pretrained` is a `models.load_pretrained` name or path, and with
    `workdir` the weights are the run's checkpoint `step` (restored as launch/eval.py does). lm-eval's `batch_size`
    ("4", "auto", "auto:4"), `max_batch_size` and `device` come as strings (JAX picks the device; "cpu" / "cuda"
    are only checked against the backend)."""

    def __init__(self, pretrained: str = "", workdir: str | None = None, step: int | str | None = None,
                 batch_size: int | str = 1, max_batch_size: int | str | None = None, device: str | None = None,
                 max_length: int | str | None = None, max_gen_toks: int | str = 256, seed: int | str = 1234,
                 **kwargs):
        super().__init__()
        if not pretrained:
            raise ValueError("harnessrl_jax: model_args needs pretrained=NAME_OR_PATH")
        if device and str(device).split(":")[0] not in ("cpu", "cuda", "gpu", "tpu"):
            raise ValueError(f"harnessrl_jax: unknown device {device!r}")
        if device and str(device).split(":")[0] in ("cuda", "gpu") and jax.default_backend() != "gpu":
            raise ValueError(f"harnessrl_jax: device={device!r} but JAX runs on {jax.default_backend()}")
        if kwargs:
            logging.getLogger(__name__).warning("harnessrl_jax: ignoring model_args %s", sorted(kwargs))
        self.model_config, self.params, self.tokenizer = load_policy(pretrained, workdir, _int_or_none(step))
        if self.tokenizer is None:
            raise ValueError(f"{pretrained}: no tokenizer files; lm-eval needs the model's tokenizer")
        self.pretrained = pretrained
        self.batch_size_per_call = _batch_size(batch_size, max_batch_size)
        self._max_length = _int_or_none(max_length) or int(self.model_config.max_position_embeddings)
        self.max_gen_toks = int(max_gen_toks)
        self.seed = int(seed)
        self._engine = None

    # -- what TemplateLM asks for ---------------------------------------------------------------------------------

    @property
    def eot_token_id(self) -> int:
        return int(self.tokenizer.eos_id)

    @property
    def prefix_token_id(self) -> int:
        return int(self.tokenizer.bos_id) if self.tokenizer.bos_id is not None else self.eot_token_id

    @property
    def max_length(self) -> int:
        return self._max_length

    @property
    def tokenizer_name(self) -> str:
        return self.pretrained.replace("/", "__")

    def tok_encode(self, string: str, add_special_tokens: bool | None = None, **kwargs) -> list[int]:
        """Token ids; add_special_tokens None follows the tokenizer's own rule (a BOS only where the model adds
        one, and never a second one before a string that starts with the BOS text)."""
        if add_special_tokens is None:
            bos = self.tokenizer.bos_token
            add_special_tokens = not (bos and string.startswith(bos))
        return self.tokenizer.encode(string, add_special_tokens=bool(add_special_tokens))

    def tok_decode(self, tokens, skip_special_tokens: bool = True) -> str:
        return self.tokenizer.decode(tokens, skip_special_tokens=skip_special_tokens)

    def apply_chat_template(self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        """The chat as text under the model's own template (lm-eval's --apply_chat_template)."""
        return self.tokenizer.apply_chat_template(chat_history, add_generation_prompt=add_generation_prompt,
                                                  tokenize=False)

    # -- scoring --------------------------------------------------------------------------------------------------

    @functools.cached_property
    def _log_softmax(self):
        config = self.model_config

        @jax.jit
        def fn(params, tokens, mask):
            return jax.nn.log_softmax(forward(config, params, tokens, mask).astype(jnp.float32), axis=-1)

        return fn

    def _score_windows(self, windows: list[tuple[list[int], list[int]]]) -> list[tuple[float, bool]]:
        """(sum of continuation logprobs, all greedy) of each (context, continuation) token pair."""
        out: list[tuple[float, bool] | None] = [None] * len(windows)
        inputs = []
        for k, (ctx, cont) in enumerate(windows):
            if not cont:
                raise ValueError("a loglikelihood request with an empty continuation")
            seq = (list(ctx) + list(cont))[-(self.max_length + 1):]
            inputs.append((k, seq[:-1], len(cont)))
        order = sorted(inputs, key=lambda x: -len(x[1]))  # similar lengths share a padded batch
        for b in range(0, len(order), self.batch_size_per_call):
            batch = order[b:b + self.batch_size_per_call]
            length = _round_up(max(len(x[1]) for x in batch), 32)
            rows = _round_up(len(batch), 1 if len(batch) == 1 else 2)
            tokens = np.full((rows, length), self.tokenizer.pad_id or 0, np.int32)
            mask = np.zeros((rows, length), bool)
            for r, (_, seq, _) in enumerate(batch):
                tokens[r, :len(seq)], mask[r, :len(seq)] = seq, True
            logp = np.asarray(self._log_softmax(self.params, jnp.asarray(tokens), jnp.asarray(mask)))
            for r, (k, seq, n) in enumerate(batch):
                n = min(n, len(seq))  # a continuation longer than the window is scored on its last tokens
                target = np.asarray(windows[k][1][-n:], np.int64)
                rows_lp = logp[r, len(seq) - n:len(seq)]
                picked = rows_lp[np.arange(n), target]
                out[k] = (float(picked.sum(dtype=np.float64)), bool((rows_lp.argmax(-1) == target).all()))
        return out  # type: ignore[return-value]

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, **kwargs) -> list[tuple[float, bool]]:
        results = self._score_windows([(ctx, cont) for _, ctx, cont in requests])
        for (key, _, _), res in zip(requests, results):
            self.cache_hook.add_partial("loglikelihood", key, res)
        return results

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

        out = []
        for (string,) in [req.args for req in requests]:
            windows = [make_disjoint_window(w) for w in get_rolling_token_windows(
                token_list=self.tok_encode(string, add_special_tokens=False), prefix_token=self.prefix_token_id,
                max_seq_len=self.max_length, context_len=1)]
            total = sum(lp for lp, _ in self._score_windows(windows))
            self.cache_hook.add_partial("loglikelihood_rolling", (string,), total)
            out.append(total)
        return out

    # -- generation -----------------------------------------------------------------------------------------------

    @property
    def engine(self):
        if self._engine is None:
            self._engine = JaxEngine(self.model_config, self.params, self.tokenizer)
        return self._engine

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        """Continuations of each request's context: greedy unless `do_sample` (then `temperature`), at most
        `max_gen_toks` new tokens, stopped at EOS and cut before the first `until` string (a string or a list)."""
        out: list[str | None] = [None] * len(requests)
        groups: dict[tuple, list[int]] = {}
        parsed = []
        for k, req in enumerate(requests):
            context, gen = req.args
            gen = dict(gen or {})
            until = gen.pop("until", None)
            until = [until] if isinstance(until, str) else list(until or [])
            max_new = int(gen.pop("max_gen_toks", self.max_gen_toks))
            sample = bool(gen.pop("do_sample", False))
            temperature = float(gen.pop("temperature", 0.0)) if sample else 0.0
            if sample and temperature <= 0:
                temperature = 1.0
            top_p = float(gen.pop("top_p", 1.0) or 1.0)
            parsed.append((context, until))
            groups.setdefault((max_new, temperature, top_p), []).append(k)
        for (max_new, temperature, top_p), idx in groups.items():
            for b in range(0, len(idx), self.batch_size_per_call):
                chunk = idx[b:b + self.batch_size_per_call]
                budget = max(1, self.max_length - max_new)
                prompts = [self.tok_encode(parsed[k][0])[-budget:] for k in chunk]
                ro = self.engine.generate(prompts, n=1, max_new_tokens=max_new, temperature=temperature,
                                          top_p=top_p, seed=self.seed + b)
                for k, text in zip(chunk, ro.texts):
                    for stop in parsed[k][1]:
                        if stop:
                            text = text.split(stop, 1)[0]
                    out[k] = text
                    self.cache_hook.add_partial("generate_until", requests[k].args, text)
        return out  # type: ignore[return-value]


def main() -> None:
    """lm-eval's command line with the adapter registered (`python -m harnessrl_jax.eval.lm_eval ...`)."""
    from lm_eval.__main__ import cli_evaluate

    cli_evaluate()


if __name__ == "__main__":
    main()
