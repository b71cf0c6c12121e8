"""The GGUF loader against the gguf package's own reader (`gguf.GGUFReader`), the independent reference: the same
metadata, the same tensor bytes, and params equal bit for bit to the reader's dequantised tensors under llama.cpp's
Q/K permutation (written here as its converter writes it, not as the loader inverts it)."""

import gguf
import numpy as np
import pytest

from harnessrl_jax.models import load_pretrained
from harnessrl_jax.models.gguf_file import read_gguf
from harnessrl_jax.models.loading import load_gguf
from harnessrl_jax.models.tokenizer import Tokenizer


@pytest.fixture(scope="module")
def reader(smollm2_path):
    return gguf.GGUFReader(smollm2_path)


def _llama_cpp_permute(w, n_head):
    # convert_hf_to_gguf.py's LlamaModel.permute: HF rotate-half rows -> GGUF interleaved rows.
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def test_metadata_and_tensor_views_match_gguf_reader(smollm2_path, reader):
    ours = read_gguf(smollm2_path)
    theirs = {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    assert ours.metadata == theirs
    assert [(k, type(v)) for k, v in ours.metadata.items()] == [(k, type(v)) for k, v in theirs.items()]
    assert list(ours.tensors) == [t.name for t in reader.tensors]
    for t in reader.tensors:
        mine = ours.tensors[t.name]
        assert mine.tensor_type == t.tensor_type and mine.shape == tuple(int(d) for d in t.shape)
        assert mine.data.dtype == t.data.dtype and mine.data.shape == t.data.shape
        assert np.array_equal(mine.data, t.data), t.name


def test_smollm2_params_equal_gguf_reader_dequantised(smollm2_path, reader):
    config, params = load_gguf(smollm2_path)
    tensors = {t.name: t for t in reader.tensors}

    def ref(name):
        t = tensors[name]
        return gguf.quants.dequantize(t.data, t.tensor_type).reshape([int(d) for d in reversed(t.shape)])

    assert "output.weight" not in tensors and config.tie_embeddings and "lm_head" not in params
    assert np.array_equal(np.asarray(params["embed"]), ref("token_embd.weight"))
    assert np.array_equal(np.asarray(params["final_norm"]), ref("output_norm.weight"))
    names = {"attn_norm": "attn_norm", "mlp_norm": "ffn_norm", "wq": "attn_q", "wk": "attn_k", "wv": "attn_v",
             "wo": "attn_output", "w_gate": "ffn_gate", "w_up": "ffn_up", "w_down": "ffn_down"}
    assert set(params["layers"]) == set(names)
    for ours, theirs in names.items():
        stacked = np.asarray(params["layers"][ours])
        assert stacked.dtype == np.float32 and stacked.shape[0] == config.num_layers
        for i in range(config.num_layers):
            w = stacked[i]
            if w.ndim == 2:
                w = w.T  # ours [in, out], GGUF [out, in]
            if ours in ("wq", "wk"):
                w = _llama_cpp_permute(w, config.num_heads if ours == "wq" else config.num_kv_heads)
            assert np.array_equal(w, ref(f"blk.{i}.{theirs}.weight")), (ours, i)


def test_tokenizer_from_one_read_equals_tokenizer_from_path(smollm2_path):
    shared, own = Tokenizer.from_gguf(read_gguf(smollm2_path)), Tokenizer.from_gguf(smollm2_path)
    assert shared.backend.to_str() == own.backend.to_str()
    assert (shared.bos_id, shared.eos_id, shared.pad_id, shared.chat_template, shared.model_max_length) == \
        (own.bos_id, own.eos_id, own.pad_id, own.chat_template, own.model_max_length)


def test_truncated_gguf_is_a_value_error_naming_the_file(smollm2_path, tmp_path):
    data = open(smollm2_path, "rb").read()
    for cut, name in ((1000, "head.gguf"), (len(data) - 1000, "tail.gguf"), (0, "empty.gguf")):
        path = tmp_path / name
        path.write_bytes(data[:cut])
        with pytest.raises(ValueError, match=rf"{name}: not a readable GGUF file"):
            load_pretrained(str(path))


def test_quantised_dequantise_equals_gguf_package_on_every_block_type(tmp_path):
    # Our row slicing must not change a value: random tensors of each quantised type the writer can make.
    rng = np.random.default_rng(0)
    path = str(tmp_path / "q.gguf")
    writer = gguf.GGUFWriter(path, "llama")
    kinds = (gguf.GGMLQuantizationType.Q4_0, gguf.GGMLQuantizationType.Q4_1, gguf.GGMLQuantizationType.Q8_0,
             gguf.GGMLQuantizationType.BF16, gguf.GGMLQuantizationType.F16, gguf.GGMLQuantizationType.F32)
    for kind in kinds:
        x = rng.standard_normal((300, 4096), dtype=np.float32)  # more than one slice of rows
        writer.add_tensor(kind.name, gguf.quants.quantize(x, kind), raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    ours = read_gguf(path)
    for t in gguf.GGUFReader(path).tensors:
        want = gguf.quants.dequantize(t.data, t.tensor_type).reshape(300, 4096)
        assert np.array_equal(ours.tensors[t.name].dequantize(), want), t.name
