"""``gputrace report TRACE...``: summary, GPU idle totals, the ranked stalls list, pinning and
the critical path as text tables (rich) or JSON. Wiring only: the numbers come from
`gputrace.analysis.report.analyse_timeline`, the same composition the TUI panels show."""

from __future__ import annotations

import argparse
import math
import re
import sys
from typing import TYPE_CHECKING, Any

from gputrace.commands.report_gpu import cut_rows, print_cut
from gputrace.textsafe import rich_text

if TYPE_CHECKING:
    from rich.console import JustifyMethod

#: Phase-table rows printed by default (largest total first); a line says how many more there are.
PHASE_ROWS = 40
#: Critical-path rows printed (largest first).
CRITICAL_ROWS = 10

_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


def parse_duration(text: str) -> int:
    """'1ms', '2.5s', '100us', '500' (ns) -> ns. Raises argparse.ArgumentTypeError."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ns|us|µs|ms|s)?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"expected a duration like 1ms, 2.5s or 100us, got {text!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2) or "ns"])


def register(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "report", help="summary, stalls, pinning and unattributed-time tables for trace files",
        description="Per-phase statistics, GPU idle gaps (with what the host was doing), host waits, pinning "
                    "economics, unattributed time and the critical path, as rich tables or JSON.",
    )
    p.add_argument("traces", nargs="+", metavar="TRACE", help="trace files (OTLP JSON lines, Chrome JSON, nsys SQLite)")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    p.add_argument("--no-by-device", dest="by_device", action="store_false",
                   help="phase statistics over all devices together")
    p.add_argument("--min-gap", type=parse_duration, default=None, metavar="DURATION",
                   help="smallest time lost for a stalls row to be listed (default: 0.1%% of wall time, at least "
                        "1 µs); totals (busy, idle, waits) always count every gap")
    p.add_argument("--wait-margin", type=parse_duration, default=1_000_000,
                   help="host time beyond device time that counts as a wait (default 1ms)")
    p.add_argument("--pageable-gbps", type=float, default=None,
                   help="pageable host-to-device bandwidth to weigh pinning against (GB/s)")
    p.add_argument("--top", type=int, default=None, help="stalls rows to list (default 20, as the TUI's stalls panel)")
    p.add_argument("--phase-rows", type=int, default=PHASE_ROWS, metavar="N",
                   help=f"phase rows to print, largest total first (default {PHASE_ROWS}; --json has all)")
    p.add_argument("--lenient", action="store_true", help="skip unreadable lines/spans instead of failing")
    p.set_defaults(func=run)
    return p


def analyse(tl, *, by_device=True, min_gap=None, wait_margin=1_000_000, pageable_gbps=None, top=None) -> dict:
    """Everything the report shows, as plain JSON-able data (also the ``--json`` output):
    `gputrace.analysis.report.analyse_timeline`, the composition the TUI panels use too."""
    from gputrace.analysis.report import DEFAULT_TOP, analyse_timeline

    return analyse_timeline(tl, by_device=by_device, min_lost_ns=min_gap, wait_margin_ns=wait_margin,
                            pageable_gbps=pageable_gbps, top=DEFAULT_TOP if top is None else top).to_dict()


def _fmt(ns) -> str:
    from gputrace.analysis._common import fmt_ns

    if ns is None or (isinstance(ns, float) and math.isnan(ns)):
        return "-"
    return fmt_ns(ns)


def _dev(d) -> str:
    from gputrace.analysis.lanes import device_name

    return device_name(d)


def _row(t, *cells) -> None:
    """Add a table row; every ``str`` cell is trace-derived or plain text and is shown literally
    (gputrace.textsafe.rich_text: no markup, control characters made visible)."""
    t.add_row(*(rich_text(c) if isinstance(c, str) else c for c in cells))


#: A column of names: one line per row, cut with an ellipsis (a C++ kernel name never wraps over 12 lines).
NAME_COLUMN: dict[str, Any] = {"no_wrap": True, "overflow": "ellipsis", "max_width": 60}


def render_findings(items: list[dict], console) -> None:
    """The Findings (analysis/findings.py): what to fix first, largest estimated saving first. Each finding is
    a block, not a table row, so that it reads whole at any width (80 columns included): its rank and
    estimated saving, then its title (the advice), its evidence and its rule, each wrapped under the title
    (a word longer than the line, a C++ kernel name, folds; nothing is cut)."""
    from rich.table import Table
    from rich.text import Text

    if not items:
        console.print(rich_text("Findings: none above the listing threshold (1% of the wall time)", style="dim"))
        return
    console.print(rich_text("Findings (what to fix first; savings are estimates, see docs/findings.md)"))
    t = Table.grid(padding=(0, 1))
    t.add_column(justify="right", no_wrap=True)
    t.add_column(justify="right", no_wrap=True)
    t.add_column(overflow="fold", ratio=1)
    for i, f in enumerate(items, 1):
        body = Text("\n").join([rich_text(f["title"], style="bold"), rich_text(f["evidence"]),
                                rich_text(f"rule: {f['rule']}", style="dim")])
        if i > 1:
            t.add_row()  # a blank line between findings
        t.add_row(f"{i}.", rich_text(finding_saving(f)), body)
    console.print(t)


def finding_saving(f: dict) -> str:
    """A finding's estimated saving as the Findings list shows it (``~1.23 s``)."""
    return "~" + _fmt(f["saving_ns"])


