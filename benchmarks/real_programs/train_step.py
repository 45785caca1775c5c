"""A small PyTorch training loop, the kind of program ``gputrace record`` is meant for.

An MLP on synthetic data, fed by a ``DataLoader`` with worker processes (``--workers``, default 2). Each step:

* ``data``: wait for the next batch from the workers (host only);
* ``h2d``: copy the batch to the device from *pageable* memory on purpose (the workers' tensors are not
  pinned and ``.to(device)`` is synchronous): the pageable-copy rule of ``gputrace report`` should fire on GPU;
* ``forward``, ``backward``, ``optimizer``;
* ``sync``: ``loss.item()``, where the host waits for the GPU.

Each of those is a named range (``--ranges``, see _ranges.py: ``torch.cuda.nvtx`` by default, as an ordinary
program has, or ``gputrace.phase``), and a ``torch.profiler.record_function`` of the same name.

It prints one line per timed step (``step I ms=...``) and, last, one machine-readable line:

    STEPS median_ms=12.345 n=20 device=cuda ranges=nvtx profile=0

Step times are wall times of whole steps after ``--warmup`` untimed steps (on CUDA each step ends with
``loss.item()``, so a step's time includes its GPU work). ``--profile PATH`` runs the timed steps under
``torch.profiler`` (CPU + CUDA activities when CUDA is there) and exports a Kineto JSON trace to PATH after the
last step (the export is not in the step times).

    python benchmarks/real_programs/train_step.py --steps 20
    gputrace record --trace train.jsonl -- python benchmarks/real_programs/train_step.py --steps 20
    python benchmarks/real_programs/train_step.py --steps 20 --profile train_kineto.json

``--toggle-blocks K`` (under ``gputrace record``): what collection costs, measured inside this one process. After
warm-up the timed steps run in pairs of blocks of K steps, one block with CUDA activity collection on and one
with it paused (``gputrace.record_control``), the order within each pair drawn from a seeded generator
(``--toggle-seed``); collection is switched between steps (each ends in ``loss.item()``, so the GPU is idle),
outside the step timer. ``_toggle.py`` turns the blocks into one more line, after ``STEPS`` (whose median then
mixes on and off steps):

    TOGGLE on_median_ms=9.812 off_median_ms=9.640 ratio=1.0180 pairs=12 ci95=1.0060-1.0310 k=10 steps=240

ratio: the median over pairs of (on block median / off block median); ci95: a bootstrap interval of it over
pairs. Steps past the last whole pair run with collection on. Not under ``gputrace record`` (or with CUPTI off)
it prints ``TOGGLE unavailable (not under gputrace record)`` and times the steps as usual.

    gputrace record --trace t.jsonl -- python benchmarks/real_programs/train_step.py --steps 240 --toggle-blocks 10

``--toggle-profiler`` (with ``--toggle-blocks K``, *not* under ``gputrace record``): the same blocks, the same plan
and the same TOGGLE line, for ``torch.profiler``: each 'on' block runs inside its own
``torch.profiler.profile(activities=[CPU, CUDA when available])`` session, started at the block's start and
stopped at its end (after a device synchronize), both between steps and outside the step timer; 'off' blocks run
with no profiler (``_toggle.ProfilerToggle``). Nothing is exported: an export costs per session, not per step,
and is not what a step pays. A line ``toggle: torch.profiler sessions=N switch_ms=...`` (sessions opened, time
spent opening and closing them, outside the figures) comes before the TOGGLE line. Refused with an argparse error
with ``--profile``; under ``gputrace record`` with CUDA activity collecting it prints ``TOGGLE refused: ...``
and exits 3 (two CUPTI users in one process would conflict).

    python benchmarks/real_programs/train_step.py --steps 240 --toggle-blocks 10 --toggle-profiler
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import _toggle
import torch
from _ranges import HOWS, named_range, resolve
from torch.utils.data import DataLoader, Dataset


class SyntheticBatches(Dataset):
    """``n`` pre-made (x, y) batches, returned whole (the DataLoader runs with ``batch_size=None``): a worker's
    cost per item is one copy of a batch, so the loader keeps up with the step and the step is what is timed."""

    def __init__(self, n: int, batch: int, width: int, classes: int, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(8, batch, width, generator=g)
        self.y = torch.randint(0, classes, (8, batch), generator=g)
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        k = i % len(self.x)
        return self.x[k].clone(), self.y[k].clone()


def build_model(width: int, depth: int, classes: int, device: str) -> torch.nn.Module:
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    layers.append(torch.nn.Linear(width, classes))
    return torch.nn.Sequential(*layers).to(device)


def setup(dev: str, batch: int | None, width: int | None, depth: int, workers: int, total: int):
    """The model, optimizer and batch iterator of ``total`` steps on ``dev`` (``main`` and kernel_probe.py):
    ``(iterator, model, optimizer)``; batch and width default to 1024 and 2048 on CUDA, 64 and 256 on CPU."""
    cuda = dev == "cuda"
    batch = batch or (1024 if cuda else 64)
    width = width or (2048 if cuda else 256)
    classes = 10
    data = SyntheticBatches(total, batch, width, classes)
    loader = DataLoader(data, batch_size=None, shuffle=False, num_workers=workers, pin_memory=False,
                        persistent_workers=False, prefetch_factor=2 if workers else None)
    model = build_model(width, depth, classes, dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return iter(loader), model, opt


def step(it, model: torch.nn.Module, opt, dev: str, how: str) -> float:
    """One training step in its named ranges: next batch, pageable H2D copy, forward, backward, optimizer,
    ``loss.item()``; returns the loss."""
    with named_range("train_step", how):
        with named_range("data", how):
            x, y = next(it)
        with named_range("h2d", how):
            xb, yb = x.to(dev), y.to(dev)  # pageable host memory -> device, on purpose
        with named_range("forward", how):
            loss = torch.nn.functional.cross_entropy(model(xb), yb)
        with named_range("backward", how):
            opt.zero_grad(set_to_none=True)
            loss.backward()
        with named_range("optimizer", how):
            opt.step()
        with named_range("sync", how):
            return float(loss.item())  # the host waits for the GPU here


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=20, help="timed steps (default 20)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    ap.add_argument("--profile", metavar="PATH", default=None,
                    help="run the timed steps under torch.profiler and export a Kineto JSON trace to PATH")
    ap.add_argument("--ranges", choices=HOWS, default="nvtx", help="how steps are annotated (default nvtx)")
    ap.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader workers (default 2)")
    ap.add_argument("--batch", type=int, default=None, help="default 1024 on CUDA, 64 on CPU")
    ap.add_argument("--width", type=int, default=None, help="default 2048 on CUDA, 256 on CPU")
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--quiet", action="store_true", help="no per-step lines")
    ap.add_argument("--toggle-blocks", type=int, default=0, metavar="K",
                    help="under gputrace record: alternate blocks of K timed steps with collection on and off and "
                         "print a TOGGLE line (default 0: off)")
    ap.add_argument("--toggle-seed", type=int, default=24, help="seed of the on/off order within pairs (default 24)")
    ap.add_argument("--toggle-profiler", action="store_true",
                    help="with --toggle-blocks, not under gputrace record: 'on' blocks each in a torch.profiler "
                         "session (CPU + CUDA activities), 'off' blocks with none; nothing exported")
    a = ap.parse_args(argv)
    if a.toggle_profiler and a.profile:
        ap.error("--toggle-profiler and --profile both run torch.profiler: use one")
    if a.toggle_profiler and not a.toggle_blocks:
        ap.error("--toggle-profiler needs --toggle-blocks K")
    if a.toggle_blocks < 0 or (a.toggle_blocks and a.steps < 2 * a.toggle_blocks):
        ap.error(f"--toggle-blocks K needs K >= 0 and --steps >= 2K (got K={a.toggle_blocks}, steps={a.steps})")
    if a.toggle_blocks and a.profile:
        ap.error("--toggle-blocks and --profile measure different things: use one")
    dev = ("cuda" if torch.cuda.is_available() else "cpu") if a.device == "auto" else a.device
    cuda = dev == "cuda"
    how = resolve(a.ranges)
    if not cuda:
        torch.set_num_threads(1)  # the DataLoader workers share the cores; one compute thread keeps timings steady
    total = a.warmup + a.steps
    it, model, opt = setup(dev, a.batch, a.width, a.depth, a.workers, total)

    prof = None
    times: list[float] = []
    blocks = None  # _toggle.Blocks while toggling collection (--toggle-blocks under gputrace record)
    ptoggle = None  # _toggle.ProfilerToggle (--toggle-profiler); an open session is closed in finally
    acts = [torch.profiler.ProfilerActivity.CPU]
    if cuda:
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    try:
        for i in range(total):
            j = i - a.warmup
            if a.toggle_blocks and j == 0:
                control = _toggle.find_control()
                if a.toggle_profiler:
                    if control is not None:  # (checked here: CUDA activity collection starts with CUDA use)
                        print("TOGGLE refused: --toggle-profiler under gputrace record with CUDA activity "
                              "collecting (torch.profiler and the recorder would both use CUPTI); run it "
                              "without gputrace record", flush=True)
                        return 3
                    ptoggle = _toggle.ProfilerToggle(lambda: torch.profiler.profile(activities=acts),
                                                     sync=torch.cuda.synchronize if cuda else None)
                    blocks = _toggle.Blocks(ptoggle, a.steps, a.toggle_blocks, a.toggle_seed)
                elif control is None:
                    print(_toggle.UNAVAILABLE, flush=True)
                else:
                    blocks = _toggle.Blocks(control, a.steps, a.toggle_blocks, a.toggle_seed)
            if blocks is not None and j >= 0:
                blocks.before(j)  # (between steps: the last one ended in loss.item(), the GPU is idle)
            if i == a.warmup and a.profile:
                prof = torch.profiler.profile(activities=acts)
                prof.__enter__()
            t0 = time.perf_counter()
            lv = step(it, model, opt, dev, how)
            dt = (time.perf_counter() - t0) * 1e3
            if i >= a.warmup:
                times.append(dt)
                if blocks is not None:
                    blocks.after(j, dt)
                if not a.quiet:
                    print(f"step {i - a.warmup} ms={dt:.3f} loss={lv:.4f}", flush=True)
    finally:
        if ptoggle is not None:
            ptoggle.close()
    if prof is not None:
        if cuda:
            torch.cuda.synchronize()
        prof.__exit__(None, None, None)
        prof.export_chrome_trace(a.profile)
    med = statistics.median(times) if times else float("nan")
    print(f"STEPS median_ms={med:.3f} n={len(times)} device={dev} ranges={how} profile={int(bool(a.profile))}",
          flush=True)
    if blocks is not None:
        figures = blocks.finish()
        if ptoggle is not None:
            print(f"toggle: torch.profiler sessions={ptoggle.sessions} switch_ms={ptoggle.switch_ms:.1f} "
                  f"(activities {'+'.join(x.name for x in acts)}; nothing exported)", flush=True)
        if not a.quiet:
            for b, (on, ts) in enumerate(blocks.blocks):
                print(f"block {b} collection={'on' if on else 'off'} median_ms={statistics.median(ts):.3f}")
        print(_toggle.line(figures, a.toggle_blocks), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
