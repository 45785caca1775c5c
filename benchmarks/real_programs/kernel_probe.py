"""Does the CUPTI configuration change a kernel's measured duration? train_step.py's steps under a minimal cupti-python
activity consumer (this script's own, not gputrace's collector), with a chosen set of activity kinds enabled.

Why: on the H200 every kernel name's median duration agreed between ``gputrace record`` and torch.profiler
(Kineto) within 2 % except ``nll_loss_forward...`` (one block, ~12 us): record 11.5-11.6 us, Kineto 12.1-12.2 us,
nsys 11.8 us, each tool repeating itself within 0.25 %. Same kernel, same records (CUPTI CONCURRENT_KERNEL
start/end); what differs between the tools is what else CUPTI is asked to record. This probe holds everything
else fixed and changes only that.

One process per set (``--kinds SET``): train_step.py's model, optimizer and batches (``train_step.setup``,
``train_step.step``: the same step, ranges as ``--ranges``, default nvtx), ``--warmup`` steps with nothing
enabled, then collection on (``activity_register_callbacks``, ``activity_enable`` of each kind), ``--steps``
steps, a device synchronize, ``activity_flush_all(1)``, collection off. Sets, each with CONCURRENT_KERNEL:

* ``kernel``: CONCURRENT_KERNEL alone.
* ``record``: what ``gputrace record`` enables (gputrace/trace/cupti_collect.py ``CuptiCollector.start``, with
  ``markers=True`` as ``record`` runs it): MEMCPY, MEMSET, SYNCHRONIZATION, EXTERNAL_CORRELATION, RUNTIME, DRIVER,
  MARKER; the same per-call API filter (``gputrace.trace.cupti_api_filter.restrict_api``: only launch, copy, set
  and wait calls recorded); thread ids SYSTEM; ``activity_flush_period(500)``; 2 MiB buffers. Not reproduced:
  record's own external-correlation pushes around its phases (none here: the probe opens no gputrace phase).
* ``kineto``: what torch.profiler with ``activities=[CPU, CUDA]`` enables, from the sources (read 2026-12-01):
  pytorch ``torch/csrc/profiler/kineto_shim.cpp`` ``prepareTrace`` inserts ``kCpuTypes`` (of which
  EXTERNAL_CORRELATION, CUDA_RUNTIME, CUDA_DRIVER reach CUPTI) and ``kCudaTypes`` (GPU_MEMCPY, GPU_MEMSET,
  GPU_USER_ANNOTATION, CONCURRENT_KERNEL, CUDA_RUNTIME, CUDA_DRIVER, OVERHEAD); CUDA_SYNC only with
  ``experimental_config.enable_cuda_sync_events`` or ``get_cuda_sync_enabled()``, so *not* by default.
  pytorch/kineto ``libkineto/src/CuptiActivityApi.cpp`` ``enableCuptiActivities`` maps them to CUPTI kinds
  MEMCPY, MEMSET, CONCURRENT_KERNEL, EXTERNAL_CORRELATION, RUNTIME, DRIVER, OVERHEAD (GPU_USER_ANNOTATION has
  no CUPTI kind there), and with CUDA >= 12.5 switches off API records of ``cudaGetDevice_v3020``,
  ``cuKernelGetAttribute``, ``cuDevicePrimaryCtxGetState`` and ``cuCtxGetCurrent``; 4 MiB buffers. This set is
  that (every other API call stays recorded, as in Kineto). Not reproduced: torch's per-op external-correlation
  pushes (CUSTOM0) and its CPU-side op recording.
* ``kineto_sync``: ``kineto`` plus SYNCHRONIZATION (torch.profiler with CUDA sync events on).

A process prints one line, then a table (median ns per kernel name; names as gputrace.kernel_names shows them,
cut to 60 characters):

    PROBE kinds=kernel steps=200 kernels=8800 nll_median_ns=11552 nll_n=200
    kinds_enabled: CONCURRENT_KERNEL | records: CONCURRENT_KERNEL=8800
    kernel median_ns=11552 n=200 total_ns=2310400 name=at::native::(anonymous namespace)::nll_loss_forward_re…

``--modes kernel,record,kineto --repeats R`` runs each set in its own fresh process (CUPTI state is per process),
the order of the sets reversed on every other repeat, and prints last a table: kernel name (the 13 with the most
time) x set, the median over a set's processes of their per-process medians, and the nll_loss_forward medians
per set with their ratio to the ``kernel`` set.

    python3 benchmarks/real_programs/kernel_probe.py --kinds kernel --steps 200
    python3 benchmarks/real_programs/kernel_probe.py --modes kernel,record,kineto --repeats 2 --steps 200

A set may carry suffixes, to hold the kinds fixed and change what else ``gputrace record`` does differently:
``+early`` turns collection on before train_step.py touches CUDA (before the context exists, as ``record``
does; the warm-up steps' kernels are then collected too), ``+inject`` runs the process with
``NVTX_INJECTION64_PATH`` at the CUPTI library (as ``record`` sets it), so every NVTX push and pop of the step's
ranges goes through CUPTI (set by ``--modes``; with ``--kinds`` alone the caller sets it):

    python3 benchmarks/real_programs/kernel_probe.py --modes record,record+early,record+inject,record+early+inject

Without torch, CUDA or cupti-python it prints one line ``kernel_probe: missing: ...`` and exits 2.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
NLL = "nll_loss_forward"
NAME_WIDTH = 60
TOP = 13

#: Activity kinds (``cupti.ActivityKind`` member names) of each set; CONCURRENT_KERNEL is in every one.
KIND_SETS: dict[str, tuple[str, ...]] = {
    "kernel": ("CONCURRENT_KERNEL",),
    "record": ("CONCURRENT_KERNEL", "MEMCPY", "MEMSET", "SYNCHRONIZATION", "EXTERNAL_CORRELATION", "RUNTIME",
               "DRIVER", "MARKER"),
    "kineto": ("CONCURRENT_KERNEL", "MEMCPY", "MEMSET", "EXTERNAL_CORRELATION", "RUNTIME", "DRIVER", "OVERHEAD"),
    "kineto_sync": ("CONCURRENT_KERNEL", "MEMCPY", "MEMSET", "EXTERNAL_CORRELATION", "RUNTIME", "DRIVER",
                    "OVERHEAD", "SYNCHRONIZATION"),
}
#: Buffer bytes CUPTI is handed per request, as each tool does (record 2 MiB, Kineto 4 MiB).
BUFFER_BYTES = {"kernel": 4 << 20, "record": 2 << 20, "kineto": 4 << 20, "kineto_sync": 4 << 20}
#: The API calls Kineto switches off (CUDA >= 12.5): (enum name, enable function, call name).
KINETO_API_OFF = (("RuntimeApiTraceCbid", "activity_enable_runtime_api", "cudaGetDevice_v3020"),
                  ("DriverApiTraceCbid", "activity_enable_driver_api", "cuKernelGetAttribute"),
                  ("DriverApiTraceCbid", "activity_enable_driver_api", "cuDevicePrimaryCtxGetState"),
                  ("DriverApiTraceCbid", "activity_enable_driver_api", "cuCtxGetCurrent"))


# -- pure parts (no torch, no CUPTI) --------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--kinds", default=None, metavar="SET[+early][+inject]",
                   help="what is enabled besides CONCURRENT_KERNEL, in this process (default kernel); +early: "
                        "collection on before the CUDA context exists; +inject: NVTX routed to CUPTI")
    g.add_argument("--modes", default=None, metavar="SET,SET,...",
                   help="run each set in its own fresh process, in turn, and compare them")
    ap.add_argument("--repeats", type=int, default=1, help="with --modes: rounds over the sets (default 1)")
    ap.add_argument("--steps", type=int, default=200, help="collected steps (default 200)")
    ap.add_argument("--warmup", type=int, default=5, help="steps before collection is enabled (default 5)")
    ap.add_argument("--ranges", choices=("nvtx", "gputrace", "none"), default="nvtx",
                    help="train_step.py's step ranges (default nvtx, as train_step.py)")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader workers (default 2, as train_step.py)")
    ap.add_argument("--timeout", type=float, default=120.0, help="with --modes: seconds per process (default 120)")
    a = ap.parse_args(argv)
    a.kinds = a.kinds or "kernel"
    if split_mode(a.kinds) is None:
        ap.error(f"--kinds: unknown set {a.kinds!r}; sets: {','.join(sorted(KIND_SETS))}, each with optional "
                 f"+early, +inject")
    if a.modes is not None:
        a.modes = [m.strip() for m in a.modes.split(",") if m.strip()]
        bad = [m for m in a.modes if split_mode(m) is None]
        if bad or not a.modes:
            ap.error(f"--modes: unknown set(s) {','.join(bad) or '(none given)'}; sets: {','.join(sorted(KIND_SETS))}"
                     f", each with optional +early, +inject")
    if a.repeats < 1:
        ap.error("--repeats must be >= 1")
    if a.steps < 1 or a.warmup < 0:
        ap.error("--steps must be >= 1 and --warmup >= 0")
    return a


def split_mode(mode: str) -> tuple[str, bool, bool] | None:
    """``SET[+early][+inject]`` -> (set, early, inject); None when the set or a suffix is unknown."""
    kinds, *flags = mode.split("+")
    if kinds not in KIND_SETS or any(f not in ("early", "inject") for f in flags) or len(set(flags)) != len(flags):
        return None
    return kinds, "early" in flags, "inject" in flags


def short(name: str, width: int = NAME_WIDTH) -> str:
    """A kernel name as one table cell: demangled and elided (gputrace.kernel_names), at most ``width`` chars. A
    name with nll_loss_forward in it keeps it (a mangled name, with no demangler here, is cut from there)."""
    def cut(s: str) -> str:
        return s if len(s) <= width else s[: width - 1] + "…"

    try:
        from gputrace.kernel_names import display_name, fit

        out = fit(display_name(name), width)
    except Exception:  # noqa: BLE001 (gputrace not importable: the raw name, cut)
        out = cut(name)
    if NLL in name and NLL not in out:
        out = cut(name[name.index(NLL):])
    return out


def medians(records: Iterable[tuple[str, int, int]]) -> dict[str, tuple[float, int, int]]:
    """(name, start_ns, end_ns) records -> {short name: (median duration ns, count, total ns)}."""
    by: dict[str, list[int]] = {}
    for name, start, end in records:
        by.setdefault(short(name), []).append(int(end) - int(start))
    return {k: (statistics.median(v), len(v), sum(v)) for k, v in by.items()}


def nll_of(table: dict[str, tuple[float, int, int]]) -> tuple[float | None, int]:
    """The nll_loss_forward kernel's (median ns, count); several names with it: the one with most records."""
    hits = [(n, med) for k, (med, n, _tot) in table.items() if NLL in k]
    if not hits:
        return None, 0
    n, med = max(hits)
    return med, n


