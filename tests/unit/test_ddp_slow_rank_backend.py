"""benchmarks/real_programs/ddp_slow_rank.py ``--backend nccl`` without torch: on a stand-in ``torch`` it refuses,
before any process group is made, when there are fewer GPUs than ranks, and says how many of each it saw; gloo
and NCCL are the only backends it takes. (The NCCL run itself needs two GPUs: device-runs/pending/nccl_call.sh.)"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest

PROGS = Path(__file__).resolve().parents[2] / "benchmarks" / "real_programs"


@pytest.fixture
def ddp(monkeypatch):
    inits: list[str] = []
    gpus = {"n": 0}
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(is_available=lambda: gpus["n"] > 0, device_count=lambda: gpus["n"],
                                       nvtx=types.SimpleNamespace())
    dist = types.ModuleType("torch.distributed")
    dist.init_process_group = lambda backend: inits.append(backend) or (_ for _ in ()).throw(SystemExit(9))
    torch.distributed = dist
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch.distributed", dist)
    monkeypatch.delitem(sys.modules, "_ranges", raising=False)
    monkeypatch.syspath_prepend(str(PROGS))
    spec = importlib.util.spec_from_file_location("ddp_slow_rank_under_test", PROGS / "ddp_slow_rank.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, inits, gpus


def test_nccl_needs_one_gpu_per_rank(ddp, monkeypatch, capsys):
    mod, inits, gpus = ddp
    monkeypatch.setenv("WORLD_SIZE", "2")
    gpus["n"] = 1
    assert mod.main(["--backend", "nccl"]) == 2
    assert "2 ranks, 1 GPU(s) visible" in capsys.readouterr().err and inits == []
    gpus["n"] = 0
    assert mod.main(["--backend", "nccl"]) == 2 and inits == []
    gpus["n"] = 2  # enough GPUs: it goes on to make the NCCL process group
    with pytest.raises(SystemExit):
        mod.main(["--backend", "nccl"])
    assert inits == ["nccl"]


def test_gloo_is_the_default_and_other_backends_are_refused(ddp, monkeypatch):
    mod, inits, _ = ddp
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(SystemExit):
        mod.main([])
    assert inits == ["gloo"]
    with pytest.raises(SystemExit) as e:
        mod.main(["--backend", "mpi"])
    assert e.value.code == 2 and inits == ["gloo"]
