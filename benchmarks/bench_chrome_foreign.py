"""Other tools' Chrome traces (PyTorch profiler / Kineto shape) against gputrace's own Chrome export.

    python benchmarks/bench_chrome_foreign.py [--events 1000000] [--repeats 3] [--before TREE]

Issue 18's Chrome target (>= 0.3 M events/s, <= 0.6 GiB for 1 M events) holds for gputrace's own
exports; this measures traces as the PyTorch profiler writes them: indented JSON, per step a ``cpu_op``
with ``External id``, a ``cudaLaunchKernel`` with ``correlation``, a kernel with Kineto's 13 ``args``
(device, stream, grid, block, occupancy...), and either a ``user_annotation`` ``X`` event ("X only")
or a ``B``/``E`` pair ("with B/E"). Every read runs in a fresh process; rows are interleaved round by
round; medians. Also ``gputrace view``'s first screen of the X-only file (``load_steps`` with the cache
off, up to the TUI's index of the first snapshot) and its whole load. Reference in the same rounds: ``read_chrome`` of gputrace's own export of a synthetic
trace with as many spans. ``--before TREE``: a gputrace source tree (e.g. ``git archive`` of main)
whose ``read_chrome`` reads the Kineto files too. Prints the load average with the table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# What ``gputrace view`` does before its first draw, then the rest of the load (argv: path, "all").
from bench_10m import _FIRST

_CHILD = r"""
import json, sys, time
what, path = sys.argv[1], sys.argv[2]
from gputrace.timeline.formats.chrome.read import read_chrome
t, c = time.perf_counter(), time.process_time()
n = read_chrome(path).n
s, cpu = time.perf_counter() - t, time.process_time() - c
peak = next(int(ln.split()[1]) / 1024 for ln in open("/proc/self/status") if ln.startswith("VmHWM:"))
print(json.dumps({"n": n, "s": s, "cpu": cpu, "peak": peak}))
"""

_KERNELS = ("vectorized_elementwise_kernel", "ampere_sgemm_128x64_nn", "reduce_kernel")
_OPS = ("aten::mul", "aten::add", "aten::matmul", "aten::copy_")


def write_kineto(path: Path, events: int, paired: bool, seed: int = 1) -> int:
    """A Kineto-shaped trace of about ``events`` events (indented, as the profiler writes it).
    Returns the number of events written."""
    import orjson

    rnd = random.Random(seed)
    pid, gpid = 321, 0
    evs: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": pid, "args": {"name": "python3"}},
        {"ph": "M", "name": "process_name", "pid": gpid, "tid": 0, "args": {"name": "GPU 0"}},
    ]
    t = 10.0
    step = 0
    with open(path, "wb") as f:
        f.write(b'{\n  "schemaVersion": 1,\n  "deviceProperties": [],\n  "baseTimeNanoseconds": 1700000000000000000,\n'
                b'  "traceEvents": [\n')
        n = 0
        first = True
        while n < events:
            corr = ext = step + 1
            evs += [
                {"ph": "X", "cat": "cpu_op", "name": rnd.choice(_OPS), "pid": pid, "tid": pid, "ts": round(t, 3),
                 "dur": 40.125, "args": {"External id": ext, "Record function id": 0, "Ev Idx": ext}},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": pid,
                 "ts": round(t + 10, 3), "dur": 5.5, "args": {"External id": ext, "cbid": 211, "correlation": corr}},
                {"ph": "X", "cat": "kernel", "name": rnd.choice(_KERNELS), "pid": gpid, "tid": 7,
                 "ts": round(t + 20.5, 3), "dur": 2.25,
                 "args": {"External id": ext, "queued": 0, "device": 0, "context": 1, "stream": 7,
                          "correlation": corr, "registers per thread": 24, "shared memory": 0, "blocks per SM": 0.5,
                          "warps per SM": 2.0, "grid": [64, 1, 1], "block": [128, 1, 1],
                          "est. achieved occupancy %": 3}},
            ]
            if paired:
                evs += [{"ph": "B", "name": "sync", "pid": pid, "tid": pid, "ts": round(t + 45, 3)},
                        {"ph": "E", "pid": pid, "tid": pid, "ts": round(t + 48, 3)}]
            else:
                evs.append({"ph": "X", "cat": "user_annotation", "name": "step", "pid": pid, "tid": pid,
                            "ts": round(t + 41, 3), "dur": 8.0})
            t += 60
            step += 1
            if len(evs) >= 4096 or n + len(evs) >= events:
                for ev in evs:
                    text = orjson.dumps(ev, option=orjson.OPT_INDENT_2).replace(b"\n", b"\n    ")
                    f.write((b"    " if first else b",\n    ") + text)
                    first = False
                n += len(evs)
                evs = []
        f.write(b'\n  ],\n  "traceName": "bench"\n}\n')
    return n


def _own_export(path: Path, spans: int) -> None:
    from gputrace.testing.synthetic import SyntheticSpec, synthetic_timeline
    from gputrace.timeline.formats.chrome.export import write_chrome

    write_chrome(synthetic_timeline(SyntheticSpec(hosts=2, gpus=4, streams=2, circuits=8, target_spans=spans,
                                                  seed=1)), path)


def _child(path: Path, tree: str | None, script: str = _CHILD) -> dict:
    env = dict(os.environ, GPUTRACE_CACHE="0")
    if tree:
        env["PYTHONPATH"] = tree
    # ``python -c`` puts the working directory first on sys.path: a tree must be the cwd too.
    args = ["read", str(path)] if script is _CHILD else [str(path), "all"]
    r = subprocess.run([sys.executable, "-c", script, *args], check=True, capture_output=True,
                       text=True, env=env, cwd=tree or None)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--before", help="a gputrace source tree read in the same rounds")
    ap.add_argument("--dir", help="where the trace files go (default: a temporary directory)")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=a.dir) as tmp:
        d = Path(tmp)
        files = {"own": d / "own.chrome.json", "x": d / "kineto-x.json", "be": d / "kineto-be.json"}
        t = time.perf_counter()
        _own_export(files["own"], a.events)
        counts = {"x": write_kineto(files["x"], a.events, paired=False),
                  "be": write_kineto(files["be"], a.events, paired=True)}
        print(f"files made in {time.perf_counter() - t:.0f} s: "
              + ", ".join(f"{k} {p.stat().st_size / 1e6:.0f} MB" for k, p in files.items()))
        rows: dict[str, list[dict]] = {}
        loads = [os.getloadavg()[0]]
        plan = [("reference: gputrace's own export", files["own"], None),
                ("Kineto, X only", files["x"], None), ("Kineto, with B/E", files["be"], None)]
        if a.before:
            plan += [("before: Kineto, X only", files["x"], a.before),
                     ("before: Kineto, with B/E", files["be"], a.before)]
        views = [("view of Kineto, X only", None)] + ([("before: view of Kineto, X only", a.before)] if a.before else [])
        for _ in range(a.repeats):
            for label, path, tree in plan:
                rows.setdefault(label, []).append(_child(path, tree))
            for label, tree in views:
                rows.setdefault(label, []).append(_child(files["x"], tree, _FIRST))
            loads.append(os.getloadavg()[0])
    ref = statistics.median(r["s"] for r in rows[plan[0][0]])
    print(f"\n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}, {os.cpu_count()} CPUs, "
          f"load average {min(loads):.1f}-{max(loads):.1f}; medians of {a.repeats}, fresh processes")
    print(f"{'read_chrome of':<36} {'spans':>9} {'events':>9} {'wall s':>7} {'CPU s':>6} {'M ev/s':>7} "
          f"{'M sp/s':>7} {'ref/this':>8} {'peak MiB':>9}")
    for label, _path, _tree in plan:
        rs = rows[label]
        s = statistics.median(r["s"] for r in rs)
        cpu = statistics.median(r["cpu"] for r in rs)
        n = rs[0]["n"]
        if "Kineto" in label:
            ev = counts["x" if "X only" in label else "be"]
            events, rate = f"{ev:>9,}", f"{ev / s / 1e6:>7.3f}"
        else:  # the export's flow and metadata events are not counted here
            events, rate = f"{'':>9}", f"{'':>7}"
        print(f"{label:<36} {n:>9,} {events} {s:>7.2f} {cpu:>6.2f} {rate} {n / s / 1e6:>7.3f} "
              f"{ref / s:>7.2f}x {statistics.median(r['peak'] for r in rs):>9.0f}")
    print("target (issue 18): >= 0.3 M events/s, <= 614 MiB at 1 M events")
    print(f"\n{'gputrace view (load_steps; cache off)':<36} {'first screen s':>15} {'all read s':>11} {'peak MiB':>9}")
    for label, _tree in views:
        rs = rows[label]
        print(f"{label:<36} {statistics.median(r['first_s'] for r in rs):>15.2f} "
              f"{statistics.median(r['all_s'] for r in rs):>11.2f} {statistics.median(r['peak'] for r in rs):>9.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
