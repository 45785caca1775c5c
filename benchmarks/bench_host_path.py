#!/usr/bin/env python3
"""The host path (``--synthesis host --b-g2 host``): what each of its phases costs, and the b_g2 bases' decode.

Usage: python3 benchmarks/bench_host_path.py [--sizes 14,15,16] [--cores 1,2] [--race-logn 20]
       [--race-threads 16] [--keys DIR] [--out DIR]

1. **Phases** (``--sizes`` x ``--cores``): for each size and core count, a child process pinned to that many
   CPUs (``sched_setaffinity``, so ``cpu_threads()`` and the pools see them) runs the host work of one proof
   as the pipeline does, under a ``prove`` root, recorded with gputrace: ``synthesis`` (the fork pool of one
   process per core, the circuit's challenge-range parts, ``merge_parts``; child span ``fork_pool``),
   ``load_bases`` (the cached key's lazy b_g2 query decoded) and ``b_g2`` (``HostMsm`` over the cores: scalar
   conversion and the split G2 MSM). The GPU work of a CUDA proof (a few hundred ms at 2^20) is left out. The
   per-phase figures come from ``gputrace report --json`` on each child's trace (OUT/host-2_N-cK.jsonl).
2. **Race** (``--race-logn``, ``--race-threads``): the first read of a lazy G2 key query of 2^N points (rows
   tiled from the largest cached key, valid points) by the ``HostMsm`` parts of one b_g2, before and after
   5ad4271, in one run: *before* each of the k part threads read the query (``bases[lo:hi]``) and the query
   decoded without a lock (the previous ``PointRows.points``), so every part that arrived while the first
   decode ran decoded the whole query too; *after* the query is read once (``bases[:n]``) and decodes under
   a lock. Only the reads are timed (the MSM work after them is the same either way). Counts the decodes.

Keys are made with ``keygen=host`` into ``--keys`` when missing (2^16: about 25 s on 2 cores). Prints the
date, the CPU count and the load average; figures in benchmarks/RESULTS.md ("The host path at 2^20").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PHASES = ("prove", "synthesis", "fork_pool", "load_bases", "b_g2")


def keys_for(logn: int, key_dir: Path):
    from gputrace.prover.circuit import shape_for_constraints
    from gputrace.prover.keygen.cache import get_keys

    shape = shape_for_constraints(1 << logn)
    return shape, get_keys(shape, key_dir, 7, keygen="host")


def child(logn: int, cores: int, key_dir: Path, trace: Path) -> None:
    """One proof's host work on ``cores`` CPUs, traced (run in a process of its own)."""
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:cores])
    from py_arkworks_bls12381 import G2Point

    import gputrace
    from gputrace.prover.host_msm import HostMsm, cpu_threads
    from gputrace.prover.processes import fork_pool, stop
    from gputrace.prover.witness import merge_parts, split_challenges, synthesize_part

    shape, ks = keys_for(logn, key_dir)
    pk, opts, cpus = ks.pk, frozenset({"a1", "a2"}), cpu_threads()
    gputrace.configure(trace_file=str(trace), config={"bench": "host_path", "cores": cpus}, collect_gpu_info=False)
    try:
        with gputrace.phase("prove", kind="host", constraints=shape.constraints, cores=cpus):
            with gputrace.phase("synthesis", kind="host", device=-1, lane="thread:synth-0"):
                with gputrace.phase("fork_pool", kind="host", device=-1, lane="thread:synth-0"):
                    pool = fork_pool(cpus)
                try:
                    jobs = [pool.submit(synthesize_part, shape, 1, 0, opts, lo, hi)
                            for lo, hi in split_challenges(shape.challenges, cpus)]
                    w = merge_parts(shape, 0, pk.domain_size, [j.result() for j in jobs])
                finally:
                    stop(pool, interrupted=False)
            with gputrace.phase("load_bases", kind="host", device=-1, lane="thread:b_g2-pool-0", query="b_g2"):
                pk.b_g2.points()
            msm = HostMsm(cpus)
            try:
                with gputrace.phase("b_g2", kind="host", device=-1, lane="thread:b_g2-pool-0",
                                    parts=msm.parts_for(len(w.z_limbs))):
                    msm.multiexp(G2Point, pk.b_g2, w.z_limbs)
            finally:
                msm.close()
    finally:
        gputrace.shutdown()


