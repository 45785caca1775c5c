"""A plain DDP training job (gloo on CPU, or NCCL with --nccl), written as a user would (no gputrace import, no ranges, the defaults).

    torchrun --standalone --nproc-per-node 2 ddp_train.py [--steps N] [--late-ms MS] [--late-rank R] [--nccl]

Each step: next batch from a DataLoader, then (on ``--late-rank`` only) ``time.sleep(late_ms)``, forward,
``loss.backward()`` (DDP's bucket all-reduces, gloo), optimizer step. Prints one line per rank:
``DDP rank=R steps=N backward_median_ms=... params_sum=...`` (the sum of the final parameters: the same on
every rank, and the same with or without gputrace's capture). ``--nccl``: the model on GPU ``LOCAL_RANK`` and the
NCCL backend (one GPU per rank; the device script benchmarks/device-runs/pending/torch_capture_call.sh).
"""

import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--late-ms", type=float, default=0.0)
    ap.add_argument("--late-rank", type=int, default=1)
    ap.add_argument("--nccl", action="store_true")
    a = ap.parse_args()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if a.nccl else torch.device("cpu")
    if a.nccl:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if a.nccl else "gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4)).to(device)
    # Two buckets: the default 25 MiB cap would make one; a small cap shows DDP's bucketing.
    ddp = DistributedDataParallel(model, bucket_cap_mb=0.01)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(1 + rank)
    data = TensorDataset(torch.randn(8 * a.steps, 32, generator=g), torch.randint(0, 4, (8 * a.steps,), generator=g))
    loader = DataLoader(data, batch_size=8)
    loss_fn = nn.CrossEntropyLoss()
    backward_ms = []
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        if rank == a.late_rank and a.late_ms > 0:
            time.sleep(a.late_ms / 1e3)
        opt.zero_grad()
        loss = loss_fn(ddp(x), y)
        t0 = time.perf_counter()
        loss.backward()
        if a.nccl:
            torch.cuda.synchronize()
        backward_ms.append((time.perf_counter() - t0) * 1e3)
        opt.step()
    total = sum(float(p.detach().double().sum()) for p in model.parameters())
    print(f"DDP rank={rank} steps={len(backward_ms)} backward_median_ms={statistics.median(backward_ms):.3f} "
          f"params_sum={total:.17g}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
