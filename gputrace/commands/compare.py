"""``gputrace compare BASE... --vs VARIANT...``: which phase moved, on which device, by how
much, and whether it is real. Wiring and rendering only (statistics: gputrace.analysis.ab.compare).

Exit codes: 0 fine, 1 unreadable input or bad arguments, 3 ``--fail-on-regression`` tripped,
4 ``--fail-on-regression`` could not decide (too few runs to rule out a regression of the asked
size; ``--allow-undecided`` turns this into 0).
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import TYPE_CHECKING

from gputrace.textsafe import console, markup, report_width, rich_text

if TYPE_CHECKING:
    from rich.console import JustifyMethod

REGRESSION_EXIT = 3
UNDECIDED_EXIT = 4

VERDICT_STYLE = {
    "slower": "bold red",
    "faster": "bold green",
    "unchanged": "dim",
    "inconclusive": "yellow",
    "within margin": "dim yellow",
    "partial": "dim cyan",
    "too few runs": "magenta",
    "new": "cyan",
    "gone": "cyan",
}


def parse_fraction(text: str) -> float:
    """'5%' -> 0.05, '0.05' -> 0.05. Raises argparse.ArgumentTypeError."""
    t = text.strip()
    try:
        v = float(t[:-1]) / 100.0 if t.endswith("%") else float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction like 5% or 0.05, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text!r}")
    return v


def parse_confidence(text: str) -> float:
    v = parse_fraction(text)
    if not 0.0 < v < 1.0:
        raise argparse.ArgumentTypeError(f"confidence must be between 0 and 1 (or 0% and 100%), got {text!r}")
    return v


def add_stat_options(p: argparse.ArgumentParser) -> None:
    """Options shared by ``compare`` and ``ab``."""
    p.add_argument("--confidence", type=parse_confidence, default=0.95,
                   help="confidence of the intervals (default 95%%)")
    p.add_argument("--equivalence", type=parse_fraction, default=0.02,
                   help="an interval inside ±this is called unchanged (default 2%%)")
    p.add_argument("--warmup", type=int, default=0, help="discard the first K runs of each side (by start time)")
    p.add_argument("--correction", choices=("fdr", "holm", "none"), default=None,
                   help="how rows are decided together: holm (default: the chance of any false call stays under "
                        "1 - confidence; ~40 rows need 8 runs a side), fdr (Benjamini-Hochberg: at most 1 - confidence "
                        "of the rows called slower/faster are false calls) or none (each row alone)")
    p.add_argument("--familywise", action="store_true", help="the same as --correction holm")
    p.add_argument("--fail-on-regression", type=parse_fraction, default=None, metavar="PCT",
                   help=f"exit {REGRESSION_EXIT} when a phase or the whole run is slower by more than PCT "
                        f"with the stated confidence (e.g. 5%%); exit {UNDECIDED_EXIT} when the runs cannot rule "
                        "such a regression out (and say how many runs would)")
    p.add_argument("--allow-undecided", action="store_true",
                   help="with --fail-on-regression: exit 0, not 4, when the runs cannot decide")
    p.add_argument("--min-time", type=float, default=0.0, metavar="SECONDS",
                   help="ignore phases whose baseline median is shorter than this for --fail-on-regression")
    p.add_argument("--ignore-env", action="append", default=[], metavar="FIELD",
                   help="resource attribute not to check for environment differences (repeatable)")
    p.add_argument("--top", type=int, default=40, help="rows to print (default 40; --json has all)")
    p.add_argument("--only-changed", action="store_true",
                   help="print only rows called slower, faster, new or gone (plus the end-to-end rows)")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of tables")


def register(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "compare", help="noise-aware comparison of two sets of traces, per phase and device",
        description="Compare N baseline runs against N variant runs (one run per trace file; a file holding "
                    "several runs is split by run id). Per phase path, device and clock: medians, the "
                    "Hodges-Lehmann difference with its rank-based confidence interval, and a verdict.",
    )
    p.add_argument("base", nargs="+", metavar="BASE", help="baseline trace files")
    p.add_argument("--vs", nargs="+", required=True, metavar="VARIANT", help="variant trace files")
    add_stat_options(p)
    p.add_argument("--paired", action="store_true",
                   help="runs were interleaved (A B A B ...): pair the i-th baseline with the i-th variant run "
                        "by start time (signed-rank interval; cancels load that drifts between pairs)")
    p.add_argument("--lenient", action="store_true", help="skip unreadable lines/spans instead of failing")
    p.set_defaults(func=run)
    return p


def load_runs(paths, lenient: bool = False):
    """(Timelines, labels), one per run (:func:`gputrace.commands._inputs.read_runs`); with ``lenient``,
    what each file's read skipped is printed to stderr."""
    from gputrace.commands._inputs import read_runs

    return read_runs("compare", paths, lenient)


