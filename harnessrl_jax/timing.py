"""Timing for the benchmark scripts (launch/bench_*.py): the median of repeated calls, and the machine's float32
matmul rate that their tables state throughput against."""

from __future__ import annotations

import statistics
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


def matmul_rate(n: int = 2048, repeats: int = 5) -> float:
    """Float32 FLOP/s of a large jitted matmul: this machine's practical peak."""
    import jax
    import jax.numpy as jnp

    a = jax.random.normal(jax.random.PRNGKey(0), (n, n), jnp.float32)
    b = jax.random.normal(jax.random.PRNGKey(1), (n, n), jnp.float32)
    mm = jax.jit(lambda a, b: a @ b)
    return 2 * n**3 / median_time(lambda: mm(a, b).block_until_ready(), repeats)
