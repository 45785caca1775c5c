"""GPU-activity analysis and `report` on a synthetic trace with many kernels (prints a table).

    .venv/bin/python benchmarks/bench_gpu_activity.py [--kernels 100000] [--gpus 2] [--repeats 5]

Builds the trace with ``gputrace.testing.activity_synth`` (prover-shaped: phases with CUDA-event brackets on
``stream:1``, kernels with launch gaps, pinned and pageable copies, memsets, a stream sync per batch), reads it
back through the OTLP reader, then times (median of ``--repeats``, each on a fresh copy of the Timeline so
the activity-index cache is cold) each GPU-activity function and the whole ``report`` analysis, next to a
reference taken in the same run: the phase statistics of the same Timeline (``phase_stats``), which every
report already computes. Figures go to benchmarks/RESULTS.md (## GPU activity analysis).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time


def _median(fn, repeats: int, tl) -> float:
    out = []
    for _ in range(repeats):
        t = copy.copy(tl)  # a new object: the per-Timeline activity-index cache starts cold
        t0 = time.perf_counter()
        fn(t)
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=100_000)
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()

    from gputrace.analysis.gpu_activity import activity_index, device_busy, launch_gaps
    from gputrace.analysis.gpu_summary import gpu_summary
    from gputrace.analysis.gpu_transfers import copy_table, kernel_table, sync_waits
    from gputrace.analysis.stats import phase_stats
    from gputrace.commands.report import analyse
    from gputrace.testing.activity_synth import activity_run_timeline

    t0 = time.perf_counter()
    tl = activity_run_timeline(kernels=a.kernels, gpus=a.gpus, kernels_per_phase=20, seed=1)
    build = time.perf_counter() - t0
    n_act = len(activity_index(tl))
    print(f"trace: {tl.n:,} spans, {n_act:,} activity spans ({a.kernels:,} kernels, {a.gpus} GPUs); built and read in {build:.2f} s")
    ref = _median(lambda t: phase_stats(t), a.repeats, tl)
    rows = [
        ("phase_stats (reference)", ref),
        ("activity_index", _median(activity_index, a.repeats, tl)),
        ("device_busy", _median(device_busy, a.repeats, tl)),
        ("launch_gaps", _median(launch_gaps, a.repeats, tl)),
        ("copy_table", _median(copy_table, a.repeats, tl)),
        ("sync_waits", _median(sync_waits, a.repeats, tl)),
        ("kernel_table", _median(kernel_table, a.repeats, tl)),
        ("gpu_summary (all of the above)", _median(gpu_summary, a.repeats, tl)),
        ("report analyse() (everything)", _median(analyse, max(1, a.repeats // 2), tl)),
    ]
    print(f"{'function':34s} {'median ms':>10s} {'x reference':>12s}")
    for name, s in rows:
        print(f"{name:34s} {s * 1e3:10.1f} {s / ref:12.2f}")


if __name__ == "__main__":
    main()