def _pct(x: float) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x * 100:+.1f}%"


CHANGED = ("slower", "faster", "new", "gone")


#: The comparison table's columns before the shift and its interval, and after them. ``diff`` and
#: ``change`` are the medians' difference and ratio (so a doubling reads +100 %); the verdict uses
#: the Hodges-Lehmann shift and its interval, shown beside them as what they are.
COLUMNS: tuple[tuple[str, JustifyMethod], ...] = (
    ("phase", "left"), ("device", "left"), ("clock", "left"), ("baseline", "right"), ("variant", "right"),
    ("diff", "right"), ("change", "right"), ("p", "right"), ("verdict", "left"))
LEGEND = ("baseline, variant: medians; diff, change: variant median vs baseline median; HL shift: the "
          "Hodges-Lehmann estimate (median of pairwise differences) that the interval and verdict use")


def median_change(r) -> float:
    """``variant median / baseline median - 1`` of a row (NaN when the baseline median is 0)."""
    return r.variant_median_ns / r.base_median_ns - 1.0 if r.base_median_ns > 0 else float("nan")


def table_cells(r) -> tuple[str, ...]:
    """A row's cells before its verdict, in table order (``COLUMNS`` with the shift and interval)."""
    from gputrace.analysis._common import fmt_ns
    from gputrace.analysis.lanes import device_name

    ci = "-" if not math.isfinite(r.rel_low) else f"[{_pct(r.rel_low)}, {_pct(r.rel_high)}]"
    shift = _pct(r.rel)
    if r.verdict in ("new", "gone"):
        ci = "-" if not math.isfinite(r.diff_low_ns) else f"[{fmt_ns(r.diff_low_ns)}, {fmt_ns(r.diff_high_ns)}]"
        shift = ("+" if r.diff_ns >= 0 else "-") + fmt_ns(abs(r.diff_ns))
    diff = r.variant_median_ns - r.base_median_ns
    p = "-" if not math.isfinite(r.p_value) else f"{r.p_value:.3g}"
    return (r.path, device_name(r.device), r.clock, fmt_ns(r.base_median_ns), fmt_ns(r.variant_median_ns),
            ("+" if diff >= 0 else "-") + fmt_ns(abs(diff)), _pct(median_change(r)), shift, ci, p)


def environment_panel(warnings: list[str]):
    """The red panel naming environment differences: one line per warning, each escaped (trace text) and then
    joined with real line breaks."""
    from rich.panel import Panel
    from rich.text import Text

    return Panel(Text("\n").join(rich_text(w) for w in warnings),
                 title="[bold]WARNING: the runs' environments differ[/]", border_style="bold red", style="red")


