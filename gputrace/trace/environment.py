"""The run environment as a flat ``{str: str | int}`` dict (resource attributes, A/B environment checks).

``collect_environment()`` gathers host, CPU, memory, Python, package versions, git commit and GPUs.
GPU facts come from ``nvidia-smi`` (one query, 5 s timeout) or, when CuPy is already imported (or
``use_cupy=True``), from the CUDA runtime; CuPy is never imported otherwise. Nothing here raises for a
missing tool: absent facts are simply left out. Results are cached per process (``refresh=True`` to redo).
Any thread.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from functools import lru_cache
from importlib import metadata

_PACKAGES = ("gputrace", "numpy", "cupy-cuda13x", "cupy-cuda12x", "nvtx", "opentelemetry-sdk", "py_arkworks_bls12381")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _mem_total_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


_SECTION = re.compile(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", re.M | re.S)
_NAME = re.compile(r"^name\s*=\s*[\"']([^\"']+)[\"']", re.M)


def _is_gputrace_checkout(root: str) -> bool:
    """True when ``root`` holds gputrace's own source: a ``pyproject.toml`` whose ``[project] name``
    is ``gputrace`` (``tomllib`` on Python 3.11+; on 3.10, which has none, the ``name`` line of the
    ``[project]`` table)."""
    try:
        with open(os.path.join(root, "pyproject.toml"), "rb") as f:
            data = f.read(1 << 20)
    except OSError:
        return False
    if sys.version_info >= (3, 11):
        import tomllib

        try:
            return tomllib.loads(data.decode()).get("project", {}).get("name") == "gputrace"
        except ValueError:  # not UTF-8 or not TOML (tomllib.TOMLDecodeError)
            return False
    section = _SECTION.search(data.decode("utf-8", "replace"))
    name = _NAME.search(section.group(1)) if section else None
    return name is not None and name.group(1) == "gputrace"


def _git_commit(cwd: str | None = None) -> str | None:
    """HEAD of the git checkout holding gputrace's source at ``cwd``; None when git is missing, ``cwd``
    is not in a repository, or the enclosing repository is not gputrace's own (the package installed
    inside some other project's tree must not record that project's commit as gputrace's)."""
    if shutil.which("git") is None:
        return None
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--show-toplevel", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or len(lines) != 2 or len(lines[1]) < 7 or not _is_gputrace_checkout(lines[0]):
        return None
    return lines[1]


def gpus_from_nvidia_smi(timeout_s: float = 5.0) -> list[dict]:
    """One dict per GPU (index, model, uuid, driver, memory_bytes) from nvidia-smi; [] without it."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run(
            [exe, "--query-gpu=index,name,uuid,driver_version,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=timeout_s, check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = []
    for line in out.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 5 or not parts[0].isdigit():
            continue
        g = {"index": int(parts[0]), "model": parts[1], "uuid": parts[2], "driver": parts[3]}
        try:
            g["memory_bytes"] = int(float(parts[4]) * 1024 * 1024)
        except ValueError:
            pass
        gpus.append(g)
    return gpus


def gpus_from_cupy() -> list[dict]:
    """One dict per GPU from the CUDA runtime through CuPy (imports cupy); [] if unavailable."""
    try:
        import cupy

        rt = cupy.cuda.runtime
        n = rt.getDeviceCount()
        driver = rt.driverGetVersion()
    except Exception:  # noqa: BLE001 no usable CUDA runtime: no GPU attributes
        return []
    gpus = []
    for i in range(n):
        try:
            p = rt.getDeviceProperties(i)
        except Exception:  # noqa: BLE001 a device that cannot be queried is left out
            continue
        name = p.get("name", b"")
        g = {
            "index": i,
            "model": name.decode(errors="replace") if isinstance(name, bytes) else str(name),
            "driver": f"cuda {driver // 1000}.{(driver % 1000) // 10}",
            "memory_bytes": int(p.get("totalGlobalMem", 0)),
        }
        uuid = p.get("uuid")
        if isinstance(uuid, (bytes, bytearray)) and len(uuid) == 16:
            h = uuid.hex()
            g["uuid"] = f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
        gpus.append(g)
    return gpus


def gpu_info(use_cupy: bool | None = None) -> list[dict]:
    """GPUs of this machine: nvidia-smi first, then CuPy when already imported or ``use_cupy``."""
    gpus = gpus_from_nvidia_smi()
    if not gpus and (use_cupy or (use_cupy is None and "cupy" in sys.modules)):
        gpus = gpus_from_cupy()
    return gpus


@lru_cache(maxsize=4)
def _collect(use_cupy: bool | None) -> tuple:
    env: dict[str, str | int] = {
        "host.name": socket.gethostname(),
        "os": platform.platform(),
        "cpu.model": _cpu_model(),
        "cpu.count": os.cpu_count() or 0,
        "python.version": platform.python_version(),
        "python.implementation": platform.python_implementation(),
    }
    mem = _mem_total_bytes()
    if mem is not None:
        env["memory.total_bytes"] = mem
    for pkg in _PACKAGES:
        try:
            env[f"package.{pkg}"] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    sha = _git_commit(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    if sha:
        env["git.commit"] = sha
    gpus = gpu_info(use_cupy)
    env["gpu.count"] = len(gpus)
    for g in gpus:
        i = g["index"]
        for k in ("model", "uuid", "driver", "memory_bytes"):
            if k in g:
                env[f"gpu.{i}.{k}"] = g[k]
    return tuple(env.items())


def collect_environment(use_cupy: bool | None = None, refresh: bool = False) -> dict[str, str | int]:
    """Flat dict describing this machine and software (see module doc). Cached; never raises."""
    if refresh:
        _collect.cache_clear()
    return dict(_collect(use_cupy))


def environment_diff(a: dict, b: dict, ignore=("host.name",)) -> dict[str, tuple]:
    """Keys whose values differ between two environments: ``{key: (a_value, b_value)}`` (None = absent)."""
    keys = (set(a) | set(b)) - set(ignore)
    return {k: (a.get(k), b.get(k)) for k in sorted(keys) if a.get(k) != b.get(k)}
