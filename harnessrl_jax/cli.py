"""What the launch scripts share: absl's app.run where a user's mistake (a config that cannot run, a missing file,
checkpoint or server) is a short message and exit code 2 instead of a traceback; malloc settings; XLA flags.

XLA's CPU runtime allocates an executable's temporaries (gigabytes for a train step) afresh on every call, and glibc
maps so large a block from the kernel and unmaps it on free, so every call faults it in again, 4 KiB at a time. A
launch script run directly re-executes itself once on Linux with MALLOC_TUNABLES (huge pages; every block from the
main heap, kept for the next call), or only HUGE_PAGES with an accelerator; HARNESSRL_NO_REEXEC=1, or a
GLIBC_TUNABLES of one's own, turns that off. On the jaxlib versions in FUSION_EMITTERS_MEASURED the CPU backend
compiles with its older fusion emitters, which were faster there. docs/design.md (Measurements) has the numbers.
"""

from __future__ import annotations

import os
import sys
from typing import Callable

from harnessrl_jax.errors import USER_ERRORS


def report(error: BaseException) -> None:
    """Prints `error` as the launch scripts do: 'error: ...' on stderr."""
    print(f"error: {error}", file=sys.stderr, flush=True)


HUGE_PAGES = "glibc.malloc.hugetlb=1"
MALLOC_TUNABLES = f"{HUGE_PAGES}:glibc.malloc.mmap_max=0:glibc.malloc.arena_max=1:glibc.malloc.trim_threshold={1 << 40}"
ACCELERATOR_FILES = ("/dev/nvidia0", "/dev/kfd", "/dev/accel0")  # NVIDIA, AMD, TPU
REEXECUTED = "HARNESSRL_REEXECUTED"  # set on the re-executed process: GLIBC_TUNABLES is ours, not the user's


OLDER_FUSION_EMITTERS = "--xla_cpu_use_fusion_emitters=false"
FUSION_EMITTERS_MEASURED = ("0.10.",)  # jaxlib version prefixes
XLA_ADDED = "HARNESSRL_XLA_FLAGS_ADDED"  # what add_xla_flags appended to XLA_FLAGS (a child can take it back out)


def default_xla_flags() -> str:
    """OLDER_FUSION_EMITTERS where the installed jaxlib is one it was measured on (FUSION_EMITTERS_MEASURED), else
    ''."""
    from importlib import metadata

    try:
        version = metadata.version("jaxlib")
    except metadata.PackageNotFoundError:
        return ""
    return OLDER_FUSION_EMITTERS if version.startswith(FUSION_EMITTERS_MEASURED) else ""


def compilation_cache_dir() -> str:
    """JAX's persistent compilation cache of the launch scripts and the tests: $JAX_COMPILATION_CACHE_DIR, else
    $XDG_CACHE_HOME/harnessrl_jax/xla (~/.cache/harnessrl_jax/xla). It lies outside any checkout, so another clone on
    the same machine loads what an earlier one compiled: JAX keys each program by its HLO, the compile options and
    flags, the device assignment and the jaxlib version, so a changed program compiles anew and never loads a stale
    one. It grows without bound (JAX evicts nothing by default): delete the directory to reclaim the space."""
    return os.environ.get("JAX_COMPILATION_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "harnessrl_jax", "xla")


def add_xla_flags() -> None:
    """Appends default_xla_flags() to XLA_FLAGS unless it already names the option; takes effect in XLA backends
    created after it (call before the first computation) and in child processes."""
    flags = default_xla_flags()
    current = os.environ.get("XLA_FLAGS", "")
    if not flags or "xla_cpu_use_fusion_emitters" in current:
        return
    os.environ["XLA_FLAGS"] = f"{current} {flags}".strip()
    os.environ[XLA_ADDED] = flags


def user_environment() -> dict[str, str]:
    """os.environ without what this module set (the GLIBC_TUNABLES of the re-execution, the XLA flags it added): the
    environment a child process starts in as a user's would, e.g. an older checkout's train.py timed against this
    one (launch/bench_step.py); a launch script of this checkout started in it sets both again."""
    env = dict(os.environ)
    if env.pop(REEXECUTED, None) is not None:
        env.pop("GLIBC_TUNABLES", None)
    added = env.pop(XLA_ADDED, None)
    if added is not None:
        flags = env.get("XLA_FLAGS", "").replace(added, "").strip()
        if flags:
            env["XLA_FLAGS"] = flags
        else:
            env.pop("XLA_FLAGS", None)
    return env


def malloc_tunables() -> str:
    """MALLOC_TUNABLES where XLA computes on the host's CPU, HUGE_PAGES where it has an accelerator (its
    temporaries live on the device); decided before jax is imported, from JAX_PLATFORMS when set, else from the
    device files."""
    platforms = os.environ.get("JAX_PLATFORMS", "").strip()
    if platforms:
        accelerator = platforms.split(",")[0].strip().lower() != "cpu"
    else:
        accelerator = any(os.path.exists(f) for f in ACCELERATOR_FILES)
    return HUGE_PAGES if accelerator else MALLOC_TUNABLES


def reexec_with_malloc_tunables(script_is_main: bool) -> None:
    """Re-executes this launch script with GLIBC_TUNABLES=malloc_tunables() (glibc reads them at start), only when
    it runs as the main program (`script_is_main`; not a test calling its main). A script that imports jax at its
    top calls this before, so nothing is imported twice."""
    if (not script_is_main or not sys.platform.startswith("linux") or "GLIBC_TUNABLES" in os.environ
            or os.environ.get("HARNESSRL_NO_REEXEC") or not sys.argv or not os.path.isfile(sys.argv[0])):
        return
    tunables = malloc_tunables()
    sys.stdout.flush(), sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.argv],
              {**os.environ, "GLIBC_TUNABLES": tunables, REEXECUTED: tunables})


def run(main: Callable[[list[str]], object]) -> None:
    """absl.app.run(main), with USER_ERRORS reported by `report` and exit code 2 (a script run directly first
    re-executes itself with the malloc settings of the module docstring) and with add_xla_flags."""
    from absl import app

    is_main = getattr(main, "__module__", None) == "__main__"
    reexec_with_malloc_tunables(is_main)
    if is_main:
        add_xla_flags()

    def guarded(argv):
        try:
            return main(argv)
        except USER_ERRORS as e:
            report(e)
            sys.exit(2)

    app.run(guarded)
