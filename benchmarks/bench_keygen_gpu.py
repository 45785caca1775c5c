#!/usr/bin/env python3
"""Key generation on the GPU and the largest proofs on one device (issue 13; device machine only).

    python3 benchmarks/bench_keygen_gpu.py --kernel 20 --largest 22,24 --keys /tmp/gk --repeats 2 --deadline 540

1. ``--kernel N``: the fixed-base kernels alone, 2^N random scalars, G1 and G2: CUDA-event time of the
   kernel launch (median of 3 after a warm-up) and the host wall of ``mul_rows`` (kernel + copy to the host).
2. ``--keygen N,..``: ``get_keys(..., keygen="device")`` into a fresh directory, per ``setup`` child phase
   (host wall, from gputrace's own trace).
3. ``--largest N,..``: for each size, ``run_prove`` on one GPU with device key generation (cold key cache),
   then ``--repeats`` more proofs with the keys cached (each loads ``pk.npz``): setup seconds and its phases,
   prove wall, per-phase seconds, peak device memory in use (``cudaMemGetInfo`` sampled every 20 ms, the
   whole device), every proof verified (``verify``: arkworks pairings, as every benchmark here).
Writes ``$OUT/bench_keygen_gpu.json`` after every step (a timeout still leaves what was done) and the
traces ``$OUT/largest-2_N-*.jsonl``; prints a table last. ``--deadline`` (s): no new size starts after it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = Path(os.environ.get("OUT") or ROOT / "gpu-out")
OUT.mkdir(parents=True, exist_ok=True)
START = time.perf_counter()
RES: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "command": " ".join(sys.argv)}
TABLE: list[tuple[str, str]] = []
SETUP_PHASES = ("setup_fingerprint", "setup_qap", "setup_fixed_base", "setup_decode", "key_save", "key_load")


def save() -> None:
    (OUT / "bench_keygen_gpu.json").write_text(json.dumps(RES, indent=1, default=str))


def row(item: str, value: str) -> None:
    TABLE.append((item, value))
    print(f"  {item:<44} {value}", flush=True)


class PeakMemory:
    """Largest ``total - free`` device memory seen by a thread polling ``cudaMemGetInfo`` (the whole device)."""

    def __init__(self, device: int = 0, every_s: float = 0.02) -> None:
        self.device, self.every_s, self.peak, self._stop = device, every_s, 0, threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import cupy

        with cupy.cuda.Device(self.device):
            while not self._stop.is_set():
                free, total = cupy.cuda.runtime.memGetInfo()
                self.peak = max(self.peak, total - free)
                time.sleep(self.every_s)

    def __enter__(self) -> "PeakMemory":
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()


def trace_phases(trace: Path, names=SETUP_PHASES) -> dict[str, float]:
    """Seconds per span name (summed) among ``names`` in a trace file."""
    from gputrace.timeline import read_trace

    tl = read_trace(trace)
    out: dict[str, float] = {}
    for i in range(tl.n):
        nm = tl.name_of(i)
        if nm in names:
            out[nm] = out.get(nm, 0.0) + (int(tl.cols["end"][i]) - int(tl.cols["start"][i])) / 1e9
    return out


def kernel_bench(logn: int) -> None:
    import cupy
    import numpy as np

    from gputrace.prover.backends.cuda_fixed_base import FixedBaseGpu
    from gputrace.prover.field import R

    fb = FixedBaseGpu(0)
    n = 1 << logn
    rng = np.random.default_rng(1)
    limbs = rng.integers(0, 1 << 63, size=(n, 4), dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, (n, 4), dtype=np.uint64)
    limbs[:, 3] %= np.uint64(R >> 192)  # below r
    dev = cupy.asarray(limbs)
    res = {}
    for group in ("g1", "g2"):
        fb.mul(group, dev[:1024])  # warm-up: module build, table upload
        times = []
        for _ in range(3):
            a, b = cupy.cuda.Event(), cupy.cuda.Event()
            a.record()
            out = fb.mul(group, dev)
            b.record()
            b.synchronize()
            times.append(cupy.cuda.get_elapsed_time(a, b))
            del out
        t = time.perf_counter()
        rows = fb.mul_rows(group, dev)
        wall = time.perf_counter() - t
        res[group] = dict(points=n, kernel_ms=statistics.median(times), kernel_runs_ms=times, mul_rows_wall_s=wall,
                          ns_per_point=statistics.median(times) * 1e6 / n, bytes=int(rows.nbytes))
        row(f"fixed base {group} 2^{logn} (CUDA events)", f"{statistics.median(times):.1f} ms "
            f"({res[group]['ns_per_point']:.1f} ns/point); with d2h {wall:.2f} s wall")
        del rows
    RES["kernel"] = res
    save()


def keygen_bench(sizes: list[int]) -> None:
    import gputrace
    from gputrace.prover.circuit import shape_for_constraints
    from gputrace.prover.keygen.cache import get_keys

    res = RES.setdefault("keygen", {})
    for logn in sizes:
        d = Path(tempfile.mkdtemp(prefix="gputrace-kg-"))
        tr = OUT / f"keygen-2_{logn}.jsonl"
        gputrace.configure(trace_file=str(tr))
        t = time.perf_counter()
        try:
            with PeakMemory() as pm:
                ks = get_keys(shape_for_constraints(1 << logn), d, seed=1, keygen="device")
        finally:
            gputrace.shutdown()
        wall = time.perf_counter() - t
        res[logn] = dict(wall_s=wall, phases=trace_phases(tr), peak_device_bytes=pm.peak, shape=ks.directory.name)
        shutil.rmtree(d, ignore_errors=True)
        row(f"keygen 2^{logn} on the device (host wall)", f"{wall:.2f} s: " + ", ".join(
            f"{k} {v:.2f}" for k, v in res[logn]["phases"].items()))
        save()


def largest_bench(sizes: list[int], keys: Path, repeats: int, deadline: float) -> None:
    from gputrace.prover.options import OPT_NAMES, ProveOptions
    from gputrace.prover.pipeline import run_prove

    res = RES.setdefault("largest", {})
    tmp = Path(tempfile.mkdtemp(prefix="gputrace-largest-"))
    for logn in sizes:
        if time.perf_counter() - START > deadline:
            row(f"largest 2^{logn}", f"skipped: --deadline {deadline:.0f} s passed")
            continue
        entry: dict = res.setdefault(logn, {"runs": []})
        for rep in range(1 + repeats):
            if rep and time.perf_counter() - START > deadline:
                break
            # Traces of the keygen run and the first cached run only ($OUT brings back at most 8 files).
            tr = OUT / f"largest-2_{logn}-{'keygen' if rep == 0 else 'cached'}.jsonl" if rep <= 1 else None
            o = ProveOptions(constraints=1 << logn, backend="cuda", opts=frozenset(OPT_NAMES), out_dir=tmp / f"o{rep}",
                             key_dir=keys, key_seed=1, keygen="device", trace=tr)
            t = time.perf_counter()
            with PeakMemory() as pm:
                r = run_prove(o)
            total = time.perf_counter() - t
            phases: dict[str, float] = {}
            for (name, _label), sec in r.phase_seconds.items():
                phases[name] = phases.get(name, 0.0) + sec
            run = dict(total_s=total, setup_s=r.setup_s, wall_s=r.wall_s, key_cached=r.key_cached,
                       verified=r.verified, phases=phases, setup_phases=trace_phases(tr) if tr else {},
                       peak_device_bytes=pm.peak, constraints=r.constraints, shape=f"K{r.challenges}-D{r.depth}")
            entry["runs"].append(run)
            if not all(r.verified) or not r.verified:
                entry["error"] = f"not verified: {r.verified}"
            cached = [x["wall_s"] for x in entry["runs"] if x["key_cached"]]
            entry["median_cached_wall_s"] = statistics.median(cached) if cached else None
            save()
            print(f"  2^{logn} run {rep}: setup {r.setup_s:.1f} s (cached={r.key_cached}), prove {r.wall_s:.2f} s, "
                  f"verified {r.verified}, peak {pm.peak / 2**30:.1f} GiB; phases "
                  + ", ".join(f"{k} {v:.3f}" for k, v in sorted(phases.items())), flush=True)
        first = entry["runs"][0]
        row(f"2^{logn} ({first['shape']}, {first['constraints']:,} constraints)",
            f"keygen {first['setup_s']:.1f} s, prove {first['wall_s']:.2f} s cold / "
            + (f"{entry['median_cached_wall_s']:.2f} s cached (median of {len(entry['runs']) - 1})"
               if entry["median_cached_wall_s"] else "-")
            + f", verified={all(all(x['verified']) for x in entry['runs'])}, peak "
            f"{max(x['peak_device_bytes'] for x in entry['runs']) / 2**30:.1f} GiB")
        shutil.rmtree(tmp / "o0", ignore_errors=True)
    shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", type=int, default=0, help="log2 points for the fixed-base kernel timing (0: skip)")
    ap.add_argument("--keygen", default="", help="log2 sizes: device key generation alone")
    ap.add_argument("--largest", default="", help="log2 sizes: keygen + proofs on one GPU")
    ap.add_argument("--keys", default="/tmp/gk-largest")
    ap.add_argument("--repeats", type=int, default=2, help="proofs with cached keys per size")
    ap.add_argument("--deadline", type=float, default=float("inf"))
    a = ap.parse_args()
    ints = lambda s: [int(x) for x in s.split(",") if x.strip()]  # noqa: E731
    rc = 0
    try:
        if a.kernel:
            kernel_bench(a.kernel)
        if a.keygen:
            keygen_bench(ints(a.keygen))
        if a.largest:
            largest_bench(ints(a.largest), Path(a.keys), a.repeats, a.deadline)
    except Exception as exc:
        import traceback

        traceback.print_exc()
        RES["error"] = repr(exc)
        rc = 1
    finally:
        RES["elapsed_s"] = time.perf_counter() - START
        save()
    print("\n== bench_keygen_gpu ==")
    for item, value in TABLE:
        print(f"{item:<44} {value}")
    return rc or (1 if any("error" in e for e in RES.get("largest", {}).values()) else 0)


if __name__ == "__main__":
    sys.exit(main())
