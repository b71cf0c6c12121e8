"""Task sets: the bundled mini set (`harnessrl_jax/data/mini/`) and its loaders.

`load_split(name, split)` returns validated `rubric.schema.Task`s from the installed package; `domains()` lists a
set's domains; `split_path` gives a file path for tools that read JSONL themselves. The step-0 criterion profile
(blind / saturated / discriminative under a policy) is in `harnessrl_jax.data.profile`.
"""

from harnessrl_jax.data.loaders import DOMAINS, SPLITS, domains, load_split, split_path

__all__ = ["DOMAINS", "SPLITS", "domains", "load_split", "split_path"]