def render_steps(steps: dict, t0: int, console) -> None:
    """The Steps table (analysis/steps.py): per process, the loop's steps, the steady state's median and p90,
    the slowest step against the median one and why, and the warm-up the findings leave out."""
    from rich.table import Table

    series = (steps or {}).get("series") or []
    if not series:
        return
    t = Table(title="Steps (the loop's iterations; the findings read the steady state, after the warm-up)",
              title_justify="left")
    for col in ("process", "steps", "median", "p90", "GPU busy", "slowest vs median: why", "warm-up"):
        t.add_column(col, justify="left" if col in ("process", "steps", "slowest vs median: why", "warm-up")
                     else "right", **({"overflow": "fold"} if col.startswith("slowest") else
                                      NAME_COLUMN if col == "process" else {}))
    shown, cut = cut_rows(series, "median_ns")
    for s in shown:
        w = s.get("warmup")
        warm = "-" if not w else (f"{_fmt(w['ns'])}" + (f", {w['steps']} slow step(s)" if w["steps"] else "")
                                  + f"; steady from {(s['steady_from_ns'] - t0) / 1e9:.3f} s")
        busy = _fmt(s["gpu_busy_median_ns"]) if s.get("gpu_busy_median_ns") is not None else "-"
        _row(t, s["process"], f"{s['count']:,} of {s['name']} ({s['method']})", _fmt(s["median_ns"]),
             _fmt(s["p90_ns"]), busy, s["slowest"]["text"], warm)
    console.print(t)
    print_cut(console, cut, "processes", "time per step")


def render_api(rows: list[dict], console) -> None:
    """The CUDA API calls table (not phases: analysis/api_calls.py)."""
    from rich.table import Table

    if not rows:
        return
    t = Table(title="CUDA API calls (host side; not phases)", title_justify="left")
    for col in ("api", "count", "total", "mean", "max"):
        t.add_column(col, justify="left" if col == "api" else "right", **(NAME_COLUMN if col == "api" else {}))
    for r in rows:
        _row(t, r["api"], f"{r['count']:,}", _fmt(r["total_ns"]), _fmt(r["mean_ns"]), _fmt(r["max_ns"]))
    console.print(t)


def render_comm(comm: dict, console) -> None:
    """Ranks, communication and the collectives that waited longest (analysis/collectives.py)."""
    from rich.table import Table

    if not comm or not comm.get("ranks"):
        return
    t = Table(title="Communication per rank", title_justify="left")
    for col in ("rank", "source", "collectives", "comm", "overlapped", "exposed"):
        t.add_column(col, justify="left" if col in ("rank", "source") else "right")
    shown, cut = cut_rows(comm["ranks"], "exposed_ns")
    for r in shown:
        _row(t, str(r["rank"]), r["source"], str(r["calls"]), _fmt(r["comm_ns"]), _fmt(r["overlap_ns"]),
             _fmt(r["exposed_ns"]))
    console.print(t)
    print_cut(console, cut, "ranks", "exposed communication")
    clock = comm.get("clock") or {}
    if clock.get("ok") is False:  # the trace rules a straggler verdict out (analysis/collective_match.py)
        console.print(rich_text(f"Straggler: {clock.get('reason', 'cannot tell')}", style="bold yellow"))
    if comm.get("collectives"):
        t = Table(title=f"Collectives matched across ranks ({comm.get('matched', 0)}, by content or time; "
                        f"{comm.get('unmatched', 0)} calls unmatched; longest wait first)", title_justify="left")
        for col in ("collective", "#", "matched by", "step", "last rank", "others waited"):
            name = col == "collective"
            t.add_column(col, justify="left" if name or col == "step" else "right", **(NAME_COLUMN if name else {}))
        for m in comm["collectives"][:10]:
            _row(t, m["name"], str(m["index"]), m.get("how", ""), m.get("step") or "-", str(m["last_rank"]),
                 _fmt(m["wait_ns"]))
        console.print(t)
    if comm.get("steps"):
        ranks = sorted({rk for st in comm["steps"] for rk in st["waits"]}, key=lambda x: int(x))
        t = Table(title="Waits at collectives per step (each rank's wait for the last one)", title_justify="left")
        for col in ("step", "collectives", "last rank", *(f"rank {rk} waited" for rk in ranks)):
            t.add_column(col, justify="left" if col == "step" else "right")
        for st in comm["steps"][:20]:
            _row(t, st["step"], str(st["collectives"]), str(st["last_rank"]),
                 *(_fmt(st["waits"].get(rk, 0)) for rk in ranks))
        console.print(t)


