"""Start the real SGLang server on a CPU machine, from the environment `make sglang-env` builds.

    python third_party/sglang/cpu_server.py --model-path=DIR [--port=30000]

DIR is an HF directory (config.json, *.safetensors, tokenizer files), e.g. one `harnessrl_jax.models.export.export_hf`
writes. SGLang's CPU engine runs it in float32 with torch's own attention and sampling, no CUDA graphs and no overlap
scheduler; `cpu/sgl_kernel.py` and `cpu/sitecustomize.py` stand in for what the CPU install lacks. The
server is offline (a bad path is an error, not a hub look-up) and sleeps while idle instead of spinning a core.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Iterator

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
STAND_INS = os.path.join(HERE, "cpu")  # sgl_kernel.py and sitecustomize.py
VENV = os.path.join(REPO, ".venv-sglang")
PYTHON = os.path.join(VENV, "bin", "python")
STAMP = os.path.join(VENV, ".installed")


def command(model_path: str, port: int, *, host: str = "127.0.0.1", context_length: int = 2048,
            max_total_tokens: int = 16384, extra: tuple[str, ...] = ()) -> list[str]:
    """The launch command. `--dtype float32` is explicit: `auto` serves a float32 checkpoint in float16 on a CPU.
    The KV cache holds `max_total_tokens` (without a cap SGLang fills most of the machine's memory, ~14 GB here,
    and zeroing it takes half a minute)."""
    return [PYTHON, "-m", "sglang.launch_server", "--model-path", model_path, "--host", host, "--port", str(port),
            "--device", "cpu", "--attention-backend", "torch_native", "--sampling-backend", "pytorch",
            "--dtype", "float32", "--disable-overlap-schedule", "--cuda-graph-backend-decode", "disabled",
            "--cuda-graph-backend-prefill", "disabled", "--sleep-on-idle", "--context-length", str(context_length),
            "--max-total-tokens", str(max_total_tokens), *extra]


def environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment: the CPU engine, offline, and this folder's stand-ins first on the path. torch's
    OpenMP threads sleep when idle instead of spinning: on a machine whose cores are all busy (the test suite's two
    workers), spinning made a 4-row, 8-token generation take 12-14 s instead of 0.9 s."""
    env = dict(os.environ if base is None else base)
    path = [STAND_INS] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env.update(SGLANG_USE_CPU_ENGINE="1", HF_HUB_OFFLINE="1", PYTHONPATH=os.pathsep.join(path))
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


def check_installed() -> None:
    """Raise with what to run when the environment is missing."""
    if not (os.path.exists(STAMP) and os.access(PYTHON, os.X_OK)):
        raise FileNotFoundError(f"SGLang's CPU environment is not installed at {VENV}: run `make sglang-env`")


def start(model_path: str, port: int, *, log=None, **kwargs) -> subprocess.Popen:
    """Start the server as its own process group (SGLang forks a scheduler and a detokenizer: stop them all with
    os.killpg on the returned process's pid); its output goes to `log` (a file object)."""
    check_installed()
    return subprocess.Popen(command(model_path, port, **kwargs), env=environment(), stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT if log is not None else None,
                            start_new_session=True)


class Server:
    """A server `running` started: `url` at once, `wait()` until it answers /health."""

    def __init__(self, proc: subprocess.Popen, url: str, model_path: str, log_path: str, startup_timeout_s: float):
        self.proc, self.url, self.model_path, self.log_path = proc, url, model_path, log_path
        self.pid = proc.pid
        self.start_s: float | None = None  # from the launch to the first 200 from /health
        self._t0, self._timeout = time.monotonic(), startup_timeout_s

    def wait(self) -> "Server":
        """Block until /health answers 200; RuntimeError with the end of the log if the server exits or is not
        healthy within the start-up timeout. Logs one line every 15 s while it starts."""
        last = self._t0
        while self.start_s is None:
            if _healthy(self.url):
                self.start_s = time.monotonic() - self._t0
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"SGLang server exited with code {self.proc.returncode} while starting; its "
                                   f"log ({self.log_path}) ends:\n{_tail(self.log_path)}")
            now = time.monotonic()
            if now - self._t0 > self._timeout:
                raise RuntimeError(f"SGLang server not healthy after {self._timeout:g}s; its log "
                                   f"({self.log_path}) ends:\n{_tail(self.log_path)}")
            if now - last >= 15:
                print(f"SGLang server starting: {now - self._t0:.0f}s (log: {self.log_path})", file=sys.stderr,
                      flush=True)
                last = now
            time.sleep(0.5)
        return self


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=5) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):  # refused while starting, 503 until its warm-up generation is done
        return False


def _tail(path: str, n: int = 4000) -> str:
    with open(path, errors="replace") as f:
        return f.read()[-n:]


def stop(proc: subprocess.Popen, timeout_s: float = 30.0) -> None:
    """Stop the server's process group (SIGTERM, then SIGKILL after `timeout_s`)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError):  # children that outlived the launcher
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@contextlib.contextmanager
def running(model_path: str, log_path: str, *, port: int | None = None, startup_timeout_s: float = 300.0,
            wait: bool = True, **kwargs) -> Iterator[Server]:
    """A server started on `model_path` (see `start`, `command` for kwargs) until the block exits, its output in
    `log_path`; healthy on entry unless `wait` is False (then call `Server.wait()` before using it)."""
    if not port:
        from harnessrl_jax.rubric.judges.local_server import free_port  # the caller's environment, not the server's

        port = free_port()
    with open(log_path, "w") as log:
        proc = start(model_path, port, log=log, **kwargs)
        try:
            server = Server(proc, f"http://127.0.0.1:{port}", model_path, log_path, startup_timeout_s)
            yield server.wait() if wait else server
        finally:
            stop(proc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-path", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--context-length", type=int, default=2048)
    parser.add_argument("--max-total-tokens", type=int, default=16384)
    args, extra = parser.parse_known_args()
    check_installed()
    cmd = command(args.model_path, args.port, host=args.host, context_length=args.context_length,
                  max_total_tokens=args.max_total_tokens, extra=tuple(extra))
    os.execve(cmd[0], cmd, environment())


if __name__ == "__main__":
    sys.exit(main())
