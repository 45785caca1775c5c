"""Per-collective waits of ``gputrace report`` against the truth, on a pair of rank traces (issue 32's target: within
10 %). Prints one table: the waits matched by gputrace (analysis/collectives.py), the truth, and the old pairing by
order for comparison.

* **NCCL kernel traces** (HTA's public 2-rank trace: ``tests/data/trace_filter/sampled_rank-{0,1}.json.gz`` of
  facebookresearch/HolisticTraceAnalysis): the truth pairs each NCCL kernel of rank 0 with the kernel of rank 1
  that ends within ``--end-us`` (default 1000 µs) of it (a collective completes on every rank together; each kernel
  used once), and a rank's wait is the later start minus its own. Computed here from the JSON alone, without
  gputrace.
* **gloo pairs written by benchmarks/capture_ddp_gloo_pair.py**: ``--truth-ms`` is the program's own figure (rank
  0's median ``loss.backward()`` minus rank 1's, from its ``TRUTH`` lines); compared with the median per-step wait.

Usage::

    python benchmarks/bench_collectives_truth.py sampled_rank-0.json.gz sampled_rank-1.json.gz
    python benchmarks/bench_collectives_truth.py OUT/rank0.json OUT/rank1.json --truth-ms 52.413
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from pathlib import Path


def _events(path: str) -> list[dict]:
    p = Path(path)
    with (gzip.open(p, "rt") if p.suffix == ".gz" else p.open()) as f:
        return json.load(f)["traceEvents"]


def _nccl(path: str) -> list[tuple[float, float, str, int]]:
    return sorted((e["ts"], e["ts"] + e["dur"], e["name"].split("(")[0], e.get("args", {}).get("stream", -1))
                  for e in _events(path) if e.get("cat") == "kernel" and e.get("name", "").startswith("nccl"))


def truth_by_end(k0: list, k1: list, end_us: float) -> list[tuple[float, float]]:
    """(rank 0's wait, rank 1's wait) in µs per collective: kernels paired by their ends, closest first."""
    pairs = sorted((abs(a[1] - b[1]), i, j) for i, a in enumerate(k0) for j, b in enumerate(k1)
                   if a[2] == b[2] and abs(a[1] - b[1]) <= end_us)
    used0, used1, out = set(), set(), []
    for _, i, j in pairs:
        if i in used0 or j in used1:
            continue
        used0.add(i)
        used1.add(j)
        last = max(k0[i][0], k1[j][0])
        out.append((last - k0[i][0], last - k1[j][0]))
    return out


def by_order(k0: list, k1: list) -> float:
    """The old pairing (the n-th kernel of each name and stream on both ranks): summed waits, µs."""
    tot = 0.0
    keys = {(k[2], k[3]) for k in k0} & {(k[2], k[3]) for k in k1}
    for key in keys:
        a = [k for k in k0 if (k[2], k[3]) == key]
        b = [k for k in k1 if (k[2], k[3]) == key]
        for x, y in zip(a, b, strict=False):
            tot += abs(x[0] - y[0])
    return tot


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("rank0")
    ap.add_argument("rank1")
    ap.add_argument("--truth-ms", type=float, default=None, help="the program's own per-step wait (gloo pairs)")
    ap.add_argument("--end-us", type=float, default=1000.0)
    a = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from gputrace.analysis.collectives import collectives
    from gputrace.timeline.load import read_any

    c = collectives(read_any([a.rank0, a.rank1]), top=100_000)
    ours = [int(m["wait_ns"]) / 1e6 for m in c["collectives"]]
    print(f"gputrace: {c['matched']} collectives matched ({c.get('unmatched', 0)} calls unmatched), clock "
          f"{'ok' if c.get('clock', {}).get('ok', True) else c['clock']['reason']}; waits summed {sum(ours):.3f} ms, "
          f"median {statistics.median(ours) if ours else 0:.3f} ms")
    k0, k1 = _nccl(a.rank0), _nccl(a.rank1)
    if k0 and k1:
        t = truth_by_end(k0, k1, a.end_us)
        tw = [(w0 + w1) / 1e3 for w0, w1 in t]
        print(f"truth (NCCL kernels paired by their ends): {len(t)} collectives, waits summed {sum(tw):.3f} ms, "
              f"median {statistics.median(tw) if tw else 0:.3f} ms")
        print(f"old pairing by order: waits summed {by_order(k0, k1) / 1e3:.3f} ms")
        if tw:
            print(f"gputrace / truth (summed): {sum(ours) / sum(tw):.4f}")
    if a.truth_ms:
        per_step = [st["waits"].get("0", 0) / 1e6 for st in c.get("steps", [])] or ours
        med = statistics.median(per_step)
        print(f"per-step wait of rank 0 (median over {len(per_step)}): {med:.3f} ms; the program's truth "
              f"{a.truth_ms:.3f} ms; {100 * (med / a.truth_ms - 1):+.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
