"""Issue 18's read-side targets in one run: OTLP read, cache re-open, Chrome export/import, Nsight rows.

    python benchmarks/bench_formats.py [--spans 1000000] [--kernels 500000] [--repeats 3] [--dir /tmp]
                                       [--only chrome_import|otlp] [--baseline SRC]

Every measurement runs in a fresh subprocess (so its peak memory, VmHWM, is its own) and is given as a
rate and as a ratio to the reference measured in the same run: ``read_trace`` of the same synthetic
1 M-span OTLP JSONL file in one process (the reader every command starts with). Medians over
``--repeats``; wall and CPU time of the measuring process (a shared 2-core machine disturbs wall time).

* ``cache re-open``: ``read_any`` of the same file with its columnar cache entry present
  (target >= 5 M spans/s);
* ``chrome export``: ``write_chrome`` of the 1 M-span Timeline (target <= 10 s, <= 0.5 GiB), peak
  memory given above the process's size after loading the Timeline;
* ``chrome import``: ``read_chrome`` of that export (target >= 0.3 M events/s, <= 0.6 GiB);
* ``nsys direct``: ``read_nsys`` of a SQLite file in the export schema (``--kernels`` kernels with their
  launching calls under NVTX ranges); ``nsys via JSONL``: ``read_trace`` of the same rows after
  ``import nsys`` (``write_otlp_jsonl``), with the share of lines read on the fast path;
* ``--only chrome_import``: only the reference and the Chrome rows (export, then import of that export);
* ``--only otlp``: the OTLP JSONL read (no cache) in one process, with 2 processes, and as the entrance decides
  (``read_any``: parallel or not), against a yardstick that this code does not change: ``orjson.loads`` of
  every line (dicts, no columns). CPU seconds include the worker processes'. ``--baseline SRC`` adds
  ``read_trace`` in one process from another source tree (e.g. ``git archive main``), in the same rounds;
* ``HTA``: when Holistic Trace Analysis is importable, its kernel breakdown of a Chrome export of the
  Nsight rows (kernel names found, or why not).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_CHILD = r"""
import json, os, resource, sys, time
def hwm():
    for ln in open("/proc/self/status"):
        if ln.startswith("VmHWM:"):
            return int(ln.split()[1]) / 1024
what, path, out = sys.argv[1], sys.argv[2], sys.argv[3]
from gputrace.timeline import read_trace
from gputrace.timeline.load import read_any
from gputrace.timeline.formats.chrome.read import read_chrome
from gputrace.timeline.formats.chrome.export import write_chrome
from gputrace.timeline.formats.nsys.read import read_nsys
pre = None
if what == "export":
    tl = read_trace(path)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM from here: the export's own peak
    pre = hwm()
def kids():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime
t, c, k = time.perf_counter(), time.process_time(), kids()
if what == "otlp":
    n = read_trace(path, workers=1).n
elif what == "otlp2":
    n = read_trace(path, workers=2).n
elif what == "otlp_auto":
    n = read_any(path).n
elif what == "orjson":
    import orjson
    n = 0
    with open(path, "rb") as f:
        for ln in f:
            n += sum(len(ss["spans"]) for rs in orjson.loads(ln)["resourceSpans"] for ss in rs["scopeSpans"])
elif what == "otlp_loader":
    from gputrace.timeline.formats.otlp_jsonl._loader import TraceLoader
    from gputrace.timeline.formats.otlp_jsonl._feed import load_file_into
    ld = TraceLoader()
    load_file_into(ld, path)
    n = ld.timeline().n
    pre = ld.fast_lines / max(ld.report.lines, 1)
elif what == "cache":
    n = read_any(path).n
elif what == "export":
    n = write_chrome(tl, out)
elif what == "import":
    n = read_chrome(path).n
elif what == "nsys":
    n = read_nsys(path).n
print(json.dumps({"n": n, "s": time.perf_counter() - t, "cpu": time.process_time() - c + kids() - k, "peak": hwm(),
                  "pre": pre}))
