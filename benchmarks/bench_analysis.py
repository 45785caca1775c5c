"""Analysis speed on a large synthetic Timeline (prints a table).

    .venv/bin/python benchmarks/bench_analysis.py [--spans 1000000] [--repeats 5]

Builds a prover-shaped Timeline column-wise (prove roots with host and GPU children on
4 devices, CUDA-event times on GPU spans), then times each analysis function (median of
repeats) against a reference taken in the same run: one ``np.sort`` of the duration column.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from gputrace.timeline.model import KIND_CODES, Lane, Timeline

PHASES = ["prove", "synthesis", "pin", "h2d", "ntt", "msm_h", "msm_l", "msm_a", "msm_b_g1", "b_g2", "assemble", "unpin", "sync"]
KINDS = ["host", "host", "pin", "gpu", "gpu", "gpu", "gpu", "gpu", "gpu", "host", "host", "pin", "sync"]


def build(n_spans: int, devices: int = 4, seed: int = 0) -> Timeline:
    rng = np.random.default_rng(seed)
    per = len(PHASES)
    roots = n_spans // per
    n = roots * per
    dur = rng.integers(1_000, 50_000, size=n).astype(np.int64)
    dur[::per] = 0
    ph = np.tile(np.arange(per, dtype=np.int32), roots)
    # children back to back inside each root; root spans all of them
    d2 = dur.reshape(roots, per).copy()
    gapped = d2 + 500  # leave small gaps between children
    gapped[:, 0] = 0
    offs = np.cumsum(gapped, axis=1) - gapped
    root_len = gapped.sum(axis=1)
    root_start = np.concatenate([[0], np.cumsum(root_len)[:-1]]) + 1_700_000_000_000_000_000
    start = (root_start[:, None] + offs).reshape(-1)
    end = start + d2.reshape(-1)
    end[::per] = root_start + root_len
    kind = np.array([KIND_CODES[k] for k in KINDS], np.int8)[ph]
    dev_of_root = np.arange(roots) % devices
    device = np.where(kind == KIND_CODES["gpu"], np.repeat(dev_of_root, per), -1).astype(np.int16)
    device[ph == 2] = np.repeat(dev_of_root, 1)[: (ph == 2).sum()]
    lanes = [Lane("h", 1, -1, "thread:main")] + [Lane("h", 1, d, f"stream:{d}") for d in range(devices)]
    lane = np.where(kind == KIND_CODES["gpu"], device.astype(np.int32) + 1, 0).astype(np.int32)
    is_gpu = kind == KIND_CODES["gpu"]
    gs = np.where(is_gpu, start + 100, -1)
    ge = np.where(is_gpu, end - 50, -1)
    nb = np.where(ph == 3, 1 << 28, -1)
    span_id = np.arange(1, n + 1, dtype=np.uint64)
    parent = np.repeat(span_id[::per], per)
    parent[::per] = 0
    cols = dict(start=start, end=end, gpu_start=gs, gpu_end=ge, phase=ph, lane=lane, device=device, kind=kind,
                nbytes=nb, span_id=span_id, parent_span_id=parent, resource=np.zeros(n, np.int32), trace=np.zeros(n, np.int32),
                circuit=np.repeat(np.arange(roots) % 8, per), batch=np.repeat(np.arange(roots) // 8, per))
    return Timeline.from_unsorted(cols, PHASES, lanes, [{"gputrace.run_id": "bench"}], ["0" * 32])


def timed(fn, repeats):
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spans", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    from gputrace.analysis import critical_path, gpu_idle_gaps, host_waits, phase_stats, pinning_economics, unattributed_time
    from gputrace.analysis.ab.measures import run_measures
    from gputrace.analysis.report import analyse_timeline

    t = time.perf_counter()
    tl = build(a.spans)
    print(f"built {tl.n:,} spans in {time.perf_counter() - t:.2f} s")
    ref = timed(lambda: np.sort(tl.duration()), a.repeats)
    roots = np.flatnonzero(tl.cols["parent"] < 0)
    rows = [
        ("np.sort(durations) [reference]", lambda: np.sort(tl.duration())),
        ("phase_stats(by_device=True)", lambda: phase_stats(tl)),
        ("gpu_idle_gaps", lambda: gpu_idle_gaps(tl)),
        ("host_waits", lambda: host_waits(tl)),
        ("pinning_economics", lambda: pinning_economics(tl)),
        ("unattributed_time", lambda: unattributed_time(tl)),
        ("critical_path (one prove root)", lambda: critical_path(tl, int(roots[len(roots) // 2]))),
        ("run_measures (compare input)", lambda: run_measures(tl)),
        ("analyse_timeline (TUI panels)", lambda: analyse_timeline(tl, critical=False)),
        ("analyse_timeline (report)", lambda: analyse_timeline(tl)),
    ]
    print(f"{'function':34s} {'median s':>10s} {'x reference':>12s}")
    for name, fn in rows:
        m = timed(fn, a.repeats)
        print(f"{name:34s} {m:10.4f} {m / ref:12.1f}")


if __name__ == "__main__":
    main()
