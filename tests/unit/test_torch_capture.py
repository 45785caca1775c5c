"""The torch capture on the real torch: step ranges in-process, then whole programs written as a user would
(no gputrace import, no ranges) under ``gputrace record``: a 1-rank gloo group calling collectives, and a
2-rank DDP gloo CPU job under torchrun, whose bucket all-reduces must carry bytes and sequence numbers that
match across ranks, leave the training's numbers unchanged, and be what the collectives analysis reads."""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import socket
import subprocess
import sys
import textwrap
from collections import defaultdict
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from gputrace.trace import recorder, torch_capture  # noqa: E402
from gputrace.trace.sinks.memory import MemorySink  # noqa: E402
from gputrace.trace.torch_capture import bookkeeping as B  # noqa: E402

pytestmark = pytest.mark.slow  # (importing torch alone takes over a second)

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = ROOT / "tests" / "data" / "torch_programs"


@pytest.fixture
def captured():
    """torch with the capture installed and a recorder into memory; both undone afterwards."""
    assert not torch_capture.installed
    sink = MemorySink()
    recorder.configure(sinks=[sink], collect_gpu_info=False, cuda_activity=False)
    torch_capture.install()
    try:
        yield sink
    finally:
        torch_capture.uninstall()
        recorder.shutdown()


def _names(spans):
    return [s["name"] for s in sorted(spans, key=lambda s: s["start_ns"])]


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))

    def forward(self, x):
        return self.body(x)


def test_a_training_loop_shows_its_step_parts(captured):
    model, loss_fn = Net(), torch.nn.MSELoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.utils.data.TensorDataset(torch.randn(20, 4), torch.randn(20, 2))
    for x, y in torch.utils.data.DataLoader(data, batch_size=4):  # 5 steps
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    recorder.get_recorder().drain()
    spans = [s for s in captured.spans]
    names = _names(spans)
    step = ["dataloader.next", "forward", "forward", "backward", "optimizer.step"]
    assert names == step * 5 + ["dataloader.next"]  # the last next() ends the epoch
    fw = [s for s in spans if s["name"] == "forward"]
    assert [s["attributes"][B.MODULE] for s in fw] == ["Net", "MSELoss"] * 5  # outermost calls only
    assert {s["attributes"][B.OPTIMIZER] for s in spans if s["name"] == "optimizer.step"} == {"SGD"}
    last = max((s for s in spans if s["name"] == "dataloader.next"), key=lambda s: s["start_ns"])
    assert last["attributes"].get("gputrace.torch.end_of_data") is True and "status_code" not in last
    # After two backward calls the global hooks are gone: only the classes seen at depth 0 are wrapped.
    m = torch_capture.installed["modules"]
    assert m.narrowed and set(m.roots) == {Net, torch.nn.MSELoss}
    assert not torch.nn.modules.module._global_forward_pre_hooks
    assert "__call__" not in vars(torch.nn.Linear)
    # The model pickles without any gputrace object in it (torch.save(model) loads where gputrace is absent).
    assert b"gputrace" not in pickle.dumps(model)


def test_a_forward_that_raises_closes_its_range_and_the_next_is_recorded(captured):
    class Boom(torch.nn.Module):
        def forward(self, x):
            raise ValueError("bad input")

    model = Net()
    boom = Boom()
    for _ in range(2):  # during learning (global hooks), then after narrowing (class wrappers)
        with pytest.raises(ValueError, match="bad input"):
            boom(torch.ones(1))
        model(torch.ones(1, 4)).sum().backward()
    torch_capture.installed["modules"].narrow()
    with pytest.raises(ValueError, match="bad input"):
        boom(torch.ones(1))
    model(torch.ones(1, 4))
    recorder.get_recorder().drain()
    spans = sorted(captured.spans, key=lambda s: s["start_ns"])
    fw = [(s["attributes"][B.MODULE], s.get("status_code")) for s in spans if s["name"] == "forward"]
    assert fw == [("Boom", 2), ("Net", None), ("Boom", 2), ("Net", None), ("Boom", 2), ("Net", None)]
    # every range is a root (nothing was left open to parent the next one)
    assert all(s["parent_span_id"] is None for s in spans)


