"""The GPU activity section of ``gputrace report``: device busy/idle with its basis, launch gaps per phase,
copies by memory kind, sync waits and the kernels per phase, as rich tables. Rendering only (figures:
``gputrace.analysis.gpu_summary``). Trace text goes through ``gputrace.textsafe.rich_text``.
"""

from __future__ import annotations


def _dev(d) -> str:
    from gputrace.analysis.lanes import device_name

    return device_name(d)


def _pct(a, b) -> str:
    return f"{a / b:.1%}" if b else "-"


#: The most rows a per-device or per-rank table prints (a job of 10k ranks printed 10k-row tables, most of
#: the report's time); ``--json`` keeps every row.
ROW_CAP = 32


def cut_rows(rows: list[dict], key: str, cap: int = ROW_CAP) -> tuple[list[dict], int]:
    """At most ``cap`` of ``rows``, in their order: those with the largest ``row[key]``; and how many were cut."""
    if len(rows) <= cap:
        return rows, 0
    keep = sorted(sorted(range(len(rows)), key=lambda i: -(rows[i].get(key) or 0))[:cap])
    return [rows[i] for i in keep], len(rows) - cap


def print_cut(console, n: int, what: str, key: str) -> None:
    """The line under a table :func:`cut_rows` cut."""
    if n:
        console.print(f"{n:,} more {what} not shown (the {ROW_CAP} with the most {key} are; --json for all)",
                      style="dim")


def render_gpu(g: dict, console, fmt) -> None:
    """Print the tables for ``gpu_summary()`` output ``g`` on a textsafe console; ``fmt``: ns -> text."""
    from rich.table import Table

    from gputrace.textsafe import rich_text

    def row(t, *cells):
        t.add_row(*(rich_text(c) if isinstance(c, str) else c for c in cells))

    def more(key):  # the line under a cut table
        n = g.get("left_out", {}).get(key, 0)
        if n:
            console.print(f"{n:,} more rows not shown (--top N)", style="dim")

    def table(title, cols):
        t = Table(title=title, title_justify="left")
        for i, c in enumerate(cols):
            name = c in ("phase", "kernel")  # names: one line, cut with an ellipsis
            left = i == 0 or c in ("phase", "kernel", "type", "kind", "source", "basis")
            if name:  # (the keywords of report.NAME_COLUMN)
                t.add_column(c, justify="left", no_wrap=True, overflow="ellipsis", max_width=60)
            else:
                t.add_column(c, justify="left" if left else "right")
        return t

    if g["devices"]:
        paused = any(d.get("unobserved_ns") for d in g["devices"])  # record_control.pause(): not observed
        t = table("GPU busy (union of kernels and copies where recorded; else event brackets, an upper bound)",
                  ("device", "basis", "busy", "kernels busy", "idle", "idle share", "kernels", "copies", "memsets",
                   *(("unobserved",) if paused else ())))
        devices, cut = cut_rows(g["devices"], "idle_ns")
        for d in devices:
            kb = d["basis"] == "kernels"
            row(t, f"{d['host']} {_dev(d['device'])}", d["basis"], fmt(d["busy_ns"]),
                fmt(d["kernel_ns"]) if kb else "-", fmt(d["idle_ns"]), _pct(d["idle_ns"], d["window_ns"]),
                str(d["kernels"]) if kb else "-", str(d["copies"]) if kb else "-", str(d["memsets"]) if kb else "-",
                *((fmt(d.get("unobserved_ns") or 0),) if paused else ()))
        console.print(t)
        print_cut(console, cut, "devices", "idle time")
        if paused:
            console.print("  unobserved: CUDA activity collection was paused (record_control.pause); idle share is "
                          "of the observed time", style="dim")
    if not g["activity_spans"]:
        if g["devices"]:
            console.print("  No kernel/copy activity in this trace: GPU time is from CUDA-event brackets only "
                          "(record with --cuda-activity or import an Nsight Systems report for kernel truth).")
        return
    if g["launch_gaps"]:
        t = table("Launch gaps (phase bracket vs GPU busy inside it; host = what the launching thread did in the gaps)",
                  ("phase", "device", "n", "bracket", "GPU busy", "busy share", "gap", "kernels", "unattributed host",
                   "host in gaps"))
        for r in g["launch_gaps"]:
            width = r["busy_ns"] + r["gap_ns"]
            host = ", ".join(f"{a['phase']} {fmt(a['ns'])}" for a in r["host_activity"]) or "-"
            un = "-" if r["unattributed_ns"] is None else fmt(r["unattributed_ns"])
            row(t, r["phase"], _dev(r["device"]), str(r["instances"]), f"{fmt(r['bracket_ns'])} ({r['bracket']})",
                fmt(r["busy_ns"]), _pct(r["busy_ns"], width), fmt(r["gap_ns"]), str(r["kernels"]), un, host)
        console.print(t)
        more("launch_gaps")
    if g["bracket_only"]:
        t = table("Phases with event brackets only (no kernels recorded under them: device time is an upper bound)",
                  ("phase", "device", "n", "bracket"))
        for r in g["bracket_only"]:
            row(t, r["phase"], _dev(r["device"]), str(r["instances"]), fmt(r["bracket_ns"]))
        console.print(t)
        more("bracket_only")
    if g["copies"]:
        t = table("Copies by memory kind",
                  ("phase", "device", "kind", "from", "to", "n", "bytes", "time", "GB/s", "note"))
        for c in g["copies"]:
            note = "PAGEABLE although pinning was asked for" if c["flag"] else ("pageable" if c["pageable"] else "")
            row(t, c["phase"], _dev(c["device"]), c["kind"], c["src_kind"], c["dst_kind"], str(c["count"]),
                f"{c['bytes'] / (1 << 20):.3g} MiB", fmt(c["ns"]), "-" if c["gbps"] is None else f"{c['gbps']:.3g}",
                note)
        console.print(t)
    if g["sync_waits"]:
        t = table("Sync waits (host blocked; the GPU work it waited for)",
                  ("type", "phase", "device", "waited", "GPU busy in it", "after GPU done", "work", "kernels"))
        for w in g["sync_waits"]:
            ks = ", ".join(f"{k['name']} {fmt(k['ns'])}" for k in w["kernels"]) or "-"
            what = w["type"] + (f" {w['stream']}" if w["stream"] is not None else "")
            row(t, what, w["phase"], _dev(w["device"]), fmt(w["wait_ns"]), fmt(w["gpu_busy_ns"]),
                fmt(w["after_gpu_ns"]), str(w["work"]), ks)
        console.print(t)
        more("sync_waits")
    if g["kernels"]:
        t = table("Kernels per phase", ("phase", "kernel", "device", "n", "total", "mean", "max"))
        for k in g["kernels"]:
            row(t, k["phase"], k.get("display") or k["kernel"], _dev(k["device"]), str(k["count"]), fmt(k["total_ns"]),
                fmt(k["mean_ns"]), fmt(k["max_ns"]))
        console.print(t)
        more("kernels")