def probe_lines(kinds: str, steps: int, table: dict[str, tuple[float, int, int]], enabled: Sequence[str] = (),
                counts: dict[str, int] | None = None) -> list[str]:
    """The lines one process prints: PROBE, the kinds and record counts, one per kernel name (most time first)."""
    med, n = nll_of(table)
    kernels = sum(c for _m, c, _t in table.values())
    out = [f"PROBE kinds={kinds} steps={steps} kernels={kernels} "
           f"nll_median_ns={'nan' if med is None else f'{med:.0f}'} nll_n={n}"]
    cnt = " ".join(f"{k}={v}" for k, v in sorted((counts or {}).items()))
    out.append(f"kinds_enabled: {','.join(enabled) or '-'} | records: {cnt or '-'}")
    for k, (m, c, t) in sorted(table.items(), key=lambda kv: -kv[1][2]):
        out.append(f"kernel median_ns={m:.0f} n={c} total_ns={t} name={k}")
    return out


def parse_probe(text: str) -> dict[str, Any] | None:
    """One process's output -> {kinds, steps, kernels, nll_median_ns, nll_n, table: {name: (median, n, total)}};
    None without a PROBE line."""
    res: dict[str, Any] | None = None
    for line in text.splitlines():
        if line.startswith("PROBE "):
            f = dict(p.split("=", 1) for p in line.split()[1:])
            nll = f.get("nll_median_ns", "nan")
            res = {"kinds": f.get("kinds"), "steps": int(f.get("steps", 0)), "kernels": int(f.get("kernels", 0)),
                   "nll_median_ns": None if nll == "nan" else float(nll), "nll_n": int(f.get("nll_n", 0)),
                   "table": {}}
        elif line.startswith("kernel median_ns=") and res is not None:
            head, name = line.split(" name=", 1)
            f = dict(p.split("=", 1) for p in head.split()[1:])
            res["table"][name] = (float(f["median_ns"]), int(f["n"]), int(f["total_ns"]))
    return res


