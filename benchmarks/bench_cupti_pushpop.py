"""Cost of one CUPTI external-correlation push + pop pair through cupti-python (what every phase pays while
CUDA activity is collected). GPU machine: ``python3 benchmarks/bench_cupti_pushpop.py``."""

import statistics
import time

from cupti import cupti

K = int(cupti.ExternalCorrelationKind.CUSTOM0)
push, pop = cupti.activity_push_external_correlation_id, cupti.activity_pop_external_correlation_id


def loop(n, enabled):
    t0 = time.perf_counter_ns()
    for i in range(n):
        push(K, i)
        pop(K)
    return (time.perf_counter_ns() - t0) / n


def empty(n):
    t0 = time.perf_counter_ns()
    for i in range(n):
        pass
    return (time.perf_counter_ns() - t0) / n


n = 100_000
base = statistics.median(empty(n) for _ in range(5))
off = statistics.median(loop(n, False) for _ in range(5))
cupti.activity_enable(cupti.ActivityKind.EXTERNAL_CORRELATION)
cupti.activity_register_callbacks(lambda: (1 << 20, 0), lambda acts: None)
on = statistics.median(loop(n, True) for _ in range(5))
print(f"push+pop pair: {off - base:.0f} ns (collection off), {on - base:.0f} ns (EXTERNAL_CORRELATION on); "
      f"empty loop {base:.0f} ns")
