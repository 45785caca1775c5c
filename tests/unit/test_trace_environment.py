"""Run environment collection: flat str -> str|int dict, no cupy import, nvidia-smi parsing, diffs."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from gputrace.trace import environment as envmod


@pytest.fixture(autouse=True)
def _fresh_cache():
    envmod._collect.cache_clear()
    yield
    envmod._collect.cache_clear()  # the next caller recomputes with the real PATH


def test_flat_dict_of_str_and_int():
    env = envmod.collect_environment(refresh=True)
    assert env["python.version"].count(".") == 2
    assert env["cpu.count"] >= 1 and env["host.name"]
    for k, v in env.items():
        assert isinstance(k, str) and type(v) in (str, int), (k, v)
    assert "package.numpy" in env


def test_does_not_import_cupy():
    code = "import sys; from gputrace.trace.environment import collect_environment as c; c(); print('cupy' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "False", r.stderr


def test_nvidia_smi_output_parsed(tmp_path, monkeypatch):
    fake = tmp_path / "nvidia-smi"
    fake.write_text(
        "#!/bin/sh\n"
        "echo '0, NVIDIA H200, GPU-11111111-2222-3333-4444-555555555555, 580.65.06, 143771'\n"
        "echo '1, NVIDIA H200, GPU-aaaaaaaa-2222-3333-4444-555555555555, 580.65.06, 143771'\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    gpus = envmod.gpus_from_nvidia_smi()
    assert [g["index"] for g in gpus] == [0, 1]
    assert gpus[0]["model"] == "NVIDIA H200" and gpus[1]["uuid"].startswith("GPU-aaaa")
    assert gpus[0]["driver"] == "580.65.06" and gpus[0]["memory_bytes"] == 143771 * 1024 * 1024
    env = envmod.collect_environment(refresh=True)
    assert env["gpu.count"] == 2 and env["gpu.1.model"] == "NVIDIA H200"


def test_resource_carries_gpu_facts(tmp_path, monkeypatch):
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho '0, NVIDIA H200, GPU-1234, 580.1, 1000'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    envmod.collect_environment(refresh=True)
    from gputrace.trace.resource import build_resource

    res = build_resource("svc", "r1")
    assert res["gputrace.gpu.0.model"] == "NVIDIA H200" and res["gputrace.gpu.0.uuid"] == "GPU-1234"
    assert res["gputrace.gpu.0.driver"] == "580.1"


def test_environment_diff():
    a = {"host.name": "a", "gpu.0.driver": "580", "python.version": "3.11.7"}
    b = {"host.name": "b", "gpu.0.driver": "575", "cpu.model": "EPYC"}
    d = envmod.environment_diff(a, b)
    assert d == {"cpu.model": (None, "EPYC"), "gpu.0.driver": ("580", "575"), "python.version": ("3.11.7", None)}


def test_broken_nvidia_smi_is_ignored(tmp_path, monkeypatch):
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert envmod.gpus_from_nvidia_smi() == []
