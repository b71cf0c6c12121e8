"""The decoder and its loaders, checked against transformers running the same weights."""

import json

import gguf
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from harnessrl_jax.models import forward, init_params, load_pretrained, preset_config
from harnessrl_jax.models.export import export_hf

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    if n < 2:\n        return n",
    "Cellulose is a polysaccharide made of β-glucose units; explain why cows can digest it and humans can't.",
    "1, 1, 2, 3, 5, 8, 13, 21,",
]
# Float32 on both sides: differences come only from summation order. Logits reach ~40 in magnitude.
LOGIT_ATOL = 2e-3


def _reference_logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].numpy()


def test_smollm2_gguf_logits_match_transformers(smollm2, hf_smollm2):
    config, params, _ = smollm2
    model, hf_tok = hf_smollm2
    assert config == preset_config("smollm2-135m-instruct").replace(rms_norm_eps=config.rms_norm_eps)
    fwd = jax.jit(forward, static_argnums=0)
    for text in PROMPTS + [hf_tok.apply_chat_template([{"role": "user", "content": "Hi!"}], tokenize=False)]:
        ids = hf_tok(text, add_special_tokens=False)["input_ids"]
        ref = _reference_logits(model, ids)
        ours = np.asarray(fwd(config, params, jnp.asarray([ids])))[0]
        assert ours.dtype == np.float32
        np.testing.assert_allclose(ours, ref, atol=LOGIT_ATOL, rtol=0)
        assert np.abs(ref).max() > 10  # the bound is small relative to the logit scale
        np.testing.assert_array_equal(ours.argmax(-1), ref.argmax(-1))


def test_left_padding_does_not_change_logits(smollm2):
    config, params, _ = smollm2
    ids = [1, 4093, 198, 5248, 314, 260, 3575]
    alone = np.asarray(forward(config, params, jnp.asarray([ids])))[0]
    padded = jnp.asarray([[2, 2, 2] + ids])
    mask = jnp.asarray([[0, 0, 0] + [1] * len(ids)])
    both = np.asarray(forward(config, params, padded, attention_mask=mask))[0, 3:]
    np.testing.assert_allclose(both, alone, atol=LOGIT_ATOL)


def _tiny_hf_model(model_type, tmp_path, **extra):
    from transformers import AutoConfig, AutoModelForCausalLM

    hf_config = AutoConfig.for_model(
        model_type, vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=24, max_position_embeddings=256,
        rms_norm_eps=1e-6, rope_theta=5000.0, **extra,
    )
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(hf_config).eval()
    with torch.no_grad():  # random norms and biases, so a swapped or dropped one shows up
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(0.3 * torch.randn_like(p))
    model.save_pretrained(tmp_path)
    return model


@pytest.mark.parametrize(
    "model_type,extra",
    [
        ("qwen3", dict(tie_word_embeddings=True)),
        ("qwen2", dict(tie_word_embeddings=False)),
        ("llama", dict(tie_word_embeddings=False, attention_bias=False)),
    ],
)
def test_random_hf_safetensors_model_loads_and_matches(model_type, extra, tmp_path):
    model = _tiny_hf_model(model_type, tmp_path, **extra)
    config, params, tokenizer = load_pretrained(str(tmp_path))
    assert tokenizer is None  # no tokenizer files in the directory
    assert config.head_dim == 24 and config.qk_norm == (model_type == "qwen3")
    assert config.num_params() == sum(p.numel() for p in model.parameters())
    ids = np.random.default_rng(0).integers(0, 300, size=(2, 17))
    with torch.no_grad():
        ref = model(torch.tensor(ids)).logits.numpy()
    ours = np.asarray(forward(config, params, jnp.asarray(ids)))
    np.testing.assert_allclose(ours, ref, atol=1e-4, rtol=1e-4)


