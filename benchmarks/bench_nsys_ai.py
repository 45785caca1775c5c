"""Nsight SQLite into the timeline: gputrace against nsys-ai (cold), on the same ~1 M-row file.

    python benchmarks/bench_nsys_ai.py --nsys-ai-python /path/to/venv/bin/python
                                       [--kernels 500000] [--repeats 3] [--dir /tmp] [--only ours]

The file is ``bench_interop._nsys_file``'s synthetic export (``--kernels`` kernels, each with its
launching ``cudaLaunchKernel`` row, under NVTX ranges of 100 kernels: 1.005 M rows at 500 k). Every
measurement runs in a fresh process, the rows interleaved round by round (a busy spell hits every
row alike); medians over ``--repeats``. Per row: the load's wall and CPU seconds inside the process
(after its imports; CPU counts every thread, DuckDB's included), the whole process's wall and CPU
seconds (interpreter, imports, load), peak RSS (VmHWM) and the rows (or spans) it loaded.

Rows:

* ``nsys-ai cold``: nsys-ai's timeline load, ``NsysTimelineApp._fetch_gpu_data_from_db`` (what
  ``nsys-ai timeline`` runs in its load worker: ``profile.open`` building its Parquet cache beside the
  file, then per GPU ``Profile.kernels`` and ``build_nvtx_tree``), with a trim window covering the
  whole file (its default, (0, 0), loads no kernels), the cache deleted before every run. Run with
  ``--nsys-ai-python``, an interpreter of a separate venv with nsys-ai, duckdb==1.5.5 and the DuckDB
  sqlite scanner copied into ``~/.duckdb/extensions/v1.5.5/<platform>/`` (docs in benchmarks/RESULTS.md).
  It reports the kernels and NVTX spans it loaded, so a load of nothing cannot pass for a fast one.
* ``read_nsys``: ``gputrace.timeline.formats.nsys.read.read_nsys(rep.sqlite)``;
* ``view rep.sqlite, first open``: ``read_any`` with an empty columnar cache (what ``view`` does the
  first time: read, then store the cache entry);
* ``import nsys``: ``gputrace import nsys rep.sqlite -o rep.jsonl`` (the CLI's ``main``), and
  ``import nsys --no-runtime``;
* ``read_trace JSONL``: ``read_trace`` of that output, in one process (``view`` of it without the cache);
* ``import + read``: the sum per round;
* ``view rep.jsonl after import``: ``read_any`` of the import's output with the cache entry the import
  stored (what the first ``view`` of an import loads), and ``import + view``: the sum per round, the
  documented import path as the user meets it. With ``--before``, the same rows of the other checkout
  (whose import stores no entry: its first ``view`` reads the JSON and stores one).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_OURS = r"""
import json, os, sys, time
def hwm():
    for ln in open("/proc/self/status"):
        if ln.startswith("VmHWM:"):
            return int(ln.split()[1]) / 1024
what, path, out = sys.argv[1], sys.argv[2], sys.argv[3]
from gputrace.cli import main
from gputrace.timeline import read_trace
from gputrace.timeline.load import read_any
from gputrace.timeline.formats.nsys.read import read_nsys
import contextlib, io
t, c = time.perf_counter(), time.process_time()
if what == "read_nsys":
    n = read_nsys(path).n
elif what == "view_sqlite":
    n = read_any(path).n
elif what in ("import", "import_nort"):
    args = ["import", "nsys", path, "-o", out] + (["--no-runtime"] if what == "import_nort" else [])
    with contextlib.redirect_stdout(io.StringIO()) as so:
        rc = main(args)
    assert rc == 0, rc
    n = int(so.getvalue().split()[1])  # "wrote N spans ..."
elif what == "read_jsonl":
    n = read_trace(path, workers=1).n
elif what == "view_jsonl":
    n = read_any(path).n
