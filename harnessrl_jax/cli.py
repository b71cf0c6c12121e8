"""What the launch scripts share: absl's app.run where a user's mistake (a config that cannot run, a missing file,
checkpoint or server) is reported as a short message and exit code 2 instead of a traceback; and malloc on
transparent huge pages.

XLA's CPU runtime allocates an executable's temporaries afresh on every call (one block: ~1-5 GB for a SmolLM2
train step), glibc maps a block that large straight from the kernel, and the kernel faults it in 4 KiB pages:
about a million page faults per update, which serialise the compute threads (launch/bench_train.py shows them).
glibc's `glibc.malloc.hugetlb=1` tunable (glibc >= 2.35) asks for transparent huge pages instead, 512x fewer
faults; it is read only at process start, so a launch script run directly re-executes itself once with it set,
before anything else runs, where the kernel gives huge pages on request (transparent_hugepage 'madvise') and the
variable is not already set. HARNESSRL_NO_REEXEC=1, or any GLIBC_TUNABLES of one's own, turns that off."""

from __future__ import annotations

import os
import sys
from typing import Callable

from harnessrl_jax.configs import ConfigError


class UserError(Exception):
    """A mistake the user fixes (a flag, a path, a server), not a bug: reported without a traceback."""


USER_ERRORS = (ConfigError, UserError, FileNotFoundError, NotADirectoryError, IsADirectoryError)


def report(error: BaseException) -> None:
    """Prints `error` as the launch scripts do: 'error: ...' on stderr."""
    print(f"error: {error}", file=sys.stderr, flush=True)


HUGE_PAGES = "glibc.malloc.hugetlb=1"
THP_MODE = "/sys/kernel/mm/transparent_hugepage/enabled"
REEXECUTED = "HARNESSRL_REEXECUTED"  # set on the re-executed process: GLIBC_TUNABLES is ours, not the user's


def reexec_with_huge_pages(script_is_main: bool) -> None:
    """Re-executes this launch script with GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (see the module docstring), only
    when it runs as the main program (`script_is_main`; not a test calling its main) and the kernel hands out huge
    pages on request. A script that imports jax at its top calls this before, so nothing is imported twice."""
    if (not script_is_main or not sys.platform.startswith("linux") or "GLIBC_TUNABLES" in os.environ
            or os.environ.get("HARNESSRL_NO_REEXEC") or not sys.argv or not os.path.isfile(sys.argv[0])):
        return
    try:
        with open(THP_MODE) as f:
            if "[madvise]" not in f.read():  # 'always' needs no request, 'never' gives none
                return
    except OSError:
        return
    sys.stdout.flush(), sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.argv],
              {**os.environ, "GLIBC_TUNABLES": HUGE_PAGES, REEXECUTED: HUGE_PAGES})


def run(main: Callable[[list[str]], object]) -> None:
    """absl.app.run(main), with USER_ERRORS reported by `report` and exit code 2 (a script run directly first
    re-executes itself with malloc on transparent huge pages: see the module docstring)."""
    from absl import app

    reexec_with_huge_pages(getattr(main, "__module__", None) == "__main__")

    def guarded(argv):
        try:
            return main(argv)
        except USER_ERRORS as e:
            report(e)
            sys.exit(2)

    app.run(guarded)
