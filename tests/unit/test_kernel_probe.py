"""benchmarks/real_programs/kernel_probe.py's pure parts, without torch or CUPTI: argument handling, the
per-process median table and its PROBE line from fake kernel records, the parent's parsing and comparison
table, and the one-line exit 2 when torch, CUDA or cupti-python is missing. The probe itself runs on a GPU."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "real_programs" / "kernel_probe.py"


@pytest.fixture(scope="module")
def kp():
    spec = importlib.util.spec_from_file_location("kernel_probe_under_test", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


NLL = "nll_loss_forward_reduce_cuda_kernel_2d"


def _records():
    recs = []
    for i in range(5):  # durations 11500..11540: median 11520
        recs.append((NLL, 1000 * i, 1000 * i + 11500 + 10 * i))
    for d in (3000, 1000, 2000):  # median 2000, total 6000
        recs.append(("gemm_kernel", 0, d))
    return recs


def test_parse_args_defaults_and_modes(kp):
    a = kp.parse_args([])
    assert (a.kinds, a.modes, a.steps, a.warmup, a.repeats) == ("kernel", None, 200, 5, 1)
    a = kp.parse_args(["--modes", "kernel, record,kineto", "--repeats", "2"])
    assert a.modes == ["kernel", "record", "kineto"] and a.repeats == 2
    assert kp.plan(a.modes, 3) == ["kernel", "record", "kineto", "kineto", "record", "kernel",
                                   "kernel", "record", "kineto"]


@pytest.mark.parametrize("argv", [["--modes", "kernel,bogus"], ["--modes", ","], ["--kinds", "bogus"],
                                  ["--kinds", "kernel", "--modes", "kernel"], ["--repeats", "0"],
                                  ["--steps", "0"]])
def test_parse_args_refusals(kp, argv):
    with pytest.raises(SystemExit) as e:
        kp.parse_args(argv)
    assert e.value.code == 2


def test_kind_sets_match_the_sources(kp):
    assert all(s[0] == "CONCURRENT_KERNEL" for s in kp.KIND_SETS.values())
    assert kp.KIND_SETS["kernel"] == ("CONCURRENT_KERNEL",)
    assert set(kp.KIND_SETS["kineto"]) == {"CONCURRENT_KERNEL", "MEMCPY", "MEMSET", "EXTERNAL_CORRELATION",
                                           "RUNTIME", "DRIVER", "OVERHEAD"}
    assert set(kp.KIND_SETS["kineto_sync"]) - set(kp.KIND_SETS["kineto"]) == {"SYNCHRONIZATION"}
    src = (ROOT / "gputrace" / "trace" / "cupti_collect.py").read_text()
    for k in kp.KIND_SETS["record"]:  # every kind of the record set is one gputrace's collector enables
        assert f"AK.{k}" in src


def test_medians_and_probe_lines(kp):
    table = kp.medians(_records())
    assert table[NLL] == (11520, 5, sum(11500 + 10 * i for i in range(5)))
    assert table["gemm_kernel"] == (2000, 3, 6000)
    assert kp.nll_of(table) == (11520, 5)
    lines = kp.probe_lines("record", 5, table, ["CONCURRENT_KERNEL", "MEMCPY"], {"CONCURRENT_KERNEL": 8})
    assert lines[0] == "PROBE kinds=record steps=5 kernels=8 nll_median_ns=11520 nll_n=5"
    assert lines[2].startswith("kernel median_ns=11520 n=5 ") and lines[2].endswith(f"name={NLL}")
    assert lines[3] == "kernel median_ns=2000 n=3 total_ns=6000 name=gemm_kernel"
    back = kp.parse_probe("noise\n" + "\n".join(lines))
    assert back["kinds"] == "record" and back["nll_median_ns"] == 11520 and back["table"] == table


def test_no_nll_and_long_names(kp):
    table = kp.medians([("x" * 100, 0, 7)])
    (name,) = table
    assert len(name) <= kp.NAME_WIDTH
    assert kp.nll_of(table) == (None, 0)
    assert "nll_median_ns=nan nll_n=0" in kp.probe_lines("kernel", 1, table)[0]
    mangled = "_ZN2at6native" + "x" * 80 + "nll_loss_forward_reduce_cuda_kernel_2dIffEEvPT_"
    (name,) = kp.medians([(mangled, 0, 12000)])
    assert name.startswith("nll_loss_forward") and len(name) <= kp.NAME_WIDTH


def test_compare_table_and_ratio(kp):
    def run(kinds, nll, gemm):
        return {"kinds": kinds, "nll_median_ns": nll, "table": {NLL: (nll, 10, nll * 10),
                                                                "gemm_kernel": (gemm, 10, gemm * 10)}}

    res = [run("kernel", 11500, 2000), run("kineto", 12100, 2010), run("kineto", 12300, 2030),
           run("kernel", 11700, 2000)]
    out = kp.compare(res, ["kernel", "kineto"])
    assert out[0].split() == ["kernel", "kernel", "kineto"]
    gemm = next(line for line in out if line.startswith("gemm_kernel"))
    assert gemm.split()[1:] == ["2000", "2020"]
    assert out.index(gemm) > 1  # the nll kernel has more total time: listed first
    nll = {line.split()[1]: line for line in out if line.startswith("NLL ")}
    assert "median_ns=11600 ratio_to_kernel=1.0000 runs=2" in nll["kinds=kernel"]
    assert "median_ns=12200 ratio_to_kernel=1.0517 runs=2" in nll["kinds=kineto"]
    out = kp.compare(res, ["kernel", "record"])  # a set without runs
    assert "NLL kinds=record median_ns=nan runs=0" in out


def test_cbid_lookup(kp):
    class E:
        def __init__(self, name):
            self.name = name

    enum = [E("CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020"), E("cuCtxGetCurrent"), E("cuCtxGetCurrentX")]
    assert kp.cbid(enum, "cudaGetDevice_v3020") is enum[0]
    assert kp.cbid(enum, "cuCtxGetCurrent") is enum[1]
    assert kp.cbid(enum, "cuKernelGetAttribute") is None


def test_missing_torch_cuda_cupti(kp, monkeypatch):
    fake = types.ModuleType("torch")
    fake.cuda = types.SimpleNamespace(is_available=lambda: False)
    monkeypatch.setitem(sys.modules, "torch", fake)
    assert "no CUDA device" in kp.missing()
    fake.cuda = types.SimpleNamespace(is_available=lambda: True)
    monkeypatch.setitem(sys.modules, "cupti", None)  # import cupti fails
    assert "cupti-python not importable" in kp.missing()
    monkeypatch.setitem(sys.modules, "torch", None)
    assert kp.missing().startswith("torch not importable")


# (each case starts the script in a subprocess that imports torch where it is installed: 3-4 s here; the second
# runs in the whole suite)
@pytest.mark.parametrize("argv", [[], pytest.param(["--modes", "kernel,record,kineto", "--repeats", "2"],
                                                   marks=pytest.mark.slow)])
def test_exit_2_with_one_line_without_cuda(argv):
    try:
        import torch

        if torch.cuda.is_available():
            pytest.skip("a CUDA device is here")
    except ImportError:
        pass
    p = subprocess.run([sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    lines = (p.stdout + p.stderr).strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kernel_probe: missing: ")


def test_probe_with_a_stand_in_cupti(kp, monkeypatch):
    """The consumer's calls: register, enable each kind of the set (a kind this cupti-python lacks noted, not
    enabled), Kineto's API switches, then flush and disable; kernel records kept, every record counted."""
    import enum

    calls = []

    class AK(enum.IntEnum):
        CONCURRENT_KERNEL = 10
        MEMCPY = 1
        MEMSET = 2
        EXTERNAL_CORRELATION = 3
        RUNTIME = 4
        DRIVER = 5  # no OVERHEAD: noted

    class Rt(enum.IntEnum):
        cudaGetDevice_v3020 = 7

    class Dr(enum.IntEnum):
        cuCtxGetCurrent = 8
        cuKernelGetAttribute = 9
        cuDevicePrimaryCtxGetState = 11

    c = types.SimpleNamespace(
        ActivityKind=AK, RuntimeApiTraceCbid=Rt, DriverApiTraceCbid=Dr,
        activity_register_callbacks=lambda req, done: calls.append(("register", req())),
        activity_enable=lambda k: calls.append(("enable", k.name)),
        activity_disable=lambda k: calls.append(("disable", k.name)),
        activity_enable_runtime_api=lambda cb, on: calls.append(("rt", cb, on)),
        activity_enable_driver_api=lambda cb, on: calls.append(("dr", cb, on)),
        activity_flush_all=lambda flag: calls.append(("flush", flag)))
    monkeypatch.setitem(sys.modules, "cupti", types.SimpleNamespace(cupti=c))
    p = kp.Probe("kineto")
    p.start()
    assert calls[0] == ("register", (4 << 20, 0))
    assert [x[1] for x in calls if x[0] == "enable"] == ["CONCURRENT_KERNEL", "MEMCPY", "MEMSET",
                                                        "EXTERNAL_CORRELATION", "RUNTIME", "DRIVER"]
    assert ("rt", 7, 0) in calls and ("dr", 8, 0) in calls and ("dr", 9, 0) in calls and ("dr", 11, 0) in calls
    assert any("OVERHEAD" in n for n in p.notes)
    rec = types.SimpleNamespace
    p._completed([rec(kind=AK.CONCURRENT_KERNEL, name="k", start=5, end=9), rec(kind=AK.RUNTIME)])
    p.stop()
    assert p.kernels == [("k", 5, 9)] and p.kind_counts() == {"CONCURRENT_KERNEL": 1, "RUNTIME": 1}
    assert calls[-7] == ("flush", 1) and calls[-1] == ("disable", "DRIVER")


def test_mode_suffixes(kp):
    assert kp.split_mode("record") == ("record", False, False)
    assert kp.split_mode("record+early+inject") == ("record", True, True)
    assert kp.split_mode("kineto+inject") == ("kineto", False, True)
    for bad in ("record+late", "bogus+early", "record+early+early", "+early"):
        assert kp.split_mode(bad) is None
    a = kp.parse_args(["--modes", "record,record+early"])
    assert a.modes == ["record", "record+early"]
    with pytest.raises(SystemExit):
        kp.parse_args(["--kinds", "record+late"])


def test_compare_without_kernel_set_uses_first_mode(kp):
    def run(kinds, nll):
        return {"kinds": kinds, "nll_median_ns": nll, "table": {"nll_loss_forward_x": (nll, 10, nll * 10)}}

    out = kp.compare([run("record", 11500.0), run("record+early", 11776.0)], ["record", "record+early"])
    nll = {ln.split()[1]: ln for ln in out if ln.startswith("NLL ")}
    assert "ratio_to_kernel=1.0000" in nll["kinds=record"]
    assert "ratio_to_kernel=1.0240" in nll["kinds=record+early"]
