"""Text <-> token ids for the policy, from a GGUF file or a HuggingFace tokenizer directory.

`Tokenizer` wraps a HuggingFace `tokenizers.Tokenizer` (the Rust library). From a GGUF it rebuilds the byte-level
BPE from the file's vocabulary and merges, with the pre-tokenizer llama.cpp runs for the file's `tokenizer.ggml.pre`,
so ids match what the model was trained on. (transformers' GGUF loader falls back to plain GPT-2 splitting for
`smollm`, which drops SmolLM2's digit splitting: `"a  1"` and `"\\n\\n7"` come out differently there.)
Chat templates render with jinja2 the way transformers renders them, and `save_pretrained` writes a directory that
`transformers.AutoTokenizer.from_pretrained` loads unchanged.
"""

from __future__ import annotations

import datetime
import functools
import json
import os
from pathlib import Path
from typing import Any, Iterable, Sequence

import gguf
import jinja2
import jinja2.ext
import jinja2.sandbox
import tokenizers
from tokenizers import AddedToken, Regex, decoders, models, pre_tokenizers, processors

from harnessrl_jax.models.gguf_file import GGUFFile, read_gguf

# The split regexes of Qwen2's and Llama-3's tokenizer.json; llama.cpp runs the same ones (rewritten for std::regex).
# GPT-2's is built into `pre_tokenizers.ByteLevel(use_regex=True)`.
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)


def _gpt2():
    # GPT-2's regex, then bytes to the byte-level alphabet.
    return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)


def _digits_then_gpt2():
    # StarCoder's tokenizer.json (SmolLM2 reuses it): every digit its own piece, then the GPT-2 regex.
    return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), _gpt2()])


def _split(pattern):
    def make():
        byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(pattern), behavior="isolated"), byte_level])
    return make


# `tokenizer.ggml.pre` -> (pre-tokenizer, ignore_merges, add_bos when the file does not say), grouped as llama.cpp's
# llama-vocab.cpp groups them. A missing key reads as "default", taken as GPT-2 here; llama.cpp instead guesses
# with a punctuation/three-digit split and warns that quality is degraded, so neither is the model's own.
_PRE_TOKENIZERS = {
    **{name: (_gpt2, False, False) for name in ("gpt-2", "default", "phi-2", "mpt", "olmo")},
    **{name: (_digits_then_gpt2, False, False)
       for name in ("smollm", "starcoder", "refact", "codeshell", "command-r", "exaone", "minerva-7b")},
    **{name: (_split(_QWEN2_SPLIT), False, False) for name in ("qwen2", "deepseek-r1-qwen", "megrez", "stablelm2")},
    # llama.cpp takes a word that is already one token whole (ignore_merges), as Llama-3's tokenizer.json says.
    **{name: (_split(_LLAMA3_SPLIT), True, True) for name in ("llama-bpe", "llama3", "llama-v3", "falcon3", "pixtral")},
    **{name: (_split(_LLAMA3_SPLIT), False, False) for name in ("dbrx", "smaug-bpe")},
}

_CONTROL, _USER_DEFINED = 3, 4  # llama.cpp token types
_SPECIAL_NAMES = ("bos_token", "eos_token", "unk_token", "pad_token")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "merges.txt")