"""


def _child(what: str, path: Path, out: Path | None = None, env: dict | None = None, cwd: str | None = None) -> dict:
    # ``python -c`` puts the working directory first on sys.path: a baseline tree must be the cwd too.
    r = subprocess.run([sys.executable, "-c", _CHILD, what, str(path), str(out or "")], check=True,
                       capture_output=True, text=True, env=env, cwd=cwd)
    return json.loads(r.stdout.strip().splitlines()[-1])


def _write_otlp(path: Path, spans: int) -> None:
    from gputrace.otlp.encode import encode_request
    from gputrace.testing.synthetic import SyntheticSpec, iter_synthetic

    spec = SyntheticSpec(hosts=2, gpus=4, streams=2, circuits=8, target_spans=spans, seed=1)
    with open(path, "wb") as f:
        for res, group in iter_synthetic(spec):
            for i in range(0, len(group), 512):
                f.write(encode_request(res, group[i:i + 512]) + b"\n")


def _hta(tl, d: Path) -> str:
    try:
        from hta.trace_analysis import TraceAnalysis
    except ImportError:
        return "not installed here (optional; pip install HolisticTraceAnalysis)"
    from gputrace.timeline.formats.chrome.export import write_chrome

    hd = d / "hta"
    hd.mkdir()
    write_chrome(tl, hd / "rank-0.json")
    _, per_kernel = TraceAnalysis(trace_dir=str(hd)).get_gpu_kernel_breakdown(visualize=False)
    kinds = sorted(set(zip(per_kernel["name"], per_kernel["kernel_type"])))
    return f"kernel breakdown found {len(kinds)} kernels: " + ", ".join(f"{n} ({t})" for n, t in kinds[:4])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spans", type=int, default=1_000_000)
    ap.add_argument("--kernels", type=int, default=500_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--only", choices=["chrome_import", "otlp"],
                    help="chrome_import: only the reference and the Chrome rows; otlp: only the OTLP read rows")
    ap.add_argument("--baseline", help="with --only otlp: a gputrace source tree whose read_trace is timed too")
    a = ap.parse_args(argv)
    d = Path(tempfile.mkdtemp(prefix="gputrace_bench_formats_", dir=a.dir))
    env = dict(os.environ, GPUTRACE_CACHE_DIR=str(d / "cache"), GPUTRACE_CACHE_MIN_BYTES="0")
    try:
        otlp = d / "synthetic.jsonl"
        t = time.perf_counter()
        _write_otlp(otlp, a.spans)
        gen = time.perf_counter() - t
        chrome = d / "synthetic.chrome.json"
        rows: dict[str, list[dict]] = {k: [] for k in ("otlp", "cache", "export", "import", "nsys", "nsys_jsonl",
                                                      "orjson", "otlp2", "otlp_auto", "baseline")}
        full = a.only is None
        if a.only == "otlp":
            return _otlp_only(a, otlp, gen, rows, env)
        if full:
            _child("cache", otlp, env=env)  # fills the cache entry
            sys.path.insert(0, str(Path(__file__).parent))
            from bench_interop import _nsys_file

            from gputrace.timeline.formats.otlp_jsonl.write import write_otlp_jsonl
            from gputrace.timeline.formats.nsys.read import read_nsys

            sq = d / "rep.sqlite"
            _nsys_file(sq, a.kernels)
            ntl = read_nsys(sq)
            nj = d / "rep.jsonl"
            write_otlp_jsonl(ntl, nj)
        for _ in range(a.repeats):  # interleaved, so that a busy spell hits every row alike
            rows["otlp"].append(_child("otlp", otlp, env=env))
            if full:
                rows["cache"].append(_child("cache", otlp, env=env))
            rows["export"].append(_child("export", otlp, chrome, env=env))
            rows["import"].append(_child("import", chrome, env=env))
            if full:
                rows["nsys"].append(_child("nsys", sq, env=env))
                rows["nsys_jsonl"].append(_child("otlp_loader", nj, env=env))
        med = statistics.median
        ref = med(r["n"] / r["s"] for r in rows["otlp"])
        ref_cpu = med(r["n"] / r["cpu"] for r in rows["otlp"])
        print(f"# bench_formats: {a.spans} spans (OTLP file {otlp.stat().st_size / 1e6:.0f} MB, generated in {gen:.0f} s), "
              f"{a.kernels} kernels; medians of {a.repeats}; python {platform.python_version()}, {os.cpu_count()} CPUs, "
              f"load average {os.getloadavg()[0]:.1f}")
        print(f"{'measure':<42} {'items':>9} {'wall s':>7} {'M/s wall':>9} {'M/s CPU':>8} {'vs ref':>7} {'peak MiB':>9}  target")

        def line(label, key, target, peak_key="peak"):
            rs = rows[key]
            n = rs[0]["n"]
            wall = med(r["s"] for r in rs)
            rate = med(r["n"] / r["s"] for r in rs)
            cpu = med(r["n"] / r["cpu"] for r in rs)
            peak = med(r["peak"] - (r["pre"] or 0) if peak_key == "delta" else r["peak"] for r in rs)
            print(f"{label:<42} {n:>9} {wall:>7.2f} {rate / 1e6:>9.3f} {cpu / 1e6:>8.3f} {rate / ref:>6.2f}x {peak:>9.0f}  {target}")

        line("reference: read_trace OTLP JSONL (1 proc)", "otlp", ">= 0.5 M/s wall")
        if full:
            line("cache re-open (read_any, entry present)", "cache", ">= 5 M/s")
        line("chrome export (write_chrome; peak: +delta)", "export", "<= 10 s, <= 512 MiB", "delta")
        line("chrome import (read_chrome, spans)", "import", ">= 0.3 M/s, <= 614 MiB")
        ev = rows["export"][0]["n"]  # events written = events in the imported file
        print(f"  chrome import: {ev} events in the file ({ev / rows['import'][0]['n']:.2f} per span): "
              f"{statistics.median(ev / r['s'] for r in rows['import']) / 1e6:.3f} M events/s wall, "
              f"{statistics.median(ev / r['cpu'] for r in rows['import']) / 1e6:.3f} M events per CPU-s")
        if not full:
            print(f"  reference per CPU second: {ref_cpu / 1e6:.3f} M spans/s")
            return 0
        line("nsys direct (read_nsys, rows)", "nsys", "")
        line("nsys via import: read_trace of the JSONL", "nsys_jsonl", "")
        fast = med(r["pre"] for r in rows["nsys_jsonl"])
        print(f"  nsys JSONL lines on the fast path: {fast:.0%}; reference per CPU second: {ref_cpu / 1e6:.3f} M spans/s")
        print(f"  HTA: {_hta(ntl, d)}")
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return 0


def _otlp_only(a, otlp: Path, gen: float, rows: dict, env: dict) -> int:
    """``--only otlp``: the OTLP read rows against the orjson yardstick, interleaved in each round."""
    env = dict(env, GPUTRACE_CACHE="0")
    base_env = None
    if a.baseline:
        base_env = dict(env, PYTHONPATH=str(Path(a.baseline).resolve()))
    loads = [os.getloadavg()[0]]
    for _ in range(a.repeats):
        rows["orjson"].append(_child("orjson", otlp, env=env))
        rows["otlp"].append(_child("otlp", otlp, env=env))
        rows["otlp2"].append(_child("otlp2", otlp, env=env))
        rows["otlp_auto"].append(_child("otlp_auto", otlp, env=env))
        if base_env is not None:
            rows["baseline"].append(_child("otlp", otlp, env=base_env, cwd=base_env["PYTHONPATH"]))
        loads.append(os.getloadavg()[0])
    med = statistics.median
    ref = med(r["n"] / r["s"] for r in rows["orjson"])
    print(f"# bench_formats --only otlp: {a.spans} spans (OTLP file {otlp.stat().st_size / 1e6:.0f} MB, generated in "
          f"{gen:.0f} s); medians of {a.repeats}; python {platform.python_version()}, {os.cpu_count()} CPUs, "
          f"load average (1 min) {min(loads):.1f}-{max(loads):.1f} during the run (the machine is shared)")
    print(f"{'measure':<46} {'wall s':>7} {'M/s wall':>9} {'CPU s':>6} {'M/s CPU':>8} {'vs ref':>7} {'peak MiB':>9}")
    labels = [("orjson", "reference: orjson.loads of every line (dicts)"),
              ("otlp", "read_trace, 1 process"),
              ("otlp2", "read_trace, 2 processes (workers=2)"),
              ("otlp_auto", f"read_any (entrance decides; {os.cpu_count()} CPUs)")]
    if base_env is not None:
        labels.append(("baseline", "baseline tree: read_trace, 1 process"))
    for key, label in labels:
        rs = rows[key]
        rate = med(r["n"] / r["s"] for r in rs)
        print(f"{label:<46} {med(r['s'] for r in rs):>7.2f} {rate / 1e6:>9.3f} {med(r['cpu'] for r in rs):>6.2f} "
              f"{med(r['n'] / r['cpu'] for r in rs) / 1e6:>8.3f} {rate / ref:>6.2f}x {med(r['peak'] for r in rs):>9.0f}")
    if base_env is not None:
        probe = subprocess.run([sys.executable, "-c", "import gputrace.timeline as t; print(t.__file__)"], env=base_env,
                               cwd=base_env["PYTHONPATH"], capture_output=True, text=True, check=True).stdout.strip()
        print(f"  baseline code: {probe}")
    print("  target: OTLP JSONL read >= 0.5 M spans/s wall (issue 18)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