def test_export_reloads_in_transformers(smollm2, hf_smollm2, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    config, params, tokenizer = smollm2
    export_hf(config, params, str(tmp_path), tokenizer=tokenizer)
    assert json.load(open(tmp_path / "config.json"))["architectures"] == ["LlamaForCausalLM"]
    model = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
    hf_tok = AutoTokenizer.from_pretrained(tmp_path)
    ids = hf_tok(PROMPTS[2], add_special_tokens=False)["input_ids"]
    np.testing.assert_allclose(_reference_logits(model, ids), _reference_logits(hf_smollm2[0], ids), atol=1e-4)
    # And our own loader reads the export back to the same params.
    config2, params2, tokenizer2 = load_pretrained(str(tmp_path))
    assert config2 == config.replace(max_position_embeddings=config2.max_position_embeddings)
    assert tokenizer2 is not None and tokenizer2.encode(PROMPTS[1]) == hf_tok(PROMPTS[1])["input_ids"]
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(params2)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_export_of_random_qwen3_round_trips_through_transformers(tmp_path):
    from transformers import AutoModelForCausalLM

    config = preset_config("tiny")
    params = init_params(config, jax.random.PRNGKey(1), std=0.2)
    export_hf(config, params, str(tmp_path))
    model = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
    ids = np.arange(40).reshape(2, 20) * 7 % config.vocab_size
    with torch.no_grad():
        ref = model(torch.tensor(ids)).logits.numpy()
    np.testing.assert_allclose(np.asarray(forward(config, params, jnp.asarray(ids))), ref, atol=1e-4, rtol=1e-4)


def test_missing_model_file_is_a_clear_error(tmp_path):
    missing = str(tmp_path / "nowhere" / "model.gguf")
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load_pretrained(missing)
    with pytest.raises(FileNotFoundError, match="preset name"):
        load_pretrained("not-a-model")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="config.json"):
        load_pretrained(str(tmp_path / "empty"))
    with pytest.raises(FileNotFoundError, match="local HF directory"):
        load_pretrained("qwen3-4b")


