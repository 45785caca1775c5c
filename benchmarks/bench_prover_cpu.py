"""CPU prover benchmark: per-phase times, synthesis rate, A1/A2 synthesis A/B, key generation.

Usage: .venv/bin/python benchmarks/bench_prover_cpu.py [--sizes 12,14,16] [--repeats 3] [--keys DIR]
       [--setup-repeats 5] [--setup-only]

Prints tables (medians over repeats, batch 1, one CPU worker lane, all switches off unless
stated). Key generation is timed once per size (then cached in --keys); the 2^20 setup figure is
extrapolated from the measured sizes by a fit linear in constraints (setup is Θ(n) fixed-base
multiplications), and says so. Loading cached keys is timed with and without a fingerprint record
(``gputrace/prover/keygen/fingerprint_record.py``; without one, the template R1CS is synthesized as before),
interleaved per repeat; ``--setup-only`` prints only that and the key generation table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from gputrace.prover.keygen import fingerprint_record
from gputrace.prover.circuit import CIRCUIT_ID, make_instance, shape_for_constraints
from gputrace.prover.keygen.cache import get_keys
from gputrace.prover.keygen.template import TEMPLATE_OPTS, TEMPLATE_SEED
from gputrace.prover.options import ProveOptions
from gputrace.prover.pipeline import run_prove
from gputrace.prover.witness import build_cs

PHASES = ["synthesis", "h2d", "intt_abc", "coset_ntt", "h_eval", "intt_h", "ntt", "msm_h", "batch_add", "msm_l",
          "msm_a", "msm_b_g1", "b_g2", "sync", "assemble"]


def synthesis_rates(shape, repeats: int) -> dict[str, float]:
    """Median constraints/s of synthesis + A·z/B·z/C·z evaluation for each A1/A2 combination.

    Configurations are interleaved within each repeat (ABCD ABCD ...) so machine-load drift hits all alike.
    """
    inst = make_instance(shape, 3)
    configs = (("baseline", frozenset()), ("A1", frozenset({"a1"})), ("A2", frozenset({"a2"})),
               ("A1+A2", frozenset({"a1", "a2"})))
    times: dict[str, list[float]] = {label: [] for label, _ in configs}
    for _ in range(repeats):
        for label, opts in configs:
            t0 = time.perf_counter()
            cs = build_cs(shape, inst, opts)
            cs.evaluate(check=True)
            times[label].append(time.perf_counter() - t0)
    return {label: shape.constraints / statistics.median(ts) for label, ts in times.items()}


def cached_setup_times(shape, key_dir: Path, repeats: int) -> tuple[float, float]:
    """Median seconds of ``get_keys`` with cached keys: (no fingerprint record, record hit), interleaved."""
    rkey = fingerprint_record.record_key(CIRCUIT_ID, shape.challenges, shape.depth, TEMPLATE_SEED, TEMPLATE_OPTS)
    if rkey is None:
        raise SystemExit("fingerprint records are off (no readable source for the circuit modules)")
    record = fingerprint_record.record_path(key_dir, rkey)
    miss, hit = [], []
    for _ in range(repeats):
        record.unlink(missing_ok=True)
        for times in (miss, hit):  # the first call synthesizes and writes the record, the second reads it
            t0 = time.perf_counter()
            ks = get_keys(shape, key_dir, seed=1)
            times.append(time.perf_counter() - t0)
            assert ks.cached, "keys were not cached"
    return statistics.median(miss), statistics.median(hit)


def print_prove_tables(console, args, sizes, phase_rows, synth_rows) -> None:
    t = Table(title=f"CPU prover, per-phase seconds (median of {args.repeats}, batch 1, 1 lane, switches off)")
    t.add_column("phase")
    for n in sizes:
        t.add_column(f"2^{n}", justify="right")
    for p in PHASES + ["total"]:
        t.add_row(p, *(f"{phase_rows[n][p]:.3f}" for n in sizes))
    console.print(t)

    t = Table(title=f"synthesis rate, constraints/s (synthesis + A·z, B·z, C·z + check; median of {args.synth_repeats}, interleaved)")
    t.add_column("size")
    for label in ("baseline", "A1", "A2", "A1+A2"):
        t.add_column(label, justify="right")
    t.add_column("A1/baseline", justify="right")
    for n in sizes:
        row = synth_rows[n]
        t.add_row(f"2^{n}", *(f"{row[k]:,.0f}" for k in ("baseline", "A1", "A2", "A1+A2")),
                  f"{row['A1'] / row['baseline']:.2f}x")
    console.print(t)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="12,14,16")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--synth-repeats", type=int, default=5)
    ap.add_argument("--keys", type=Path, default=Path(tempfile.gettempdir()) / "gputrace-bench-keys")
    ap.add_argument("--setup-repeats", type=int, default=5)
    ap.add_argument("--setup-only", action="store_true", help="only key generation and cached key loading")
    args = ap.parse_args(argv)
    console = Console(width=120)
    console.print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", style="dim")
    sizes = [int(s) for s in args.sizes.split(",")]
    phase_rows, synth_rows, setup_rows, cached_rows = {}, {}, [], {}
    for n in sizes:
        shape = shape_for_constraints(1 << n)
        t0 = time.perf_counter()
        ks = get_keys(shape, args.keys, seed=1)
        setup_rows.append((n, shape.constraints, time.perf_counter() - t0, ks.cached))
        cached_rows[n] = cached_setup_times(shape, args.keys, args.setup_repeats)
        if args.setup_only:
            continue
        per_rep = []
        for r in range(args.repeats):
            with tempfile.TemporaryDirectory() as out:
                res = run_prove(ProveOptions(constraints=1 << n, batch=1, devices=1, backend="cpu",
                                             out_dir=Path(out), key_dir=args.keys, configure_tracer=False))
            assert all(res.verified), "proof did not verify"
            per_rep.append({p: sum(v for (q, _), v in res.phase_seconds.items() if q == p) for p in PHASES}
                           | {"total": res.wall_s})
        phase_rows[n] = {k: statistics.median(rep[k] for rep in per_rep) for k in per_rep[0]}
        synth_rows[n] = synthesis_rates(shape, args.synth_repeats)
        console.print(f"2^{n}: load {os.getloadavg()[0]:.1f}; {shape.constraints} constraints (K={shape.challenges}, D={shape.depth}) done", style="dim")

    sizes = [n for n in sizes if n in phase_rows]  # none with --setup-only
    if sizes:
        print_prove_tables(console, args, sizes, phase_rows, synth_rows)

    t = Table(title=f"loading cached keys: get_keys seconds (median of {args.setup_repeats}, interleaved)")
    for c in ("size", "no record (synthesis)", "record hit", "speed-up"):
        t.add_column(c, justify="right")
    for n, (miss, hit) in cached_rows.items():
        t.add_row(f"2^{n}", f"{miss:.3f}", f"{hit:.3f}", f"{miss / hit:.1f}x")
    console.print(t)

    t = Table(title="key generation (seeded test setup; cached keys marked)")
    for c in ("size", "constraints", "seconds", "cached"):
        t.add_column(c, justify="right")
    for n, c, s, cached in setup_rows:
        t.add_row(f"2^{n}", str(c), f"{s:.1f}", "yes" if cached else "no")
    console.print(t)
    fresh = [(c, s) for _, c, s, cached in setup_rows if not cached]
    if len(fresh) >= 2:
        (c0, s0), (c1, s1) = fresh[-2], fresh[-1]
        slope = (s1 - s0) / (c1 - c0)
        target = shape_for_constraints(1 << 20).constraints
        est = s1 + slope * (target - c1)
        console.print(f"extrapolated setup at 2^20 ({target} constraints) on this machine: {est / 60:.1f} min "
                      f"(linear fit through the two largest measured sizes; not measured)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
