"""Bundled task sets, read from the installed package (no paths to the source tree).

    from harnessrl_jax.data import load_split, domains
    train = load_split()                      # the mini set's training split
    held = load_split("mini", "heldout")
    domains()                                 # ('instruction_following', 'medical', 'roleplay', 'science', 'writing')

A set is a package folder `harnessrl_jax/data/<name>/` holding `<split>.jsonl` files in the task format of
`harnessrl_jax.rubric.schema` (see that folder's README.md).
"""

from __future__ import annotations

import functools
import os
import tempfile
from importlib import resources

from harnessrl_jax.rubric.schema import Task, load_tasks

SPLITS = ("train", "heldout")
# The five Rubric-Mix domains, as the bundled sets spell them.
DOMAINS = ("instruction_following", "medical", "roleplay", "science", "writing")


def _resource(name: str, split: str):
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
    folder = resources.files("harnessrl_jax.data").joinpath(name)
    if not folder.is_dir():
        available = sorted(p.name for p in resources.files("harnessrl_jax.data").iterdir()
                           if p.is_dir() and p.joinpath("train.jsonl").is_file())
        raise ValueError(f"unknown task set {name!r}; bundled: {', '.join(available) or 'none'}")
    f = folder.joinpath(f"{split}.jsonl")
    if not f.is_file():
        raise FileNotFoundError(f"task set {name!r} has no {split}.jsonl")
    return f


@functools.lru_cache(maxsize=None)
def _load(name: str, split: str) -> tuple[Task, ...]:
    res = _resource(name, split)
    with resources.as_file(res) as path:  # a real file even when the package is zipped
        return tuple(load_tasks(path))


def load_split(name: str = "mini", split: str = "train") -> list[Task]:
    """The tasks of a bundled set's split, validated (see `rubric.schema.load_tasks`). Cached; a fresh list."""
    return list(_load(name, split))


def split_path(name: str = "mini", split: str = "train") -> str:
    """A filesystem path to the split's JSONL, for tools that take a file (e.g. the trainer's tasks.path).

    Installed packages are normally plain folders; a zipped one gets a copy in the temp directory.
    """
    res = _resource(name, split)
    if isinstance(res, os.PathLike) or hasattr(res, "__fspath__"):
        return os.fspath(res)
    out = os.path.join(tempfile.gettempdir(), f"harnessrl_{name}_{split}.jsonl")
    with open(out, "wb") as f:
        f.write(res.read_bytes())
    return out


def domains(name: str = "mini", split: str | None = None) -> tuple[str, ...]:
    """Sorted domains of a bundled set (both splits, or one)."""
    splits = SPLITS if split is None else (split,)
    return tuple(sorted({t.domain for s in splits for t in _load(name, s)}))
