"""The CPU backend: NTTs on numpy object arrays, MSMs through arkworks, honest "device" lanes.

What each interface call really does here (docs/prover.md repeats this):

* ``device_count()`` is the number of worker lanes asked for; each lane reports
  ``device=-1, lane='thread:cpu-worker-N'`` so traces never pretend to be GPUs.
* ``pin``: tries ``mlock(2)`` on the array's pages (real page-locking, what cudaHostRegister does
  besides registering with the driver). If the kernel refuses (RLIMIT_MEMLOCK), it copies into a
  staging buffer allocated once per size and reused — an honest stand-in, reported as
  ``PinnedHost.pinned = False`` and ``method = 'staging-copy'``.
* ``h2d``: converts the limb array into this backend's working form (an object array of Python
  ints); ``d2h`` converts back. These are real copies/conversions, not no-ops.
* ``msm_g1``: ``G1Point.multiexp_unchecked`` (arkworks Pippenger; one core, releases the GIL), cut
  into contiguous parts on this backend's ``HostMsm`` pool (one thread per CPU the process may use,
  ``msm_threads``), the partial sums added on the calling lane's thread. With an ``MsmPlan`` (D4) the
  scalars are first split by bit length: zeros dropped, scalars narrower than ``plan.narrow_bits`` in
  one multiexp, the rest in another (each of the two cut into parts; narrow, then wide) — arkworks'
  cost grows with the widest scalar in a call, so this is the CPU's real per-MSM knob
  (``narrow_bits = 0``: one multiexp of every scalar, zeros included, as without a plan).
  ``plan.window`` is not used here. The result is the same group element as one multiexp.
* ``batch_add_g1``: a plain left-to-right sum of the selected points (holds the GIL).
* ``close``: joins the MSM pool (safe twice); a later ``msm_g1`` starts a new pool, so the object stays
  usable after ``run_prove`` closes it.

Thread safety: ``msm_g1`` may be called from several lanes at once: their parts share one pool of
``msm_threads`` threads (one queue), so N lanes never run more than ``msm_threads`` parts at a time
(an MSM too small to split, under ``2 * host_msm.MIN_PART`` points, runs whole on its lane's thread). The pool
(created on first use) and the staging-buffer cache are guarded by a lock. ``close`` must not run while another
thread is inside ``msm_g1``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
from py_arkworks_bls12381 import G1Point

from ..field import COSET_SHIFT, R, bit_lengths, ints_to_limbs, limbs_to_ints
from ..host_msm import HostMsm, cpu_threads
from ..msm_plan import MsmPlan
from ..ntt import ntt as _ntt
from .base import BackendError, BasesHandle, DeviceArray, LaneInfo, PinnedHost, ProverBackend

_libc: ctypes.CDLL | bool | None = None  # False: libc could not be loaded


def _mlock_fns():
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        except OSError:
            _libc = False
    return _libc or None


class CpuBackend(ProverBackend):
    """CPU implementation of ``ProverBackend``. ``workers``: number of worker lanes (>= 1);
    ``msm_threads``: threads of the shared MSM pool (default: one per CPU the process may use)."""

    name = "cpu"

    def __init__(self, workers: int = 1, *, try_mlock: bool = True, msm_threads: int | None = None) -> None:
        if workers < 1:
            raise ValueError(f"devices must be >= 1, got {workers}")
        if msm_threads is not None and msm_threads < 1:
            raise ValueError(f"msm_threads must be >= 1, got {msm_threads}")
        self._workers = workers
        self._try_mlock = try_mlock
        self.msm_threads = msm_threads or cpu_threads()
        self._msm: HostMsm | None = None
        self._staging: dict[tuple, list[np.ndarray]] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            msm, self._msm = self._msm, None
        if msm is not None:
            msm.close()

    def _host_msm(self) -> HostMsm:
        with self._lock:
            if self._msm is None:
                self._msm = HostMsm(self.msm_threads, thread_name_prefix="cpu-msm-part")
            return self._msm

    # -- devices ------------------------------------------------------------------------
    def device_count(self) -> int:
        return self._workers

    def lanes(self, device: int) -> Sequence[LaneInfo]:
        self._check_device(device)
        return (LaneInfo(device=-1, lane=f"thread:cpu-worker-{device}", stream=None, index=device),)

    def _check_device(self, device: int) -> None:
        if not 0 <= device < self._workers:
            raise BackendError(f"cpu backend: device {device} out of range (0..{self._workers - 1})")

    # -- memory -------------------------------------------------------------------------
    def pin(self, host: np.ndarray) -> PinnedHost:
        if not host.flags.c_contiguous:
            raise BackendError("cpu pin: array must be C-contiguous")
        libc = _mlock_fns() if self._try_mlock else None
        if libc is not None and host.nbytes:
            addr = host.ctypes.data
            if libc.mlock(ctypes.c_void_p(addr), ctypes.c_size_t(host.nbytes)) == 0:
                return PinnedHost(host, True, ("mlock", addr, host.nbytes))
        key = (host.shape, host.dtype.str)
        with self._lock:
            pool = self._staging.setdefault(key, [])
            buf = pool.pop() if pool else np.empty_like(host)
        np.copyto(buf, host)
        return PinnedHost(buf, False, ("staging", key))

    def unpin(self, pinned: PinnedHost) -> None:
        tok = pinned.token
        if tok is None:
            return
        pinned.token = None
        if tok[0] == "mlock":
            libc = _mlock_fns()
            if libc is not None:
                libc.munlock(ctypes.c_void_p(tok[1]), ctypes.c_size_t(tok[2]))
        else:
            with self._lock:
                self._staging.setdefault(tok[1], []).append(pinned.array)

    @staticmethod
    def pin_method(pinned: PinnedHost) -> str:
        return "mlock" if pinned.pinned else "staging-copy"

    def h2d(self, host: np.ndarray | PinnedHost, device: int, lane: LaneInfo | None = None) -> DeviceArray:
        self._check_device(device)
        arr = host.array if isinstance(host, PinnedHost) else host
        if arr.dtype != np.uint64 or arr.shape[-1] != 4:
            raise BackendError(f"cpu h2d: expected uint64 (..., 4) limbs, got {arr.dtype} {arr.shape}")
        flat = np.empty(arr.size // 4, dtype=object)
        flat[:] = limbs_to_ints(arr)
        return DeviceArray(flat.reshape(arr.shape[:-1]), device, arr.shape)

    def d2h(self, arr: DeviceArray, lane: LaneInfo | None = None) -> np.ndarray:
        data = arr.data
        return ints_to_limbs(data.reshape(-1).tolist()).reshape(*data.shape, 4)

    # -- field work ---------------------------------------------------------------------
    def ntt(self, x: DeviceArray, *, inverse: bool, coset: bool, lane: LaneInfo | None = None) -> DeviceArray:
        data = x.data
        shp = data.shape
        out = _ntt(data.reshape(-1, shp[-1]), inverse=inverse, coset=coset).reshape(shp)
        return DeviceArray(out, x.device, x.shape)

    def h_eval(self, a: DeviceArray, b: DeviceArray, c: DeviceArray, *, lane: LaneInfo | None = None) -> DeviceArray:
        n = a.shape[-2]
        zinv = pow((pow(COSET_SHIFT, n, R) - 1) % R, -1, R)
        out = (a.data * b.data - c.data) % R * zinv % R
        return DeviceArray(out, a.device, a.shape)

    # -- group work ---------------------------------------------------------------------
    def load_bases(self, name: str, points: Sequence[Any], device: int,
                   affine_limbs: np.ndarray | None = None) -> BasesHandle:
        self._check_device(device)
        pts = list(points)
        return BasesHandle(name, device, len(pts), pts)

    def msm_g1(self, bases: BasesHandle, scalars, *, plan: MsmPlan | None = None, lane: LaneInfo | None = None) -> Any:
        if isinstance(scalars, DeviceArray):
            limbs = self.d2h(scalars).reshape(-1, 4)
        else:
            limbs = np.ascontiguousarray(scalars, dtype=np.uint64).reshape(-1, 4)
        n = len(limbs)
        if n > bases.count:
            raise BackendError(f"cpu msm_g1({bases.name}): {n} scalars for {bases.count} bases")
        pts = bases.data
        if n == 0:
            return G1Point.identity()
        msm = self._host_msm()
        if plan is None:
            return msm.multiexp(G1Point, pts, limbs)
        bl = bit_lengths(limbs)
        acc = G1Point.identity()
        for sel in (np.flatnonzero((bl > 0) & (bl < plan.narrow_bits)), np.flatnonzero(bl >= plan.narrow_bits)):
            if sel.size:
                acc = acc + msm.multiexp(G1Point, [pts[i] for i in sel.tolist()], limbs[sel])
        return acc

    def batch_add_g1(self, bases: BasesHandle, select: np.ndarray, *, lane: LaneInfo | None = None) -> Any:
        sel = np.flatnonzero(np.asarray(select, dtype=bool))
        if sel.size and sel[-1] >= bases.count:
            raise BackendError(f"cpu batch_add_g1({bases.name}): index {int(sel[-1])} >= {bases.count} bases")
        pts = bases.data
        acc = G1Point.identity()
        for i in sel.tolist():
            acc = acc + pts[i]
        return acc
