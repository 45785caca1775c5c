"""benchmarks/real_programs/train_step.py ``--toggle-profiler`` without torch: the program runs on a stand-in
``torch`` (every tensor op a no-op, ``torch.profiler.profile`` a logging fake), so what is checked is the wiring:
the argparse refusals, one profiler session per 'on' block opened and closed between steps, the TOGGLE line, and
the refusal under ``gputrace record`` with CUDA activity collecting. The profiler's real cost is measured on a GPU
(bench_record_overhead.py --inprocess-profiler)."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROGS = ROOT / "benchmarks" / "real_programs"


class Anything:
    """A tensor / module / optimizer stand-in: every attribute, call and index gives another one."""

    def __init__(self, *a, **k):
        pass

    def __getattr__(self, name):
        return Anything()

    def __call__(self, *a, **k):
        return Anything()

    def __getitem__(self, i):
        return Anything()

    def __len__(self):
        return 8

    def __float__(self):
        return 0.5


class Activity:
    def __init__(self, name):
        self.name = name


def _fake_torch(log):
    class Profile:
        def __init__(self, activities):
            self.activities = activities

        def __enter__(self):
            log.append("enter")
            return self

        def __exit__(self, *exc):
            log.append("exit")
            return False

    class Nothing:
        def __init__(self, *a, **k):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    class DataLoader:
        def __init__(self, data, **k):
            self.data = data

        def __iter__(self):
            return (self.data[i] for i in range(len(self.data)))

    def step_marker(*a, **k):
        log.append("step")
        return Anything()

    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(is_available=lambda: False, synchronize=lambda: log.append("sync"))
    torch.profiler = types.SimpleNamespace(profile=Profile, record_function=Nothing,
                                           ProfilerActivity=types.SimpleNamespace(CPU=Activity("CPU"),
                                                                                  CUDA=Activity("CUDA")))
    torch.nn = types.SimpleNamespace(Module=object, Linear=Anything, GELU=Anything, Sequential=lambda *a: Anything(),
                                     functional=types.SimpleNamespace(cross_entropy=step_marker))
    torch.optim = types.SimpleNamespace(AdamW=lambda *a, **k: Anything())
    for name in ("set_num_threads", "manual_seed", "randn", "randint", "zeros", "Generator"):
        setattr(torch, name, lambda *a, **k: Anything())
    torch.Tensor = Anything
    utils = types.ModuleType("torch.utils")
    data = types.ModuleType("torch.utils.data")
    data.Dataset, data.DataLoader = object, DataLoader
    torch.utils = utils
    utils.data = data
    return {"torch": torch, "torch.utils": utils, "torch.utils.data": data}


@pytest.fixture
def train_step(monkeypatch):
    log: list[str] = []
    for name, mod in _fake_torch(log).items():
        monkeypatch.setitem(sys.modules, name, mod)
    for name in ("_toggle", "_ranges"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.syspath_prepend(str(PROGS))
    spec = importlib.util.spec_from_file_location("train_step_under_test", PROGS / "train_step.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.log = log
    return mod


def test_toggle_profiler_is_refused_with_profile_and_without_blocks(train_step, capsys):
    with pytest.raises(SystemExit) as e:
        train_step.main(["--toggle-blocks", "5", "--toggle-profiler", "--profile", "k.json"])
    assert e.value.code == 2 and "--toggle-profiler and --profile both run torch.profiler" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        train_step.main(["--toggle-profiler"])
    assert e.value.code == 2 and "--toggle-profiler needs --toggle-blocks K" in capsys.readouterr().err


def test_toggle_profiler_opens_a_session_per_on_block_between_steps(train_step, capsys):
    rc = train_step.main(["--steps", "40", "--warmup", "2", "--toggle-blocks", "5", "--toggle-profiler",
                          "--workers", "0", "--ranges", "none", "--toggle-seed", "3"])
    out = capsys.readouterr().out
    assert rc == 0
    states = train_step._toggle.plan(4, 3)
    log = train_step.log
    assert log[:2] == ["step", "step"]  # warm-up steps: no profiler
    # each 'on' block: a session opened before its first step and closed after its last, none in 'off' blocks
    want = ["step", "step"]
    for on in states:
        want += (["enter"] + ["step"] * 5 + ["exit"]) if on else ["step"] * 5
    assert log == want
    assert f"toggle: torch.profiler sessions={sum(states)} " in out and "(activities CPU; nothing exported)" in out
    got = train_step._toggle.parse(out)
    assert got is not None and got["pairs"] == 4 and len(got["pair_ms"]) == 4
    assert "TOGGLE unavailable" not in out and "STEPS median_ms=" in out


def test_toggle_profiler_refuses_under_record_with_cuda_activity_collecting(train_step, monkeypatch, capsys):
    monkeypatch.setattr(train_step._toggle, "find_control", lambda: object())
    rc = train_step.main(["--steps", "20", "--warmup", "1", "--toggle-blocks", "5", "--toggle-profiler",
                          "--workers", "0", "--ranges", "none"])
    out = capsys.readouterr().out
    assert rc == 3 and "TOGGLE refused: --toggle-profiler under gputrace record" in out
    assert "enter" not in train_step.log and "TOGGLE on_median_ms" not in out
