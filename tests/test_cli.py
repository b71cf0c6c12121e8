"""The launch scripts' malloc settings (harnessrl_jax/cli.py): a script run directly re-executes itself with them, and
glibc then serves large blocks, from any thread, out of the main heap, where freed memory stays for the next call;
on an accelerator host, huge pages only."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap

import pytest

from harnessrl_jax import cli

SCRIPT = textwrap.dedent("""
    import ctypes, os, threading
    from harnessrl_jax import cli
    cli.reexec_with_malloc_tunables(True)
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    blocks = [libc.malloc(256 << 20)]  # an XLA temporary's size class, from the main thread ...
    worker = threading.Thread(target=lambda: blocks.append(libc.malloc(256 << 20)))  # ... and from another
    worker.start(), worker.join()
    heap = [[int(x, 16) for x in line.split()[0].split("-")] for line in open("/proc/self/maps")
            if line.rstrip().endswith("[heap]")]  # one region per page size with huge pages
    print(os.environ.get("GLIBC_TUNABLES"), *(any(lo <= b < hi for lo, hi in heap) for b in blocks))
""")


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's tunables")
def test_a_launch_script_reexecutes_with_the_malloc_tunables_and_glibc_applies_them(tmp_path):
    script = tmp_path / "launch_me.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items()
           if k not in ("GLIBC_TUNABLES", "HARNESSRL_NO_REEXEC", cli.REEXECUTED, "JAX_PLATFORMS")}
    if any(os.path.exists(f) for f in cli.ACCELERATOR_FILES):
        env["JAX_PLATFORMS"] = "cpu"  # XLA on this host's CPU, whatever else it has

    def run(**extra) -> list[str]:
        out = subprocess.run([sys.executable, str(script)], env={**env, **extra}, capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout.split()

    # re-executed once with the tunables: both blocks in the main heap (mmap_max=0, arena_max=1)
    assert run() == [cli.MALLOC_TUNABLES, "True", "True"]
    # without them, glibc maps blocks this large from the kernel, from either thread
    assert run(HARNESSRL_NO_REEXEC="1") == ["None", "False", "False"]
    # a user's own GLIBC_TUNABLES are kept as they are
    assert run(GLIBC_TUNABLES="glibc.malloc.check=0") == ["glibc.malloc.check=0", "False", "False"]
    # XLA on an accelerator: huge pages only, large blocks mapped as glibc does by default
    assert run(JAX_PLATFORMS="cuda,cpu") == [cli.HUGE_PAGES, "False", "False"]


def test_a_launch_script_run_directly_compiles_with_the_xla_flags_and_one_imported_does_not(tmp_path):
    script = tmp_path / "launch_me.py"
    script.write_text(textwrap.dedent("""
        import os, sys
        from harnessrl_jax import cli
        def main(argv):
            print(os.environ.get("XLA_FLAGS"))
        if sys.argv[1:] == ["imported"]:
            main.__module__ = "a_library"  # cli.run called from a module that is not the program
        cli.run(main)
    """))
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", cli.XLA_ADDED)}

    def run(*args) -> str:
        out = subprocess.run([sys.executable, str(script), *args], env={**env, "HARNESSRL_NO_REEXEC": "1"},
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    assert run() == (cli.default_xla_flags() or "None")
    assert run("imported") == "None"


def test_xla_flags_are_added_once_only_on_measured_jaxlibs_and_taken_back_out_for_a_users_run(monkeypatch):
    from importlib import metadata

    monkeypatch.delenv(cli.XLA_ADDED, raising=False)
    monkeypatch.setattr(metadata, "version", lambda name: "0.10.2")
    assert cli.default_xla_flags() == cli.OLDER_FUSION_EMITTERS
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
    cli.add_xla_flags()
    cli.add_xla_flags()  # named already: not added twice
    assert os.environ["XLA_FLAGS"] == f"--xla_force_host_platform_device_count=2 {cli.OLDER_FUSION_EMITTERS}"
    # a child that must start as a user's would (bench_step on an older checkout) gets the user's flags back
    assert cli.user_environment()["XLA_FLAGS"] == "--xla_force_host_platform_device_count=2"
    monkeypatch.delenv("XLA_FLAGS")
    monkeypatch.delenv(cli.XLA_ADDED)
    cli.add_xla_flags()
    assert "XLA_FLAGS" not in cli.user_environment()
    # the user's own setting of the option is kept
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=true")
    monkeypatch.delenv(cli.XLA_ADDED)
    cli.add_xla_flags()
    assert os.environ["XLA_FLAGS"] == "--xla_cpu_use_fusion_emitters=true" and cli.XLA_ADDED not in os.environ
    # a jaxlib it was not measured on (XLA aborts on a flag it does not know) gets none
    monkeypatch.setattr(metadata, "version", lambda name: "0.11.0")
    assert cli.default_xla_flags() == ""


def test_the_compilation_cache_is_the_users_cache_directory_unless_jax_is_told_another(monkeypatch, tmp_path):
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cli.compilation_cache_dir() == str(tmp_path / "xdg" / "harnessrl_jax" / "xla")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cli.compilation_cache_dir() == str(tmp_path / "home" / ".cache" / "harnessrl_jax" / "xla")
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "mine"))
    assert cli.compilation_cache_dir() == str(tmp_path / "mine")
