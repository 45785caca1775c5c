"""Capture tests/data/foreign/train_kineto_cpu.json.gz: a CPU-only ``torch.profiler`` trace (PyTorch CPU build).

Two training steps of a tiny MLP (batch 64, width 128, 3 layers) under
``torch.profiler.profile(activities=[ProfilerActivity.CPU])``, each step under ``record_function("stepN")``
with ``forward`` / ``backward`` / ``optimizer`` annotations inside, after one untraced warm-up step. The
trace has no device or CUDA-API rows: only ``user_annotation``, ``cpu_op``, ``python_function`` (none
without ``with_stack``) and the profiler's own ``Trace`` span.

Usage: ``python benchmarks/capture_cpu_kineto.py OUT.json`` (then ``gzip -9 OUT.json``).
"""

from __future__ import annotations

import sys

import torch
from torch.profiler import ProfilerActivity, profile, record_function

BATCH, WIDTH, DEPTH, STEPS = 64, 128, 3, 2


def main(out: str) -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    layers: list[torch.nn.Module] = []
    for _ in range(DEPTH):
        layers += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(BATCH, WIDTH), torch.randn(BATCH, WIDTH)

    def step() -> None:
        with record_function("forward"):
            loss = torch.nn.functional.mse_loss(model(x), y)
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)

    step()  # warm-up, not traced
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(STEPS):
            with record_function(f"step{i}"):
                step()
    prof.export_chrome_trace(out)


if __name__ == "__main__":
    main(sys.argv[1])
