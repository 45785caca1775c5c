"""A 2-rank ``torch.distributed`` job with a straggler on purpose: rank 1 sleeps before each all_reduce.

Launch with torchrun (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``/``MASTER_PORT`` come from it):

    cd benchmarks/real_programs
    torchrun --standalone --nproc-per-node 2 ddp_slow_rank.py
    gputrace record --trace ddp.jsonl -- torchrun --standalone --nproc-per-node 2 ddp_slow_rank.py
    gputrace report ddp.jsonl      # Findings: "rank 1 is the straggler", wait ~ --sleep-ms per collective

The collective runs on the gloo backend with a CPU tensor by default (gloo works everywhere; both ranks may share
one GPU). When CUDA is there each iteration also runs a small matmul chain on ``cuda:LOCAL_RANK % device_count``
(``compute``), so the trace has GPU work beside the collective. ``--backend nccl`` runs the all_reduce with NCCL
on a CUDA tensor, one GPU per rank (refused with fewer GPUs than ranks); the ``all_reduce`` range then ends with a
device synchronize, so its host span covers the wait as with gloo, and the NCCL kernel (CUPTI) shows the same
wait on the GPU of the rank that arrived first:

    gputrace record --trace nccl.jsonl -- torchrun --standalone --nproc-per-node 2 ddp_slow_rank.py --backend nccl

Each iteration: ``compute`` -> (rank 1 only) ``straggle`` (sleep ``--sleep-ms``, default 50) -> ``all_reduce``
(the collective, in a range named ``all_reduce``). The ranges are ``gputrace.phase`` when gputrace imports
(so ``gputrace record`` records them on CPU too), else ``torch.cuda.nvtx``; ``record_function`` always
(_ranges.py). ``gputrace report`` matches the n-th ``all_reduce`` span of every rank as one collective
(analysis/collectives.py); its arrival on a rank is the span's start, so rank 1 arrives ~sleep-ms late.

Truth printed by each rank, one line each (after ``--iters`` timed iterations; two warm-up all_reduces outside
any range come first and are not matched):

    DDP rank=0 world=2 iters=10 allreduce_median_ms=51.845 slept_median_ms=0.000 ranges=gputrace cuda=0
    DDP rank=1 world=2 iters=10 allreduce_median_ms=1.692 slept_median_ms=50.081 ranges=gputrace cuda=0

Rank 0's median time inside all_reduce minus rank 1's (the collective's own cost) is how long rank 0 waited
per collective: the truth the report's straggler estimate (median wait) is compared with; rank 1's measured
sleep is printed beside it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
from _ranges import named_range, resolve


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--sleep-ms", type=float, default=50.0, help="rank 1's sleep before each all_reduce")
    ap.add_argument("--numel", type=int, default=1 << 18, help="all_reduce size in float32 elements")
    ap.add_argument("--ranges", choices=("gputrace", "nvtx", "none"), default="gputrace")
    ap.add_argument("--backend", choices=("gloo", "nccl"), default="gloo",
                    help="gloo: CPU tensor, any machine (default); nccl: CUDA tensor, one GPU per rank")
    a = ap.parse_args(argv)
    cuda = torch.cuda.is_available()
    world_env = int(os.environ.get("WORLD_SIZE", "1"))
    if a.backend == "nccl" and (not cuda or torch.cuda.device_count() < world_env):
        n = torch.cuda.device_count() if cuda else 0
        print(f"ddp_slow_rank: --backend nccl needs one GPU per rank: {world_env} ranks, {n} GPU(s) visible",
              file=sys.stderr)
        return 2
    dist.init_process_group(a.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    how = resolve(a.ranges)
    nccl = a.backend == "nccl"
    if cuda:
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
        torch.cuda.set_device(dev)
        w = torch.randn(1024, 1024, device=dev) / 32
    else:
        w = torch.randn(256, 256) / 16
    t = torch.ones(a.numel, device=dev if nccl else "cpu")
    for _ in range(2):  # warm-up, outside any range: not matched as collectives
        dist.all_reduce(t)
    in_coll: list[float] = []
    slept: list[float] = []
    for _ in range(a.iters):
        with named_range("iteration", how):
            with named_range("compute", how):
                for _ in range(4):
                    w = torch.tanh(w @ w)
                if cuda:
                    torch.cuda.synchronize()
            if rank == 1:
                with named_range("straggle", how):
                    t0 = time.perf_counter()
                    time.sleep(a.sleep_ms / 1e3)
                    slept.append((time.perf_counter() - t0) * 1e3)
            t0 = time.perf_counter()
            with named_range("all_reduce", how):
                dist.all_reduce(t)
                if nccl:
                    torch.cuda.synchronize()  # (the host span then covers the wait, as gloo's does)
            in_coll.append((time.perf_counter() - t0) * 1e3)
    dist.barrier()
    print(f"DDP rank={rank} world={world} iters={a.iters} allreduce_median_ms={statistics.median(in_coll):.3f} "
          f"slept_median_ms={statistics.median(slept) if slept else 0.0:.3f} ranges={how} cuda={int(cuda)} "
          f"backend={a.backend}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
