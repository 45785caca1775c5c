"""The torch capture without torch: sequence numbers per process group, payload bytes, ranks, argument lookup,
the span attributes, the switches, the analysis's names for them, and the import hook on a stand-in ``torch``
whose APIs are all missing (the program must run, the error must be in the trace's resource)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from gputrace.analysis.collectives import is_collective_name
from gputrace.trace import torch_capture
from gputrace.trace.torch_capture import bookkeeping as B

ROOT = Path(__file__).resolve().parents[2]


class FakeTensor:
    def __init__(self, n: int, size: int, dtype: str = "torch.float32") -> None:
        self.n, self.size, self.dtype = n, size, dtype

    def numel(self) -> int:
        return self.n

    def element_size(self) -> int:
        return self.size


def test_sequence_numbers_count_each_group_on_its_own():
    seq = B.GroupSequences()
    got = [(g, seq.next(g)) for g in ["0", "0", "1", "0", "1", "2"]]
    assert got == [("0", 0), ("0", 1), ("1", 0), ("0", 2), ("1", 1), ("2", 0)]


def test_sequence_numbers_from_many_threads_are_a_permutation():
    seq = B.GroupSequences()
    out: list[int] = []
    lock = threading.Lock()

    def work():
        mine = [seq.next("g") for _ in range(500)]
        with lock:
            out.extend(mine)

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert sorted(out) == list(range(2000))


def test_payload_bytes_of_a_tensor_and_summed_over_a_list():
    assert B.payload(FakeTensor(1000, 4)) == (4000, "float32")
    assert B.payload([FakeTensor(10, 2, "torch.bfloat16"), FakeTensor(6, 2, "torch.bfloat16")]) == (32, "bfloat16")
    assert B.payload((FakeTensor(1, 4), FakeTensor(1, 8, "torch.float64"))) == (12, "mixed")


def test_payload_of_what_is_not_a_tensor_is_unknown():
    class Broken(FakeTensor):
        def numel(self) -> int:
            raise RuntimeError("meta tensor")

    assert B.payload(None) == (None, None)
    assert B.payload([]) == (None, None)
    assert B.payload([FakeTensor(1, 4), "x"]) == (None, None)
    assert B.payload({"a": 1}) == (None, None)
    assert B.payload(Broken(1, 4)) == (None, None)


def test_ranks_text_joins_runs():
    assert B.ranks_text([0, 1, 2, 3, 8, 10, 11]) == "0-3,8,10-11"
    assert B.ranks_text([5]) == "5"
    assert B.ranks_text([3, 1, 2, 2]) == "1-3"
    assert B.ranks_text(range(1024)) == "0-1023"
    assert B.ranks_text([]) == ""


def test_argspec_reads_keywords_positions_and_defaults():
    def all_reduce(tensor, op="SUM", group=None, async_op=False):  # torch.distributed's shape
        pass

    spec = B.ArgSpec(all_reduce)
    t = FakeTensor(1, 4)
    assert spec.get((t,), {}, "tensor") is t
    assert spec.get((t,), {"tensor": 5}, "tensor") == 5
    assert spec.get((t, "MAX", "g", True), {}, "group") == "g"
    assert spec.get((t, "MAX", "g", True), {}, "async_op") is True
    assert spec.get((t,), {"async_op": True}, "async_op") is True
    assert spec.get((t,), {}, "async_op") is False
    assert spec.get((t,), {}, "nothing") is None


def test_group_cache_describes_each_group_once():
    calls = []

    def describe(g):
        calls.append(g)
        return B.GroupInfo(str(len(calls)), "0-1", 2)

    cache = B.GroupCache(describe)
    a, b = object(), object()
    assert cache.get(a).name == "1"
    assert cache.get(a).name == "1"
    assert cache.get(b).name == "2"
    assert calls == [a, b]


def test_collective_attrs_names_the_call_and_its_group():
    g = B.GroupInfo("7", "0,2", 2, "nccl")
    a = B.collective_attrs("all_reduce", "ddp.bucket", g, 3, 4096, "float16", True)
    assert a == {B.OP: "all_reduce", B.API: "ddp.bucket", B.GROUP: "7", B.GROUP_RANKS: "0,2", B.GROUP_SIZE: 2,
                 B.SEQ: 3, B.ASYNC: True, B.BACKEND: "nccl", B.BYTES: 4096, B.DTYPE: "float16"}
    assert B.BACKEND not in B.collective_attrs("barrier", "x", B.GroupInfo("0", "0", 1), 0, None, None, False)
    assert B.BYTES not in B.collective_attrs("barrier", "x", g, 0, None, None, False)
    assert all(k.startswith("gputrace.collective.") for k in a)


def test_span_names_are_what_the_analysis_takes_for_collectives():
    names = {span for span, _ in B.COLLECTIVES.values()}
    six = {"all_reduce", "broadcast", "all_gather", "reduce_scatter", "all_to_all", "barrier"}
    assert six <= names
    assert all(is_collective_name(n) for n in six)
    # NCCL's own NVTX ranges (CUPTI's NVTX capture) are collectives too; its group calls and p2p are not.
    assert all(is_collective_name(n) for n in ("ncclAllReduce", "ncclBroadcast", "ncclAllGather",
                                                "ncclReduceScatter", "ncclAlltoAll"))
    assert not any(is_collective_name(n) for n in ("ncclGroupStart", "ncclGroupEnd", "ncclCommInitRank",
                                                    "forward", "backward", "optimizer.step", "ddp.comm_hook"))


def test_switches_from_the_environment():
    assert torch_capture.enabled({})
    assert not torch_capture.enabled({torch_capture.ENV: "0"})
    assert not torch_capture.enabled({torch_capture.ENV: " Off "})
    assert torch_capture.enabled({torch_capture.ENV: "1"})
    assert torch_capture.max_depth({}) == 0
    assert torch_capture.max_depth({torch_capture.ENV_DEPTH: "2"}) == 2
    assert torch_capture.max_depth({torch_capture.ENV_DEPTH: "-3"}) == 0
    assert torch_capture.max_depth({torch_capture.ENV_DEPTH: "x"}) == 0


def test_a_torch_without_the_expected_apis_never_breaks_the_program(tmp_path):
    """A stand-in ``torch`` package with none of the APIs: the import hook installs at its import, every part
    fails, the program goes on, and the trace's resource says what failed, on one line."""
    fake = tmp_path / "site" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("VALUE = 42\n")
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent("""
        import sys, json
        import torch
        from gputrace.trace.torch_capture import status
        print(json.dumps({"value": torch.VALUE, "loader": type(torch.__loader__).__name__,
                          "finders": [type(f).__name__ for f in sys.meta_path], "attrs": status.attributes()}))
    """))
    trace = tmp_path / "t.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(ROOT)])}
    env.pop(torch_capture.ENV, None)
    r = subprocess.run([sys.executable, "-m", "gputrace", "record", "--no-cuda-activity", "--trace", str(trace),
                        "--", sys.executable, str(prog)], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["value"] == 42
    assert out["loader"] == "SourceFileLoader"  # torch sees its own loader
    assert "TorchFinder" not in out["finders"]  # the finder left after torch's import
    err = out["attrs"]["gputrace.torch_capture.error"]
    assert "\n" not in err
    for part in ("modules", "backward", "optimizer", "dataloader", "collectives"):
        assert f"{part}: " in err
    assert out["attrs"]["gputrace.torch_capture"] == ""
    res = [json.loads(line)["resourceSpans"][0]["resource"]["attributes"] for line in trace.read_text().splitlines()]
    keys = {a["key"] for r in res for a in r}
    assert "gputrace.torch_capture.error" in keys


def test_no_torch_capture_leaves_torch_alone(tmp_path):
    fake = tmp_path / "site" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    prog = tmp_path / "prog.py"
    prog.write_text("import sys, torch\nfrom gputrace.trace import torch_capture as c\n"
                    "print(bool(c.installed), any(type(f).__name__ == 'TorchFinder' for f in sys.meta_path))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(ROOT)])}
    r = subprocess.run([sys.executable, "-m", "gputrace", "record", "--no-cuda-activity", "--no-torch-capture",
                        "--trace", str(tmp_path / "t.jsonl"), "--", sys.executable, str(prog)],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False"]
