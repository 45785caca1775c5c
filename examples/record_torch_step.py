"""A small PyTorch training step with NVTX ranges: ``gputrace record -- python examples/record_torch_step.py``.

Each step is an NVTX range ("train_step") holding "forward", "backward" and "optimizer" ranges (PyTorch's
``torch.cuda.nvtx``); gputrace record shows them as spans with the step's kernels and copies under them.
"""

import sys

import torch

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
dev = "cuda" if torch.cuda.is_available() else "cpu"
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(256, 512)
y = torch.randint(0, 10, (256,))
nvtx = torch.cuda.nvtx
for step in range(steps):
    nvtx.range_push("train_step")
    xb, yb = x.to(dev), y.to(dev)
    nvtx.range_push("forward")
    loss = torch.nn.functional.cross_entropy(model(xb), yb)
    nvtx.range_pop()
    nvtx.range_push("backward")
    opt.zero_grad()
    loss.backward()
    nvtx.range_pop()
    nvtx.range_push("optimizer")
    opt.step()
    nvtx.range_pop()
    if dev == "cuda":
        torch.cuda.synchronize()
    nvtx.range_pop()
print(f"{steps} steps on {dev}, loss {loss.item():.4f}")
