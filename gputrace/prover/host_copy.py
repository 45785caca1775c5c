"""Large host-memory copies split over a few threads (the proving-key staging copy of the CUDA backend).

One thread's ``memcpy`` out of ordinary (pageable) host memory runs at about 7 GB/s on the H200 machine, while the
page-locked chunk it fills goes to the GPU at about 54 GB/s: the staged upload of a 2.4 GB key (2^22) spent ~0.5 s
in that copy, on the critical path of the first proof (RESULTS.md, "Staged key upload"). numpy releases the GIL for
the copy of a plain dtype, so pieces copied by several threads run in parallel.

``parallel_copy`` is safe from any thread; the pool's threads are daemons, created on first use and shared by all
callers (copies from two callers interleave their pieces; each call returns when its own pieces are done).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

#: Threads of one copy (the calling thread included). Four saturate the memory bandwidth one copy can use on the
#: machines measured; more only take cores from the program's own threads.
COPY_THREADS = max(1, min(4, (os.cpu_count() or 1) // 2))
#: Copies smaller than this run on the calling thread alone (the hand-off costs more than it saves).
MIN_SPLIT_BYTES = 4 << 20

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=max(1, COPY_THREADS - 1), thread_name_prefix="gputrace-copy")
        return _pool


def parallel_copy(dst: np.ndarray, src: np.ndarray, threads: int | None = None) -> None:
    """``dst[:] = src`` for two 1-D arrays of one dtype and length, in up to ``threads`` (default ``COPY_THREADS``)
    contiguous pieces; the calling thread copies the first. Raises ValueError for mismatched arrays; an error in a
    piece is raised here after every piece has finished (so no piece still writes ``dst`` when this returns)."""
    if dst.ndim != 1 or src.ndim != 1 or dst.shape != src.shape or dst.dtype != src.dtype:
        raise ValueError(f"parallel_copy: {src.dtype}{src.shape} into {dst.dtype}{dst.shape}")
    k = COPY_THREADS if threads is None else max(1, int(threads))
    n = src.shape[0]
    if k == 1 or src.nbytes < MIN_SPLIT_BYTES:
        np.copyto(dst, src)
        return
    step = -(-n // k)
    pool = _executor()
    futures = [pool.submit(np.copyto, dst[o:o + step], src[o:o + step]) for o in range(step, n, step)]
    first: BaseException | None = None
    try:
        np.copyto(dst[:step], src[:step])
    except BaseException as exc:  # noqa: BLE001 re-raised below, once the other pieces are done
        first = exc
    for f in futures:
        failed = f.exception()
        if first is None and failed is not None:
            first = failed
    if first is not None:
        raise first
