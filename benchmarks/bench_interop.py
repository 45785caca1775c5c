"""Interop speed: exports (Chrome/Perfetto, Jaeger, OTLP JSONL), nsys SQLite import, OTLP receiver.

    python benchmarks/bench_interop.py [--spans 200000] [--kernels 200000] [--repeats 3]

Prints one table, medians over ``--repeats``, each rate with its ratio to the reference taken in
the same run: ``read_trace`` of the same spans from OTLP JSONL (the reader every gputrace command
uses), so "0.5x" means "half as fast as loading the trace".

* chrome / jaeger / otlp: Timeline -> bytes (builder + orjson), synthetic prover trace;
* nsys: ``read_nsys`` of a SQLite file in the export schema with ``--kernels`` kernels, each with
  its launching API call, under NVTX ranges (rows/s counts kernels + calls + ranges);
* receiver: one client POSTing OTLP/HTTP JSON requests of 512 spans to ``OtlpReceiver`` on
  127.0.0.1 (spans/s end to end: HTTP, validation, file append + flush).
"""

from __future__ import annotations

import argparse
import atexit
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import orjson

from gputrace.timeline.formats.otlp_jsonl.write import timeline_requests, write_otlp_jsonl
from gputrace.interop.receiver import OtlpReceiver
from gputrace.timeline import read_trace
from gputrace.timeline.formats.chrome.export import to_chrome
from gputrace.timeline.formats.jaeger import to_jaeger
from gputrace.timeline.formats.nsys.read import read_nsys
from gputrace.testing.synthetic import SyntheticSpec, synthetic_timeline


def _median_time(fn, repeats: int) -> float:
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def _nsys_file(path: Path, kernels: int) -> int:
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER PRIMARY KEY, name TEXT, label TEXT);
        CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
        CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, category INTEGER,
          color INTEGER, text TEXT, globalTid INTEGER, textId INTEGER, domainId INTEGER, int64Value INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER,
          globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER,
          streamId INTEGER, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER, shortName INTEGER,
          registersPerThread INTEGER, gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER, blockY INTEGER,
          blockZ INTEGER);
    """)
    pid = 77
    gtid, gpid = (pid << 24) | pid, pid << 24
    con.executemany("INSERT INTO StringIds VALUES (?,?)", [(1, "cudaLaunchKernel_v7000"), (2, "ntt_kernel"),
                                                           (3, "void ntt_kernel<256>(Fr*, int)")])
    con.executemany("INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (?,?,?)", [(59, "NvtxPushPopRange", ""), (75, "NvtxDomainCreate", "")])
    con.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1767225600000000000, '', '')")
    con.execute("INSERT INTO NVTX_EVENTS VALUES (0, NULL, 75, NULL, NULL, 'gputrace', ?, NULL, 1, NULL)", (gtid,))
    per = 100  # kernels per NVTX range
    ranges = [(i * per * 1000, (i + 1) * per * 1000 - 1, 59, None, None, "ntt", gtid, None, 1, None)
              for i in range(kernels // per)]
    con.executemany("INSERT INTO NVTX_EVENTS VALUES (?,?,?,?,?,?,?,?,?,?)", ranges)
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,1,?,?,1,0)",
                    [(i * 1000 + 10, i * 1000 + 20, gtid, i) for i in range(kernels)])
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,0,?,?,?,3,2,40,1024,1,1,256,1,1)",
                    [(i * 1000 + 30, i * 1000 + 900, 7 + i % 4, i, gpid) for i in range(kernels)])
    con.commit()
    con.close()
    return len(ranges) + 2 * kernels


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spans", type=int, default=200_000)
    ap.add_argument("--kernels", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="gputrace-bench-interop-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)  # about 0.3 GB of traces
    tl = synthetic_timeline(SyntheticSpec(hosts=2, gpus=4, target_spans=args.spans))
    jsonl = tmp / "t.jsonl"
    write_otlp_jsonl(tl, jsonl)
    ref = _median_time(lambda: read_trace(jsonl), args.repeats)
    ref_rate = tl.n / ref
    rows = [("reference: read_trace (OTLP JSONL)", tl.n, ref_rate)]
    for name, fn in (
        ("export chrome (to_chrome + orjson)", lambda: orjson.dumps(to_chrome(tl))),
        ("export jaeger (to_jaeger + orjson)", lambda: orjson.dumps(to_jaeger(tl))),
        ("export otlp (timeline_requests)", lambda: b"\n".join(timeline_requests(tl))),
    ):
        rows.append((name, tl.n, tl.n / _median_time(fn, args.repeats)))
    db = tmp / "k.sqlite"
    nrows = _nsys_file(db, args.kernels)
    rows.append((f"import nsys ({args.kernels} kernels)", nrows, nrows / _median_time(lambda: read_nsys(db), args.repeats)))
    req = orjson.loads(next(timeline_requests(tl, max_spans=512)))
    nspans = sum(len(ss["spans"]) for rs in req["resourceSpans"] for ss in rs["scopeSpans"])
    body = orjson.dumps(req)
    posts = max(1, min(200, args.spans // nspans))

    def receive():
        with OtlpReceiver(None, "127.0.0.1:0", tmp / "rx.jsonl", max_buffer_bytes=0) as rx:
            for _ in range(posts):
                r = urllib.request.Request(rx.http_endpoint, data=body, headers={"Content-Type": "application/json"})
                urllib.request.urlopen(r, timeout=10).read()
    rows.append((f"receiver OTLP/HTTP JSON ({nspans} spans/request)", posts * nspans,
                 posts * nspans / _median_time(receive, args.repeats)))
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  {platform.node()}  {platform.processor() or platform.machine()}"
          f"  cpus={os.cpu_count()}  python {sys.version.split()[0]}  repeats={args.repeats}")
    print(f"| {'operation':<46} | {'items':>9} | {'items/s':>11} | vs read_trace |")
    print(f"|{'-' * 48}|{'-' * 11}|{'-' * 13}|---------------|")
    for name, n, rate in rows:
        print(f"| {name:<46} | {n:>9} | {rate:>11,.0f} | {rate / ref_rate:>12.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
