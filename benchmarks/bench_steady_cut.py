"""Do the steady-state findings change when the warm-up is cut from the trace? (issue 32, part 3's target)

For each trace: ``report``'s findings (``analyse_timeline(...).to_dict()``), and the findings of the same trace
cut at each process's first steady step (``steps.series[].steady_from_ns`` of that report): rows that end
before the cut dropped, rows across it started at it, as a recording started at the steady state would hold
(the cut is done here, on the trace's columns, not by ``gputrace.analysis.steps.steady_timeline``). Prints per
trace the rules (and places) of both, their savings and the largest relative difference, then the first three
findings with steps off (``steps=False``: what the report said before steps existed) and on.
Target: the same rules, savings within 5 %.

    python benchmarks/bench_steady_cut.py [TRACE ...]

Without arguments: the committed traces with a loop (the H200 `record` traces of
benchmarks/real_programs/h200-2026-12-01/traces.tar.gz and h200-2026-12-04/cnn.jsonl.gz, the Kineto and `record`
fixtures of tests/data/foreign, ddp_plain_record.jsonl.gz among them).
On a GPU machine, a fresh one: ``python -m gputrace record -o train.jsonl -- python
benchmarks/real_programs/train_step.py --steps 40`` then ``python benchmarks/bench_steady_cut.py train.jsonl``.
"""

from __future__ import annotations

import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gputrace.analysis._common import fmt_ns  # noqa: E402
from gputrace.analysis.report import analyse_timeline  # noqa: E402
from gputrace.timeline.load import read_any  # noqa: E402
from gputrace.timeline.model import Timeline  # noqa: E402

TAR = ROOT / "benchmarks" / "real_programs" / "h200-2026-12-01" / "traces.tar.gz"
FOREIGN = ROOT / "tests" / "data" / "foreign"
CNN = ROOT / "benchmarks" / "real_programs" / "h200-2026-12-04" / "cnn.jsonl.gz"


def cut_at(tl: Timeline, cuts: dict[tuple[str, int], int]) -> Timeline:
    """The trace as a recording started at each process's cut would hold it (other lanes: the earliest cut)."""
    c = tl.cols
    first = min(cuts.values())
    at = np.array([cuts.get((ln.host, int(ln.pid)), first) for ln in tl.lanes], np.int64)[c["lane"]]
    keep = np.maximum(c["end"], c["gpu_end"]) > at
    rows = np.flatnonzero(keep)
    cols = {k: v[rows].copy() for k, v in c.items()}
    a = at[rows]
    cols["end"] = np.maximum(cols["end"], a)
    cols["start"] = np.clip(cols["start"], a, cols["end"])
    g = cols["gpu_start"] >= 0
    cols["gpu_start"][g] = np.maximum(cols["gpu_start"][g], a[g])
    cols["gpu_end"][g] = np.maximum(cols["gpu_end"][g], cols["gpu_start"][g])
    new = {int(r): i for i, r in enumerate(rows.tolist())}
    attrs = {new[r]: v for r, v in tl.attrs.items() if r in new}
    names = {new[r]: v for r, v in tl.names.items() if r in new}
    return Timeline.from_unsorted(cols, tl.phases, tl.lanes, tl.resources, tl.trace_ids, attrs, names)


def steady(d: dict) -> dict[tuple[str, str], int]:
    return {(f["rule"], f["where"]): int(f["saving_ns"]) for f in d["findings"] if f["rule"] != "warm-up"}


def one(name: str, tl: Timeline) -> float | None:
    full = analyse_timeline(tl).to_dict()
    series = full["steps"]["series"]
    cuts = {(s["host"], int(s["pid"])): int(s["steady_from_ns"]) for s in series if s.get("warmup")}
    print(f"== {name}: {tl.n:,} spans, wall {fmt_ns(full['wall_ns'])}")
    for s in series:
        w = s.get("warmup") or {}
        print(f"   steps: {s['process']}: {s['count']} of {s['name']} ({s['method']}), median {fmt_ns(s['median_ns'])},"
              f" p90 {fmt_ns(s['p90_ns'])}; warm-up {fmt_ns(w.get('ns', 0))} ({w.get('steps', 0)} step(s)); "
              f"slowest: {s['slowest']['text']}")
    before = analyse_timeline(tl, steps=False).to_dict()["findings"]
    print("   first 3 findings, steps off (before):")
    for f in before[:3]:
        print(f"     {f['rule']:14s} ~{fmt_ns(f['saving_ns']):>9s}  {f['title'][:96]}")
    print("   first 3 findings, steps on (after):")
    for f in full["findings"][:3]:
        print(f"     {f['rule']:14s} ~{fmt_ns(f['saving_ns']):>9s}  {f['title'][:96]}")
    if not cuts:
        print("   no warm-up: nothing to cut")
        return None
    got, want = steady(full), steady(analyse_timeline(cut_at(tl, cuts)).to_dict())
    worst = 0.0
    print(f"   {'rule (where)':50s} {'full':>10s} {'cut':>10s} {'diff':>7s}")
    for k in sorted(set(got) | set(want)):
        a, b = got.get(k), want.get(k)
        rel = abs(a - b) / b if a is not None and b else float("inf")
        worst = max(worst, rel)
        print(f"   {(k[0] + ' (' + k[1] + ')')[:50]:50s} {fmt_ns(a) if a is not None else '-':>10s} "
              f"{fmt_ns(b) if b is not None else '-':>10s} {rel:7.1%}")
    same = set(got) == set(want)
    print(f"   same rules: {same}; largest saving difference {worst:.1%}; target: same rules, <= 5 %: "
          f"{'MET' if same and worst <= 0.05 else 'NOT MET'}")
    return worst if same else float("inf")


def main(argv: list[str]) -> int:
    todo: list[tuple[str, list[Path]]] = [(p, [Path(p)]) for p in argv]
    tmp = tempfile.TemporaryDirectory()
    if not todo:
        if TAR.exists():
            with tarfile.open(TAR) as tar:
                for member in ("./train.jsonl", "./ddp.jsonl", "./bench/record-2.jsonl", "./bench/kineto-2.json"):
                    tar.extract(member, tmp.name, filter="data")
                    todo.append((f"h200-2026-12-01 {member[2:]}", [Path(tmp.name) / member]))
        todo.append(("h200-2026-12-04 cnn.jsonl.gz", [CNN]))
        todo.append(("ddp_plain_record.jsonl.gz", [FOREIGN / "ddp_plain_record.jsonl.gz"]))
        todo.append(("train_record_toggle.jsonl.gz", [FOREIGN / "train_record_toggle.jsonl.gz"]))
        todo.append(("dist_rank0 + dist_rank1", [FOREIGN / "dist_rank0.json.gz", FOREIGN / "dist_rank1.json.gz"]))
        todo.append(("train_kineto.json.gz", [FOREIGN / "train_kineto.json.gz"]))
        todo.append(("train_nsys.sqlite.gz", [FOREIGN / "train_nsys.sqlite.gz"]))
    results = [one(name, read_any(paths if len(paths) > 1 else paths[0])) for name, paths in todo]
    cut = [r for r in results if r is not None]
    met = sum(1 for r in cut if r <= 0.05)
    print(f"\nSUMMARY traces={len(results)} with_warmup={len(cut)} target_met={met}/{len(cut)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