class Tokenizer:
    """A `tokenizers.Tokenizer` plus the special tokens, BOS policy and chat template that go with it."""

    def __init__(self, backend: tokenizers.Tokenizer, *, bos_token: str | None = None, eos_token: str | None = None,
                 pad_token: str | None = None, unk_token: str | None = None, chat_template: str | None = None,
                 model_max_length: int | None = None):
        self.backend = backend
        self.bos_token, self.eos_token, self.unk_token = bos_token, eos_token, unk_token
        self.pad_token = pad_token if pad_token is not None else eos_token
        self.bos_id, self.eos_id, self.pad_id = (self._token_id(t) for t in (bos_token, eos_token, self.pad_token))
        self.chat_template = chat_template
        self.model_max_length = model_max_length
        self.vocab_size = backend.get_vocab_size(with_added_tokens=True)
        # What `encode(..., add_special_tokens=True)` does, read off the backend so GGUF and HF dirs agree.
        self.add_bos = self.bos_id is not None and backend.encode("a", add_special_tokens=True).ids[:1] == [self.bos_id]

    def _token_id(self, token):
        if token is None:
            return None
        token_id = self.backend.token_to_id(token)
        if token_id is None:
            raise ValueError(f"special token {token!r} is not in the vocabulary")
        return token_id

    def __repr__(self):
        return (f"Tokenizer(vocab_size={self.vocab_size}, bos={self.bos_token!r}, eos={self.eos_token!r}, "
                f"pad={self.pad_token!r}, add_bos={self.add_bos})")

    # ---------------------------------------------------------------- loading

    @classmethod
    def from_gguf(cls, path_or_file: str | os.PathLike | GGUFFile | gguf.GGUFReader) -> Tokenizer:
        """Builds the tokenizer a GGUF file describes (byte-level BPE only), from its path or an already read file
        (`gguf_file.read_gguf`, which the weights loader shares, or an open `gguf.GGUFReader`)."""
        if isinstance(path_or_file, gguf.GGUFReader):
            name = getattr(path_or_file.data, "filename", "<GGUFReader>")
            metadata = {key: field.contents() for key, field in path_or_file.fields.items()}
        else:
            gguf_file = path_or_file if isinstance(path_or_file, GGUFFile) else read_gguf(path_or_file)
            name, metadata = gguf_file.path, gguf_file.metadata
        meta = metadata.get

        kind = meta("tokenizer.ggml.model")
        if kind != "gpt2":
            raise ValueError(f"{name}: tokenizer.ggml.model is {kind!r}; only byte-level BPE ('gpt2') is supported")
        pre = meta("tokenizer.ggml.pre", "default")
        if pre not in _PRE_TOKENIZERS:
            raise ValueError(f"{name}: tokenizer.ggml.pre is {pre!r}, which this loader does not know "
                             f"(known: {', '.join(sorted(_PRE_TOKENIZERS))})")
        make_pre_tokenizer, ignore_merges, add_bos_default = _PRE_TOKENIZERS[pre]

        tokens = meta("tokenizer.ggml.tokens")
        token_types = meta("tokenizer.ggml.token_type") or [1] * len(tokens)
        # llama.cpp splits a merge at the first space after its first character.
        merges = [(m[:i], m[i + 1:]) for m in meta("tokenizer.ggml.merges", []) for i in [m.index(" ", 1)]]
        backend = tokenizers.Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges,
                                                  ignore_merges=ignore_merges))
        backend.pre_tokenizer = make_pre_tokenizer()
        backend.decoder = decoders.ByteLevel()
        # Control tokens are matched whole in text and dropped by skip_special_tokens; user-defined ones (like
        # `<think>`) are matched whole too but kept, as llama.cpp does.
        backend.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                    for t, token_type in zip(tokens, token_types) if token_type == _CONTROL])
        backend.add_tokens([AddedToken(t, special=False, normalized=False)
                            for t, token_type in zip(tokens, token_types) if token_type == _USER_DEFINED])

        special = {name: tokens[i] for name, key in zip(_SPECIAL_NAMES, ("bos", "eos", "unknown", "padding"))
                   if (i := meta(f"tokenizer.ggml.{key}_token_id")) is not None}
        add_bos = meta("tokenizer.ggml.add_bos_token", add_bos_default)
        add_eos = meta("tokenizer.ggml.add_eos_token", False)
        backend.post_processor = _bos_eos_processor(special.get("bos_token") if add_bos else None,
                                                    special.get("eos_token") if add_eos else None, backend)
        arch = meta("general.architecture")
        return cls(backend, **special, chat_template=meta("tokenizer.chat_template"),
                   model_max_length=meta(f"{arch}.context_length"))

    @classmethod
    def from_hf_dir(cls, path: str | os.PathLike) -> Tokenizer:
        """Loads `tokenizer.json` with `tokenizer_config.json` / `special_tokens_map.json` / `chat_template.jinja`."""
        directory = Path(path)
        if not (directory / "tokenizer.json").is_file():
            raise ValueError(f"{directory}: no tokenizer.json (only fast-tokenizer directories are supported)")
        backend = tokenizers.Tokenizer.from_file(str(directory / "tokenizer.json"))
        config, special_map = (_read_json(directory / f) for f in ("tokenizer_config.json", "special_tokens_map.json"))

        def token(name):
            value = config.get(name, special_map.get(name))
            return value.get("content") if isinstance(value, dict) else value  # AddedToken dicts in older files

        special = {name: token(name) for name in _SPECIAL_NAMES}
        if special["eos_token"] is None:  # e.g. a bare tokenizer.json next to a model's config.json
            eos_id = _read_json(directory / "config.json").get("eos_token_id")
            eos_id = eos_id[0] if isinstance(eos_id, list) else eos_id
            special["eos_token"] = backend.id_to_token(eos_id) if eos_id is not None else None

        # transformers 5 writes the template to chat_template.jinja, which wins over the config's copy.
        template = config.get("chat_template")
        if isinstance(template, list):  # named templates: [{"name": ..., "template": ...}]
            template = {t["name"]: t["template"] for t in template}.get("default")
        if (directory / "chat_template.jinja").is_file():
            template = (directory / "chat_template.jinja").read_text(encoding="utf-8")
        max_length = config.get("model_max_length")
        max_length = max_length if isinstance(max_length, int) and max_length < 10**12 else None  # 1e30 = unset
        return cls(backend, **special, chat_template=template, model_max_length=max_length)

    # --------------------------------------------------------------- encoding

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Token ids of `text`; special tokens written in the text become their ids."""
        return self.backend.encode(text, add_special_tokens=add_special_tokens).ids

    def encode_batch(self, texts: Sequence[str], add_special_tokens: bool = False) -> list[list[int]]:
        """`encode` over a batch, in parallel in the Rust backend."""
        return [e.ids for e in self.backend.encode_batch(list(texts), add_special_tokens=add_special_tokens)]

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        """Text of `ids` (any iterable of ints, numpy and jax arrays included)."""
        return self.backend.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)

    def batch_decode(self, batch: Iterable[Iterable[int]], skip_special_tokens: bool = True) -> list[str]:
        """`decode` over a batch."""
        return [self.decode(ids, skip_special_tokens) for ids in batch]

    # ---------------------------------------------------------- chat template

    def apply_chat_template(self, messages: Sequence[dict[str, Any]], add_generation_prompt: bool = True,
                            tokenize: bool = False, **kwargs) -> str | list[int]:
        """Renders `messages` with the model's chat template as transformers does; ids (no BOS added) if `tokenize`."""
        if not self.chat_template:
            raise ValueError("this tokenizer has no chat template (none in the GGUF metadata or tokenizer files)")
        # As transformers does: keys set to None are dropped, since templates test for presence, not for None.
        messages = [{k: v for k, v in m.items() if v is not None} for m in messages]
        context = {"tools": None, "documents": None,
                   **{name: getattr(self, name) for name in _SPECIAL_NAMES if getattr(self, name) is not None},
                   **kwargs}
        text = _compile_template(self.chat_template).render(
            messages=messages, add_generation_prompt=add_generation_prompt, **context)
        return self.encode(text) if tokenize else text

    # ----------------------------------------------------------------- saving

    def save_pretrained(self, directory: str | os.PathLike) -> None:
        """Writes tokenizer.json, tokenizer_config.json and special_tokens_map.json for `AutoTokenizer`."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.backend.save(str(directory / "tokenizer.json"))
        special = {name: getattr(self, name) for name in _SPECIAL_NAMES if getattr(self, name) is not None}
        # No add_bos_token / add_eos_token keys: transformers would then rebuild the post-processor, while without
        # them it keeps the one in tokenizer.json, which already adds exactly what `add_bos` says.
        config = {"tokenizer_class": "PreTrainedTokenizerFast", **special, "clean_up_tokenization_spaces": False}
        if self.model_max_length is not None:
            config["model_max_length"] = self.model_max_length
        if self.chat_template is not None:
            config["chat_template"] = self.chat_template
        for name, content in (("tokenizer_config.json", config), ("special_tokens_map.json", special)):
            (directory / name).write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def load_tokenizer(path: str | os.PathLike) -> Tokenizer | None:
    """The tokenizer of a `.gguf` file or an HF directory; None when the directory holds no tokenizer files."""
    path = Path(path)
    if path.is_file() and path.suffix == ".gguf":
        return Tokenizer.from_gguf(path)
    if not path.is_dir():
        raise ValueError(f"{path}: neither a .gguf file nor a directory")
    if not any((path / f).is_file() for f in _TOKENIZER_FILES):
        return None
    return Tokenizer.from_hf_dir(path)


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _bos_eos_processor(bos, eos, backend):
    """Adds BOS/EOS the way llama.cpp's add_bos_token/add_eos_token do; otherwise only offsets (as SmolLM2's)."""
    if bos is None and eos is None:
        return processors.ByteLevel(trim_offsets=False)
    single = " ".join(t for t in (bos, "$A", eos) if t)
    pair = " ".join(t for t in (single, bos and f"{bos}:1", "$B:1", eos and f"{eos}:1") if t)
    return processors.TemplateProcessing(
        single=single, pair=pair,
        special_tokens=[(t, backend.token_to_id(t)) for t in (bos, eos) if t is not None])


class _GenerationTag(jinja2.ext.Extension):
    """transformers' `{% generation %}` marks assistant text for its loss mask; here it renders its body as is."""

    tags = {"generation"}

    def parse(self, parser):
        next(parser.stream)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers' filter: unlike jinja's own it does not HTML-escape, and it takes json.dumps' options.
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


@functools.lru_cache(maxsize=16)
def _compile_template(template: str) -> jinja2.Template:
    # Templates come from model files, so they run sandboxed, with the globals transformers gives them.
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    return env.from_string(template)
