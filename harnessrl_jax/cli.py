"""What the launch scripts share: absl's app.run where a user's mistake (a config that cannot run, a missing file,
checkpoint or server) is reported as a short message and exit code 2 instead of a traceback."""

from __future__ import annotations

import sys
from typing import Callable

from harnessrl_jax.configs import ConfigError


class UserError(Exception):
    """A mistake the user fixes (a flag, a path, a server), not a bug: reported without a traceback."""


USER_ERRORS = (ConfigError, UserError, FileNotFoundError, NotADirectoryError, IsADirectoryError)


def report(error: BaseException) -> None:
    """Prints `error` as the launch scripts do: 'error: ...' on stderr."""
    print(f"error: {error}", file=sys.stderr, flush=True)


def run(main: Callable[[list[str]], object]) -> None:
    """absl.app.run(main), with USER_ERRORS reported by `report` and exit code 2."""
    from absl import app

    def guarded(argv):
        try:
            return main(argv)
        except USER_ERRORS as e:
            report(e)
            sys.exit(2)

    app.run(guarded)
