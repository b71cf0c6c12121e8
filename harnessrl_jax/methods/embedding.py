"""Text embeddings for the methods' own retrieval (SkillRL's skills, AMARIS's summaries) and a small cosine index.

    embed = text_embedder(name, memory)     # 'memory': the memory's embedder when it has one, else 'lexical'
    index = VectorIndex(embed); index.add(keys, texts); index.search(text, k) -> [(cosine, key)]

'lexical' is a model-free stand-in (hashed word counts, L2-normalised) for runs without an embedding model (the
tiny CPU config): cosine thresholds calibrated for a sentence embedder do not carry over to it.
"""

from __future__ import annotations

import zlib
from typing import Any, Callable, Sequence

import numpy as np

from harnessrl_jax.evolver.text import words
from harnessrl_jax.memory.semantic import DEFAULT_EMBEDDER, shared_embedder

LEXICAL_DIM = 1024


def lexical_encode(texts: Sequence[str], dim: int = LEXICAL_DIM) -> np.ndarray:
    """Hashed bag-of-words vectors, unit rows (a zero row for a text with no word)."""
    out = np.zeros((len(texts), dim), np.float32)
    for n, t in enumerate(texts):
        for w in words(t):
            out[n, zlib.crc32(w.encode()) % dim] += 1.0
    norm = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.maximum(norm, 1e-12)


def text_embedder(name: str, memory=None) -> Callable[[Sequence[str]], np.ndarray]:
    """`encode(texts) -> unit rows [n, d]`: 'memory' (the memory's semantic index embedder, else lexical),
    'lexical', or a sentence-transformers model by bundled name or local path."""
    if name == "lexical":
        return lexical_encode
    if name == "memory":
        semantic = getattr(memory, "semantic", None)
        return semantic.embedder.encode if semantic is not None else lexical_encode
    return shared_embedder(DEFAULT_EMBEDDER if name == "default" else name).encode  # the memory's, when the same


class VectorIndex:
    """Keys with unit vectors of their texts; exact cosine search (the methods' pools stay small)."""

    def __init__(self, embed: Callable[[Sequence[str]], np.ndarray]):
        self.embed = embed
        self.keys: list[Any] = []
        self.vectors: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.keys)

    def add(self, keys: Sequence[Any], texts: Sequence[str]) -> None:
        if not keys:
            return
        v = np.asarray(self.embed(list(texts)), np.float32)
        self.vectors = v if self.vectors is None else np.vstack([self.vectors, v])
        self.keys += list(keys)

    def cosines(self, text: str) -> np.ndarray:
        if self.vectors is None:
            return np.zeros(0, np.float32)
        q = np.asarray(self.embed([text]), np.float32)[0]
        return self.vectors @ q

    def search(self, text: str, k: int, *, min_cosine: float = -1.0, exclude=None) -> list[tuple[float, Any]]:
        """The k best (cosine, key) at or above `min_cosine`, best first; `exclude(key)` drops keys."""
        cos = self.cosines(text)
        order = np.argsort(-cos, kind="stable")
        out = []
        for i in order:
            if len(out) >= k or cos[i] < min_cosine:
                break
            if exclude is None or not exclude(self.keys[i]):
                out.append((float(cos[i]), self.keys[i]))
        return out