def phase_totals(trace: Path) -> dict[str, float]:
    """Seconds per phase from ``gputrace report --json`` (summed over instances)."""
    r = subprocess.run([sys.executable, "-m", "gputrace", "report", "--json", str(trace)], capture_output=True,
                       text=True, check=True, cwd=ROOT)
    out: dict[str, float] = {}
    for row in json.loads(r.stdout)["phases"]:
        out[row["phase"]] = out.get(row["phase"], 0.0) + row["total_ns"] / 1e9
    return out


def race(logn: int, threads: int, key_dir: Path, repeats: int) -> None:
    from gputrace.prover import fixed_base

    src = max((p for p in key_dir.rglob("pk.npz")), key=lambda p: p.stat().st_size)
    with np.load(src) as z:
        rows = np.ascontiguousarray(z["b_g2"])
    n = 1 << logn
    tiled = np.ascontiguousarray(np.tile(rows, (-(-n // len(rows)), 1))[:n])
    cuts = np.linspace(0, n, threads + 1).astype(int).tolist()

    class Before(fixed_base.PointRows):
        """``PointRows.points`` before 5ad4271: check, then decode, no lock."""

        decodes = 0

        def points(self) -> list:
            if self._points is None:
                Before.decodes += 1
                self._points = fixed_base.decode_g2(self.rows.tobytes())
            return self._points

    def before() -> int:
        Before.decodes = 0
        q = Before(tiled, "g2")
        start = threading.Barrier(threads)

        def part(lo: int, hi: int) -> None:  # HostMsm's _part before 5ad4271: bases[lo:hi] on the pool thread
            start.wait()
            q[lo:hi]

        ts = [threading.Thread(target=part, args=(lo, hi)) for lo, hi in zip(cuts, cuts[1:], strict=False)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return Before.decodes

    def after() -> int:
        q = fixed_base.PointRows(tiled, "g2")
        points = q[:n]  # HostMsm.multiexp now: one read on the calling thread
        for lo, hi in zip(cuts, cuts[1:], strict=False):
            points[lo:hi]
        return 1 if q.decoded else 0

    times: dict[str, list[float]] = {"before": [], "after": []}
    decodes: dict[str, int] = {}
    for _ in range(repeats):  # interleaved: load drift hits both alike
        for name, fn in (("before", before), ("after", after)):
            t = time.perf_counter()
            decodes[name] = fn()
            times[name].append(time.perf_counter() - t)
    b, a = statistics.median(times["before"]), statistics.median(times["after"])
    print(f"\nb_g2 bases' first read, 2^{logn} G2 points, {threads} parts (median of {repeats}):")
    print(f"  before: {b:7.2f} s, {decodes['before']} decodes of the whole query")
    print(f"  after:  {a:7.2f} s, {decodes['after']} decode")
    print(f"  ratio:  {b / a:7.1f}x")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="14,15,16")
    ap.add_argument("--cores", default="1,2")
    ap.add_argument("--race-logn", type=int, default=20, help="0 skips the race")
    ap.add_argument("--race-threads", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=1, help="race repeats (interleaved)")
    ap.add_argument("--keys", type=Path, default=Path("/tmp/gputrace-bench-keys"))
    ap.add_argument("--out", type=Path, default=Path("/tmp/gputrace-bench-host-path"))
    ap.add_argument("--child", nargs=2, type=int, metavar=("LOGN", "CORES"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    if a.child:
        logn, cores = a.child
        child(logn, cores, a.keys, a.out / f"host-2_{logn}-c{cores}.jsonl")
        return 0
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {len(os.sched_getaffinity(0))} CPUs, "
          f"load {os.getloadavg()[0]:.1f}")
    sizes = [int(s) for s in a.sizes.split(",") if s]
    cores = [int(c) for c in a.cores.split(",") if c]
    rows = []
    for logn in sizes:
        keys_for(logn, a.keys)  # made here, once, not inside a timed child
        for c in cores:
            subprocess.run([sys.executable, __file__, "--child", str(logn), str(c), "--keys", str(a.keys),
                            "--out", str(a.out)], check=True)
            tot = phase_totals(a.out / f"host-2_{logn}-c{c}.jsonl")
            rows.append((logn, c, tot))
    if rows:
        print("\nphase seconds (gputrace report --json on OUT/host-2_N-cK.jsonl):")
        print(f"{'size':>5} {'cores':>5} " + " ".join(f"{p:>10}" for p in PHASES))
        for logn, c, tot in rows:
            print(f"{'2^' + str(logn):>5} {c:>5} " + " ".join(f"{tot.get(p, 0.0):10.3f}" for p in PHASES))
    if a.race_logn:
        race(a.race_logn, a.race_threads, a.keys, a.repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
