"""Prompt templates: text files in `rubric/prompts/` with `{name}` placeholders, filled in one pass.

Only `{lowercase_name}` is a placeholder, so JSON examples in a template (`{"criteria_met": true}`) need no
escaping, and text substituted in (a response that contains braces) is never re-read as a placeholder.
"""

from __future__ import annotations

import functools
import os
import re

PROMPTS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "prompts")
_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)\}")


def placeholders(template: str) -> set[str]:
    """The placeholder names a template uses."""
    return set(_parts(template)[1::2])


@functools.lru_cache(maxsize=256)
def _parts(template: str) -> tuple[str, ...]:
    # Literal text and placeholder names alternating (re.split with a group), split once per template: a judge
    # fills one template per cell.
    return tuple(_PLACEHOLDER.split(template))


@functools.lru_cache(maxsize=None)
def load_template(name_or_path: str) -> str:
    """A template by name (`criterion` -> prompts/criterion.txt) or by path to a .txt file."""
    path = name_or_path if os.sep in name_or_path or name_or_path.endswith(".txt") else \
        os.path.join(PROMPTS_DIR, f"{name_or_path}.txt")
    with open(path, encoding="utf-8") as f:
        return f.read()


def fill(template: str, **values: object) -> str:
    """The template with every placeholder replaced; a missing or unused value is an error (a typo, not a choice)."""
    parts = _parts(template)
    names = set(parts[1::2])
    if names != values.keys():
        missing, unused = names - set(values), set(values) - names
        raise KeyError(f"template placeholders {sorted(names)}: missing {sorted(missing)}, unused {sorted(unused)}")
    out = list(parts)
    out[1::2] = [str(values[name]) for name in parts[1::2]]
    return "".join(out)