def plan(modes: Sequence[str], repeats: int) -> list[str]:
    """The order of the processes: the sets in turn, reversed on every other repeat."""
    out: list[str] = []
    for r in range(repeats):
        out += list(modes) if r % 2 == 0 else list(reversed(modes))
    return out


def compare(results: Sequence[dict[str, Any]], modes: Sequence[str], top: int = TOP) -> list[str]:
    """The final table: the ``top`` kernel names by total time over all processes x set (median over the set's
    processes of their medians, ns), then nll_loss_forward per set with its ratio to the ``kernel`` set."""
    per: dict[str, dict[str, list[float]]] = {m: {} for m in modes}
    nll: dict[str, list[float]] = {m: [] for m in modes}
    total: dict[str, int] = {}
    for r in results:
        m = r["kinds"]
        if m not in per:
            continue
        for name, (med, _n, tot) in r["table"].items():
            per[m].setdefault(name, []).append(med)
            total[name] = total.get(name, 0) + tot
        if r["nll_median_ns"] is not None:
            nll[m].append(r["nll_median_ns"])
    names = sorted(total, key=lambda k: -total[k])[:top]
    w = max([len(n) for n in names] + [4])
    out = [f"{'kernel':<{w}} " + " ".join(f"{m:>12}" for m in modes)]
    for name in names:
        cells = []
        for m in modes:
            v = per[m].get(name)
            cells.append(f"{statistics.median(v):>12.0f}" if v else f"{'-':>12}")
        out.append(f"{name:<{w}} " + " ".join(cells))
    base_mode = next((m for m in modes if m == "kernel"), modes[0] if modes else None)
    base = statistics.median(nll[base_mode]) if base_mode and nll.get(base_mode) else None
    out.append("")
    for m in modes:
        v = nll[m]
        if not v:
            out.append(f"NLL kinds={m} median_ns=nan runs=0")
            continue
        med = statistics.median(v)
        ratio = f"{med / base:.4f}" if base else "nan"
        runs = ",".join(f"{x:.0f}" for x in v)
        out.append(f"NLL kinds={m} median_ns={med:.0f} ratio_to_kernel={ratio} runs={len(v)} values={runs}")
    return out


