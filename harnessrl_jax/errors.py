"""The errors a user fixes (a config that cannot run, a flag, a path, a server): raised anywhere in the package and
reported by the launch scripts in a few lines, without a traceback."""

from __future__ import annotations


class UserError(Exception):
    """A mistake the user fixes (a flag, a path, a server), not a bug: reported without a traceback."""


class ConfigError(ValueError):
    """A config that cannot run; `problems` lists each problem, naming the key or flag that fixes it."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("the config cannot run:\n" + "\n".join(f"  - {p}" for p in self.problems))


# What a launch script reports as a short message and exit code 2.
USER_ERRORS = (ConfigError, UserError, FileNotFoundError, NotADirectoryError, IsADirectoryError)
