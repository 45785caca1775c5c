"""Scaling of ``report`` and ``view --screenshot`` with ranks, processes and span names (issue 34).

    python benchmarks/bench_scaling.py [--sizes 1000,10000,100000] [--only ranks,pids,names] [--no-view]

Writes, per size n, three traces as a user's tools would and times the whole command in a child process
(reading included), against a reference taken in the same run (the same command on the n = 100 trace):

* ``ranks``: a ``gputrace record``-shaped OTLP JSON Lines trace of n ranks (8 per host, one GPU each), each a
  root span over four steps of ``compute``, a GPU phase and an ``all_reduce`` (one rank late): ``report``.
* ``pids``: a PyTorch-profiler (Kineto) JSON trace with n distinct pids, one CPU op and one kernel each:
  ``report``.
* ``names``: an OTLP trace of n host spans back to back, each its own name: ``report`` and
  ``view --screenshot`` (160x48).

Prints a table: kind, n, spans, seconds per command and the ratio to the n = 100 reference. Linear work keeps
seconds / n about constant from 10k to 100k; the targets are 10k ranks in <= 10 s (report) and 100k names on
screen in <= 3 s (view). Figures: benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputrace.testing.synth import kineto_pids_trace  # noqa: E402

MS = 1_000_000
BASE = 1_700_000_000_000_000_000


def _attr(k: str, v: object) -> dict:
    return {"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}}


def write_ranks(path: Path, n: int) -> int:
    """n ranks; rank n-1 arrives 30 ms late at each all_reduce. Returns the span count."""
    spans = 0
    with path.open("w") as f:
        for rank in range(n):
            pid = 1000 + rank
            out = [{"traceId": "ab" * 16, "spanId": f"{pid:016x}", "name": "python job.py", "kind": 1,
                    "startTimeUnixNano": str(BASE), "endTimeUnixNano": str(BASE + 1000 * MS), "attributes": []}]
            i = 1
            for step in range(4):
                t = 200 * step + rank % 7
                late = 30 if rank == n - 1 else 0
                for name, s, e, kind, dev in (("compute", t, t + 50, "host", -1), ("msm_h", t + 10, t + 40, "gpu", 0),
                                              ("all_reduce", t + 50 + late, t + 60 + late, "host", -1)):
                    a = [_attr("gputrace.kind", kind)]
                    if dev >= 0:
                        a += [_attr("gputrace.device", rank % 8), _attr("gputrace.lane", "stream:0")]
                    out.append({"traceId": "ab" * 16, "spanId": f"{pid:08x}{i:08x}", "parentSpanId": f"{pid:016x}",
                                "name": name, "kind": 1, "startTimeUnixNano": str(BASE + s * MS),
                                "endTimeUnixNano": str(BASE + e * MS), "attributes": a})
                    i += 1
            res = {"attributes": [_attr("service.name", "python job.py"), _attr("host.name", f"h{rank // 8}"),
                                  _attr("process.pid", pid), _attr("gputrace.rank", rank),
                                  _attr("gputrace.world_size", n)]}
            f.write(json.dumps({"resourceSpans": [{"resource": res, "scopeSpans": [{"scope": {"name": "gputrace"},
                                                                                      "spans": out}]}]}) + "\n")
            spans += len(out)
    return spans


def write_pids(path: Path, n: int) -> int:
    doc = kineto_pids_trace(n, base_ns=BASE)
    path.write_text(json.dumps(doc))
    return len(doc["traceEvents"])


def write_names(path: Path, n: int) -> int:
    spans = [{"traceId": "ab" * 16, "spanId": f"{i + 1:016x}", "name": f"op_{i:07d}", "kind": 1,
              "startTimeUnixNano": str(BASE + i * 2000), "endTimeUnixNano": str(BASE + i * 2000 + 1000)}
             for i in range(n)]
    path.write_text(json.dumps({"resourceSpans": [{"resource": {"attributes": []},
                                                    "scopeSpans": [{"spans": spans}]}]}) + "\n")
    return n


WRITERS = {"ranks": (write_ranks, ".jsonl"), "pids": (write_pids, ".json"), "names": (write_names, ".jsonl")}


def timed(args: list[str], timeout: float) -> float:
    t = time.perf_counter()
    try:
        r = subprocess.run([sys.executable, "-m", "gputrace", *args], capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return float("inf")
    if r.returncode:
        print(r.stderr.decode()[-1000:], file=sys.stderr)
        return float("nan")
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--only", default="ranks,pids,names")
    ap.add_argument("--no-view", action="store_true", help="leave out view --screenshot")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per command (inf in the table beyond)")
    a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(",")]
    print(f"{'kind':6s} {'n':>8s} {'spans':>10s} {'report s':>9s} {'x n=100':>8s} {'view s':>8s} {'x n=100':>8s}")
    with tempfile.TemporaryDirectory() as d:
        for kind in a.only.split(","):
            write, ext = WRITERS[kind]
            ref: dict[str, float] = {}
            for n in [100, *sizes]:
                path = Path(d) / f"{kind}-{n}{ext}"
                spans = write(path, n)
                rep = timed(["report", str(path)], a.timeout)
                view = float("nan")
                if kind == "names" and not a.no_view:
                    view = timed(["view", str(path), "--screenshot", str(Path(d) / "shot.svg")], a.timeout)
                if n == 100:
                    ref = {"report": rep, "view": view}
                    continue
                print(f"{kind:6s} {n:>8,} {spans:>10,} {rep:>9.2f} {rep / ref['report']:>8.1f} {view:>8.2f} "
                      f"{view / ref['view']:>8.1f}", flush=True)
                path.unlink()


if __name__ == "__main__":
    main()
