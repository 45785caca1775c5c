"""Trace file writing and reading speed (spans/s) and reader peak memory.

    python benchmarks/bench_reader.py [--spans 1000000] [--repeats 3] [--dir /tmp]

Prints a table:

* write: ``encode_request`` + file write of pre-built span dicts (the file sink's work; span
  generation is excluded), 512 spans per line; the orjson-dict reference encoder timed on the
  same spans gives the ratio;
* decode: one pass over the file's lines with the typed msgspec decoder vs ``orjson.loads``
  (the reason the reader uses msgspec Structs);
* read: ``read_trace`` of the whole file into a Timeline (spans/s), in a fresh subprocess per
  repeat, with that process's peak RSS (ru_maxrss) and its RSS right after imports;
* reference in the same run: the same read with the reader's fast path switched off
  (``TraceLoader(fast=False)``: every line through the general msgspec decoder, i.e. the reader
  before the fast path), one fresh process per repeat, alternating with the fast reads. Rates
  are also given per CPU second of the reading process (``time.process_time``), which a shared
  machine disturbs less than wall time.

Medians over ``--repeats``. Targets (issue 2): write >= 0.5 M spans/s, read >= 0.5 M spans/s,
reader memory <= 1 GiB for 1 M spans.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

from gputrace.otlp.encode import encode_request, encode_request_reference
from gputrace.testing.synthetic import SyntheticSpec, iter_synthetic

# VmHWM (not ru_maxrss, which survives execve and would report the parent's peak).
_CHILD = r"""
import json, resource, sys, time
import gputrace.timeline as T
from gputrace.timeline.formats.otlp_jsonl._loader import TraceLoader
from gputrace.timeline.formats.otlp_jsonl._feed import load_file_into
def hwm():
    for ln in open("/proc/self/status"):
        if ln.startswith("VmHWM:"):
            return int(ln.split()[1])
base = hwm()
t = time.perf_counter()
c = time.process_time()
workers = int(sys.argv[2])
if workers == 0:  # reference: general decoder only
    loader = TraceLoader(fast=False)
    load_file_into(loader, sys.argv[1])
    tl = loader.timeline()
else:
    tl = T.read_trace(sys.argv[1], workers=workers)
