"""``gputrace ab``: run the prover N times per switch variant (interleaved), keep every trace,
compare, and name which switch or interaction explains the end-to-end change.

Wiring only: designs, the runner and the statistics live in ``gputrace.analysis``
(``design``, ``experiment``, ``abtest``, ``effects``); this module supplies the prover as the
``run_variant(switches, trace_path)`` callable. Exit codes as ``gputrace compare``.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from gputrace.commands.compare import add_stat_options, dump_json, gate, render_comparison
from gputrace.commands.prove import add_placement_options
from gputrace.textsafe import console, markup, report_width, rich_text


def register(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "ab", help="run the prover per switch variant, interleaved, and attribute the change",
        description="A/B experiment over the prover's optimisation switches: --opt-sets compares whole sets "
                    "(the first is the baseline); --switches with --design one-at-a-time (each alone, and "
                    "leave-one-out) or factorial (main effects and two-way interactions per phase). Every trace "
                    "is kept under --out with a manifest; --analyze re-reads such a folder without running.",
    )
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--opt-sets", nargs="+", metavar="SET", help='switch sets, e.g. "none" "all" "a1,b1"')
    what.add_argument("--switches", help="switches to study, e.g. A1,A2,A4,B1,D4")
    what.add_argument("--analyze", type=Path, metavar="DIR", help="analyse an existing experiment folder")
    p.add_argument("--design", choices=("one-at-a-time", "factorial"), default="one-at-a-time",
                   help="design for --switches (default one-at-a-time)")
    p.add_argument("--fraction", choices=("auto", "full", "half"), default="auto",
                   help="factorial: full 2^k or half fraction (auto: half from 5 switches)")
    p.add_argument("--runs", type=int, default=5, help="measured runs per variant (default 5)")
    p.add_argument("--shuffle", action="store_true", help="random variant order within each round (seeded)")
    p.add_argument("--seed-order", type=int, default=0, help="seed of --shuffle")
    p.add_argument("--out", type=Path, default=None, help="experiment folder (default gputrace-ab/<time>)")
    pr = p.add_argument_group("prover")
    pr.add_argument("--constraints", default="2^10", help="constraints per circuit: N or 2^N (default 2^10)")
    pr.add_argument("--batch", type=int, default=1, help="circuits per device (default 1)")
    pr.add_argument("--devices", type=int, default=1, help="devices / CPU worker lanes (default 1)")
    pr.add_argument("--backend", choices=("auto", "cpu", "cuda"), default="cpu", help="default cpu")
    pr.add_argument("--key-dir", type=Path, default=None, help="key cache (default OUT/keys, shared by all runs)")
    add_placement_options(pr)
    pr.add_argument("--subprocess", action="store_true", help="run each prove in a fresh process (slower, isolated)")
    pr.add_argument("--cuda-activity", action="store_true",
                    help="collect CUDA activity (CUPTI: kernels, copies, syncs) in every run, and give each factorial "
                         "verdict its kernel evidence (kernel time, launch gaps, copies by memory kind with GB/s, "
                         "sync waits); a phase whose bracket moved but neither its kernels nor its copies did is "
                         "called host timing")
    p.add_argument("--deadline", type=float, default=None, metavar="S",
                   help="start no run that would end more than S seconds after the first (predicted from earlier runs "
                        "of its variant); then analyse what ran: a time-boxed call keeps its results")
    p.add_argument("--prime", type=int, default=0, metavar="N",
                   help="N runs of the baseline before the design's rounds (process warm-up: kernel loads, pools), "
                        "kept as prime-NNN traces and left out of the analysis; cheaper than a --warmup round")
    add_stat_options(p)
    # Here --warmup counts warm-up *rounds* that are run first and kept out of the analysis.
    p.set_defaults(func=run, warmup=1)
    return p


def prover_runner(args, out_dir: Path) -> Callable[[frozenset[str], Path], None]:
    """``run_variant(switches, trace_path)`` that proves with those switches on."""
    key_dir = args.key_dir or out_dir / "keys"
    proofs = out_dir / "proofs"
    if args.subprocess:
        def run_in_subprocess(switches: frozenset[str], trace_path: Path) -> None:
            cmd = [sys.executable, "-m", "gputrace", "prove", "--constraints", str(args.constraints),
                   "--batch", str(args.batch), "--devices", str(args.devices), "--backend", args.backend,
                   "--opt", ",".join(sorted(switches)) or "none", "--trace", str(trace_path), "--out", str(proofs),
                   "--key-dir", str(key_dir), "--no-verify", "--quiet", "--synthesis", args.synthesis,
                   "--b-g2", args.b_g2, "--device-flow", args.device_flow]
            r = subprocess.run(cmd, capture_output=True, text=True, env=_run_env(args))
            if r.returncode != 0:
                raise RuntimeError(f"gputrace prove exited {r.returncode}: {r.stderr.strip()[-500:]}")
        return run_in_subprocess

    from gputrace.prover import run_prove
    from gputrace.prover.options import ProveOptions, parse_size

    constraints = parse_size(str(args.constraints))

    def run_here(switches: frozenset[str], trace_path: Path) -> None:
        run_prove(ProveOptions(constraints=constraints, batch=args.batch, devices=args.devices, backend=args.backend,
                               opts=frozenset(switches), out_dir=proofs, key_dir=key_dir, trace=trace_path,
                               verify=False, synthesis=args.synthesis, b_g2=args.b_g2, device_flow=args.device_flow))
    return run_here


def _run_env(args) -> dict[str, str]:
    """The environment of a subprocess run: CUDA activity on or off as ``--cuda-activity`` says."""
    import os

    from gputrace.trace.recorder import CUDA_ACTIVITY_ENV

    env = dict(os.environ)
    env[CUDA_ACTIVITY_ENV] = "1" if getattr(args, "cuda_activity", False) else "0"
    return env


def _plan(args):
    """(design, switches, variants) from the arguments; ValueError naming the flag for a bad switch or an
    impossible ``--batch`` / ``--devices`` (checked here, before any run)."""
    from gputrace.analysis.ab.design import factorial, one_at_a_time, opt_sets, parse_switches
    from gputrace.prover.options import ALL_OPT_NAMES, check_counts

    check_counts(args.batch, args.devices, args.backend)
    if getattr(args, "prime", 0) < 0:
        raise ValueError(f"--prime must be >= 0, got {args.prime}")
    if getattr(args, "deadline", None) is not None and not args.deadline > 0:
        raise ValueError(f"--deadline must be > 0 seconds, got {args.deadline}")
    if args.opt_sets:
        return "opt-sets", tuple(ALL_OPT_NAMES), opt_sets(args.opt_sets, tuple(ALL_OPT_NAMES))
    sw = parse_switches(args.switches)
    bad = [s for s in sw if s not in ALL_OPT_NAMES]
    if bad:
        raise ValueError(f"--switches: unknown switch {bad[0]!r} (the prover has {', '.join(ALL_OPT_NAMES)})")
    if args.design == "factorial":
        return "factorial", sw, factorial(sw, args.fraction)
    return "one-at-a-time", sw, one_at_a_time(sw)


def render_report(rep, console, top: int, only_changed: bool = False) -> None:
    from rich.table import Table

    console.rule(f"[bold]A/B result ({markup(rep.design)})")
    for line in rep.conclusions:
        console.print(rich_text(" • " + line))
    if rep.comparisons:
        label, res = rep.comparisons[0]
        render_comparison(res, console, top, title=label, only_changed=only_changed)
    if rep.switch_findings:
        from gputrace.analysis.ab.abtest import e2e_row

        t = Table(title="One switch at a time (end to end)", title_justify="left")
        for col in ("switch", "alone vs none (HL shift)", "verdict", "all vs all-without (HL shift)", "verdict",
                    "interaction?"):
            t.add_column(col)
        for f in rep.switch_findings:
            a = e2e_row(f.alone) if f.alone else None
            lo = e2e_row(f.loo) if f.loo else None
            t.add_row(rich_text(f.switch), f"{a.rel:+.1%}" if a else "-", a.verdict if a else "-",
                      f"{lo.rel:+.1%}" if lo else "-", lo.verdict if lo else "-", "yes" if f.interaction else "")
        console.print(t)
    if rep.factorial is not None:
        fr = rep.factorial
        from gputrace.analysis.ab.effects import CODING

        t = Table(title=f"Factorial effects on {markup(fr.e2e_path)} ({fr.model}, {fr.df} residual df; {CODING})",
                  title_justify="left")
        for col in ("term", "effect", f"{fr.confidence:.0%} interval", "time", "p", "significant"):
            t.add_column(col)
        for e in sorted(fr.for_key(fr.e2e_path), key=lambda e: -abs(e.ns)):
            iv = f"[{e.rel_low:+.1%}, {e.rel_high:+.1%}]" if math.isfinite(e.rel_low) else "-"
            from gputrace.analysis._common import fmt_ns

            t.add_row(rich_text(e.term), f"{e.rel:+.1%}", iv, ("+" if e.ns >= 0 else "-") + fmt_ns(abs(e.ns)),
                      "-" if not math.isfinite(e.p_value) else f"{e.p_value:.3g}", "yes" if e.significant else "")
        console.print(t)
    if rep.evidence:
        render_evidence(rep.evidence, console)


def render_evidence(evidence, console) -> None:
    """The kernel-evidence table: per term and phase, the bracket's, kernels', launch gaps', sync waits' and copies'
    fitted changes (n.s. = not significant) and the verdict."""
    from rich.table import Table

    from gputrace.analysis.ab.evidence import _signed

    def cell(e) -> str:
        return "-" if e is None else _signed(e.ns) + ("" if e.significant else " n.s.")

    t = Table(title="Kernel evidence (CUDA activity): what moved inside each phase", title_justify="left")
    for col in ("term", "phase", "bracket", "kernels", "launch gaps", "sync waits", "copies (GB/s off -> on)",
                "verdict"):
        t.add_column(col)
    for pe in evidence:
        copies = "; ".join(c.describe().removeprefix("copies ") + ("" if c.effect.significant else " n.s.")
                           for c in pe.copies) or "-"
        verdict = pe.verdict + (": " + ", ".join(pe.because) if pe.because else "")
        t.add_row(rich_text(pe.term), rich_text(pe.path), cell(pe.bracket), cell(pe.kernels), cell(pe.gaps),
                  cell(pe.syncs), rich_text(copies), rich_text(verdict))
    console.print(t)


def run(args) -> int:
    import datetime

    from gputrace.analysis.ab.abtest import analyse
    from gputrace.analysis.ab.experiment import Experiment, ExperimentError, run_experiment

    err = console(stderr=True, soft_wrap=True)
    try:
        if args.analyze:
            exp = Experiment.load(args.analyze)
        else:
            design, switches, variants = _plan(args)
            out = args.out or Path("gputrace-ab") / datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
            total = len(variants) * (args.runs + args.warmup)
            err.print(f"{design}: {len(variants)} variants x ({args.warmup} warm-up + {args.runs}) runs = {total} runs "
                      f"-> {markup(out)}")

            def progress(done, total, v, warm):
                err.print(f"  \\[{done + 1}/{total}] {markup(v.name)}{' (warm-up)' if warm else ''}")

            if args.cuda_activity and not args.subprocess:
                import os

                from gputrace.trace.recorder import CUDA_ACTIVITY_ENV

                os.environ[CUDA_ACTIVITY_ENV] = "1"  # read by every run's gputrace.configure
            exp = run_experiment(prover_runner(args, Path(out)), variants, args.runs, out, design=design,
                                 switches=switches, warmup=args.warmup, shuffle=args.shuffle, seed=args.seed_order,
                                 progress=progress, prime=args.prime, deadline_s=args.deadline)
            if exp.stopped:
                done = sum(1 for r in exp.records if not r.warmup)
                err.print(f"stopped at the --deadline: {done} measured runs of {len(variants) * args.runs}")
        runs = exp.measures()
        rep = analyse(runs, exp.design, exp.switches, confidence=args.confidence, equivalence=args.equivalence,
                      familywise=args.familywise, correction=args.correction)
    except (OSError, ValueError, ExperimentError) as e:
        from gputrace.commands._errors import describe_error

        print(f"gputrace ab: {describe_error(e)}", file=sys.stderr)
        return 1
    head = rep.comparisons[0][1] if rep.comparisons else None
    if args.json:
        doc = rep.to_dict()
        doc["folder"] = str(exp.out_dir)
        dump_json(doc)
        return gate(head, args.fail_on_regression, args.min_time, err, args.allow_undecided) if head is not None else 0
    out_c = console(width=report_width())
    render_report(rep, out_c, args.top, args.only_changed)
    out_c.print(rich_text(f"traces and manifest: {exp.out_dir}"))
    return gate(head, args.fail_on_regression, args.min_time, out_c, args.allow_undecided) if head is not None else 0
