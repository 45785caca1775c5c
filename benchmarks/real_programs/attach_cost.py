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
import statistics
import sys
import time

import torch


def _launch_ns(t: torch.Tensor, calls: int, chunk: int) -> float:
    total = 0
    done = 0
    clock = time.perf_counter_ns
    while done < calls:
        n = min(chunk, calls - done)
        t0 = clock()
        for _ in range(n):
            t.add_(1)
        total += clock() - t0
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
    a = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("ATTACH unavailable (no CUDA)", flush=True)
        return 2
    t = torch.zeros(1, device="cuda")
    _launch_ns(t, 2000, a.chunk)  # warm-up: the first launches load modules and set CUPTI's stream state up
    _nvtx_ns(2000)
    control = _control()
    modes = ["on", "paused"] if control is not None else ["plain"]
    got: dict[str, tuple[list[float], list[float]]] = {m: ([], []) for m in modes}
    for r in range(a.repeats):
        order = modes if r % 2 == 0 else modes[::-1]
        for m in order:
            if control is not None:
                (control.pause(drain=True) if m == "paused" else control.resume())
            torch.cuda.synchronize()
            got[m][0].append(_launch_ns(t, a.calls, a.chunk))
            got[m][1].append(_nvtx_ns(a.calls))
    if control is not None:
        control.resume()
    for m in modes:
        launch, nvtx = got[m]
        print(f"ATTACH mode={m} launch_ns={statistics.median(launch):.1f} nvtx_ns={statistics.median(nvtx):.1f} "
              f"repeats={a.repeats} calls={a.calls} launch_min_ns={min(launch):.1f} launch_max_ns={max(launch):.1f}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
