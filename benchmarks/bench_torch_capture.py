"""What the torch capture costs (``gputrace record``'s forward / backward / optimizer.step / dataloader.next
ranges and torch.distributed collectives), on a small CPU model, capture on against off in one process.

Usage::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_torch_capture.py [--repeats 7] [--steps 200]

A recorder writes to a temporary file throughout (its exporter thread running, as under ``record``). Every
row alternates its variants block by block in one process (``--repeats`` blocks each; the table gives the
median block), so the shared machine's load hits them alike; the capture is installed for an "on" block
and removed after it (``torch_capture.install`` / ``uninstall``), with warm-up steps first so the forward
ranges have left their learning phase. Each block gives the calling thread's CPU time per call
(``thread_time_ns``: what the capture costs the program's own thread, unmoved by other processes on a
loaded box; the exporter thread's work is not in it) and the wall time per call; the table gives medians
over blocks of both, the wall-clock ratio last (the overhead a program sees, on a quiet machine).

Rows:

* ``range (ranged wrapper)``: a no-op function wrapped as backward / optimizer.step / dataloader.next are.
* ``forward, steady``: an outermost call of ``nn.Identity`` (no work) with the class wrapper against plain.
* ``forward, learning``: the same with the global module hooks (the first steps only), per module call.
* ``all_reduce 4 KiB``, ``all_reduce async``: ``dist.all_reduce`` on a 1-rank gloo group.
* ``DDP step``: a training step of a 1-rank gloo DDP model, our bucket hook and the step ranges against DDP's
  built-in all-reduce and no capture.
* ``train step``: a plain training step (DataLoader next, forward of an MLP, loss, backward, SGD step), with
  the capture against without: the figure for the overhead target. ``torch.profiler (CPU)`` on the same step
  is the alternative the capture avoids (record-function observers for every op).

The whole-step rows are also given per pair of blocks (``--pairs`` pairs of ``--block`` steps, on and off in
alternating order, the install/uninstall churn in both halves): the median ratio and its quartiles, which a
loaded machine's drift between blocks moves less than the ratio of medians.
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from time import perf_counter_ns, thread_time_ns

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402

from gputrace.trace import recorder, torch_capture  # noqa: E402
from gputrace.trace.torch_capture import steps  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def per_call(fn, n: int) -> tuple[float, float]:
    """(wall ns, this thread's CPU ns) per call of ``fn``, over ``n`` calls."""
    c, t = thread_time_ns(), perf_counter_ns()
    for _ in range(n):
        fn()
    return (perf_counter_ns() - t) / n, (thread_time_ns() - c) / n


def mlp() -> nn.Module:
    layers: list[nn.Module] = []
    for _ in range(4):
        layers += [nn.Linear(64, 64), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(64, 10))


class Step:
    """One plain training step per call (the DataLoader cycles)."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.opt = torch.optim.SGD(model.parameters(), lr=0.01)
        data = torch.utils.data.TensorDataset(torch.randn(32 * 64, 64), torch.randint(0, 10, (32 * 64,)))
        self.loader = torch.utils.data.DataLoader(data, batch_size=32)
        self.it = iter(self.loader)
        self.loss = nn.CrossEntropyLoss()

    def __call__(self) -> None:
        try:
            x, y = next(self.it)
        except StopIteration:
            self.it = iter(self.loader)
            x, y = next(self.it)
        self.opt.zero_grad()
        self.loss(self.model(x), y).backward()
        self.opt.step()


def toggled(rows: dict[str, dict[str, list[tuple[float, float]]]], name: str, make, n: int, repeats: int,
            warm: int = 5) -> None:
    """Row ``name``: ``make()`` -> a callable timed with the capture off, then on (installed per block)."""
    fn = make()
    for _ in range(warm):
        fn()
    for _ in range(repeats):
        rows[name].setdefault("off", []).append(per_call(fn, n))
        torch_capture.install()
        try:
            for _ in range(warm):
                fn()
            rows[name].setdefault("on", []).append(per_call(fn, n))
        finally:
            torch_capture.uninstall()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("-n", type=int, default=20000, help="calls per block for the micro rows")
    ap.add_argument("--pairs", type=int, default=40, help="on/off block pairs for the whole-step rows")
    ap.add_argument("--block", type=int, default=50, help="steps per block for the whole-step rows")
    a = ap.parse_args()
    torch.set_num_threads(1)
    load0 = f"{os.getloadavg()[0]:.1f}"
    os.environ.pop(torch_capture.ENV, None)
    tmp = tempfile.mkdtemp(prefix="bench-torch-capture-")
    recorder.configure(trace_file=os.path.join(tmp, "t.jsonl"), collect_gpu_info=False, cuda_activity=False)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
    rows: dict[str, dict[str, list[tuple[float, float]]]] = {k: {} for k in (
        "range (ranged wrapper)", "forward, steady (Identity)", "forward, learning (per module call)",
        "all_reduce 4 KiB", "all_reduce 4 KiB async", "DDP step (1 rank, MLP)", "train step (MLP, CPU)",
        "torch.profiler (CPU) on that step")}
    n = a.n

    # range: a no-op function, plain and wrapped
    def noop():
        return None

    wrapped = steps.ranged(noop, "bench")
    for _ in range(a.repeats):
        rows["range (ranged wrapper)"].setdefault("off", []).append(per_call(noop, n))
        rows["range (ranged wrapper)"].setdefault("on", []).append(per_call(wrapped, n))

    ident = nn.Identity()
    x = torch.ones(1)

    def fwd():
        ident(x)

    toggled(rows, "forward, steady (Identity)", lambda: fwd, n, a.repeats, warm=0)
    # steady state needs the class seen at depth 0 and the learning ended: force it per block
    rows["forward, steady (Identity)"].pop("on")
    for _ in range(a.repeats):
        torch_capture.install()
        try:
            fwd()
            torch_capture.installed["modules"].narrow()
            rows["forward, steady (Identity)"].setdefault("on", []).append(per_call(fwd, n))
        finally:
            torch_capture.uninstall()
    # learning: global hooks on every module call (a model of 9 leaf modules + its Sequential: 10 calls)
    model, xb = mlp(), torch.randn(32, 64)
    for _ in range(a.repeats):
        rows["forward, learning (per module call)"].setdefault("off", []).append(
            tuple(v / 10 for v in per_call(lambda: model(xb), a.steps)))
        torch_capture.install()
        try:
            torch_capture.installed["modules"].learn_calls = 1 << 60
            rows["forward, learning (per module call)"].setdefault("on", []).append(
                tuple(v / 10 for v in per_call(lambda: model(xb), a.steps)))
        finally:
            torch_capture.uninstall()

    t4k = torch.ones(1024)
    toggled(rows, "all_reduce 4 KiB", lambda: (lambda: dist.all_reduce(t4k)), n // 10, a.repeats)
    toggled(rows, "all_reduce 4 KiB async", lambda: (lambda: dist.all_reduce(t4k, async_op=True).wait()),
            n // 10, a.repeats)

    # Whole steps: pairs of short blocks, capture on / off, the order alternating; per pair the ratio of the
    # blocks' per-step times (the install / uninstall churn is in both halves).
    from torch.nn.parallel import DistributedDataParallel as DDP

    def capture_on():
        torch_capture.install()

    def capture_off():
        torch_capture.install()
        torch_capture.uninstall()

    plain_ddp = Step(DDP(mlp()))
    plain_ddp()  # first forward without the capture: DDP's built-in all-reduce for good
    torch_capture.install()
    hooked_ddp = Step(DDP(mlp()))  # (its first forward registers the bucket hook)
    hooked_ddp()
    torch_capture.uninstall()
    step = Step(mlp())
    pair_rows = {
        "train step (MLP, CPU)": ((capture_on, step), (capture_off, step)),
        "DDP step (1 rank, MLP)": ((capture_on, hooked_ddp), (capture_off, plain_ddp)),
    }
    ratios: dict[str, list[tuple[float, float]]] = {k: [] for k in pair_rows}
    for i in range(a.pairs):
        for name, ((on_setup, on_fn), (off_setup, off_fn)) in pair_rows.items():
            got = {}
            for side in (("on", "off") if i % 2 else ("off", "on")):
                setup, fn = (on_setup, on_fn) if side == "on" else (off_setup, off_fn)
                setup()
                for _ in range(3):
                    fn()
                got[side] = per_call(fn, a.block)
                torch_capture.uninstall()
            rows[name].setdefault("on", []).append(got["on"])
            rows[name].setdefault("off", []).append(got["off"])
            ratios[name].append((got["on"][1] / got["off"][1], got["on"][0] / got["off"][0]))
    for _ in range(a.repeats):
        off = per_call(step, a.block)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
            on = per_call(step, a.block)
        rows["torch.profiler (CPU) on that step"].setdefault("off", []).append(off)
        rows["torch.profiler (CPU) on that step"].setdefault("on", []).append(on)
        ratios.setdefault("torch.profiler (CPU) on that step", []).append((on[1] / off[1], on[0] / off[0]))

    dist.destroy_process_group()
    recorder.shutdown()
    print(f"# bench_torch_capture: {platform.node()}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, torch {torch.__version__}, python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC; median of {a.repeats} interleaved blocks; "
          "min-based: min on / min off")
    print(f"load average before: {load0}, after: {os.getloadavg()[0]:.1f}")
    print(f"| {'what':38} | {'off cpu ns':>10} | {'on cpu ns':>10} | {'cpu cost':>9} | {'cpu on/off':>10} "
          f"| {'wall on/off':>11} |")
    print(f"|{'-' * 40}|{'-' * 12}|{'-' * 12}|{'-' * 11}|{'-' * 12}|{'-' * 13}|")
    for name, v in rows.items():
        off_c = statistics.median(c for _, c in v["off"])
        on_c = statistics.median(c for _, c in v["on"])
        wall = statistics.median(w for w, _ in v["on"]) / statistics.median(w for w, _ in v["off"])
        print(f"| {name:38} | {off_c:10.0f} | {on_c:10.0f} | {on_c - off_c:9.0f} | {on_c / off_c:10.3f} "
              f"| {wall:11.3f} |")
    print()
    print("Whole steps, per pair of blocks (on / off), median [quartiles]:")
    for name, rs in ratios.items():
        cpu = sorted(c for c, _ in rs)
        wall = sorted(w for _, w in rs)
        q = len(rs) // 4
        print(f"  {name:38} cpu {statistics.median(cpu):.3f} [{cpu[q]:.3f}, {cpu[-1 - q]:.3f}]   "
              f"wall {statistics.median(wall):.3f} [{wall[q]:.3f}, {wall[-1 - q]:.3f}]   ({len(rs)} pairs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
