"""A small CNN training loop written the way a user writes one: no gputrace import, no ranges, library defaults.

Each step copies a batch from *pageable* host memory (``.to(device)``), runs a conv/batchnorm/relu stack forward
and backward, an SGD step, and reads the loss (``loss.item()``, so the step's time includes its GPU work). On an
H200 a step is about 3 ms and about 50 kernel launches: launch-bound, the case where a tool's per-launch host cost
shows. ``--model matmul`` is the other end: a few large bf16 matmuls per step, GPU-bound.

Last line, machine-readable (step times are host wall clock over the timed steps, after ``--warmup`` steps):

    CNN model=cnn steps=300 mean_ms=3.101 median_ms=3.054 p90_ms=3.3 device=cuda

``--profile``: the timed steps run inside ``torch.profiler.profile`` (CPU + CUDA), nothing exported (an export
costs per session, not per step). ``--thread-cpu``: one more line per thread of this process with its CPU time
(``/proc/self/task``), so a profiler's own threads show what they cost. ``--gc-stats``: per generation, how many
collections ran during the timed steps, their total and longest pause (``gc.callbacks``), and the slowest steps.

    python benchmarks/real_programs/cnn_step.py --steps 300
    gputrace record --trace cnn.jsonl -- python benchmarks/real_programs/cnn_step.py
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import statistics
import time

import torch
from torch import nn


def cnn() -> nn.Module:
    def block(i: int, o: int) -> list[nn.Module]:
        return [nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU()]
    return nn.Sequential(*block(3, 32), *block(32, 32), nn.MaxPool2d(2), *block(32, 64), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(64, 10))


def matmul_model(n: int) -> nn.Module:
    return nn.Sequential(*[nn.Linear(n, n, bias=False) for _ in range(4)])


def thread_cpu_lines() -> list[str]:
    out = []
    tick = os.sysconf("SC_CLK_TCK")
    for tid in sorted(os.listdir("/proc/self/task"), key=int):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        cpu_s = (int(fields[11]) + int(fields[12])) / tick
        out.append(f"THREAD tid={tid} comm={comm} cpu_s={cpu_s:.3f}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--model", choices=("cnn", "matmul"), default="cnn")
    ap.add_argument("--matmul-n", type=int, default=8192)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--thread-cpu", action="store_true")
    ap.add_argument("--gc-stats", action="store_true")
    a = ap.parse_args()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    if a.model == "cnn":
        model = cnn().to(dev)
        xs = [torch.randn(a.batch, 3, 32, 32) for _ in range(8)]  # pageable host tensors
        ys = [torch.randint(0, 10, (a.batch,)) for _ in range(8)]
        loss_fn = nn.CrossEntropyLoss()
    else:
        dtype = torch.bfloat16 if dev == "cuda" else torch.float32
        model = matmul_model(a.matmul_n).to(dev, dtype)
        xs = [torch.randn(a.batch * 64, a.matmul_n, dtype=dtype) for _ in range(2)]
        ys = None
        loss_fn = None
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(i: int) -> float:
        x = xs[i % len(xs)].to(dev)
        out = model(x)
        loss = loss_fn(out, ys[i % len(ys)].to(dev)) if loss_fn is not None else out.float().square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    for i in range(a.warmup):
        step(i)
    prof: contextlib.AbstractContextManager = contextlib.nullcontext()
    if a.profile:
        acts = [torch.profiler.ProfilerActivity.CPU]
        if dev == "cuda":
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        prof = torch.profiler.profile(activities=acts)
    gc_log: list[tuple[int, float]] = []  # (generation, pause ms) of each collection in the timed steps
    gc_t0 = [0.0]

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            gc_t0[0] = time.perf_counter()
        else:
            gc_log.append((info["generation"], (time.perf_counter() - gc_t0[0]) * 1e3))

    if a.gc_stats:
        gc.callbacks.append(on_gc)
    times = []
    with prof:
        for i in range(a.steps):
            t0 = time.perf_counter()
            step(i)
            times.append((time.perf_counter() - t0) * 1e3)
    if a.gc_stats:
        gc.callbacks.remove(on_gc)
        for g in range(3):
            ms = [d for gen, d in gc_log if gen == g]
            print(f"GC gen={g} collections={len(ms)} total_ms={sum(ms):.2f} max_ms={max(ms, default=0):.2f}")
        print("SLOWEST " + " ".join(f"{t:.2f}" for t in sorted(times)[-8:]))
    times.sort()
    if a.thread_cpu:
        print("\n".join(thread_cpu_lines()))
    print(f"CNN model={a.model} steps={a.steps} mean_ms={statistics.fmean(times):.4f} "
          f"median_ms={statistics.median(times):.4f} p90_ms={times[int(0.9 * (len(times) - 1))]:.4f} "
          f"max_ms={times[-1]:.3f} device={dev} profile={int(a.profile)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
