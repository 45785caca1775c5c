"""What being recorded costs each CUDA launch and each NVTX range on the host: not recorded, recorded with
collection paused, and recorded with collection on.

``train_step.py --toggle-blocks`` measures collection (on against paused inside one recorded process). What it
cannot see is the part of ``gputrace record`` that stays while collection is paused: CUPTI's hooks in the CUDA
driver and the NVTX injection library are loaded, the exporter thread runs. Per step, a program pays that part
only through its CUDA calls and NVTX ranges, so this measures those two per call, in tight loops, where the
noise between processes is far smaller than between whole training runs:

* ``launch``: ``t.add_(1)`` on a one-element CUDA tensor (one ``cudaLaunchKernel`` through PyTorch's
  dispatcher), host time per call; chunks of ``--chunk`` launches, a device synchronisation after each chunk
  outside the timer (the launch queue never fills);
* ``nvtx``: ``torch.cuda.nvtx.range_push`` + ``range_pop``, host time per pair.

Not recorded it prints one line ``ATTACH mode=plain``. Under ``gputrace record`` (with CUPTI) it alternates
``on`` and ``paused`` repeats in one process (``gputrace.record_control``) and prints a line for each. Each
figure is the median over ``--repeats`` repeats of ns per call:

    ATTACH mode=paused launch_ns=4312.5 nvtx_ns=801.2 repeats=15 calls=20000

The attached cost of a step is then (paused - plain) launch_ns x launches per step + (paused - plain) nvtx_ns x
ranges per step (the counts from a recorded trace of the step), beside the step's time.

    python benchmarks/real_programs/attach_cost.py
    gputrace record --trace /tmp/a.jsonl -- python benchmarks/real_programs/attach_cost.py
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time

import torch


def _launch_ns(t: torch.Tensor, calls: int, chunk: int, chunks: list[float] | None = None) -> float:
    """ns per launch over ``calls`` launches; ``chunks`` gets each chunk's ns per launch."""
    total = 0
    done = 0
    clock = time.perf_counter_ns
    while done < calls:
        n = min(chunk, calls - done)
        t0 = clock()
        for _ in range(n):
            t.add_(1)
        dt = clock() - t0
        total += dt
        if chunks is not None:
            chunks.append(dt / n)
        torch.cuda.synchronize()
        done += n
    return total / calls


def _nvtx_ns(calls: int) -> float:
    push, pop = torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop
    clock = time.perf_counter_ns
    t0 = clock()
    for _ in range(calls):
        push("attach_cost")
        pop()
    return (clock() - t0) / calls


def _control():
    try:
        from gputrace.trace import record_control
    except ImportError:
        return None
    return record_control if record_control.is_collecting() else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=20000, help="launches (and NVTX pairs) per repeat (default 20000)")
    ap.add_argument("--repeats", type=int, default=15, help="repeats per mode (default 15)")
    ap.add_argument("--chunk", type=int, default=200, help="launches between synchronisations (default 200)")
    ap.add_argument("--switch-interval-ms", type=float, default=None,
                    help="sys.setswitchinterval for this run (the GIL hand-over period; Python's default is 5 ms)")
    ap.add_argument("--detach", action="store_true",
                    help="under record, last: pause, detach CUPTI (cupti.finalize) and time 'detached' repeats, "
                         "then attach again (callbacks registered, kinds enabled) and time 'reattached' repeats; "
                         "prints how many records each phase produced")
    ap.add_argument("--variants", action="store_true",
                    help="under record, diagnosis: also time 'on-noexport' (the recorder's exporter kept idle during "
                         "the timed loops) and 'on-fastcb' (CUPTI's buffer-completed callback replaced by one that "
                         "only counts; those records are lost)")
    ap.add_argument("--gc", choices=("on", "off"), default="on",
                    help="off: gc.disable() for the whole run (the process's, so the recorder's threads too)")
    ap.add_argument("--pin", type=int, default=None, metavar="CPU",
                    help="run the timing (main) thread on this one CPU (os.sched_setaffinity of the calling thread: "
                         "threads started before, such as the recorder's, keep their CPUs), so that processes "
                         "compared with each other do not differ in where the scheduler put them")
    a = ap.parse_args(argv)
    if a.pin is not None:
        os.sched_setaffinity(0, {a.pin})
        print(f"ATTACH pinned main thread to CPU {a.pin}", flush=True)
    if a.gc == "off":
        gc.disable()
    if a.switch_interval_ms is not None:
        sys.setswitchinterval(a.switch_interval_ms / 1e3)
    if not torch.cuda.is_available():
        print("ATTACH unavailable (no CUDA)", flush=True)
        return 2
    t = torch.zeros(1, device="cuda")
    _launch_ns(t, 2000, a.chunk)  # warm-up: the first launches load modules and set CUPTI's stream state up
    _nvtx_ns(2000)
    control = _control()
    modes = ["on", "paused"] if control is not None else ["plain"]
    if control is not None and a.variants:
        modes += ["on-noexport", "on-fastcb"]
    variant = _Variants() if control is not None and a.variants else None
    got: dict[str, tuple[list[float], list[float], list[float]]] = {m: ([], [], []) for m in modes}
    gcs = _GcLog()

    def measure(m: str) -> None:
        torch.cuda.synchronize()
        got.setdefault(m, ([], [], []))
        gcs.mode = m
        got[m][0].append(_launch_ns(t, a.calls, a.chunk, got[m][2]))
        got[m][1].append(_nvtx_ns(a.calls))
        gcs.mode = None

    for r in range(a.repeats):
        order = modes if r % 2 == 0 else modes[::-1]
        for m in order:
            if control is not None:
                (control.pause(drain=True) if m == "paused" else control.resume())
            if variant is not None:
                variant.enter(m, control)
            measure(m)
            if variant is not None:
                variant.leave(m, control)
    if control is not None:
        control.resume()
    _report(got, gcs, a.calls)
    if control is not None and a.detach:
        done = set(got)
        _detach_probe(control, a.repeats, measure)
        _report({m: v for m, v in got.items() if m not in done}, gcs, a.calls)
    gcs.close()
    return 0


