"""A 10 M-span trace: first screen, peak memory, ``report`` (issue 18).

    python benchmarks/bench_10m.py [--spans 10000000] [--dir /tmp]

Writes a synthetic prover trace (OTLP JSONL, 512 spans per line), then, each in a fresh process:

* ``first screen``: what ``gputrace view`` does before its first draw: the entrance's ``load_steps``
  up to the first step with spans, its snapshot, and the TUI's ``TimelineIndex`` of it (target <= 2 s);
  also the whole progressive read's peak memory (VmHWM; target <= 3 GiB);
* ``report``: ``gputrace report`` on the file (exit status, wall time, peak memory; the first run
  also fills the columnar cache);
* ``re-open``: the first screen again, now from the columnar cache.

The reference in the same run is the first screen of a 1 M-span prefix of the same file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_FIRST = r"""
import json, sys, time
def hwm():
    for ln in open("/proc/self/status"):
        if ln.startswith("VmHWM:"):
            return int(ln.split()[1]) / 1024
t = time.perf_counter()
from gputrace.timeline.load import load_steps
from gputrace.tui.index import TimelineIndex
first = None
n = 0
for step in load_steps([sys.argv[1]], interval=0.05):
    if step.snapshot is None:
        continue
    if first is None:
        tl = step.snapshot()
        if tl.n:
            TimelineIndex.build(tl, origin=tl.t0)
            first = (time.perf_counter() - t, tl.n)
            if sys.argv[2] == "first":
                break
    last = step
if sys.argv[2] != "first":
    n = last.snapshot().n
print(json.dumps({"first_s": first[0], "first_spans": first[1], "all_s": time.perf_counter() - t, "n": n, "peak": hwm()}))
"""


def _run(args, env) -> dict:
    r = subprocess.run([sys.executable, "-c", _FIRST, *args], check=True, capture_output=True, text=True, env=env)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spans", type=int, default=10_000_000)
    ap.add_argument("--dir", default="/tmp")
    a = ap.parse_args(argv)
    d = Path(tempfile.mkdtemp(prefix="gputrace_bench_10m_", dir=a.dir))
    env = dict(os.environ, GPUTRACE_CACHE_DIR=str(d / "cache"))
    try:
        from gputrace.otlp.encode import encode_request
        from gputrace.testing.synthetic import SyntheticSpec, iter_synthetic

        big, small = d / "big.jsonl", d / "small.jsonl"
        t = time.perf_counter()
        spec = SyntheticSpec(hosts=2, gpus=4, streams=2, circuits=8, target_spans=a.spans, seed=1)
        n_small = 0
        with open(big, "wb") as f, open(small, "wb") as g:
            for res, group in iter_synthetic(spec):
                for i in range(0, len(group), 512):
                    line = encode_request(res, group[i:i + 512]) + b"\n"
                    f.write(line)
                    if n_small < 1_000_000:
                        g.write(line)
                        n_small += len(group[i:i + 512])
        gen = time.perf_counter() - t
        print(f"# bench_10m: {a.spans} spans, {big.stat().st_size / 1e9:.1f} GB (generated in {gen:.0f} s); "
              f"python {platform.python_version()}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
        ref = _run([str(small), "first"], env)
        print(f"reference: first screen of a 1 M-span prefix: {ref['first_s']:.2f} s ({ref['first_spans']} spans)")
        whole = _run([str(big), "all"], env)
        print(f"10M first screen: {whole['first_s']:.2f} s ({whole['first_spans']} spans; target <= 2 s); "
              f"whole progressive read {whole['all_s']:.0f} s, {whole['n']} spans, peak {whole['peak']:.0f} MiB (target <= 3072)")
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-c",
                            "import resource, subprocess, sys\n"
                            "rc = subprocess.run([sys.executable, '-m', 'gputrace', 'report', sys.argv[1]], "
                            "stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).returncode\n"
                            "print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)", str(big)],
                           capture_output=True, text=True, env=env)
        rc, kib = r.stdout.split()
        print(f"report: exit {rc} in {time.perf_counter() - t:.0f} s, peak {int(kib) / 1024:.0f} MiB (stores the cache entry)")
        again = _run([str(big), "first"], env)
        print(f"10M re-open (columnar cache): first screen {again['first_s']:.2f} s, peak {again['peak']:.0f} MiB")
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
