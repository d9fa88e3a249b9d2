"""The benches' in-process timer (one place): median wall time of a callable."""
import statistics
import time


def median_ms(f, repeats, loops=1, warmup=1):
    """Milliseconds per call of f: `warmup` untimed calls, then the median over `repeats` timings
    of `loops` calls each (several loops for calls too short to time one by one)."""
    for _ in range(warmup):
        f()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(loops):
            f()
        times.append((time.perf_counter() - t0) / loops)
    return 1e3 * statistics.median(times)