def render_comparison(res, console, top: int = 40, title: str = "Comparison", only_changed: bool = False) -> None:
    """Print a ComparisonResult: environment warnings (stderr-loud), the table, outliers. Trace-derived
    text (phase paths, run labels, environment values) goes in through gputrace.textsafe."""
    from rich.table import Table

    from gputrace.analysis._common import fmt_ns
    from gputrace.analysis.lanes import device_name

    env = res.environment
    if env.warnings:
        console.print(environment_panel(env.warnings))
    if env.config_diffs:
        console.print(rich_text(f"configuration: {env.config_summary()}"))
    nb, nv = len(res.base_labels), len(res.variant_labels)
    head = f"{nb} baseline vs {nv} variant runs, {res.confidence:.0%} confidence"
    if res.paired:
        head += f", paired by round ({res.paired_rounds} rounds)"
    if res.warmup_dropped:
        head += f", warm-up discarded: {', '.join(res.warmup_dropped)}"
    console.print(rich_text(head))
    how = {"fdr": f"false discoveries held at {1 - res.confidence:.0%} (Benjamini-Hochberg)",
           "holm": f"chance of any false call held at {1 - res.confidence:.0%} (Holm, end-to-end rows first)",
           "none": "each row tested alone (no control across rows)"}[res.correction]
    console.print(f"{res.tested_rows} rows tested, {res.called_rows} called different; {how}; "
                  f"changes within ±{res.equivalence:.0%} are never called slower/faster")
    if res.undecidable:
        console.print(f"[bold magenta]N too small to decide: with {nb} vs {nv} runs the smallest possible p is "
                      f"{res.min_p:.3g}, above the {res.smallest_threshold:.3g} any call needs "
                      f"({res.correction}, {res.tested_rows} rows); "
                      f"add runs.[/]")
    elif res.phases_undecidable:
        console.print(f"[magenta]phase rows cannot be called with {nb} vs {nv} runs (smallest possible p "
                      f"{res.min_p:.3g}, a phase needs {res.thresholds['phase']:.3g} among {res.tested_rows} rows); "
                      f"the end-to-end rows can. Add runs to name phases.[/]")
    for side, emu in res.emulated.items():
        if emu:
            what = ", ".join(f"{k[len('gputrace.emulated.'):]}={'/'.join(v)}" for k, v in emu.items())
            which = "baseline" if side == "base" else "variant"
            console.print(rich_text(f"emulated costs in the {which} runs: " + what, style="bold yellow"))
    t = Table(title=rich_text(title), title_justify="left")  # (ab passes variant labels)
    ival = (f"{res.row_confidence:.4g} interval" if res.row_confidence != res.confidence
            else f"{res.confidence:.0%} interval")
    shift_cols: tuple[tuple[str, JustifyMethod], ...] = (("HL shift", "right"), (ival, "right"))
    for col, j in COLUMNS[:7] + shift_cols + COLUMNS[7:]:
        t.add_column(col, justify=j, no_wrap=col != "phase")
    rows = [r for r in res.rows if not only_changed or r.verdict in CHANGED or r.path.startswith("(")]
    for r in rows[:top]:
        t.add_row(*map(rich_text, table_cells(r)), rich_text(r.verdict, style=VERDICT_STYLE.get(r.verdict, "")))
    console.print(t)
    console.print(LEGEND, style="dim")
    if any(r.interval_confidence > res.confidence for r in rows[:top]):
        console.print("(rows called different show their interval at the higher confidence that holds across rows)")
    if len(rows) > top:
        console.print(f"({len(rows) - top} more rows: --top N or --json)")
    if only_changed and len(rows) < len(res.rows):
        console.print(f"({len(res.rows) - len(rows)} unchanged, inconclusive or undecidable rows hidden)")
    if res.outliers:
        t = Table(title="Outlier runs (reported, not dropped)", title_justify="left")
        for col in ("side", "run", "phase", "device", "clock", "value", "side median", "robust z"):
            t.add_column(col)
        for o in res.outliers[:top]:
            dev = device_name(o["device"])
            t.add_row(*map(rich_text, (o["side"], o["run"], o["path"], dev, o["clock"], fmt_ns(o["value_ns"]),
                                       fmt_ns(o["median_ns"]), f"{o['z']:+.1f}")))
        console.print(t)


def gate_state(res, threshold: float, min_time_s: float) -> tuple[str, list, int | None]:
    """(``"regression"`` / ``"undecided"`` / ``"pass"``, regressed rows, runs per side needed).

    Undecided: no regression was found, but the end-to-end row (``(prove)``, else ``(run)``)
    cannot rule one of ``threshold`` out: its interval reaches above ``+threshold``, or no
    interval is possible with these N. The runs needed are for that row's noise, at the
    comparison's confidence and 80 % power (`family.runs_needed`)."""
    from gputrace.analysis.ab.family import runs_needed

    bad = res.regressions(threshold, min_base_ns=min_time_s * 1e9)
    if bad:
        return "regression", bad, None
    e2e = res.find("(prove)") or res.total
    if e2e is None:
        return "pass", [], None
    open_ = not math.isfinite(e2e.rel_high) or e2e.rel_high > threshold or res.undecidable
    if not open_:
        return "pass", [], None
    return "undecided", [], runs_needed(e2e.base_values, e2e.variant_values, threshold, res.confidence,
                                        alpha=res.thresholds.get("end-to-end"))


