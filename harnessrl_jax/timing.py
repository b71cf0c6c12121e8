"""Timing for the benchmark scripts (launch/bench_*.py): the median of repeated calls; the machine's float32 matmul
rate and memory read bandwidth, which their tables state throughput against and a recorded baseline is tagged with
(`machine`); XLA compile time as a run's start-up record counts it; and the process's peak resident memory, which a
run logs every step."""

from __future__ import annotations

import os
import platform
import resource
import statistics
import sys
import time


def median_time(fn, repeats: int, *, warmup: bool = True) -> float:
    """Median seconds of `repeats` calls of `fn` (after one untimed call that compiles and warms up)."""
    if warmup:
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def peak_rss_bytes(usage: resource.struct_rusage | None = None) -> int:
    """Peak resident memory in bytes from a getrusage or wait4 result (default: this process so far); ru_maxrss is
    KiB on Linux, bytes on macOS."""
    peak = (usage or resource.getrusage(resource.RUSAGE_SELF)).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def matmul_rate(n: int = 2048, repeats: int = 5) -> float:
    """Float32 FLOP/s of a large jitted matmul: this machine's practical peak."""
    import jax
    import jax.numpy as jnp

    a = jax.random.normal(jax.random.PRNGKey(0), (n, n), jnp.float32)
    b = jax.random.normal(jax.random.PRNGKey(1), (n, n), jnp.float32)
    mm = jax.jit(lambda a, b: a @ b)
    return 2 * n**3 / median_time(lambda: mm(a, b).block_until_ready(), repeats)


def read_bandwidth(gib: int = 1, repeats: int = 5) -> float:
    """Bytes per second of a streaming read: the median time of summing a `gib` GiB float32 array (jitted)."""
    import jax
    import jax.numpy as jnp

    x = jnp.ones((gib << 28,), jnp.float32)
    total = jax.jit(jnp.sum)
    return x.nbytes / median_time(lambda: total(x).block_until_ready(), repeats)


def cpu_model() -> str:
    """The CPU's model name as the kernel reports it ('model name' in /proc/cpuinfo), else platform.processor()."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine(tries: int = 3) -> dict:
    """What a benchmark's times depend on, measured now: CPU model, cores, float32 matmul GFLOP/s and read GB/s, each
    rate the best of `tries` medians (a shared machine has slow spells: one read-bandwidth median came out at half
    the others)."""
    return {"cpu": cpu_model(), "cores": os.cpu_count(),
            "matmul_gflops": round(max(matmul_rate() for _ in range(tries)) / 1e9, 1),
            "read_gbs": round(max(read_bandwidth() for _ in range(tries)) / 1e9, 1)}


def machine_differences(recorded: dict | None, now: dict, tolerance: float = 0.25) -> list[str]:
    """How the machine a baseline was recorded on differs from this one: another CPU model or core count, or a
    matmul rate or read bandwidth more than `tolerance` (relative) away. A baseline without a record differs."""
    if not recorded:
        return ["the baseline does not record its machine"]
    out = [f"{key} {recorded.get(key)!r} there, {now[key]!r} here" for key in ("cpu", "cores")
           if recorded.get(key) != now[key]]
    for key, unit in (("matmul_gflops", "GFLOP/s"), ("read_gbs", "GB/s")):
        there = recorded.get(key)
        if not there or abs(now[key] / there - 1) > tolerance:
            out.append(f"{key.split('_')[0]} {there} {unit} there, {now[key]} here")
    return out


# JAX's monitoring event names (jax._src.dispatch.BACKEND_COMPILE_EVENT, jax._src.compiler): one XLA compile or
# persistent-cache look-up, and one persistent-cache hit.
_BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
_CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"


class CompileTimer:
    """XLA compile seconds (cache look-ups included) and persistent-cache hits while active, read off JAX's own
    monitoring events; tracing and lowering are not counted (nested jits would count them twice)."""

    def __init__(self):
        self.seconds, self.compiles, self.cache_hits = 0.0, 0, 0
        self.active = False

    def _duration(self, event: str, duration: float, **_) -> None:
        if event == _BACKEND_COMPILE_EVENT:
            self.seconds += duration
            self.compiles += 1

    def _event(self, event: str, **_) -> None:
        if event == _CACHE_HIT_EVENT:
            self.cache_hits += 1

    def start(self) -> CompileTimer:
        """Starts counting (the listeners are process-wide: call `stop`)."""
        import jax

        if not self.active:
            jax.monitoring.register_event_duration_secs_listener(self._duration)
            jax.monitoring.register_event_listener(self._event)
            self.active = True
        return self

    def stop(self) -> None:
        """Stops counting (again: nothing)."""
        import jax

        if self.active:
            jax.monitoring.unregister_event_duration_listener(self._duration)
            jax.monitoring.unregister_event_listener(self._event)
            self.active = False

    def __enter__(self) -> CompileTimer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
