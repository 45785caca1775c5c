"""A 2-rank DDP pair on CPU (gloo) with a known straggler, each rank traced by ``torch.profiler``: the gloo pair
the collective matching is checked against (docs/analysis.md, "Collectives"; benchmarks/RESULTS.md).

A program as a user writes it: ``DistributedDataParallel`` around a small MLP, gloo, the library's defaults, no
gputrace import and no ranges named for the analysis. Rank 1's input is late by ``--late-ms`` (default 50) each
step (a ``time.sleep`` before its forward, as a slow data loader would be), so rank 0 waits for it in DDP's
gradient all-reduce during ``loss.backward()``. Each rank writes ``OUT/rank{N}.json`` (``torch.profiler``, CPU
activities, one ``ProfilerStep#N`` per step) and prints its truth, measured by the program itself with
``time.perf_counter`` around each step's ``loss.backward()``::

    TRUTH rank=0 steps=8 backward_median_ms=53.912 late_median_ms=0.000
    TRUTH rank=1 steps=8 backward_median_ms=3.120 late_median_ms=50.081

Rank 0's median backward minus rank 1's is how long rank 0 waited per step (both do the same compute).

Usage: ``python benchmarks/capture_ddp_gloo_pair.py OUT_DIR [--steps 8] [--late-ms 50]`` (spawns the two ranks
itself with ``torch.multiprocessing``; CPU only, about 10 s on 2 cores). Then
``gputrace report OUT_DIR/rank0.json OUT_DIR/rank1.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile, schedule


def _rank(rank: int, world: int, out: str, steps: int, late_ms: float, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 256), torch.randn(64, 256)
    backward, late = [], []
    warm = 2
    def step() -> None:
        if rank == 1:  # the late input
            t0 = time.perf_counter()
            time.sleep(late_ms / 1e3)
            late.append((time.perf_counter() - t0) * 1e3)
        loss = torch.nn.functional.mse_loss(model(x), y)
        t0 = time.perf_counter()
        loss.backward()
        backward.append((time.perf_counter() - t0) * 1e3)
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(warm):  # warm-up, untraced
        step()
    path = str(Path(out) / f"rank{rank}.json")
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=steps),
                 on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
        for _ in range(steps + 1):
            step()
            prof.step()
    b, lt = backward[warm + 1:], late[warm + 1:]  # the profiler's warm-up step is not traced either
    print(f"TRUTH rank={rank} steps={len(b)} backward_median_ms={statistics.median(b):.3f} "
          f"late_median_ms={statistics.median(lt) if lt else 0.0:.3f}", flush=True)
    print(f"STEPS rank={rank} backward_ms={','.join(f'{x:.3f}' for x in b)}", flush=True)
    dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--late-ms", type=float, default=50.0)
    ap.add_argument("--port", type=int, default=29533)
    a = ap.parse_args(argv)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    mp.spawn(_rank, args=(2, a.out, a.steps, a.late_ms, a.port), nprocs=2, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