def cbid(enum: Any, call: str) -> Any:
    """The member of a callback-id enum for an API call name (``cudaGetDevice_v3020``), written bare or with
    CUPTI's ``CUPTI_RUNTIME_TRACE_CBID_`` style prefix; None when the enum has none."""
    for m in enum:
        if m.name == call or m.name.endswith("_" + call):
            return m
    return None


def missing() -> str | None:
    """What this machine lacks to run the probe (torch, a CUDA device, cupti-python), or None."""
    try:
        import torch
    except Exception as e:  # noqa: BLE001 reported in the one line
        return f"torch not importable ({type(e).__name__}: {e})"
    if not torch.cuda.is_available():
        return "no CUDA device (torch.cuda.is_available() is False)"
    try:
        from cupti import cupti  # noqa: F401
    except Exception as e:  # noqa: BLE001 reported in the one line
        return f"cupti-python not importable ({type(e).__name__}: {e}); pip install cupti-python"
    return None


# -- one process: collect ---------------------------------------------------------------------------------------
class Probe:
    """A minimal cupti-python activity consumer: kernel records (name, start, end) and a count per kind."""

    def __init__(self, kinds: str) -> None:
        from cupti import cupti

        self.c = cupti
        self.set = kinds  # a KIND_SETS key (no +early/+inject suffix)
        self.kernels: list[tuple[str, int, int]] = []
        self.counts: dict[str, int] = {}
        self.enabled: list[Any] = []
        self.notes: list[str] = []
        self._kernel_kind = cupti.ActivityKind.CONCURRENT_KERNEL

    def _requested(self):
        return BUFFER_BYTES[self.set], 0

    def _completed(self, acts) -> None:
        kk = self._kernel_kind
        for a in acts:
            k = a.kind
            if k == kk:
                self.kernels.append((a.name, a.start, a.end))
            self.counts[k] = self.counts.get(k, 0) + 1

    def start(self) -> None:
        c = self.c
        if self.set == "record":
            c.set_thread_id_type(c.ActivityThreadIdType.SYSTEM)
        c.activity_register_callbacks(self._requested, self._completed)
        for name in KIND_SETS[self.set]:
            k = getattr(c.ActivityKind, name, None)
            if k is None:  # (an older cupti-python without it: said in the notes line, the rest still enabled)
                self.notes.append(f"ActivityKind.{name}: not in this cupti-python, not enabled")
                continue
            c.activity_enable(k)
            self.enabled.append(k)
        if self.set == "record":
            from gputrace.trace.cupti_api_filter import restrict_api

            self.notes += restrict_api(c)
            period = getattr(c, "activity_flush_period", None)
            if period is not None:
                period(500)
        elif self.set.startswith("kineto"):
            for enum_name, fn_name, call in KINETO_API_OFF:
                enum, fn = getattr(c, enum_name, None), getattr(c, fn_name, None)
                m = cbid(enum, call) if enum is not None else None
                if m is None or fn is None:
                    self.notes.append(f"{call}: no callback id / {fn_name} in this cupti-python")
                    continue
                try:
                    fn(int(m), 0)
                except Exception as e:  # noqa: BLE001 noted (CUPTI older than 12.5 may refuse)
                    self.notes.append(f"{fn_name}({call}, 0): {type(e).__name__}: {e}")

    def stop(self) -> None:
        self.c.activity_flush_all(1)
        for k in self.enabled:
            self.c.activity_disable(k)

    def kind_counts(self) -> dict[str, int]:
        out = {}
        for k, v in self.counts.items():
            try:
                out[self.c.ActivityKind(k).name] = v
            except Exception:  # noqa: BLE001 an unnamed kind: its number
                out[str(int(k))] = v
        return out


