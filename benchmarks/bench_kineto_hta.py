"""A 1 M-event Kineto trace: `gputrace report` (kernel truth) against Holistic Trace Analysis' kernel
breakdown plus idle time, on the same file, in one run.

    python benchmarks/bench_kineto_hta.py [--events 1000000] [--repeats 3] [--dir /tmp] [--before DIR]

The file is ``bench_chrome_foreign.write_kineto``'s PyTorch-profiler-shaped trace (X-only: per step a
``cpu_op``, a ``cudaLaunchKernel`` with its correlation id, a kernel with Kineto's 13 args, a
``user_annotation``; 250 k kernels at 1 M events), written as ``rank-0.json`` in a folder of its own (HTA
reads a folder of per-rank files). Rows, each in a fresh process, interleaved round by round; medians:

* ``gputrace report``: the CLI (``gputrace report FILE``, output discarded) with the columnar cache off
  (``GPUTRACE_CACHE=0``: a first open, as HTA's is): read, Kineto mapping, every analysis, the tables;
* ``gputrace report --json``: the same with the JSON document;
* ``HTA``: ``TraceAnalysis(trace_dir=...)`` (its parse), ``get_gpu_kernel_breakdown()`` and
  ``get_idle_time_breakdown()`` (HolisticTraceAnalysis from the package index; skipped with a note when
  it is not installed);
* with ``--before DIR``: ``gputrace report`` of another checkout in the same rounds.

Per row: wall seconds of the whole process (interpreter and imports included: both sides pay theirs), CPU
seconds and peak RSS (VmHWM); the ratio is HTA's over gputrace's.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_REPORT = r"""
import contextlib, json, os, sys, time
t = time.perf_counter()
from gputrace.cli import main
with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):  # the JSON goes to stdout.buffer
    rc = main(["report", *sys.argv[1:]])
assert rc == 0, rc
peak = next(int(ln.split()[1]) / 1024 for ln in open("/proc/self/status") if ln.startswith("VmHWM:"))
print(json.dumps({"s": time.perf_counter() - t, "peak": peak}))
"""

_HTA = r"""
import json, sys, time, logging
logging.disable(logging.WARNING)
t = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1])
_, per_kernel = a.get_gpu_kernel_breakdown(visualize=False)
idle = a.get_idle_time_breakdown(visualize=False)
peak = next(int(ln.split()[1]) / 1024 for ln in open("/proc/self/status") if ln.startswith("VmHWM:"))
print(json.dumps({"s": time.perf_counter() - t, "peak": peak, "kernels": int(len(per_kernel)),
                  "idle_rows": int(len(idle[0]))}))
"""


def _run(argv: list[str], env: dict, cwd: Path) -> dict:
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(argv, check=True, capture_output=True, text=True, env=env, cwd=cwd, timeout=1800)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out["proc_s"] = time.perf_counter() - t
    out["cpu"] = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    out["load"] = os.getloadavg()[0]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--pythonpath", metavar="DIR", help="run this checkout's rows from DIR (a snapshot)")
    ap.add_argument("--before", metavar="DIR", help="also run `report` of the checkout in DIR")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_chrome_foreign import write_kineto

    d = Path(a.dir) / f"gputrace_bench_kineto_hta_{a.events}"
    tdir = d / "traces"
    tdir.mkdir(parents=True, exist_ok=True)
    trace = tdir / "rank-0.json"
    if not trace.exists():
        write_kineto(d / "part.json", a.events, paired=False)
        (d / "part.json").rename(trace)
    cwd = d / "cwd"  # never the checkout: `python -c` puts the working directory first on sys.path
    cwd.mkdir(exist_ok=True)
    env = dict(os.environ, GPUTRACE_CACHE="0")
    if a.pythonpath:
        env["PYTHONPATH"] = str(Path(a.pythonpath).resolve())
    rows: dict[str, list[dict]] = {"report": [], "report --json": []}
    if a.before:
        rows["report (before)"] = []
    have_hta = importlib.util.find_spec("hta") is not None
    if have_hta:
        rows["HTA"] = []
    for _ in range(a.repeats):
        for k in rows:
            if k == "HTA":
                rows[k].append(_run([sys.executable, "-c", _HTA, str(tdir)], dict(os.environ), cwd))
            elif k == "report (before)":
                rows[k].append(_run([sys.executable, "-c", _REPORT, str(trace)],
                                    dict(env, PYTHONPATH=str(Path(a.before).resolve())), cwd))
            else:
                extra = ["--json"] if k.endswith("--json") else []
                rows[k].append(_run([sys.executable, "-c", _REPORT, str(trace), *extra], env, cwd))
    med = statistics.median
    loads = [r["load"] for rs in rows.values() for r in rs]
    print(f"# bench_kineto_hta {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: "
          f"{trace.stat().st_size / 1e6:.0f} MB Kineto trace, {a.events:,} events; medians of {a.repeats}, "
          "fresh processes, interleaved; "
          f"{os.cpu_count()} CPUs, load average {min(loads):.1f}-{max(loads):.1f}")
    ref = rows.get("HTA")
    print("| row | process s | CPU s | peak MiB | HTA / this (time) | HTA / this (peak) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for k, rs in rows.items():
        s, c, p = med(r["proc_s"] for r in rs), med(r["cpu"] for r in rs), med(r["peak"] for r in rs)
        rt = f"{med(r['proc_s'] for r in ref) / s:.2f}x" if ref else "-"
        rp = f"{med(r['peak'] for r in ref) / p:.2f}x" if ref else "-"
        print(f"| {k} | {s:.2f} | {c:.2f} | {p:.0f} | {rt} | {rp} |")
    if ref:
        print(f"  HTA's kernel breakdown: {ref[0]['kernels']} kernel names; idle-time rows {ref[0]['idle_rows']}")
    else:
        print("  HTA is not installed here (pip install HolisticTraceAnalysis): gputrace's rows alone")
    print("  per round (process s): " + "; ".join(f"{k} " + "/".join(f"{r['proc_s']:.1f}" for r in rs)
                                                for k, rs in rows.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
