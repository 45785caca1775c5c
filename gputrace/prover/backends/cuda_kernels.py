"""Build, cache and launch the CUDA kernels in ``gputrace/prover/kernels`` (imports CuPy).

Each module (``ntt``, ``msm``) is compiled once per device and process through ``cupy.RawModule``
(NVRTC, for the device's own architecture, e.g. sm_90 on an H200; CuPy also keeps compiled binaries in
its on-disk kernel cache, so a second process on the same machine does not compile again). Compiling
both modules took 2.4 s and 3.1 s on the H200 machine. ``GPUTRACE_CUBIN_DIR`` may hold
``<module>-<source hash>-sm<cc>.cubin`` files built with ``nvcc -cubin`` (for a machine without
NVRTC); a stale cubin never matches the hash of the current sources.

Errors: every CUDA failure surfaces as ``BackendError`` naming the failing call; an out-of-memory
says how many bytes were asked for and how many were free. Thread-safe: the module cache is locked.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import cupy
import numpy as np

from .base import BackendError

KERNEL_DIR = Path(__file__).resolve().parent.parent / "kernels"
#: module name -> (source file, extra compile options). ``msm_inline`` is the A/B variant with the Fq
#: multiplication inlined into the point formulas (see field.cuh).
MODULES = {"ntt": ("ntt.cu", ()), "msm": ("msm.cu", ()), "msm_inline": ("msm.cu", ("-DGPUTRACE_FQ_MUL_INLINE",)),
           "witness": ("witness.cu", ())}
#: nvcc/NVRTC options (also what cuda_build passes to nvcc).
OPTIONS = ("-std=c++17",)

_cache: dict[tuple[str, int], cupy.RawModule] = {}
_kernels: dict[tuple[str, int, str], object] = {}
_lock = threading.Lock()


def sources(name: str) -> str:
    """The module's source text (the .cu file; headers are found through -I)."""
    return (KERNEL_DIR / MODULES[name][0]).read_text()


def source_hash(name: str) -> str:
    """sha256 over the module's .cu, every .cuh and the options (names prebuilt cubins)."""
    h = hashlib.sha256()
    h.update(sources(name).encode())
    for p in sorted(KERNEL_DIR.glob("*.cuh")):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    h.update(" ".join(OPTIONS + MODULES[name][1]).encode())
    return h.hexdigest()[:16]


def cubin_name(name: str, cc: str) -> str:
    return f"{name}-{source_hash(name)}-sm{cc}.cubin"


def _compute_capability(device: int) -> str:
    return cupy.cuda.Device(device).compute_capability


def module(name: str, device: int) -> cupy.RawModule:
    """The compiled module ``name`` on ``device`` (compiled or loaded on first use). Raises BackendError."""
    key = (name, device)
    mod = _cache.get(key)
    if mod is not None:
        return mod
    with _lock:
        mod = _cache.get(key)
        if mod is not None:
            return mod
        with cupy.cuda.Device(device):
            cc = _compute_capability(device)
            pre = os.environ.get("GPUTRACE_CUBIN_DIR")
            path = Path(pre) / cubin_name(name, cc) if pre else None
            try:
                if path is not None and path.is_file():
                    mod = cupy.RawModule(path=str(path))
                else:
                    mod = cupy.RawModule(code=sources(name), options=(*OPTIONS, *MODULES[name][1], f"-I{KERNEL_DIR}"))
                mod.compile()
            except Exception as exc:  # CompileException, CUDADriverError
                raise BackendError(f"building CUDA module {name!r} for device {device} (sm_{cc}): {exc}") from exc
        _cache[key] = mod
        return mod


def kernel(name: str, device: int, fn: str):
    """The kernel function ``fn`` of module ``name`` on ``device`` (cached)."""
    key = (name, device, fn)
    k = _kernels.get(key)
    if k is None:
        try:
            k = module(name, device).get_function(fn)
        except BackendError:
            raise
        except Exception as exc:
            raise BackendError(f"loading kernel {fn} from module {name!r} on device {device}: {exc}") from exc
        _kernels[key] = k
    return k


def kernel_names(name: str) -> list[str]:
    """The extern "C" kernels of module ``name``, including those a ``MSM_KERNELS(prefix, type)`` line makes."""
    import re

    src = sources(name)
    names = [fn for fn in re.findall(r'extern "C" __global__ void (\w+)\(', src)]
    for prefix in re.findall(r'^MSM_KERNELS\((\w*),', src, flags=re.M):
        if prefix and MODULES[name][1]:  # the G2 instances are left out of the option builds (msm.cu says why)
            continue
        names += [prefix + fn for fn in ("sum_affine_chunks", "sum_xyzz_chunks", "bucket_reduce", "msm_horner")]
    return names


def kernel_report(device: int, modules=("ntt", "msm", "witness")) -> list[dict]:
    """Registers, local (stack/spill) bytes and max threads per block of every kernel, for the docs."""
    out = []
    for name in modules:
        for fn in kernel_names(name):
            k = kernel(name, device, fn)
            out.append(dict(module=name, kernel=fn, registers=int(k.num_regs),
                            local_bytes=int(k.local_size_bytes), max_threads=int(k.max_threads_per_block)))
    return out


def launch(k, call: str, n: int, args: tuple, stream, *, block: int = 256, shared: int = 0,
           grid: int | None = None) -> None:
    """Launch ``k`` over ``n`` threads (``grid`` blocks if given) on ``stream``; BackendError names ``call``."""
    if grid is None:
        if n <= 0:
            return
        block = min(block, int(k.max_threads_per_block))
        grid = (n + block - 1) // block
    try:
        k((grid,), (block,), args, stream=stream, shared_mem=shared)
    except Exception as exc:
        raise BackendError(f"{call}: kernel launch failed ({exc})") from exc


def empty(shape, dtype, what: str, device: int):
    """``cupy.empty`` that turns out-of-memory into a BackendError saying how much was needed."""
    try:
        return cupy.empty(shape, dtype=dtype)
    except cupy.cuda.memory.OutOfMemoryError as exc:
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        free, total = cupy.cuda.runtime.memGetInfo()
        raise BackendError(
            f"{what}: out of device memory on device {device}: needed {nbytes} bytes, "
            f"{free} of {total} bytes free ({exc})"
        ) from exc


def check(call: str, fn, *args, **kw):
    """Run a CuPy/CUDA call and re-raise any CUDA error as BackendError naming ``call``."""
    try:
        return fn(*args, **kw)
    except BackendError:
        raise
    except cupy.cuda.memory.OutOfMemoryError as exc:
        raise BackendError(f"{call}: out of device memory ({exc})") from exc
    except (cupy.cuda.runtime.CUDARuntimeError, cupy.cuda.driver.CUDADriverError) as exc:
        raise BackendError(f"{call}: {exc}") from exc


u64 = np.uint64
i32 = np.int32