def render_host_samples(data: dict, console) -> None:
    """Where each process's threads were (the recorder's Python stack samples: analysis/host_samples.py), and
    the lines the listed stalls ran."""
    from rich.table import Table

    hs = data.get("host_samples") or {}
    procs = hs.get("processes") or []
    if not procs:
        return
    t = Table(title="Host samples (Python stack samples: where each process's threads were; parked threads left "
                    "out)", title_justify="left")
    for col in ("process", "samples", "share", "line (> library call inside it)", "thread"):
        t.add_column(col, justify="right" if col in ("samples", "share") else "left",
                     overflow="fold" if col.startswith("line") else "ellipsis")
    for p in procs:
        who = f"rank {p['rank']} (pid {p['pid']})" if p.get("rank") is not None else f"pid {p['pid']}"
        if str(p.get("command") or "").startswith("fork: "):
            who += " fork"  # (a DataLoader worker, say: it inherits its parent's rank)
        if not p["sites"]:
            _row(t, who, f"{p['samples']:,}", "-", "(only parked threads)", "")
        for i, site in enumerate(p["sites"]):
            _row(t, who if i == 0 else "", f"{site['count']:,}", f"{site['share']:.0%}", site["label"],
                 site["thread"])
    console.print(t)
    stalls = [s for s in data.get("stalls") or [] if s.get("samples")]
    for s in stalls[:5]:
        top = s["samples"][0]
        console.print(rich_text(f"  {s['text']}: mostly {top['label']} ({top['count']} samples, pid {top['pid']})"))
    if hs.get("note"):
        console.print(rich_text(hs["note"], style="dim"))


