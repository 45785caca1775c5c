"""`gputrace view` of a 1 M-row Nsight export from the columnar cache, against nsys-ai's viewer load.

    python benchmarks/bench_view_cached.py [--kernels 500000] [--repeats 3] [--dir /tmp]
                                           [--nsys-ai-python PY] [--before DIR] [--pythonpath DIR]

The file is ``bench_interop._nsys_file``'s synthetic export (500 k kernels, their 500 k launching API
calls, 5 k NVTX ranges: 1,005,000 rows), read once to store its cache entry. Then, round by round in fresh
processes, the rows interleaved (a busy spell hits every row alike), medians over ``--repeats``:

* ``view (cache)``: the Textual app (``GputraceApp``, headless, 160x48) on the file: ``first screen``
  (seconds from before importing the viewer until the first frame with spans was drawn, as
  ``bench_tui.py`` counts it), ``loaded`` (the final update shown), ``ready`` (loaded and analysed:
  the stalls panel filled) and the process's peak RSS (VmHWM) at the first screen and at the end;
* ``view (cache), before``: the same for the checkout in ``--before`` (its own cache entry);
* ``nsys-ai``: nsys-ai's timeline load (``bench_nsys_ai.py``'s row: ``_fetch_gpu_data_from_db`` over
  the whole file, its Parquet cache kept after the first round: its warm open, the fair match for a
  cached one), with ``--nsys-ai-python`` (a venv with nsys-ai 0.3.0 and DuckDB's sqlite scanner,
  see benchmarks/RESULTS.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_VIEW = r"""
import asyncio, json, sys, time
t0 = time.perf_counter()
from gputrace.tui.app import GputraceApp
def hwm():
    for ln in open("/proc/self/status"):
        if ln.startswith("VmHWM:"):
            return int(ln.split()[1]) / 1024
app = GputraceApp([sys.argv[1]])
out = {}
async def go():
    async with app.run_test(size=(160, 48)) as pilot:
        while app.first_draw_s is None:
            await asyncio.sleep(0.005)
        out["first_s"] = (app._t_start - t0) + app.first_draw_s
        out["peak_first"] = hwm()
        await asyncio.wait_for(app.loaded.wait(), 600)
        out["load_s"] = time.perf_counter() - t0
        await app.wait_ready(600)
        out["ready_s"] = time.perf_counter() - t0
        out["spans"] = app.full_index.timeline.n
        await pilot.pause()
asyncio.run(go())
out["peak"] = hwm()
print(json.dumps(out))
"""


def _run(argv: list[str], env: dict, cwd: Path) -> dict:
    r = subprocess.run(argv, check=True, capture_output=True, text=True, env=env, cwd=cwd, timeout=900)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["load"] = os.getloadavg()[0]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=500_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--nsys-ai-python", default=os.environ.get("NSYS_AI_PYTHON"))
    ap.add_argument("--pythonpath", metavar="DIR", help="run this checkout's rows from DIR (a snapshot)")
    ap.add_argument("--before", metavar="DIR", help="also run the checkout in DIR, in the same rounds")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_interop import _nsys_file
    from bench_nsys_ai import _NSYS_AI

    d = Path(a.dir) / f"gputrace_bench_view_cached_{a.kernels}"
    d.mkdir(parents=True, exist_ok=True)
    sq = d / "rep.sqlite"
    if not sq.exists():
        _nsys_file(d / "rep.part", a.kernels)
        (d / "rep.part").rename(sq)
    cwd = d / "cwd"  # never the checkout: `python -c` puts the working directory first on sys.path
    cwd.mkdir(exist_ok=True)
    envs: dict[str, dict] = {}
    for tag, tree in (("this", a.pythonpath), ("before", a.before)):
        if tag == "before" and not tree:
            continue
        env = dict(os.environ, GPUTRACE_CACHE_DIR=str(d / f"cache_{tag}"))
        if tree:
            env["PYTHONPATH"] = str(Path(tree).resolve())
        # The cache entry (stored by a background thread of the first open: wait for the file).
        subprocess.run([sys.executable, "-c", "import sys,time\nfrom gputrace.timeline.load import read_any\n"
                        "read_any(sys.argv[1])\ntime.sleep(8)", str(sq)], check=True, env=env, cwd=cwd)
        envs[tag] = env
    keys = [f"view:{t}" for t in envs] + (["nsys_ai"] if a.nsys_ai_python else [])
    rows: dict[str, list[dict]] = {k: [] for k in keys}
    if a.nsys_ai_python:  # its Parquet cache built once: the rounds time its warm open
        _run([a.nsys_ai_python, "-c", _NSYS_AI, str(sq)], dict(os.environ), cwd)
    for _ in range(a.repeats):
        for k in keys:
            if k == "nsys_ai":
                rows[k].append(_run([a.nsys_ai_python, "-c", _NSYS_AI, str(sq)], dict(os.environ), cwd))
            else:
                rows[k].append(_run([sys.executable, "-c", _VIEW, str(sq)], envs[k.split(":")[1]], cwd))
    med = statistics.median
    loads = [r["load"] for rs in rows.values() for r in rs]
    print(f"# bench_view_cached {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: "
          f"{sq.stat().st_size / 1e6:.0f} MB SQLite, {a.kernels} kernels; medians of {a.repeats}, fresh processes, "
          f"interleaved; {os.cpu_count()} CPUs, "
          f"load average {min(loads):.1f}-{max(loads):.1f}")
    print("| row | first screen s | loaded s | ready s | peak at first screen MiB | peak MiB |")
    print("| --- | --- | --- | --- | --- | --- |")
    for k, rs in rows.items():
        if k == "nsys_ai":
            print(f"| nsys-ai 0.3.0 timeline load (warm, {rs[0]['n']:,} rows) | - | {med(r['s'] for r in rs):.2f} "
                  f"| - | - | {med(r['peak'] for r in rs):.0f} |")
            continue
        print(f"| view (cache), {k.split(':')[1]} ({rs[0]['spans']:,} spans) | {med(r['first_s'] for r in rs):.2f} | "
              f"{med(r['load_s'] for r in rs):.2f} | {med(r['ready_s'] for r in rs):.2f} | "
              f"{med(r['peak_first'] for r in rs):.0f} | {med(r['peak'] for r in rs):.0f} |")
    print("  per round: " + "; ".join(
        f"{k} " + "/".join(f"{r.get('first_s', r.get('s', 0)):.2f}" for r in rs) for k, rs in rows.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
