"""``gputrace report TRACE...``: summary, stalls, pinning and unattributed time as text tables
(rich) or JSON. Wiring only: the numbers come from ``gputrace.analysis``."""

from __future__ import annotations

import argparse
import math
import re
import sys

from gputrace.textsafe import rich_text

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
    p.add_argument("--no-by-device", dest="by_device", action="store_false", help="phase statistics over all devices together")
    p.add_argument("--min-gap", type=parse_duration, default=None,
                   help="smallest GPU idle gap to list (default: 0.1%% of wall time, at least 1 µs)")
    p.add_argument("--wait-margin", type=parse_duration, default=1_000_000,
                   help="host time beyond device time that counts as a wait (default 1ms)")
    p.add_argument("--pageable-gbps", type=float, default=None,
                   help="pageable host-to-device bandwidth to weigh pinning against (GB/s)")
    p.add_argument("--top", type=int, default=10, help="rows per stall/unattributed table (default 10)")
    p.add_argument("--lenient", action="store_true", help="skip unreadable lines/spans instead of failing")
    p.set_defaults(func=run)
    return p


def analyse(tl, *, by_device=True, min_gap=None, wait_margin=1_000_000, pageable_gbps=None, top=10) -> dict:
    """Everything the report shows, as plain JSON-able data (also the ``--json`` output)."""
    from gputrace.analysis import (
        critical_path_summary,
        gpu_idle_gaps,
        host_waits,
        phase_stats,
        pinning_economics,
        unattributed_time,
        wall_ns,
    )
    from gputrace.analysis.gpu_summary import gpu_summary

    wall = wall_ns(tl)
    if min_gap is None:
        min_gap = max(1_000, wall // 1000)
    gaps = gpu_idle_gaps(tl, min_gap_ns=min_gap)
    waits = host_waits(tl, margin_ns=wait_margin)
    un = unattributed_time(tl, min_ns=min_gap)
    pins = pinning_economics(tl, pageable_gbps)
    busy: dict[int, int] = {}
    for (_, _, dev), b in zip(gaps.groups, gaps.busy_ns.tolist()):
        busy[dev] = busy.get(dev, 0) + b
    idle = gaps.idle_by_device()
    return {
        "spans": tl.n,
        "t0": tl.t0,
        "wall_ns": wall,
        "phases": [s.to_dict() for s in phase_stats(tl, by_device=by_device)],
        "gpu_idle": {
            "min_gap_ns": min_gap,
            "per_device": [{"device": d, "busy_ns": busy.get(d, 0), "idle_ns": idle.get(d, 0)} for d in sorted(set(busy) | set(idle))],
            "largest": [
                {"device": g.device, "start": g.start, "end": g.end, "duration_ns": g.duration, "edge": g.edge,
                 "host_activity": [{"phase": p, "ns": ns} for p, ns in g.host_activity], "text": g.describe()}
                for g in gaps.largest(top)
            ],
            "count": len(gaps),
        },
        "host_waits": waits.total_by()[:top],
        "pinning": [r.to_dict() | {"text": r.describe()} for r in pins] if any(r.overhead_ns for r in pins) else [],
        "unattributed": un.by_path(tl)[:top],
        "critical_path": critical_path_summary(tl)[:top],
        "gpu_activity": gpu_summary(tl, top=top),
    }


def _fmt(ns) -> str:
    from gputrace.analysis._common import fmt_ns

    if ns is None or (isinstance(ns, float) and math.isnan(ns)):
        return "-"
    return fmt_ns(ns)


def _row(t, *cells) -> None:
    """Add a table row; every ``str`` cell is trace-derived or plain text and is shown literally
    (gputrace.textsafe.rich_text: no markup, control characters made visible)."""
    t.add_row(*(rich_text(c) if isinstance(c, str) else c for c in cells))


def render(data: dict, console) -> None:
    """Print the report tables for ``analyse()`` output on a rich Console (one from
    ``gputrace.textsafe.console``: trace text never reaches it as markup or raw control characters)."""
    from rich.table import Table

    from gputrace.phases import phase_hex

    console.print(f"[bold]{data['spans']:,} spans[/], wall {_fmt(data['wall_ns'])}")
    t = Table(title="Phases", title_justify="left")
    for col, j in (("phase", "left"), ("device", "left"), ("count", "right"), ("total", "right"), ("mean", "right"),
                   ("median", "right"), ("p95", "right"), ("share", "right"), ("device time", "right")):
        t.add_column(col, justify=j)
    for s in data["phases"]:
        dev = "all" if s["device"] is None else ("host" if s["device"] < 0 else f"GPU {s['device']}")
        gpu = f"{_fmt(s['gpu_total_ns'])} ({s['gpu_count']})" if s["gpu_count"] else "-"
        _row(t, rich_text(s["phase"], style=phase_hex(s["phase"])), dev, str(s["count"]), _fmt(s["total_ns"]), _fmt(s["mean_ns"]),
                  _fmt(s["median_ns"]), _fmt(s["p95_ns"]), f"{s['share']:.1%}" if s["share"] == s["share"] else "-", gpu)
    console.print(t)

    gi = data["gpu_idle"]
    t = Table(title=f"GPU idle (gaps of at least {_fmt(gi['min_gap_ns'])}: {gi['count']})", title_justify="left")
    for col in ("device", "busy", "idle", "idle share"):
        t.add_column(col, justify="left" if col == "device" else "right")
    for d in gi["per_device"]:
        tot = d["busy_ns"] + d["idle_ns"]
        _row(t, f"GPU {d['device']}", _fmt(d["busy_ns"]), _fmt(d["idle_ns"]), f"{d['idle_ns'] / tot:.1%}" if tot else "-")
    console.print(t)
    if gi["largest"]:
        t = Table(title="Largest GPU idle gaps", title_justify="left")
        t.add_column("at (s from start)", justify="right")
        t.add_column("gap")
        t0 = data["t0"]
        for g in gi["largest"]:
            _row(t, f"{(g['start'] - t0) / 1e9:.3f}", g["text"])
        console.print(t)

    if data["host_waits"]:
        t = Table(title="Host waits", title_justify="left")
        for col in ("kind", "phase", "device", "count", "waited"):
            t.add_column(col, justify="right" if col in ("count", "waited") else "left")
        for w in data["host_waits"]:
            _row(t, w["kind"], w["phase"], "host" if w["device"] < 0 else f"GPU {w['device']}", str(w["count"]), _fmt(w["wait_ns"]))
        console.print(t)

    if data["pinning"]:
        t = Table(title="Pinning economics", title_justify="left")
        for col in ("device", "pin", "unpin", "pinned", "per GiB", "h2d", "h2d GB/s", "break-even GB/s", "net"):
            t.add_column(col, justify="left" if col == "device" else "right")
        for r in data["pinning"]:
            dev = "all" if r["device"] is None else ("host" if r["device"] < 0 else f"GPU {r['device']}")
            gb = f"{r['pin_bytes'] / (1 << 30):.3g} GiB" if r["pin_bytes"] > 0 else "-"

            def g(x):
                return "-" if x is None or x != x else f"{x:.3g}"

            net = r["net_ns"]
            _row(t, dev, _fmt(r["pin_ns"]), _fmt(r["unpin_ns"]), gb, _fmt(r["pin_ns_per_gib"]), _fmt(r["h2d_ns"]),
                      g(r["h2d_gbps"]), g(r["effective_gbps"]), "-" if net != net else ("+" if net >= 0 else "-") + _fmt(abs(net)))
        console.print(t)
        for r in data["pinning"]:
            console.print(rich_text("  " + r["text"]))

    if data["unattributed"]:
        t = Table(title="Unattributed time (parent time no child span covers)", title_justify="left")
        for col in ("path", "count", "parent time", "unattributed", "share"):
            t.add_column(col, justify="left" if col == "path" else "right")
        for u in data["unattributed"]:
            _row(t, u["path"], str(u["count"]), _fmt(u["duration_ns"]), _fmt(u["unattributed_ns"]), f"{u['fraction']:.1%}")
        console.print(t)

    if data["critical_path"]:
        t = Table(title="Critical path of the prove roots", title_justify="left")
        for col in ("phase", "on path", "share"):
            t.add_column(col, justify="left" if col == "phase" else "right")
        for c in data["critical_path"]:
            _row(t, c["phase"], _fmt(c["ns"]), f"{c['share']:.1%}")
        console.print(t)

    if data.get("gpu_activity"):
        from gputrace.commands.report_gpu import render_gpu

        render_gpu(data["gpu_activity"], console, _fmt)


def run(args) -> int:
    import orjson

    from gputrace.commands._inputs import read_inputs
    from gputrace.textsafe import console

    tl = read_inputs("report", args.traces, args.lenient, "the trace holds no spans")
    if tl is None:
        return 1
    data = analyse(tl, by_device=args.by_device, min_gap=args.min_gap, wait_margin=args.wait_margin,
                   pageable_gbps=args.pageable_gbps, top=args.top)
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY) + b"\n")
        return 0
    render(data, console(width=None if sys.stdout.isatty() else 160))
    return 0
