"""Host memory of the CUDA backend: page-locked staging of key uploads, page-locked buffers for copies back.

* ``_upload_staged``: a proving-key query copied to the device through two page-locked chunks of
  ``STAGE_CHUNK`` bytes (CuPy's pinned pool), used in turn; ``_uploader`` picks it for keys of
  ``STAGE_MIN_BYTES`` and more (both read when called: patch them here, not in ``cuda``, which re-exports them).
* ``_pinned_empty``: a page-locked uint64 array; ``_copy_back``: an asynchronous device-to-host copy into one.
* ``_HOST_REGISTER_PORTABLE``: the ``cudaHostRegister`` flag of ``pin`` (``cuda_core``).

Errors: ``BackendError`` for a size mismatch, or from ``cuda_kernels.check`` naming the failing CUDA call.
Threads: ``_upload_staged`` runs on the thread that loads the key (the load stream) and returns when the upload
is done (its host copies run on a few ``host_copy`` threads); ``_copy_back`` only queues the copy.
"""

from __future__ import annotations

import cupy
import numpy as np

from ..host_copy import parallel_copy
from .base import BackendError
from .cuda_kernels import check

_HOST_REGISTER_PORTABLE = 1  # cudaHostRegisterPortable (driver_types.h)
#: Key uploads at least this large go through page-locked staging (``_upload_staged``), in chunks of this size.
STAGE_MIN_BYTES = 1 << 20
STAGE_CHUNK = 16 << 20


def _upload_staged(dst, arr: np.ndarray, stream) -> None:
    """Copy contiguous host ``arr`` into device ``dst`` (same byte size) on ``stream`` through two page-locked
    chunks of ``STAGE_CHUNK`` bytes from CuPy's pinned pool, used in turn: a chunk is copied
    (``host_copy.parallel_copy``: a few threads, the GIL released) while the DMA of the other runs; returns when
    the last copy is done. A pageable upload of the 100-200 MB of one proving-key query held up the CUDA calls of
    the process's other threads for its whole length (RESULTS.md, "The host share off the workers");
    page-locking a whole query instead (the version before) cost a ~200 MB ``cudaHostAlloc`` whenever two
    devices loaded at once (two GPUs' loaders, the pool holding one), inside the timed run. Two 16 MB chunks per
    loader come back from the pool every time after the first."""
    src = arr.reshape(-1).view(np.uint8)
    nbytes = src.nbytes
    if nbytes != dst.nbytes:
        raise BackendError(f"upload: {nbytes} host bytes for a {dst.nbytes}-byte device array")
    chunk = max(8, int(STAGE_CHUNK))
    bufs = []
    for _ in range(2 if nbytes > chunk else 1):
        mem = cupy.cuda.alloc_pinned_memory(chunk)
        bufs.append(np.frombuffer(mem, dtype=np.uint8, count=chunk))  # holds ``mem``
    done: list = [None] * len(bufs)
    for i, off in enumerate(range(0, nbytes, chunk)):
        k = i % len(bufs)
        if done[k] is not None:
            check("cudaEventSynchronize(staging chunk)", done[k].synchronize)
        n = min(chunk, nbytes - off)
        parallel_copy(bufs[k][:n], src[off:off + n])  # a few threads: one memcpy thread bounded the upload
        check(f"cudaMemcpyAsync(H2D staged chunk, {n} bytes)", cupy.cuda.runtime.memcpyAsync, dst.data.ptr + off,
              bufs[k].ctypes.data, n, cupy.cuda.runtime.memcpyHostToDevice, stream.ptr)
        ev = cupy.cuda.Event(disable_timing=True)
        check("cudaEventRecord(staging chunk)", ev.record, stream)
        done[k] = ev
    check("cudaStreamSynchronize(staged upload)", stream.synchronize)  # the chunks go back to the pool after this


def _uploader(nbytes: int, staging: bool = True):
    """``G1Msm.load_bases``'s ``upload`` for a key of ``nbytes``: chunked staging from ``STAGE_MIN_BYTES`` up,
    else None (the pageable copy). ``staging`` False (``key_staging``, the ``pageable`` switch): always None."""
    return _upload_staged if staging and nbytes >= STAGE_MIN_BYTES else None


def _pinned_empty(words: int) -> np.ndarray:
    """A page-locked uint64 host array (CuPy's pinned pool), the target of an asynchronous copy back."""
    mem = cupy.cuda.alloc_pinned_memory(max(8, 8 * words))
    return np.frombuffer(mem, dtype=np.uint64, count=words)  # holds ``mem``


def _copy_back(dst: np.ndarray, src, stream, what: str) -> None:
    """Queue the copy of contiguous device ``src`` into page-locked ``dst`` on ``stream`` (returns at once)."""
    check(f"cudaMemcpyAsync(D2H {what})", cupy.cuda.runtime.memcpyAsync, dst.ctypes.data, src.data.ptr, src.nbytes,
          cupy.cuda.runtime.memcpyDeviceToHost, stream.ptr)