def run_one(a: argparse.Namespace) -> int:
    sys.path.insert(0, HERE)
    import torch
    import train_step
    from _ranges import resolve

    how = resolve(a.ranges)
    kinds, early, _inject = split_mode(a.kinds) or ("kernel", False, False)
    probe = Probe(kinds)
    if early:  # before train_step touches CUDA, as gputrace record starts (warm-up kernels are collected too)
        probe.start()
    it, model, opt = train_step.setup("cuda", None, None, 4, a.workers, a.warmup + a.steps)
    for _ in range(a.warmup):
        train_step.step(it, model, opt, "cuda", how)
    torch.cuda.synchronize()
    if not early:
        probe.start()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        train_step.step(it, model, opt, "cuda", how)
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    probe.stop()
    table = medians(probe.kernels)
    names = [getattr(k, "name", str(k)) for k in probe.enabled]
    for line in probe_lines(a.kinds, a.steps, table, names, probe.kind_counts()):
        print(line, flush=True)
    print(f"steps_wall_s={wall:.3f} notes: {'; '.join(probe.notes) or '-'}", flush=True)
    return 0


# -- several processes: compare ---------------------------------------------------------------------------------
def run_modes(a: argparse.Namespace) -> int:
    results = []
    failed = 0
    for i, m in enumerate(plan(a.modes, a.repeats)):
        cmd = [sys.executable, os.path.abspath(__file__), "--kinds", m, "--steps", str(a.steps), "--warmup",
               str(a.warmup), "--ranges", a.ranges, "--workers", str(a.workers)]
        env = dict(os.environ)
        if (split_mode(m) or ("", False, False))[2]:
            from gputrace.trace.cupti_probe import library_path

            lib = library_path()
            if lib is None:
                print(f"== run {i} kinds={m}: no CUPTI library path for NVTX_INJECTION64_PATH", flush=True)
                failed += 1
                continue
            env["NVTX_INJECTION64_PATH"] = lib
        print(f"== run {i} kinds={m}: {' '.join(cmd[1:])}", flush=True)
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout, env=env)
            out, rc = p.stdout + p.stderr, p.returncode
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            rc = "timeout"
        print(out.rstrip(), flush=True)
        if rc == 2 and "kernel_probe: missing:" in out:
            return 2
        r = parse_probe(out)
        if rc != 0 or r is None:
            failed += 1
            print(f"== run {i} kinds={m} failed (exit {rc})", flush=True)
            continue
        results.append(r)
    print(f"== compare: {len(results)} processes, {failed} failed; median ns per kernel name (median over a set's "
          f"processes of their medians)", flush=True)
    for line in compare(results, a.modes):
        print(line, flush=True)
    return 0 if not failed else 1


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    what = missing()
    if what is not None:
        print(f"kernel_probe: missing: {what}", flush=True)
        return 2
    if a.modes is not None:
        return run_modes(a)
    return run_one(a)


if __name__ == "__main__":
    sys.exit(main())