def test_no_narrowing_while_another_thread_is_inside_a_forward(captured):
    import threading

    inside, release = threading.Event(), threading.Event()

    class Slow(torch.nn.Module):
        def forward(self, x):
            inside.set()
            release.wait(10)
            return x

    t = threading.Thread(target=lambda: Slow()(torch.ones(1)), name="worker")
    t.start()
    assert inside.wait(10)
    model = Net()
    for _ in range(3):
        model(torch.ones(1, 4)).sum().backward()
    m = torch_capture.installed["modules"]
    assert not m.narrowed  # the worker's forward is still open: its post hook must stay
    release.set()
    t.join()
    model(torch.ones(1, 4))
    assert m.narrowed
    recorder.get_recorder().drain()
    slow = [s for s in captured.spans if s["name"] == "forward" and s["attributes"][B.MODULE] == "Slow"]
    assert len(slow) == 1 and slow[0]["attributes"]["gputrace.lane"] == "thread:worker"


def test_ddp_default_and_program_comm_hooks_one_rank(captured):
    """One rank, in this process: DDP's default all-reduce becomes our bucket hook (an ``all_reduce`` span per
    bucket, seq counting on); a hook the program registers runs inside ``ddp.comm_hook`` and its own
    ``dist.all_reduce`` is the collective span, whether registered before the first forward or after it (torch
    allows it until the first backward); a built-in hook registered first is left alone, one registered after
    the first forward (ALLREDUCE) is what our hook does anyway."""
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
    x = torch.ones(3, 4)
    try:
        plain, custom, builtin, late, late_builtin = (DDP(Net()) for _ in range(5))
        custom.register_comm_hook(None, default_hooks.allreduce_hook)
        builtin._register_builtin_comm_hook(dist.BuiltinCommHookType.ALLREDUCE)
        for m in (plain, custom, builtin):
            for _ in range(2):
                m(x).sum().backward()
        out = late(x)
        late.register_comm_hook(None, default_hooks.allreduce_hook)  # after the first forward
        out.sum().backward()
        late(x).sum().backward()
        out = late_builtin(x)
        late_builtin._register_builtin_comm_hook(dist.BuiltinCommHookType.ALLREDUCE)
        out.sum().backward()
        late_builtin(x).sum().backward()
        with pytest.raises(RuntimeError):  # a second registration fails as it does without gputrace
            late.register_comm_hook(None, default_hooks.allreduce_hook)
    finally:
        dist.destroy_process_group()
    recorder.get_recorder().drain()
    spans = sorted(captured.spans, key=lambda s: s["start_ns"])
    ar = [s for s in spans if s["name"] == "all_reduce"]
    assert [s["attributes"][B.API] for s in ar] == (["ddp.bucket"] * 2 + ["torch.distributed.all_reduce"] * 4
                                                    + ["ddp.bucket"] * 2)
    assert [s["attributes"][B.SEQ] for s in ar] == list(range(8))
    nbytes = sum(p.numel() * 4 for p in Net().parameters())
    assert all(s["attributes"][B.BYTES] == nbytes for s in ar)
    hooks = [s for s in spans if s["name"] == "ddp.comm_hook"]
    assert len(hooks) == 4 and {h["attributes"]["gputrace.collective.hook"] for h in hooks} == {"allreduce_hook"}
    assert all(any(h["start_ns"] <= s["start_ns"] and s["end_ns"] <= h["end_ns"] for h in hooks)
               for s in ar[2:6]), [(s["name"], s["start_ns"], s["end_ns"]) for s in hooks + ar[2:6]]
    # DDP's list holds the program's hooks only (torch also lists the refused second one, as without gputrace)
    assert [h for h, _ in late._comm_hooks][0] is default_hooks.allreduce_hook
    assert not plain._comm_hooks


