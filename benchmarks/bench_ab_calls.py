"""False and true calls of ``compare`` over simulated comparisons (prints a table).

    .venv/bin/python benchmarks/bench_ab_calls.py [--reps 200] [--seed 1]

Each comparison draws fresh synthetic runs (`gputrace.testing.synth.synthetic_run`: 2 circuits
on 2 devices, 3 % multiplicative log-normal noise per phase; ~40 rows: paths x devices x
clocks) and compares them with the defaults (Holm at 95 %, 2 % margin; ``--correction fdr``
for Benjamini-Hochberg).
Targets (issue 15):

* pure noise, 8 vs 8: comparisons with any row called slower or faster <= 5 %;
* ``msm_l`` slowed 15 %, 8 vs 8: found (its all-devices host row called slower) and found
  alone (no other path called slower/faster; its ancestors and its own per-device/clock rows
  aside) in >= 95 %;
* ``msm_l`` slowed 5 %, 16 vs 16: found in >= 80 %.
"""

from __future__ import annotations

import argparse
import time

from gputrace.analysis.ab.compare import compare_measures
from gputrace.analysis.ab.measures import run_measures
from gputrace.testing.synth import synthetic_run

SLOW = "msm_l"
OWN = {"(run)", "(prove)", "prove", f"prove/{SLOW}"}  # the phase and its ancestors


def _runs(seed0: int, n: int, slow=None):
    return [run_measures(synthetic_run(seed0 + i, circuits=2, devices=2, noise=0.03, slow=slow), f"r{seed0 + i}")
            for i in range(n)]


def scenario(name: str, reps: int, n: int, slow: float | None, seed: int, correction: str | None = None) -> dict:
    any_call = found = alone = 0
    rows = 0
    for k in range(reps):
        base = _runs(seed + 1_000_000 * k, n)
        var = _runs(seed + 1_000_000 * k + 500_000, n, {SLOW: slow} if slow else None)
        res = compare_measures(base, var, correction=correction)
        rows = len(res.rows)
        called = [r for r in res.rows if r.verdict in ("slower", "faster")]
        any_call += bool(called)
        row = res.find(f"prove/{SLOW}")
        hit = row is not None and row.verdict == "slower"
        found += hit
        alone += hit and all(r.path in OWN for r in called)
    return {"scenario": name, "runs": f"{n} vs {n}", "rows": rows, "reps": reps, "any call": any_call / reps,
            "found": found / reps, "found alone": alone / reps}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--correction", choices=("fdr", "holm", "none"), default=None, help="default: compare's default")
    args = ap.parse_args()
    c = args.correction
    t = time.monotonic()
    out = [
        (scenario("pure noise", args.reps, 8, None, args.seed, c), "any call <= 5 %"),
        (scenario(f"{SLOW} +15 %", args.reps, 8, 0.15, args.seed + 7, c), "found alone >= 95 %"),
        (scenario(f"{SLOW} +5 %", args.reps, 16, 0.05, args.seed + 13, c), "found >= 80 %"),
    ]
    print(f"| scenario | runs | rows | comparisons | any row called | found | found alone | target |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for d, target in out:
        print(f"| {d['scenario']} | {d['runs']} | {d['rows']} | {d['reps']} | {d['any call']:.1%} | "
              f"{d['found']:.1%} | {d['found alone']:.1%} | {target} |")
    print(f"\n(correction {c or 'default'}; {time.monotonic() - t:.0f} s)")


if __name__ == "__main__":
    main()
