"""The evolver's prompt templates: text files in `evolver/prompts/` with `{name}` placeholders.

Same rules as the judge's templates (`rubric.judges.templates`): only `{lowercase_name}` is a placeholder, filled in
one pass, and a missing or unused value is an error.
"""

from __future__ import annotations

import os

from harnessrl_jax.rubric.judges.templates import fill, load_template, placeholders

PROMPTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prompts")

__all__ = ["PROMPTS_DIR", "fill", "load", "placeholders"]


def load(name_or_path: str) -> str:
    """A template by name (`proposer` -> evolver/prompts/proposer.txt) or by path to a .txt file."""
    if os.sep in name_or_path or name_or_path.endswith(".txt"):
        return load_template(name_or_path)
    return load_template(os.path.join(PROMPTS_DIR, f"{name_or_path}.txt"))
