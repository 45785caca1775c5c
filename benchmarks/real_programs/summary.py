"""The closing summary of run_all.sh: at most 10 lines from what the steps left in WORK (logs, report JSON).

    python benchmarks/real_programs/summary.py WORK

Reads (each optional; a missing one gives a line saying so):
``env.txt`` (torch/CUDA/device), ``bench.log`` (the ``BENCH`` line and the table of bench_record_overhead.py),
``train-record.log`` / ``ddp-record.log`` / ``cupy-record.log`` (record's closing ``trace:`` line and, for ddp,
each rank's ``DDP`` truth line), ``train-report.json`` / ``ddp-report.json`` / ``cupy-report.json``
(``gputrace report --json``). The ddp line compares the report's straggler estimate (median wait per
collective) with the truth the ranks printed: rank 0's median time inside all_reduce minus rank 1's.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path


def _read(p: Path) -> str:
    try:
        return p.read_text(errors="replace")
    except OSError:
        return ""


def _last(text: str, pattern: str) -> str | None:
    found = re.findall(pattern, text, re.MULTILINE)
    return found[-1] if found else None


def _report(p: Path) -> dict | None:
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


def _findings(d: dict | None, n: int = 3) -> str:
    if d is None:
        return "no report"
    fs = d.get("findings") or []
    if not fs:
        return "no findings"
    return "; ".join(f"{f.get('rule')}@{f.get('where')} ~{f.get('saving_ns', 0) / 1e6:.1f} ms" for f in fs[:n])


def lines(work: Path) -> list[str]:
    out = []
    env = _read(work / "env.txt").strip().splitlines()
    out.append("env: " + (env[-1] if env else "unknown"))
    bench = _read(work / "bench.log")
    out.append(_last(bench, r"^BENCH .*$") or "bench: no BENCH line (see run_all.log)")
    rows = [_last(bench, rf"^{m} +[0-9.]+ +[0-9.]+.*$") for m in ("plain", "record", "profiler")]
    out.append("bench median step ms: " + " | ".join(" ".join(r.split()[:3]) for r in rows if r) if any(rows)
               else "bench: no table")
    tr = _read(work / "train-record.log")
    out.append("train: " + (_last(tr, r"^STEPS .*$") or "no STEPS line") + " || "
               + (_last(tr, r"^trace: .*$") or "no record line"))
    out.append("train findings: " + _findings(_report(work / "train-report.json")))
    dr = _read(work / "ddp-record.log")
    truth = {int(r): float(ms) for r, ms in re.findall(r"DDP rank=(\d+) .*?allreduce_median_ms=([0-9.]+)", dr)}
    d = _report(work / "ddp-report.json")
    st = ((d or {}).get("collectives") or {}).get("stragglers") or []
    slept = _last(dr, r"DDP rank=1 .*?slept_median_ms=([0-9.]+)")
    if 0 in truth and 1 in truth:
        t = truth[0] - truth[1]
        if st:
            est = st[0]["median_wait_ns"] / 1e6
            err = abs(est - t) / t * 100 if t else float("nan")
            out.append(f"ddp: straggler rank {st[0]['rank']} (last at {st[0]['last']}/{st[0]['of']}); "
                       f"estimated wait {est:.1f} ms vs truth {t:.1f} ms ({err:.1f} % off; target <= 10 %; "
                       f"rank 1 slept {slept} ms)")
        else:
            out.append(f"ddp: NO straggler found; truth wait {t:.1f} ms")
    else:
        out.append("ddp: the ranks printed no DDP truth lines (see run_all.log)")
    out.append("ddp: " + (_last(dr, r"^trace: .*$") or "no record line") + " || findings: " + _findings(d, 2))
    cr = _read(work / "cupy-record.log")
    if cr:
        out.append("cupy: " + (_last(cr, r"^trace: .*$") or "no record line") + " || findings: "
                   + _findings(_report(work / "cupy-report.json"), 2))
    else:
        out.append("cupy: not run")
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: summary.py WORK", file=sys.stderr)
        return 2
    for ln in lines(Path(argv[0]))[:10]:
        print(ln)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