class _Variants:
    """The diagnosis modes of ``--variants`` (entered with collection on, between timed loops)."""

    def __init__(self) -> None:
        from cupti import cupti

        from gputrace.trace import recorder

        self.cupti = cupti
        self.rec = recorder.get_recorder()
        self.col = self.rec.cupti
        self.counted = 0

    def _count(self, activities) -> None:
        self.counted += sum(1 for _ in activities)

    def enter(self, m: str, control) -> None:
        if m == "on-noexport":
            self.rec.drain()
            self.rec._drain_lock.acquire()  # the exporter's next drain waits here until leave()
        elif m == "on-fastcb":
            control.pause(drain=True)
            self.cupti.activity_register_callbacks(self.col._requested, self._count)
            control.resume()

    def leave(self, m: str, control) -> None:
        if m == "on-noexport":
            self.rec._drain_lock.release()
            self.rec.drain()
        elif m == "on-fastcb":
            control.pause()
            self.cupti.activity_register_callbacks(self.col._requested, self.col._completed)
            control.resume()
            print(f"FASTCB counted={self.counted}", flush=True)


def _report(got: dict, gcs: _GcLog, calls: int) -> None:
    for m, (launch, nvtx, chunks) in got.items():
        q = statistics.quantiles(chunks, n=10)
        print(f"ATTACH mode={m} launch_ns={statistics.median(launch):.1f} nvtx_ns={statistics.median(nvtx):.1f} "
              f"repeats={len(launch)} calls={calls} launch_min_ns={min(launch):.1f} launch_max_ns={max(launch):.1f} "
              f"chunk_p50_ns={statistics.median(chunks):.1f} chunk_p90_ns={q[-1]:.1f} chunk_max_ns={max(chunks):.1f}",
              flush=True)
        print(gcs.line(m), flush=True)


class _GcLog:
    """Collections per generation (count, total and longest ms, any thread) while ``mode`` is set."""

    def __init__(self) -> None:
        self.mode: str | None = None
        self._t0 = 0
        self._at: str | None = None
        self.by: dict[tuple[str, int], list[float]] = {}
        gc.callbacks.append(self._cb)

    def _cb(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t0, self._at = time.perf_counter_ns(), self.mode
        elif self._at is not None:
            ms = (time.perf_counter_ns() - self._t0) / 1e6
            self.by.setdefault((self._at, int(info["generation"])), []).append(ms)

    def close(self) -> None:
        gc.callbacks.remove(self._cb)

    def line(self, mode: str) -> str:
        parts = []
        for g in (0, 1, 2):
            ms = self.by.get((mode, g), [])
            parts.append(f"gen{g}_n={len(ms)} gen{g}_ms={sum(ms):.1f} gen{g}_max_ms={max(ms, default=0.0):.1f}")
        return f"GC mode={mode} " + " ".join(parts)


def _detach_probe(control, repeats: int, measure) -> None:
    """Pause, detach CUPTI from the process (``cupti.finalize``), time 'detached'; attach again and time
    'reattached'. Prints the collector's record count after each phase (a reattach that collects nothing shows
    as no growth)."""
    from cupti import cupti

    from gputrace.trace import recorder

    col = recorder.get_recorder().cupti
    control.pause(drain=True)
    print("DETACH finalizing", flush=True)
    n0 = col.records
    try:
        cupti.finalize()
    except Exception as e:  # noqa: BLE001 reported, the probe ends
        print(f"DETACH finalize failed: {type(e).__name__}: {e}", flush=True)
        return
    for _ in range(repeats):
        measure("detached")
    print("DETACH detached repeats done", flush=True)
    col.pause()  # (flushes: nothing should come)
    n1 = col.records
    try:
        cupti.activity_register_callbacks(col._requested, col._completed)
    except Exception as e:  # noqa: BLE001 reported, the probe ends
        print(f"DETACH register callbacks failed: {type(e).__name__}: {e}", flush=True)
        return
    control.resume()
    for _ in range(repeats):
        measure("reattached")
    control.pause()
    n2 = col.records
    control.resume()
    print(f"DETACH records_before={n0} records_while_detached={n1 - n0} records_after_reattach={n2 - n1} "
          f"errors={col.errors[-5:]!r}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