def test_compiled_code_traces_none_of_the_capture(captured):
    """``torch.compile(fullgraph=True)`` over a captured module call, while the global hooks learn and after
    narrowing: Dynamo must not meet gputrace's code (a graph break would raise here)."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    x = torch.ones(2, 4)
    f = torch.compile(lambda x: model(x) * 2, backend="eager", fullgraph=True)
    assert torch.equal(f(x), model(x) * 2)
    for _ in range(3):
        model(x).sum().backward()
    assert torch_capture.installed["modules"].narrowed
    g = torch.compile(lambda x: model(x) * 3, backend="eager", fullgraph=True)
    assert torch.equal(g(x), model(x) * 3)


def test_uninstall_gives_torch_back(captured):
    torch_capture.uninstall()
    assert torch.autograd.backward.__module__ == "torch.autograd"
    assert not getattr(torch.utils.data.dataloader._BaseDataLoaderIter.__next__, "_gputrace", False)
    assert not getattr(torch.distributed.all_reduce, "_gputrace", False)
    assert not torch.nn.modules.module._global_forward_hooks


def _record(tmp_path: Path, argv: list[str], *flags: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    trace = tmp_path / "t.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    env.pop(torch_capture.ENV, None)
    r = subprocess.run([sys.executable, "-m", "gputrace", "record", "--no-cuda-activity", *flags, "--trace",
                        str(trace), "--", *argv], env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    spans = []
    for line in trace.read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            res = {a["key"]: next(iter(a["value"].values())) for a in rs["resource"]["attributes"]}
            for ss in rs["scopeSpans"]:
                for sp in ss["spans"]:
                    attrs = {a["key"]: next(iter(a["value"].values())) for a in sp.get("attributes", [])}
                    spans.append({"name": sp["name"], "start": int(sp["startTimeUnixNano"]),
                                  "end": int(sp["endTimeUnixNano"]), "attrs": attrs, "res": res,
                                  "error": sp.get("status", {}).get("code") == 2})
    return r, spans


def test_one_rank_gloo_collectives(tmp_path):
    prog = tmp_path / "coll.py"
    port = _free_port()
    prog.write_text(textwrap.dedent(f"""
        import torch, torch.distributed as dist
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:{port}", rank=0, world_size=1)
        t = torch.ones(1000)
        dist.all_reduce(t)
        dist.broadcast(torch.zeros(10, dtype=torch.float64), src=0)
        dist.all_reduce(t, async_op=True).wait()
        out = [torch.empty(3, dtype=torch.int32)]
        dist.all_gather(out, torch.ones(3, dtype=torch.int32))
        dist.all_gather_object([None], {{"a": 1}})
        dist.barrier()
        dist.destroy_process_group()
    """))
    _, spans = _record(tmp_path, [sys.executable, str(prog)])
    coll = sorted((s for s in spans if B.OP in s["attrs"]), key=lambda s: s["start"])
    got = [(s["name"], s["attrs"][B.API].rsplit(".", 1)[1], int(s["attrs"][B.SEQ]),
            int(s["attrs"][B.BYTES]) if B.BYTES in s["attrs"] else None, s["attrs"].get(B.DTYPE),
            s["attrs"][B.ASYNC], s["attrs"]["gputrace.collective.completion"]) for s in coll]
    assert got == [
        ("all_reduce", "all_reduce", 0, 4000, "float32", False, "sync"),
        ("broadcast", "broadcast", 1, 80, "float64", False, "sync"),
        ("all_reduce", "all_reduce", 2, 4000, "float32", True, "future"),
        ("all_gather", "all_gather", 3, 12, "int32", False, "sync"),
        ("all_gather", "all_gather_object", 4, None, None, False, "sync"),  # its inner all_gathers not counted
        ("barrier", "barrier", 5, None, None, False, "sync"),
    ]
    assert {(s["attrs"][B.GROUP_RANKS], int(s["attrs"][B.GROUP_SIZE]), s["attrs"][B.BACKEND]) for s in coll} == {
        ("0", 1, "gloo")}
    assert len({s["attrs"][B.GROUP] for s in coll}) == 1
    a = coll[2]  # the async one: from the call to its future's completion
    assert a["start"] <= int(a["attrs"][B.CALL_END]) <= a["end"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun() -> str:
    exe = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or shutil.which("torchrun")
    if exe is None:
        pytest.skip("torchrun not found")
    return exe


def _params_sums(stdout: str) -> dict[int, str]:
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"DDP rank=(\d+) .* params_sum=(\S+)", stdout)}


def test_ddp_gloo_two_ranks_under_torchrun(tmp_path):
    argv = [_torchrun(), "--standalone", "--nproc-per-node", "2", str(PROGRAMS / "ddp_train.py"),
            "--steps", "4", "--late-ms", "40"]
    r, spans = _record(tmp_path, argv)
    by_rank: dict[int, list[dict]] = defaultdict(list)
    for s in spans:
        if "gputrace.rank" in s["res"]:
            by_rank[int(s["res"]["gputrace.rank"])].append(s)
    assert set(by_rank) == {0, 1}
    buckets = {}
    for rank, ss in by_rank.items():
        ss.sort(key=lambda s: s["start"])
        names = [s["name"] for s in ss]
        for part in ("forward", "backward", "optimizer.step"):
            assert names.count(part) == (8 if part == "forward" else 4), (rank, part)  # model + loss per step
        ar = [s for s in ss if s["name"] == "all_reduce"]
        assert ar and all(s["attrs"][B.API] == "ddp.bucket" for s in ar)
        # each bucket all-reduce lies inside its step's backward
        bw = [s for s in ss if s["name"] == "backward"]
        assert all(any(b["start"] <= s["start"] and s["end"] <= b["end"] for b in bw) for s in ar)
        buckets[rank] = {(s["attrs"][B.GROUP], int(s["attrs"][B.SEQ])): (int(s["attrs"][B.BYTES]),
                                                                           s["attrs"][B.DTYPE]) for s in ar}
        assert sorted(k[1] for k in buckets[rank]) == list(range(len(ar)))
        assert {s["attrs"][B.GROUP_RANKS] for s in ar} == {"0-1"}
    assert buckets[0] == buckets[1]  # the n-th all-reduce of the group has the same size on both ranks
    assert len({b for b, _ in buckets[0].values()}) >= 2  # the small bucket cap made several buckets
    # The collectives analysis reads them: every all-reduce matched, rank 1 (late by 40 ms) the straggler.
    from gputrace.analysis.collectives import collectives
    from gputrace.timeline.load import read_any

    c = collectives(read_any(tmp_path / "t.jsonl"))
    assert [x["calls"] for x in c["ranks"]] == [len(buckets[0])] * 2
    assert c["matched"] == len(buckets[0]) and {m["how"] for m in c["collectives"]} == {"sequence"}
    # From the third step on (in the second, DDP's rebuilt-bucket broadcast, in C++ in forward, takes the wait):
    late = [m for m in c["collectives"] if m["index"] >= 3]
    assert late and all(m["last_rank"] == 1 and m["wait_ns"] > 20e6 for m in late)
    if c["clock"]["ok"]:  # (a loaded box can make the ranks' observed ends differ by more than its slack)
        assert c["stragglers"][0]["rank"] == 1
        assert c["stragglers"][0]["median_wait_ns"] > 30e6
    # Same training result without the capture (DDP's own all-reduce): the hook divides and sums as DDP does.
    r2, spans2 = _record(tmp_path, argv, "--no-torch-capture")
    assert not [s for s in spans2 if s["name"] in ("all_reduce", "forward", "backward")]
    assert _params_sums(r.stdout) == _params_sums(r2.stdout) and len(_params_sums(r.stdout)) == 2
