"""What the exporter spends per CUDA activity span, on the host, end to end after CUPTI's conversion.

The path a recorded PyTorch step's records take in the program's process (all of it holds the GIL the
program's own thread needs): CUPTI's buffer -> plain dicts (``CuptiCollector._completed``) -> spans
(``ActivityJoin.add`` / ``take``: correlation, names, attributes) -> OTLP JSON (``encode_request``).
No CUDA: fake records (bench_cupti_convert.py's) in a training step's mix, with long mangled kernel names as
PyTorch's are (a few dozen distinct names repeating every step).

    .venv/bin/python benchmarks/bench_exporter_path.py [--steps 400] [--repeats 5] [--profile]

Prints µs per span for each stage (median of the repeats) and in all; ``--profile``: the top functions.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cupti_convert import AK, Api, External, Kernel, _make, collector  # noqa: E402

from gputrace.otlp.encode import encode_request  # noqa: E402
from gputrace.trace.cupti_join import ActivityJoin  # noqa: E402
from gputrace.trace.records import IdSource  # noqa: E402

#: Kernel names as a CNN step launches them (mangled, templated, long).
NAMES = [f"_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_{i}FunctorIfEESt5arrayIPcLm{i % 3 + 2}EEEEviT0_T1_"
         for i in range(40)]


def step_records(step: int, per_step: int = 50) -> list:
    out = []
    base = step * per_step
    for j in range(per_step):
        i = base + j
        t = 1_000_000 + 1000 * i
        out.append(_make(Api, kind=int(AK.RUNTIME), start=t, end=t + 3, correlation_id=i, cbid=211, thread_id=4242,
                         process_id=77))
        out.append(_make(Kernel, kind=int(AK.CONCURRENT_KERNEL), start=t + 5, end=t + 12, device_id=0, context_id=1,
                         stream_id=7, correlation_id=i, name=NAMES[j % len(NAMES)], grid_x=128, grid_y=1, grid_z=1,
                         block_x=256, block_y=1, block_z=1, registers_per_thread=32, static_shared_memory=0,
                         dynamic_shared_memory=4096))
        if j % 10 == 0:
            out.append(_make(External, kind=int(AK.EXTERNAL_CORRELATION), correlation_id=i, external_id=7,
                             external_kind=5))
    return out


def one_run(steps: int) -> tuple[float, float, float, int]:
    c = collector()
    recs = [r for s in range(steps) for r in step_records(s)]
    join = ActivityJoin(IdSource())
    t0 = time.perf_counter_ns()
    c._completed(recs)
    plain = c._swap()
    t1 = time.perf_counter_ns()
    spans = join.add(plain)
    spans.extend(join.take(True))
    t2 = time.perf_counter_ns()
    for k in range(0, len(spans), 2048):
        encode_request({"service.name": "bench"}, spans[k:k + 2048])
    t3 = time.perf_counter_ns()
    n = len(spans)
    return (t1 - t0) / n / 1e3, (t2 - t1) / n / 1e3, (t3 - t2) / n / 1e3, n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args(argv)
    if a.profile:
        pr = cProfile.Profile()
        pr.enable()
        one_run(a.steps)
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(18)
        return 0
    runs = [one_run(a.steps) for _ in range(a.repeats)]
    conv, join, enc = (statistics.median(r[i] for r in runs) for i in range(3))
    print(f"spans per run: {runs[0][3]}")
    print(f"{'stage':28} {'us/span':>8}")
    for name, v in (("convert (_completed)", conv), ("join (add+take)", join), ("encode (OTLP JSON)", enc),
                    ("all", conv + join + enc)):
        print(f"{name:28} {v:8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
