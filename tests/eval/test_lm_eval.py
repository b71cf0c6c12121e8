"""The lm-evaluation-harness adapter (harnessrl_jax.eval.lm_eval) against lm-eval's own transformers model ("hf")
on the same weights (a small random Llama saved as an HF directory, with SmolLM2's tokenizer), on local custom
task files of the three request types: the per-request log-likelihoods, greedy continuations and metrics agree;
lm-eval's command line runs with the adapter registered; a run's checkpoint loads by workdir and step."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX = os.path.join(REPO, "tests", "eval", "fixtures", "lm_eval")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

TASKS = {
    "hrl_mc": {"output_type": "multiple_choice", "file": "mc.jsonl", "doc_to_text": "Question: {{question}}\nAnswer:",
               "doc_to_choice": "{{choices}}", "doc_to_target": "{{answer}}", "metric_list": [{"metric": "acc"}]},
    "hrl_gen": {"output_type": "generate_until", "file": "gen.jsonl", "doc_to_text": "{{prompt}}",
                "doc_to_target": "{{target}}", "metric_list": [{"metric": "exact_match"}],
                "generation_kwargs": {"until": ["\n", "Q:", " the"], "max_gen_toks": 10, "do_sample": False}},
    "hrl_ppl": {"output_type": "loglikelihood_rolling", "file": "text.jsonl", "doc_to_text": "",
                "doc_to_target": "{{text}}", "metric_list": [{"metric": "word_perplexity"}]},
}


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory):
    """The custom tasks as lm-eval YAML files over the local JSONL fixtures."""
    import yaml

    d = tmp_path_factory.mktemp("lm_eval_tasks")
    for name, t in TASKS.items():
        t = dict(t)
        data = os.path.join(FIX, t.pop("file"))
        yaml.safe_dump({"task": name, "dataset_path": "json", "dataset_kwargs": {"data_files": {"test": data}},
                        "test_split": "test", **t}, open(d / f"{name}.yaml", "w"))
    return str(d)


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory, smollm2_path):
    """A 2-layer random Llama (transformers) with SmolLM2's tokenizer, saved as an HF directory."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from harnessrl_jax.models.tokenizer import Tokenizer

    tok = Tokenizer.from_gguf(smollm2_path)  # written as tokenizer.json, which both sides load
    cfg = LlamaConfig(vocab_size=tok.vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                      tie_word_embeddings=True, initializer_range=0.5, bos_token_id=tok.bos_id,
                      eos_token_id=tok.eos_id)
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("tiny_llama")
    LlamaForCausalLM(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return str(out)


def _evaluate(model, model_args, task_dir):
    import lm_eval
    from lm_eval.tasks import TaskManager

    import harnessrl_jax.eval.lm_eval  # noqa: F401 (registers the adapter)

    return lm_eval.simple_evaluate(model=model, model_args=model_args, tasks=list(TASKS), batch_size=3,
                                   task_manager=TaskManager(include_path=task_dir), log_samples=True)


def test_adapter_agrees_with_transformers_on_the_same_weights(hf_dir, task_dir):
    ours = _evaluate("harnessrl_jax", f"pretrained={hf_dir},device=cpu,max_batch_size=2", task_dir)
    ref = _evaluate("hf", f"pretrained={hf_dir},dtype=float32,device=cpu", task_dir)
    for task in TASKS:
        a = [s["resps"] for s in ours["samples"][task]]
        b = [s["resps"] for s in ref["samples"][task]]
        if task == "hrl_gen":
            assert a == b  # the same greedy text, cut before the same stop string
        else:
            la = np.array([[x[0] if isinstance(x, (list, tuple)) else x for r in doc for x in r] for doc in a],
                          dtype=object)
            lb = np.array([[x[0] if isinstance(x, (list, tuple)) else x for r in doc for x in r] for doc in b],
                          dtype=object)
            assert np.allclose(la.astype(float), lb.astype(float), rtol=1e-4, atol=1e-3), task
        for metric, v in ref["results"][task].items():
            if isinstance(v, float) and "stderr" not in metric:
                assert ours["results"][task][metric] == pytest.approx(v, rel=1e-4), (task, metric)
    gen = [s["resps"][0][0] for s in ours["samples"]["hrl_gen"]]
    assert not any(stop in g for g in gen for stop in ("\n", "Q:", " the"))


def test_lm_eval_command_line_runs_with_the_adapter(hf_dir, task_dir, tmp_path):
    out = subprocess.run([sys.executable, "-m", "harnessrl_jax.eval.lm_eval", "run", "--model", "harnessrl_jax",
                          "--model_args", f"pretrained={hf_dir},max_gen_toks=4", "--tasks", "hrl_mc",
                          "--include_path", task_dir, "--batch_size", "auto:2", "--max_batch_size", "2",
                          "--device", "cpu", "--output_path", str(tmp_path / "out")],
                         cwd=REPO, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "HF_DATASETS_OFFLINE": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    results = [os.path.join(r, f) for r, _, fs in os.walk(tmp_path / "out") for f in fs if f.startswith("results")]
    assert len(results) == 1
    acc = json.load(open(results[0]))["results"]["hrl_mc"]["acc,none"]
    assert acc in (0.0, 0.25, 0.5, 0.75, 1.0)


def test_constructor_takes_lm_evals_strings_and_refuses_bad_ones(hf_dir):
    from harnessrl_jax.eval.lm_eval import HarnessrlJaxLM

    lm = HarnessrlJaxLM(pretrained=hf_dir, batch_size="auto", max_batch_size="3", device="cpu", max_length="64")
    assert lm.batch_size_per_call == 3 and lm.max_length == 64
    assert lm.prefix_token_id == lm.tokenizer.bos_id or lm.tokenizer.bos_id is None
    assert HarnessrlJaxLM(pretrained=hf_dir, batch_size="4").batch_size_per_call == 4
    with pytest.raises(ValueError, match="pretrained"):
        HarnessrlJaxLM()
    with pytest.raises(ValueError, match="device"):
        HarnessrlJaxLM(pretrained=hf_dir, device="mps")


@pytest.mark.slow
def test_a_runs_checkpoint_by_workdir_and_step(analysed_runs):
    """workdir=RUN loads the run's latest checkpoint; step=0 its seed policy (the config's initial weights)."""
    import jax

    from harnessrl_jax import build
    from harnessrl_jax.eval.lm_eval import HarnessrlJaxLM, load_policy

    run = os.path.join(analysed_runs, "harnessrl-s0")
    latest = HarnessrlJaxLM(pretrained="tiny", workdir=run)
    seed = HarnessrlJaxLM(pretrained="tiny", workdir=run, step="0")
    import ml_collections
    setup = build.setup(ml_collections.ConfigDict(json.load(open(os.path.join(run, "config.json")))))
    flat = lambda p: np.concatenate([np.ravel(x) for x in jax.tree_util.tree_leaves(p)])  # noqa: E731
    assert np.array_equal(flat(seed.params), flat(setup.initial_params))
    assert not np.allclose(flat(latest.params), flat(seed.params))
    setup.close()
    with pytest.raises(ValueError, match="trained 'tiny'"):
        load_policy("smollm2-135m-instruct", run)
    (ll, _), = latest._score_windows([(latest.tok_encode("say"), latest.tok_encode(" q"))])
    assert np.isfinite(ll) and ll < 0


def test_generate_until_cuts_at_the_first_stop_string_and_passes_the_sampling_settings(hf_dir):
    from types import SimpleNamespace

    from lm_eval.api.instance import Instance

    from harnessrl_jax.eval.lm_eval import HarnessrlJaxLM

    calls = []

    class Engine:
        def generate(self, prompts, n, *, max_new_tokens, temperature, top_p, seed):
            calls.append((len(prompts), max_new_tokens, temperature))
            return SimpleNamespace(texts=["Paris.\nQ: next", "four, or 4"][:len(prompts)])

    lm = HarnessrlJaxLM(pretrained=hf_dir, batch_size="8")
    lm._engine = Engine()
    reqs = [Instance("generate_until", {}, ("Q: capital?\nA:", {"until": ["\n", "Q:"], "max_gen_toks": 5}), 0),
            Instance("generate_until", {}, ("Q: 2+2?\nA:", {"until": ",", "max_gen_toks": 5}), 1),
            Instance("generate_until", {}, ("Q: x?\nA:", {"until": ["zzz"], "do_sample": True,
                                                          "temperature": 0.7, "max_gen_toks": 3}), 2)]
    assert lm.generate_until(reqs) == ["Paris.", "four", "Paris.\nQ: next"]
    assert calls == [(2, 5, 0.0), (1, 3, 0.7)]  # greedy unless asked to sample; max_gen_toks honoured
