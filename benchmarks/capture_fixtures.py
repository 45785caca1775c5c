"""Capture the foreign-trace fixtures of tests/data/ on a GPU machine (PyTorch with CUDA required).

Three captures of small, deterministic PyTorch programs:

* ``train``: a few training steps of a small MLP, traced by ``torch.profiler`` with CPU and CUDA
  activities (Kineto JSON). Each step: a host-side preprocessing phase (numpy, on purpose long enough
  to leave the GPU idle), a pageable host-to-device copy of the batch, a pinned copy of the labels,
  forward/backward/optimizer under ``record_function`` annotations (which also push NVTX ranges of
  the same names), and a ``.item()`` that makes the host wait on the GPU.
* ``train --nvtx-only``: the same steps with NVTX ranges only, to run under
  ``nsys profile`` (Nsight's SQLite export is the fixture).
* ``dist``: a 2-process ``torch.distributed`` job (gloo, both ranks on GPU 0) where rank 1 sleeps
  ``--sleep-ms`` before each all_reduce; each rank traced by ``torch.profiler`` into its own file.

Usage (on the device machine; see tests/data/README.md for the exact command that made the fixtures):

    python benchmarks/capture_fixtures.py train --out DIR             # DIR/train_kineto.json
    nsys profile -t cuda,nvtx -o DIR/train_nsys python benchmarks/capture_fixtures.py train --nvtx-only
    python benchmarks/capture_fixtures.py dist --out DIR              # DIR/dist_rank0.json, dist_rank1.json

The phase names (``preprocess``, ``h2d``, ``forward``, ``backward``, ``optimizer``, ``loss_sync``) are
the same in all captures, so Kineto and Nsight traces of the program can be compared kernel by kernel.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

WARMUP, STEPS = 3, 4
BATCH, WIDTH, DEPTH = 2048, 1024, 4


@contextlib.contextmanager
def _phase(name: str, kineto: bool) -> Iterator[None]:
    """One phase: an NVTX range (seen by nsys) and, under torch.profiler, a record_function annotation."""
    import torch

    torch.cuda.nvtx.range_push(name)
    try:
        if kineto:
            with torch.profiler.record_function(name):
                yield
        else:
            yield
    finally:
        torch.cuda.nvtx.range_pop()


def _model():  # type: ignore[no-untyped-def]
    import torch

    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(DEPTH):
        layers += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.GELU()]
    layers.append(torch.nn.Linear(WIDTH, 10))
    return torch.nn.Sequential(*layers).cuda()


def _step(model, opt, rng, kineto: bool) -> float:  # type: ignore[no-untyped-def]
    import numpy as np
    import torch

    with _phase("preprocess", kineto):  # host work while the GPU has nothing to do
        x = rng.standard_normal((BATCH, WIDTH), dtype=np.float32)
        for _ in range(3):
            x = np.tanh(x) * 1.01
        y = rng.integers(0, 10, size=BATCH)
    with _phase("h2d", kineto):
        xb = torch.from_numpy(x).cuda()  # pageable host memory -> device
        yb = torch.from_numpy(y).pin_memory().cuda(non_blocking=True)  # pinned host memory -> device
    with _phase("forward", kineto):
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
    with _phase("backward", kineto):
        opt.zero_grad(set_to_none=True)
        loss.backward()
    with _phase("optimizer", kineto):
        opt.step()
    with _phase("loss_sync", kineto):
        return float(loss.item())  # the host waits for the GPU here


def train(out: Path | None, nvtx_only: bool) -> None:
    import numpy as np
    import torch

    model = _model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    for _ in range(WARMUP):
        _step(model, opt, rng, kineto=False)
    torch.cuda.synchronize()
    if nvtx_only:
        torch.cuda.nvtx.range_push("train")
        for i in range(STEPS):
            torch.cuda.nvtx.range_push(f"step{i}")
            _step(model, opt, rng, kineto=False)
            torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        return
    assert out is not None
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        with torch.profiler.record_function("train"):
            for i in range(STEPS):
                with torch.profiler.record_function(f"step{i}"):
                    _step(model, opt, rng, kineto=True)
            torch.cuda.synchronize()
    out.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(out / "train_kineto.json"))


def _dist_worker(rank: int, world: int, out: str, sleep_ms: float, port: int) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    t = torch.ones(1 << 20, device="cuda")
    w = torch.randn(1024, 1024, device="cuda")
    for _ in range(2):  # warm-up
        dist.all_reduce(t)
    torch.cuda.synchronize()
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        for i in range(5):
            with torch.profiler.record_function(f"step{i}"):
                with torch.profiler.record_function("compute"):
                    for _ in range(4):
                        w = torch.tanh(w @ w)
                    torch.cuda.synchronize()
                if rank == 1:
                    with torch.profiler.record_function("straggle"):
                        time.sleep(sleep_ms / 1e3)
                with torch.profiler.record_function("allreduce"):
                    dist.all_reduce(t)
                torch.cuda.synchronize()
    prof.export_chrome_trace(os.path.join(out, f"dist_rank{rank}.json"))
    dist.barrier()
    dist.destroy_process_group()


def dist_job(out: Path, sleep_ms: float) -> None:
    import torch.multiprocessing as mp

    out.mkdir(parents=True, exist_ok=True)
    mp.spawn(_dist_worker, args=(2, str(out), sleep_ms, 29511), nprocs=2, join=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=("train", "dist"))
    ap.add_argument("--out", type=Path, default=Path("fixtures-out"))
    ap.add_argument("--nvtx-only", action="store_true", help="train without torch.profiler (to run under nsys)")
    ap.add_argument("--sleep-ms", type=float, default=50.0)
    a = ap.parse_args(argv)
    if a.what == "train":
        train(a.out, a.nvtx_only)
    else:
        dist_job(a.out, a.sleep_ms)
    return 0


if __name__ == "__main__":
    sys.exit(main())