def gate(res, threshold: float | None, min_time_s: float, console, allow_undecided: bool = False) -> int:
    """Apply ``--fail-on-regression``; prints what tripped it or why it cannot decide. Returns
    the exit code (0, REGRESSION_EXIT, or UNDECIDED_EXIT unless ``allow_undecided``)."""
    if threshold is None:
        return 0
    from gputrace.analysis._common import fmt_ns
    from gputrace.analysis.lanes import device_name

    state, bad, need = gate_state(res, threshold, min_time_s)
    if state == "undecided":
        nb, nv = len(res.base_labels), len(res.variant_labels)
        e2e = res.find("(prove)") or res.total
        what = (f"the end-to-end change is {_pct(e2e.rel)} with interval up to {_pct(e2e.rel_high)}"
                if math.isfinite(e2e.rel_high) else "no interval is possible")
        more = f"; about {need} runs per side would" if need else ""
        console.print(f"[bold magenta]UNDECIDED[/] with {nb} vs {nv} runs {what}: a regression of +{threshold:.1%} "
                      f"cannot be ruled out{more} (at {res.confidence:.0%} confidence, 80% power)")
        return 0 if allow_undecided else UNDECIDED_EXIT
    if not bad:
        console.print(f"no phase slower than +{threshold:.1%} at {res.confidence:.0%} confidence")
        return 0
    for r in bad:
        console.print(f"[bold red]REGRESSION[/] {markup(r.path)} ({device_name(r.device)}, {markup(r.clock)}): "
                      f"HL shift {_pct(r.rel)} (at least {_pct(r.rel_low)} at {res.confidence:.0%}); medians "
                      f"{fmt_ns(r.base_median_ns)} -> {fmt_ns(r.variant_median_ns)} ({_pct(median_change(r))})")
    return REGRESSION_EXIT


def dump_json(doc) -> None:
    import orjson

    opts = orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
    sys.stdout.buffer.write(orjson.dumps(doc, option=opts) + b"\n")


def run(args) -> int:
    from gputrace.analysis.ab.compare import compare_measures
    from gputrace.analysis.ab.measures import run_measures

    try:
        bt, bl = load_runs(args.base, args.lenient)
        vt, vl = load_runs(args.vs, args.lenient)
        bm = [run_measures(t, lab) for t, lab in zip(bt, bl, strict=True)]
        vm = [run_measures(t, lab) for t, lab in zip(vt, vl, strict=True)]
        if args.paired:
            if len(bm) != len(vm):
                raise ValueError(f"--paired needs as many baseline as variant runs ({len(bm)} vs {len(vm)})")
            for side in (bm, vm):
                for i, m in enumerate(sorted(side, key=lambda m: m.start_ns)):
                    m.round = i
        res = compare_measures(bm, vm, confidence=args.confidence, equivalence=args.equivalence, warmup=args.warmup,
                               ignore_env=args.ignore_env, paired=True if args.paired else False,
                               familywise=args.familywise, correction=args.correction)
    except (OSError, ValueError) as e:
        from gputrace.commands._errors import describe_error

        print(f"gputrace compare: {describe_error(e)}", file=sys.stderr)
        return 1
    err = console(stderr=True, soft_wrap=True)
    if args.json:
        doc = res.to_dict()
        if args.fail_on_regression is not None:
            state, bad, need = gate_state(res, args.fail_on_regression, args.min_time)
            doc["regressions"] = [r.to_dict() for r in bad]
            doc["gate"] = {"state": state, "threshold": args.fail_on_regression, "runs_needed_per_side": need}
        dump_json(doc)
        for w in res.environment.warnings:
            err.print(f"[bold red]WARNING[/] {markup(w)}")
        return gate(res, args.fail_on_regression, args.min_time, err, args.allow_undecided)
    out = console(width=report_width())
    render_comparison(res, out, args.top, only_changed=args.only_changed)
    for w in res.environment.warnings:
        err.print(f"[bold red]WARNING[/] {markup(w)}")
    return gate(res, args.fail_on_regression, args.min_time, out, args.allow_undecided)