def test_gguf_of_unknown_architecture_is_rejected(tmp_path):
    path = str(tmp_path / "mamba.gguf")
    writer = gguf.GGUFWriter(path, "mamba")
    writer.add_block_count(1)
    writer.add_tensor("token_embd.weight", np.zeros((8, 4), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ValueError, match=r"mamba\.gguf.*architecture 'mamba'"):
        load_pretrained(path)


def test_hf_dir_of_unsupported_model_type_is_rejected(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(ValueError, match=r"config\.json.*'gpt2'"):
        load_pretrained(str(tmp_path))


def test_gguf_that_is_not_gguf_names_the_file(tmp_path):
    path = tmp_path / "broken.gguf"
    path.write_bytes(b"definitely not a gguf file" * 10)
    with pytest.raises(ValueError, match="broken.gguf"):
        load_pretrained(str(path))


def test_forward_flops_agrees_with_xla_cost_analysis():
    # With the layers unrolled XLA's count sees every layer (a scan body it counts once); it also counts the
    # non-matmul work, so allow a few percent.
    config = preset_config("tiny").replace(num_layers=3, vocab_size=2048, scan_layers=False)
    params = init_params(config, jax.random.PRNGKey(0))
    tokens = jnp.zeros((2, 64), jnp.int32)
    cost = jax.jit(forward, static_argnums=0).lower(config, params, tokens).compile().cost_analysis()
    xla = float((cost[0] if isinstance(cost, list) else cost)["flops"])
    from harnessrl_jax.models.llama import forward_flops

    ours = forward_flops(config, 2, 64)
    assert 0.9 * xla < ours <= 1.0 * xla, (ours, xla)


def _unfused_dots(fn, *args) -> list[str]:
    """The dot instructions XLA compiles outside a fusion (on the CPU backend: its generic Eigen dot, not the
    fused matmul kernels)."""
    import re

    hlo = jax.jit(fn).lower(*args).compile().as_text()
    fused = set(re.findall(r"kind=k\w+, calls=%([\w.\-]+)", hlo))
    found, current = [], None
    for line in hlo.splitlines():
        head = re.match(r"(?:ENTRY )?%([\w.\-]+) \(.*\{$", line)
        if head:
            current = head.group(1)
        elif current not in fused and re.search(r"= \S+ dot\(", line):
            found.append(line.strip()[:120])
    return found


def test_attention_matmuls_compile_as_fused_matmuls_at_decode_and_training_shapes():
    # The weighted-value dot asked for in the layout that XLA's CPU backend ran as a plain, transposed-operand dot:
    # ~10x slower at a decode step's shapes. A backend that fuses no matmul at all has nothing to check.
    from harnessrl_jax.models.llama import _attention

    rng = np.random.default_rng(0)
    assert not _unfused_dots(lambda x, w: x @ w, jnp.ones((8, 64)), jnp.ones((64, 32))) or pytest.skip(
        "this backend runs every matmul as a plain dot")
    config = preset_config("tiny").replace(num_heads=6, num_kv_heads=2)  # grouped: 3 query heads per kv head
    dh = config.head_dim
    for t, s, layout in ((1, 64, "bksd"), (16, 16, "bskd")):  # a decode step on a cache layer; a training row
        q = jnp.asarray(rng.standard_normal((4, t, 6, dh)), jnp.float32)
        kv_shape = (4, 2, s, dh) if layout == "bksd" else (4, s, 2, dh)
        k, v = (jnp.asarray(rng.standard_normal(kv_shape), jnp.float32) for _ in range(2))
        mask = jnp.ones((4, t, s), bool)
        fn = lambda q, k, v, m, layout=layout: _attention(q, k, v, m, config, kv_layout=layout)  # noqa: E731
        assert _unfused_dots(fn, q, k, v, mask) == [], layout
        # and the same values as the attention written out in numpy
        kk = np.asarray(k if layout == "bskd" else k.swapaxes(1, 2)).repeat(3, axis=2)
        vv = np.asarray(v if layout == "bskd" else v.swapaxes(1, 2)).repeat(3, axis=2)
        scores = np.einsum("bthd,bshd->bhts", np.asarray(q), kk) / np.sqrt(dh)
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        want = np.einsum("bhts,bshd->bthd", probs, vv).reshape(4, t, 6 * dh)
        np.testing.assert_allclose(fn(q, k, v, mask), want, atol=1e-5, rtol=1e-5)


def test_unrolled_layers_compute_the_scanned_forward_without_a_loop():
    from harnessrl_jax.models.llama import split_layers, stack_layers

    config = preset_config("tiny").replace(num_layers=3, vocab_size=256)
    params = init_params(config, jax.random.PRNGKey(0), std=0.3)
    tokens = jnp.asarray(np.random.default_rng(0).integers(0, 256, (2, 12)), jnp.int32)
    mask = jnp.arange(12)[None] >= jnp.array([[0], [5]])  # a left-padded row
    scanned = forward(config, params, tokens, mask)
    unrolled = config.replace(scan_layers=False)
    split = split_layers(params)
    assert len(split["layers"]) == 3 and split["layers"][1]["wq"].shape == params["layers"]["wq"].shape[1:]
    for cfg, p in ((unrolled, params), (unrolled, split), (config, split)):  # split params run unrolled anyway
        np.testing.assert_allclose(forward(cfg, p, tokens, mask), scanned, atol=1e-5, rtol=1e-5)
    lowered = {c.scan_layers: jax.jit(forward, static_argnums=0).lower(c, params, tokens, mask).as_text()
               for c in (config, unrolled)}
    assert "stablehlo.while" in lowered[True] and "stablehlo.while" not in lowered[False]
    assert jax.tree.all(jax.tree.map(lambda a, b: bool(jnp.array_equal(a, b)), stack_layers(split), params))


def test_decode_layout_gives_the_scanned_cached_steps_values_unrolled():
    # The sampler's decode runs over per-layer weights and caches (decode_layout); it must compute what the scanned
    # cached step computes, write each layer's keys to its own cache, and hold no layer loop.
    from harnessrl_jax.models import decode_layout, forward_cached, init_cache

    config = preset_config("tiny").replace(num_layers=3, vocab_size=256)
    params = init_params(config, jax.random.PRNGKey(0), std=0.3)
    rng = np.random.default_rng(0)
    prompt = jnp.asarray(rng.integers(0, 256, (2, 8)), jnp.int32)
    valid = jnp.arange(8)[None] >= jnp.array([[0], [3]])  # a left-padded row
    positions = jnp.maximum(jnp.cumsum(valid, axis=-1) - 1, 0)
    _, cache = forward_cached(config, params, prompt, positions, valid, init_cache(config, 2, 12), jnp.int32(0))
    split_params, split_cache = decode_layout(config, params, cache)
    assert len(split_params["layers"]) == 3 and len(split_cache.k) == 3
    step = jax.jit(forward_cached, static_argnums=0)
    for i, token in enumerate(([5, 9], [17, 3])):
        args = (jnp.asarray(token, jnp.int32)[:, None], positions[:, -1:] + 1 + i, jnp.ones((2, 1), bool))
        want, cache = step(config, params, *args, cache, jnp.int32(8 + i))
        got, split_cache = step(config, split_params, *args, split_cache, jnp.int32(8 + i))
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)
        for stacked, layers in ((cache.k, split_cache.k), (cache.v, split_cache.v)):
            np.testing.assert_allclose(jnp.stack(layers), stacked, atol=1e-5, rtol=1e-5)
    assert "stablehlo.while" not in step.lower(config, split_params, *args, split_cache, jnp.int32(9)).as_text()