print(json.dumps({"n": n, "s": time.perf_counter() - t, "cpu": time.process_time() - c, "peak": hwm()}))
"""

_NSYS_AI = r"""
import json, sys, time, types
def hwm():
    for ln in open("/proc/self/status"):
        if ln.startswith("VmHWM:"):
            return int(ln.split()[1]) / 1024
path = sys.argv[1]
from nsys_ai.timeline.app import NsysTimelineApp
t, c = time.perf_counter(), time.process_time()
# The app's own load, without a Textual App (no session directory): every GPU, the whole file.
me = types.SimpleNamespace(_db_path=path, _devices=[0], _trim=(0, 1 << 62))
payload = NsysTimelineApp._fetch_gpu_data_from_db(me, lambda *a: None)
s, cpu = time.perf_counter() - t, time.process_time() - c
k = sum(len(v) for v in payload["gpu_kernels"].values())
nv = sum(len(v) for v in payload["gpu_nvtx_spans"].values())
print(json.dumps({"n": k + nv, "kernels": k, "nvtx": nv, "s": s, "cpu": cpu, "peak": hwm()}))
"""


def _run(argv: list[str], env: dict, cwd: Path) -> dict:
    """One measurement in a fresh process. ``cwd`` is never the checkout: ``python -c`` puts the working
    directory first on ``sys.path``, which would shadow ``--pythonpath``/``--before``."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(argv, check=True, capture_output=True, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["proc_s"] = wall
    out["proc_cpu"] = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    out["load"] = os.getloadavg()[0]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=500_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--nsys-ai-python", default=os.environ.get("NSYS_AI_PYTHON"),
                    help="python of a venv with nsys-ai 0.3.0 (default $NSYS_AI_PYTHON; without it, no nsys-ai row)")
    ap.add_argument("--only", choices=["ours"], help="leave nsys-ai out")
    ap.add_argument("--pythonpath", metavar="DIR",
                    help="run gputrace's rows from this checkout (default: the installed one)")
    ap.add_argument("--before", metavar="DIR",
                    help="also time read_nsys, import nsys and the JSONL read of another checkout (e.g. `git archive "
                         "<commit> | tar -x -C DIR`), in the same rounds, as '... (before)' rows")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_interop import _nsys_file

    d = Path(tempfile.mkdtemp(prefix="gputrace_bench_nsys_ai_", dir=a.dir))
    env = dict(os.environ, GPUTRACE_CACHE_DIR=str(d / "cache"), GPUTRACE_CACHE_MIN_BYTES="0")
    if a.pythonpath:  # a snapshot of this checkout, so that editing it during a long run changes nothing
        env["PYTHONPATH"] = str(Path(a.pythonpath).resolve())
    ours = [sys.executable, "-c", _OURS]
    try:
        sq = d / "rep.sqlite"
        nrows = _nsys_file(sq, a.kernels)
        keys = ["read_nsys", "view_sqlite", "import", "import_nort", "read_jsonl", "view_jsonl"]
        if a.before:
            keys += ["read_nsys:before", "import:before", "read_jsonl:before", "view_jsonl:before"]
        before_env = dict(env, PYTHONPATH=str(Path(a.before).resolve())) if a.before else env
        if a.nsys_ai_python and a.only is None:
            keys.insert(0, "nsys_ai")
        rows: dict[str, list[dict]] = {k: [] for k in keys}
        ai_cwd = d / "nsys_ai_cwd"
        ai_cwd.mkdir()
        for _ in range(a.repeats):
            for key in keys:
                k, _, tag = key.partition(":")
                e = before_env if tag else env
                if k == "nsys_ai":
                    shutil.rmtree(d / "rep.nsys-cache", ignore_errors=True)
                    (d / "rep.nsys-cache.build.lock").unlink(missing_ok=True)
                    rows[key].append(_run([a.nsys_ai_python, "-c", _NSYS_AI, str(sq)], dict(os.environ), ai_cwd))
                elif k in ("read_nsys", "view_sqlite"):
                    shutil.rmtree(d / "cache", ignore_errors=True)
                    rows[key].append(_run(ours + [k, str(sq), ""], e, d))
                elif k in ("import", "import_nort"):
                    out = d / (f"rep{'_nort' if k == 'import_nort' else ''}{'_' + tag if tag else ''}.jsonl")
                    rows[key].append(_run(ours + [k, str(sq), str(out)], e, d))
                else:
                    rows[key].append(_run(ours + [k, str(d / f"rep{'_' + tag if tag else ''}.jsonl"), ""], e, d))
        for tag in ("", ":before") if a.before else ("",):
            for second, name in (("read_jsonl", "import_read"), ("view_jsonl", "import_view")):
                rows[name + tag] = [
                    {**i, "n": r["n"], **{f: i[f] + r[f] for f in ("s", "cpu", "proc_s", "proc_cpu")},
                     "peak": max(i["peak"], r["peak"])}
                    for i, r in zip(rows["import" + tag], rows[second + tag], strict=True)]
        med = statistics.median
        loads = [r["load"] for rs in rows.values() for r in rs]
        print(f"# bench_nsys_ai {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {nrows} rows "
              f"({a.kernels} kernels + their API calls + {nrows - 2 * a.kernels} NVTX ranges), "
              f"SQLite {sq.stat().st_size / 1e6:.0f} MB; medians of {a.repeats}, fresh processes, interleaved; "
              f"{platform.node()}, python {platform.python_version()}, {os.cpu_count()} CPUs, "
              f"load average {min(loads):.1f}-{max(loads):.1f}")
        ref = med(r["s"] for r in rows["nsys_ai"]) if "nsys_ai" in rows else None
        ref_p = med(r["proc_s"] for r in rows["nsys_ai"]) if "nsys_ai" in rows else None
        labels = {"nsys_ai": "nsys-ai cold (timeline load)", "read_nsys": "read_nsys (direct)",
                  "view_sqlite": "view rep.sqlite first open (read_any)", "import": "import nsys -> JSONL",
                  "import_nort": "import nsys --no-runtime", "read_jsonl": "read_trace of the JSONL",
                  "import_read": "import + read_trace (together)",
                  "view_jsonl": "view rep.jsonl after import (read_any)",
                  "import_view": "import + view rep.jsonl (together)"}
        print(f"| {'measure':<48} | {'loaded':>9} | {'load s':>7} | {'CPU s':>6} | {'process s':>9} | "
              f"{'proc CPU s':>10} | {'peak MiB':>8} | {'nsys-ai / this':>15} |")
        print("|" + "|".join("-" * (w + 2) for w in (48, 9, 7, 6, 9, 10, 8, 15)) + "|")
        for key in [k + t for t in ("", ":before") for k in labels]:
            if key not in rows:
                continue
            k, _, tag = key.partition(":")
            label = labels[k] + (" (before)" if tag else "")
            rs = rows[key]
            s, ps = med(r["s"] for r in rs), med(r["proc_s"] for r in rs)
            ratio = f"{ref / s:.2f}x ({ref_p / ps:.2f}x)" if ref else "-"
            print(f"| {label:<48} | {rs[0]['n']:>9} | {s:>7.2f} | {med(r['cpu'] for r in rs):>6.2f} | {ps:>9.2f} | "
                  f"{med(r['proc_cpu'] for r in rs):>10.2f} | {med(r['peak'] for r in rs):>8.0f} | {ratio:>15} |")
        if "nsys_ai" in rows:
            r0 = rows["nsys_ai"][0]
            print(f"  nsys-ai loaded {r0['kernels']} kernels and {r0['nvtx']} NVTX spans; the ratio is nsys-ai's "
                  f"load s / this row's load s (in brackets: whole processes)")
        print("  per round (load s): " + "; ".join(
            f"{k} " + "/".join(f"{r['s']:.1f}" for r in rs) for k, rs in rows.items()))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
