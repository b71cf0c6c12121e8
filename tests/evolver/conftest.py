"""Fixtures of the evolver tests; the builders they use live in evolver_testlib.py."""

import pytest

from evolver_testlib import BagOfWords
from harnessrl_jax.memory import Memory


@pytest.fixture
def memory(tmp_path):
    """The real memory (SQLite store + faiss index) in tmp_path, with a bag-of-words embedder instead of a model."""
    mem = Memory.open(str(tmp_path / "run"), embedder=BagOfWords())
    yield mem
    mem.close()