def render(data: dict, console, phase_rows: int = PHASE_ROWS) -> None:
    """Print the report tables for ``analyse()`` output on a rich Console (one from
    ``gputrace.textsafe.console``: trace text never reaches it as markup or raw control characters).
    The phase table shows the ``phase_rows`` largest rows and a line saying how many were left out."""
    from rich.table import Table

    from gputrace.phases import phase_hex

    console.print(f"[bold]{data['spans']:,} spans[/], wall {_fmt(data['wall_ns'])}")
    if data.get("unfinished_processes"):
        from gputrace.analysis.processes import Unfinished, unfinished_note

        note = unfinished_note([Unfinished(**u) for u in data["unfinished_processes"]])
        console.print(rich_text(f"note: {note}", style="yellow"))
    render_findings(data.get("findings", []), console)  # before anything else: what to fix first
    render_steps(data.get("steps") or {}, data["t0"], console)
    # Always on the first screen: pinning's cost may be far under the stalls cut (113 ms of 153 s).
    console.print(rich_text(data["pinning_summary"]))
    t = Table(title="Phases", title_justify="left")
    phase_cols: tuple[tuple[str, JustifyMethod], ...] = (
        ("phase", "left"), ("device", "left"), ("count", "right"), ("total", "right"), ("mean", "right"),
        ("median", "right"), ("p95", "right"), ("share", "right"), ("device time", "right"))
    for col, j in phase_cols:
        t.add_column(col, justify=j, **(NAME_COLUMN if col == "phase" else {}))
    phases = data["phases"]
    for s in phases[: max(phase_rows, 0)]:
        gpu = f"{_fmt(s['gpu_total_ns'])} ({s['gpu_count']})" if s["gpu_count"] else "-"
        _row(t, rich_text(s["phase"], style=phase_hex(s["phase"])), _dev(s["device"]), str(s["count"]),
             _fmt(s["total_ns"]), _fmt(s["mean_ns"]), _fmt(s["median_ns"]), _fmt(s["p95_ns"]),
             f"{s['share']:.1%}" if s["share"] == s["share"] else "-", gpu)
    console.print(t)
    hidden = len(phases) - max(phase_rows, 0)
    if hidden > 0:
        console.print(f"{hidden:,} more phase rows not shown ({_fmt(sum(s['total_ns'] for s in phases[phase_rows:]))} "
                      "in all; --phase-rows N, or --json for all)", style="dim")

    gi = data["gpu_idle"]
    if gi["per_device"]:
        t = Table(title=f"GPU idle (every gap counted: {gi['gaps']:,})", title_justify="left")
        paused = any(d.get("unobserved_ns") for d in gi["per_device"])  # record_control.pause(): not observed
        for col in ("device", "busy", "idle", "idle share", "gaps", "longest gap", "basis",
                    *(("unobserved",) if paused else ())):
            t.add_column(col, justify="left" if col == "device" else "right")
        devices, cut = cut_rows(gi["per_device"], "idle_ns")
        for d in devices:
            share = "-" if d["idle_share"] is None else f"{d['idle_share']:.1%}"
            _row(t, f"GPU {d['device']}", _fmt(d["busy_ns"]), _fmt(d["idle_ns"]), share, f"{d['gaps']:,}",
                      _fmt(d["longest_ns"]), d["basis"], *((_fmt(d.get("unobserved_ns") or 0),) if paused else ()))
        console.print(t)
        print_cut(console, cut, "devices", "idle time")
        if paused:
            console.print("unobserved: CUDA activity collection was paused (record_control.pause), neither busy nor "
                          "idle; idle share is of the observed time (busy + idle)", style="dim")

    if data["stalls"]:
        t = Table(title="Stalls (repeats grouped, largest time lost first)", title_justify="left")
        stall_cols: tuple[tuple[str, JustifyMethod], ...] = (
            ("what", "left"), ("lost", "right"), ("count", "right"), ("at (s)", "right"), ("detail", "left"))
        for col, j in stall_cols:
            t.add_column(col, justify=j)
        t0 = data["t0"]
        for s in data["stalls"]:
            _row(t, s["category"], _fmt(s["lost_ns"]), f"{s['count']:,}", f"{(s['start'] - t0) / 1e9:.3f}", s["text"])
        console.print(t)
    console.print(rich_text(data["listing"]["text"], style="dim"))
    render_host_samples(data, console)
    if data.get("emulated"):
        what = ", ".join(f"{k[len('gputrace.emulated.'):]}={'/'.join(v)}" for k, v in data["emulated"].items())
        console.print(rich_text("emulated costs recorded in this trace (not real work): " + what, style="bold yellow"))

    if data["pinning"]:
        t = Table(title="Pinning economics", title_justify="left")
        for col in ("device", "pin", "unpin", "pinned", "per GiB", "h2d", "h2d GB/s", "break-even GB/s", "net"):
            t.add_column(col, justify="left" if col == "device" else "right")
        for r in data["pinning"]:
            gb = f"{r['pin_bytes'] / (1 << 30):.3g} GiB" if r["pin_bytes"] > 0 else "-"

            def g(x):
                return "-" if x is None or x != x else f"{x:.3g}"

            net = r["net_ns"]
            _row(t, _dev(r["device"]), _fmt(r["pin_ns"]), _fmt(r["unpin_ns"]), gb, _fmt(r["pin_ns_per_gib"]),
                      _fmt(r["h2d_ns"]), g(r["h2d_gbps"]), g(r["effective_gbps"]),
                      "-" if net != net else ("+" if net >= 0 else "-") + _fmt(abs(net)))
        console.print(t)
        for r in data["pinning"]:
            console.print(rich_text("  " + r["text"]))

    if data["critical_path"]:
        t = Table(title="Critical path of the prove roots", title_justify="left")
        for col in ("phase", "on path", "share"):
            t.add_column(col, justify="left" if col == "phase" else "right")
        for c in data["critical_path"][:CRITICAL_ROWS]:
            _row(t, c["phase"], _fmt(c["ns"]), f"{c['share']:.1%}")
        console.print(t)
        if len(data["critical_path"]) > CRITICAL_ROWS:
            console.print(f"{len(data['critical_path']) - CRITICAL_ROWS:,} more phases on the path not shown "
                          "(--json for all)", style="dim")

    if data.get("gpu_activity"):
        from gputrace.commands.report_gpu import render_gpu

        render_gpu(data["gpu_activity"], console, _fmt)
    render_api(data.get("api_calls", []), console)
    render_comm(data.get("collectives", {}), console)


def run(args) -> int:
    import orjson

    from gputrace.commands._inputs import read_inputs
    from gputrace.textsafe import console, report_width

    tl = read_inputs("report", args.traces, args.lenient, "the trace holds no spans")
    if tl is None:
        return 1
    data = analyse(tl, by_device=args.by_device, min_gap=args.min_gap, wait_margin=args.wait_margin,
                   pageable_gbps=args.pageable_gbps, top=args.top)
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY) + b"\n")
        return 0
    render(data, console(width=report_width()), args.phase_rows)
    return 0
