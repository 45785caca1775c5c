"""An unmodified DDP training job, written as a user would: rank 1's input is late by a known 50 ms each step.

No ranges, no gputrace import, the libraries' defaults. Launch with torchrun:

    cd benchmarks/real_programs
    torchrun --standalone --nproc-per-node 2 ddp_plain.py
    gputrace record --trace ddp_plain.jsonl -- torchrun --standalone --nproc-per-node 2 ddp_plain.py
    gputrace report ddp_plain.jsonl

What it runs: ``DistributedDataParallel`` over a small MLP, process group ``gloo``, two ranks (both on GPU 0 when
CUDA is there: gloo does not mind two ranks on one device; else CPU), a ``DataLoader`` with ``num_workers=2`` over
a synthetic ``Dataset``. Each step: ``load_batch`` (next batch from the loader, moved to the device; on rank 1 only
it also sleeps ``--late-ms``, default 50: a slow input pipeline in the main process), forward, ``loss.backward()``
(DDP's gradient all-reduce runs inside it, so the rank that arrives first waits there for the late one), optimizer
step. The first ``--warmup`` steps (default 3) are not timed.

Truth printed by each rank at the end, one line each:

    DDP_PLAIN rank=0 world=2 steps=20 backward_median_ms=64.812 step_median_ms=66.101 slept_median_ms=0.000 device=cpu
    DDP_PLAIN rank=1 world=2 steps=20 backward_median_ms=14.003 step_median_ms=66.050 slept_median_ms=50.081 device=cpu

``backward_median_ms``: median wall time of ``loss.backward()`` (with CUDA, up to a ``torch.cuda.synchronize()``
right after it, so the device work is inside); rank 0's minus rank 1's is rank 0's wait per step for rank 1.
``slept_median_ms``: rank 1's measured sleep (0 on other ranks). The sleep is the line
``time.sleep(late_s)`` in ``load_batch``: a sampler that names the line the late rank was in should name it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset


class Synthetic(Dataset):
    """Deterministic random inputs and labels, made per item (a stand-in for decoding a file)."""

    def __init__(self, n: int, width: int, classes: int) -> None:
        self.n, self.width, self.classes = n, width, classes

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        g = torch.Generator().manual_seed(i)
        x = torch.randn(self.width, generator=g)
        return x, int(i % self.classes)


def load_batch(it, device: torch.device, late_s: float, slept: list[float]):
    """The next batch on the device; ``late_s`` > 0 makes it late (a slow input step in the main process)."""
    x, y = next(it)
    if late_s > 0:
        t0 = time.perf_counter()
        time.sleep(late_s)
        slept.append((time.perf_counter() - t0) * 1e3)
    return x.to(device), y.to(device)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=20, help="timed steps")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    ap.add_argument("--late-ms", type=float, default=50.0, help="rank 1's extra input latency per step")
    ap.add_argument("--late-rank", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--width", type=int, default=512)
    a = ap.parse_args(argv)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count()) if cuda \
        else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(a.width, a.width), nn.ReLU(), nn.Linear(a.width, a.width), nn.ReLU(),
                          nn.Linear(a.width, 10)).to(device)
    ddp = DistributedDataParallel(model, device_ids=[device.index] if cuda else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    total = a.warmup + a.steps
    data = Synthetic(a.batch * total * world, a.width, 10)
    loader = DataLoader(data, batch_size=a.batch, shuffle=False, num_workers=2)
    it = iter(loader)
    late_s = a.late_ms / 1e3 if rank == a.late_rank else 0.0
    backward_ms: list[float] = []
    step_ms: list[float] = []
    slept: list[float] = []
    for step in range(total):
        t_step = time.perf_counter()
        x, y = load_batch(it, device, late_s, slept)
        loss = loss_fn(ddp(x), y)
        opt.zero_grad()
        t0 = time.perf_counter()
        loss.backward()
        if cuda:
            torch.cuda.synchronize()
        t_back = (time.perf_counter() - t0) * 1e3
        opt.step()
        loss.item()
        if step >= a.warmup:
            backward_ms.append(t_back)
            step_ms.append((time.perf_counter() - t_step) * 1e3)
    timed_sleeps = slept[a.warmup:] if slept else []
    print(f"DDP_PLAIN rank={rank} world={world} steps={a.steps} "
          f"backward_median_ms={statistics.median(backward_ms):.3f} step_median_ms={statistics.median(step_ms):.3f} "
          f"slept_median_ms={statistics.median(timed_sleeps) if timed_sleeps else 0.0:.3f} device={device.type}",
          flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