dt = time.perf_counter() - t
cpu = time.process_time() - c
worker = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # largest worker process
print(json.dumps({"n": tl.n, "s": dt, "cpu": cpu, "peak_kib": hwm(), "base_kib": base, "worker_kib": worker}))
"""


def _spans(n: int, seed: int = 1):
    spec = SyntheticSpec(hosts=2, gpus=4, streams=2, circuits=8, target_spans=n, seed=seed)
    out = []
    for res, spans in iter_synthetic(spec):
        out.append((res, spans))
    return out


def bench_write(groups, path: str, encoder, per_line: int = 512) -> float:
    n = 0
    t = time.perf_counter()
    with open(path, "wb") as f:
        for res, spans in groups:
            for i in range(0, len(spans), per_line):
                chunk = spans[i:i + per_line]
                f.write(encoder(res, chunk) + b"\n")
                n += len(chunk)
    return n / (time.perf_counter() - t)


def bench_decode(path: str) -> tuple[float, float, float, int]:
    import orjson

    from gputrace.otlp.schema import lean_decoder
    from gputrace.otlp.schema import request_decoder

    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    lines = [ln for ln in lines if ln]
    n = sum(len(ss.spans) for ln in lines[:1] for rs in request_decoder.decode(ln).resourceSpans for ss in rs.scopeSpans)
    t = time.perf_counter()
    total = 0
    for ln in lines:
        req = request_decoder.decode(ln)
        total += sum(len(ss.spans) for rs in req.resourceSpans for ss in rs.scopeSpans)
    t_ms = time.perf_counter() - t
    del req
    t = time.perf_counter()
    for ln in lines:
        obj = orjson.loads(ln)
    t_oj = time.perf_counter() - t
    t = time.perf_counter()
    for ln in lines:
        obj = lean_decoder.decode(ln)
    t_lean = time.perf_counter() - t
    del obj, n
    return total / t_ms, total / t_oj, total / t_lean, total


def bench_read(path: str, workers: int) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, path, str(workers)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spans", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--workers", type=int, default=0, help="reader worker processes (0: default_workers())")
    ap.add_argument("--skip-reference", action="store_true", help="do not time the slower reference encoder")
    a = ap.parse_args(argv)
    path = os.path.join(a.dir, f"gputrace_bench_{a.spans}.jsonl")
    t = time.perf_counter()
    groups = _spans(a.spans)
    gen_s = time.perf_counter() - t
    w_fast, w_ref = [], []
    for _ in range(a.repeats):
        w_fast.append(bench_write(groups, path, encode_request))
        if not a.skip_reference:
            w_ref.append(bench_write(groups, path + ".ref", encode_request_reference))
    if not a.skip_reference:
        os.unlink(path + ".ref")
    del groups
    size = os.path.getsize(path)
    d_ms, d_oj, d_lean = [], [], []
    for _ in range(a.repeats):
        ms, oj, lean, _n = bench_decode(path)
        d_ms.append(ms)
        d_oj.append(oj)
        d_lean.append(lean)
    from gputrace.timeline.formats.otlp_jsonl.parallel import default_workers

    nw = a.workers or default_workers()
    reads1, refs = [], []
    for _ in range(a.repeats):  # alternate, so that a busy spell hits both alike
        reads1.append(bench_read(path, 1))
        refs.append(bench_read(path, 0))
    reads = [bench_read(path, nw) for _ in range(a.repeats)] if nw > 1 else reads1
    rd1 = [r["n"] / r["s"] for r in reads1]
    rd = [r["n"] / r["s"] for r in reads]
    rf = [r["n"] / r["s"] for r in refs]
    cpu1 = [r["n"] / r["cpu"] for r in reads1]
    cpuf = [r["n"] / r["cpu"] for r in refs]
    peak1 = statistics.median(r["peak_kib"] for r in reads1) / 1024
    peak = statistics.median(r["peak_kib"] for r in reads) / 1024
    base = statistics.median(r["base_kib"] for r in reads) / 1024
    med = statistics.median
    print(f"# bench_reader: {a.spans} spans, file {size / 1e6:.0f} MB ({size / a.spans:.0f} B/span), "
          f"medians of {a.repeats}; python {platform.python_version()}, {os.cpu_count()} CPUs; generation {gen_s:.1f} s")
    print(f"{'measure':<44} {'value':>14} {'target':>12}")
    print(f"{'write: encode_request + file (M spans/s)':<44} {med(w_fast) / 1e6:>14.3f} {'>= 0.5':>12}")
    if w_ref:
        print(f"{'write: orjson dict reference (M spans/s)':<44} {med(w_ref) / 1e6:>14.3f} {'':>12}")
        print(f"{'write: fast / reference':<44} {med(w_fast) / med(w_ref):>14.2f} {'':>12}")
    print(f"{'decode only: msgspec Structs (M spans/s)':<44} {med(d_ms) / 1e6:>14.3f} {'':>12}")
    print(f"{'decode only: orjson.loads (M spans/s)':<44} {med(d_oj) / 1e6:>14.3f} {'':>12}")
    print(f"{'decode only: lean, raw attributes (M spans/s)':<44} {med(d_lean) / 1e6:>14.3f} {'':>12}")
    print(f"{'read_trace, 1 process (M spans/s)':<44} {med(rd1) / 1e6:>14.3f} {'>= 0.5':>12}")
    print(f"{'  reference: general decoder only (M spans/s)':<44} {med(rf) / 1e6:>14.3f} {'':>12}")
    print(f"{'  fast / reference (wall, median of ratios)':<44} {med(x / y for x, y in zip(rd1, rf)):>14.2f} {'':>12}")
    print(f"{'  per CPU second: fast (M spans/s)':<44} {med(cpu1) / 1e6:>14.3f} {'':>12}")
    print(f"{'  per CPU second: reference (M spans/s)':<44} {med(cpuf) / 1e6:>14.3f} {'':>12}")
    print(f"{'  per CPU second: fast / reference':<44} {med(x / y for x, y in zip(cpu1, cpuf)):>14.2f} {'':>12}")
    print(f"{'read_trace, 1 process: peak RSS (MiB)':<44} {peak1:>14.0f} {'<= 1024':>12}")
    print(f"{f'read_trace, {nw} workers (M spans/s)':<44} {med(rd) / 1e6:>14.3f} {'>= 0.5':>12}")
    print(f"{f'read_trace, {nw} workers: wall (s)':<44} {med(r['s'] for r in reads):>14.2f} {'':>12}")
    print(f"{f'read_trace, {nw} workers: parent peak RSS (MiB)':<44} {peak:>14.0f} {'<= 1024':>12}")
    wk = statistics.median(r.get("worker_kib", 0) for r in reads) / 1024
    print(f"{f'read_trace, {nw} workers: largest worker (MiB)':<44} {wk:>14.0f} {'':>12}")
    print(f"{'  of which after imports (MiB)':<44} {base:>14.0f} {'':>12}")
    os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
