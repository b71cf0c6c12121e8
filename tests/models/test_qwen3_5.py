"""The Qwen3.5 hybrid decoder, its loader and exporter, checked against transformers' Qwen3_5 classes on the same
random weights (float32, sequences longer than one DeltaNet chunk)."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from safetensors import safe_open

from harnessrl_jax.models import forward, init_params, load_pretrained, param_shapes, preset_config
from harnessrl_jax.models.export import export_hf
from harnessrl_jax.rollout import JaxEngine

VOCAB = 300
TEXT = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2,
            head_dim=32, linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=24,
            linear_num_key_heads=2, linear_num_value_heads=4, max_position_embeddings=512, rms_norm_eps=1e-6,
            rope_parameters=dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.25))
VISION = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64, patch_size=4,
              temporal_patch_size=2, spatial_merge_size=2, num_position_embeddings=16)
CHUNK = 16  # our chunk length in these tests: the sequences below span several chunks
# Our float32 against transformers in float64; the perturbed weights below give logits of magnitude ~5-20.
ATOL = 2e-4


def _perturb(model):
    """Larger random weights than HF's init (0.02), and random norm offsets / scales, dt_bias and A_log, so a
    swapped tensor, a dropped (1 + w) or a wrong decay shows up in the logits."""
    torch.manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("A_log"):
                p.copy_(torch.log(torch.empty_like(p).uniform_(0.5, 8.0)))
            elif "norm" in name or "dt_bias" in name:
                p.add_(0.5 * torch.randn_like(p))
            else:
                p.normal_(0.0, 0.15)
    return model.eval()


@pytest.fixture(scope="module")
def text_model(tmp_path_factory):
    """A text-only Qwen3_5ForCausalLM (3 DeltaNet layers + 1 attention layer, untied) saved as save_pretrained
    writes it."""
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

    torch.manual_seed(0)
    model = _perturb(Qwen3_5ForCausalLM(Qwen3_5TextConfig(**TEXT, num_hidden_layers=4, tie_word_embeddings=False)))
    path = tmp_path_factory.mktemp("qwen3_5_text")
    model.save_pretrained(path)
    return model, str(path)


@pytest.fixture(scope="module")
def multimodal_model(tmp_path_factory):
    """The published layout: Qwen3_5ForConditionalGeneration with a vision tower, tied embeddings, and a
    (DeltaNet, attention) pattern repeated twice, so the scan runs over two blocks."""
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration

    torch.manual_seed(0)
    types = ["linear_attention", "full_attention"] * 2
    config = Qwen3_5Config(text_config=dict(TEXT, num_hidden_layers=4, layer_types=types), vision_config=VISION,
                           tie_word_embeddings=True)
    model = _perturb(Qwen3_5ForConditionalGeneration(config))
    path = tmp_path_factory.mktemp("qwen3_5_mm")
    model.save_pretrained(path)
    return model, str(path)


def _reference_logits(model, ids):
    """transformers' logits in float64: the reference both float32 implementations approximate (at these weight
    scales the two float32 runs differ from each other more than either differs from float64)."""
    import copy

    with torch.no_grad():
        return copy.deepcopy(model).double()(torch.tensor(ids)).logits.numpy()


_forward = jax.jit(forward, static_argnums=0)


def test_text_only_checkpoint_logits_match_transformers(text_model):
    model, path = text_model
    config, params, tokenizer = load_pretrained(path, chunk_size=CHUNK)
    assert tokenizer is None and config.model_type == "qwen3_5_text" and not config.tie_embeddings
    assert config.layer_types == ("linear_attention",) * 3 + ("full_attention",) and config.block == config.layer_types
    assert config.num_params() == sum(p.numel() for p in model.parameters())
    ids = np.random.default_rng(0).integers(0, VOCAB, size=(2, 3 * CHUNK + 5))
    ref = _reference_logits(model, ids)
    assert np.abs(ref).max() > 5
    np.testing.assert_allclose(np.asarray(_forward(config, params, jnp.asarray(ids))), ref, atol=ATOL, rtol=0)


def test_multimodal_checkpoint_logits_match_transformers(multimodal_model):
    model, path = multimodal_model
    config, params, _ = load_pretrained(path, chunk_size=CHUNK)
    assert config.model_type == "qwen3_5" and config.tie_embeddings and "lm_head" not in params
    assert config.block == ("linear_attention", "full_attention")  # two scan steps over four layers
    ids = np.random.default_rng(1).integers(0, VOCAB, size=(2, 2 * CHUNK + 3))
    ref = _reference_logits(model, ids)
    np.testing.assert_allclose(np.asarray(_forward(config, params, jnp.asarray(ids))), ref, atol=ATOL, rtol=0)


def test_left_padding_does_not_change_logits(text_model):
    _, path = text_model
    config, params, _ = load_pretrained(path, chunk_size=CHUNK)
    ids = np.random.default_rng(2).integers(0, VOCAB, size=(1, 21))
    alone = np.asarray(_forward(config, params, jnp.asarray(ids)))[0]
    padded = np.concatenate([np.full((1, 7), 3), ids], axis=1)
    mask = np.concatenate([np.zeros((1, 7), bool), np.ones((1, 21), bool)], axis=1)
    both = np.asarray(forward(config, params, jnp.asarray(padded), attention_mask=jnp.asarray(mask)))[0, 7:]
    np.testing.assert_allclose(both, alone, atol=ATOL)


def test_greedy_decode_with_the_cache_equals_transformers_generate(text_model):
    model, path = text_model
    config, params, _ = load_pretrained(path, chunk_size=CHUNK)
    engine = JaxEngine(config, params, stop_ids=[VOCAB - 1], pad_id=0, prompt_bucket=CHUNK)
    rng = np.random.default_rng(3)
    prompts = [rng.integers(1, VOCAB - 1, size=n).tolist() for n in (37, 9, 20)]  # left-padded to 48 slots
    out = engine.generate(prompts, n=1, max_new_tokens=20, temperature=0.0)
    for i, ids in enumerate(prompts):
        with torch.no_grad():
            ref = model.generate(torch.tensor([ids]), max_new_tokens=20, do_sample=False, eos_token_id=VOCAB - 1,
                                 pad_token_id=0)[0, len(ids):].tolist()
        assert out.completion(i) == ref and len(ref) == 20
    # (tests/rollout/test_sglang.py checks the sampled logprobs against a full forward.)


def test_rematerialised_gradients_equal_the_plain_ones():
    rng = np.random.default_rng(6)
    config = preset_config("qwen3.5-tiny").replace(vocab_size=VOCAB, chunk_size=CHUNK, num_layers=2,
                                                 layer_types=("linear_attention", "full_attention"))
    params = init_params(config, jax.random.PRNGKey(3), std=0.1)
    tokens = jnp.asarray(rng.integers(0, VOCAB, size=(2, 40)))
    grad = lambda c: jax.jit(jax.grad(lambda p: jnp.mean(forward(c, p, tokens) ** 2)))(params)
    for a, b in zip(jax.tree.leaves(grad(config)), jax.tree.leaves(grad(config.replace(remat=True)))):
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=1e-4)


def test_sharded_forward_equals_unsharded(multimodal_model):
    from harnessrl_jax.models.sharding import make_mesh, shard_params

    _, path = multimodal_model
    config, params, _ = load_pretrained(path, chunk_size=CHUNK)
    tokens = jnp.asarray(np.random.default_rng(7).integers(0, VOCAB, size=(4, 24)))
    sharded = shard_params(config, params, make_mesh(data=2, fsdp=2, tensor=2))
    assert sharded["linear_attn"]["w_qkv"].sharding.spec == jax.sharding.PartitionSpec(None, "fsdp", "tensor")
    np.testing.assert_allclose(np.asarray(_forward(config, sharded, tokens)),
                               np.asarray(_forward(config, params, tokens)), atol=1e-4)


def test_export_writes_the_multimodal_layout_transformers_loads(multimodal_model, tmp_path):
    from transformers import Qwen3_5ForConditionalGeneration

    model, base = multimodal_model
    config, params, _ = load_pretrained(base)
    params = jax.tree.map(lambda p: p * 0.9, params)  # new weights, as after a train step
    with pytest.raises(ValueError, match="base_dir"):
        export_hf(config, params, str(tmp_path / "nobase"))
    export_hf(config, params, str(tmp_path / "out"), base_dir=base)
    assert json.load(open(tmp_path / "out" / "config.json")) == json.load(open(f"{base}/config.json"))
    reloaded = Qwen3_5ForConditionalGeneration.from_pretrained(tmp_path / "out", dtype=torch.float32).eval()
    ids = np.random.default_rng(5).integers(0, VOCAB, size=(1, 40))
    np.testing.assert_allclose(_reference_logits(reloaded, ids), np.asarray(_forward(config, params, ids)),
                               atol=ATOL, rtol=0)
    # The vision tower passes through unchanged; norm offsets are stored as offsets (the (1 + w) convention).
    out_tensors = dict(reloaded.state_dict())
    for name, p in model.state_dict().items():
        if name.startswith("model.visual."):
            assert torch.equal(out_tensors[name], p), name
    with safe_open(str(tmp_path / "out" / "model-00001-of-00002.safetensors"), "numpy") as f:
        offset = f.get_tensor("model.language_model.norm.weight")
    np.testing.assert_allclose(offset, 0.9 * model.state_dict()["model.language_model.norm.weight"].numpy(),
                               rtol=1e-6)


def test_export_of_a_random_text_model_round_trips(tmp_path):
    from transformers import AutoModelForCausalLM

    config = preset_config("qwen3.5-tiny").replace(vocab_size=VOCAB, chunk_size=CHUNK)
    params = init_params(config, jax.random.PRNGKey(0), std=0.15)
    export_hf(config, params, str(tmp_path))
    assert json.load(open(tmp_path / "config.json"))["architectures"] == ["Qwen3_5ForCausalLM"]
    model = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
    ids = np.arange(2 * 37).reshape(2, 37) * 7 % VOCAB
    np.testing.assert_allclose(_reference_logits(model, ids), np.asarray(_forward(config, params, ids)), atol=ATOL)
    config2, params2, _ = load_pretrained(str(tmp_path), chunk_size=CHUNK)
    assert config2 == config
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(params2)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_presets_have_the_published_sizes():
    # Text decoder parameters (no vision tower, no MTP head).
    sizes = {name: preset_config(name).num_params() / 1e9 for name in ("qwen3.5-0.8b", "qwen3.5-4b", "qwen3.5-9b")}
    assert 0.7 < sizes["qwen3.5-0.8b"] < 0.8 and 4.0 < sizes["qwen3.5-4b"] < 4.3 and 8.8 < sizes["qwen3.5-9b"] < 9.1
    assert preset_config("qwen3.5-9b").block == ("linear_attention",) * 3 + ("full_attention",)
    shapes = param_shapes(preset_config("qwen3.5-4b"))
    assert shapes["full_attn"]["wq"] == (8, 2560, 2 * 16 * 256) and shapes["linear_attn"]["conv"] == (24, 4, 8192)


def test_bad_qwen3_5_configs_are_clear_errors(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen3_5"}))
    with pytest.raises(ValueError, match=r"config\.json.*text_config"):
        load_pretrained(str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen3_5_text", "num_attention_heads": 4}))
    with pytest.raises(ValueError, match=r"config\.json.*'vocab_size' is missing"):
        load_pretrained(str(tmp_path))
    with pytest.raises(ValueError, match="layer_types"):
        preset_config("qwen3.5-tiny").replace(layer_types=("linear_attention",))
    with pytest.raises(ValueError, match="scan_layers=False.*llama family only"):
        preset_config("qwen3.5-tiny").replace(scan_layers=False)
