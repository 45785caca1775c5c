"""The synchronous half of the CUDA backend: ``CudaCore``, which ``cuda.CudaBackend`` extends with the stream flow.

``CudaCore`` holds the devices (``_Device``: three non-blocking streams, the NTT, G1/G2 MSM and witness engines,
made on the constructing thread) and implements the calls that return their result: ``pin``/``unpin``
(``cudaHostRegister``), ``h2d``/``d2h``, ``ntt``/``h_eval`` (queued on the lane's stream), ``load_bases`` and
``load_bases_g2`` (on the load stream, synchronous), ``device_witness``, and ``msm_g1``/``msm_g2``/
``batch_add_g1``, each ending with a ``d2h`` and a ``sync`` phase (``_finish``). ``_msm`` and ``_batch_add`` also
serve the queued calls: with ``queued`` they leave the result on the device as a ``_Queued``. The data layout,
streams and the memory-pool rule are in ``cuda.py``'s docstring (docs/gpu.md).

Errors: ``BackendUnavailable`` without a usable driver or with fewer GPUs than asked; ``BackendError`` naming the
failing CUDA call otherwise (bad shapes, devices out of range, out of memory with byte counts); ``close`` never
raises. Threads: calls for different devices may run concurrently; one device is used by one thread at a time
(its key uploads, on the load stream, may come from another thread).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

import cupy
import numpy as np

import gputrace

from ..encoding import g1_to_affine_limbs
from ..msm_plan import MsmPlan
from .base import (
    BackendError,
    BackendUnavailable,
    BasesHandle,
    DeviceArray,
    LaneInfo,
    PinnedHost,
    ProverBackend,
    check_gpu_count,
)
from .cuda_host import _HOST_REGISTER_PORTABLE, _uploader
from .cuda_kernels import check, empty
from .cuda_msm import G1Msm, G2Msm, xyzz_to_g1, xyzz_to_g2
from .cuda_ntt import FrNtt
from .cuda_witness import MerkleWitness

log = logging.getLogger("gputrace.prover.backends.cuda")  # the backend's logger, named as before the split


class _Queued:
    """A result left on the device by a queued call: ``words`` (device uint64), ``kind`` "g1", "g2" or "limbs"."""

    __slots__ = ("device", "words", "kind", "shape")

    def __init__(self, device: int, words, kind: str, shape: tuple = ()) -> None:
        self.device, self.words, self.kind, self.shape = device, words, kind, shape


class _Device:
    """Per-GPU state: streams, engines. Created on the constructing thread; used by the device's worker (the
    load stream by whichever thread loads bases)."""

    def __init__(self, index: int) -> None:
        self.index = index
        with cupy.cuda.Device(index):
            self.stream = cupy.cuda.Stream(non_blocking=True)
            self.wstream = cupy.cuda.Stream(non_blocking=True)  # witnesses and tail splits (stream flow)
            self.lstream = cupy.cuda.Stream(non_blocking=True)  # proving-key uploads
            self.ntt = FrNtt(index)
            self.msm = G1Msm(index)
            self.msm2 = G2Msm(index)
            self.witness = MerkleWitness(index, self.ntt)
            self.consts: dict[int, cupy.ndarray] = {}  # small constants per stream pointer (``_one``)
            cupy.cuda.Device(index).synchronize()
        self.lane = LaneInfo(device=index, lane="stream:0", stream=self.stream, index=index)
        self.wlane = LaneInfo(device=index, lane="stream:1", stream=self.wstream, index=index)


class CudaCore(ProverBackend):
    """The synchronous calls of the CUDA backend over ``devices`` GPUs (0 .. devices-1); ``cuda.CudaBackend`` is the
    backend."""

    def __init__(self, devices: int = 1) -> None:
        if devices < 1:
            raise ValueError(f"devices must be >= 1, got {devices}")
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as exc:
            raise BackendUnavailable(f"no usable CUDA driver ({exc})") from exc
        check_gpu_count(devices, count)
        self._devs = [_Device(i) for i in range(devices)]
        self._pinned: dict[int, int] = {}
        self._lock = threading.Lock()
        self._closed = False

    # -- devices ----------------------------------------------------------------------------
    def device_count(self) -> int:
        return len(self._devs)

    def _dev(self, device: int) -> _Device:
        if not 0 <= device < len(self._devs):
            raise BackendError(f"cuda backend: device {device} out of range (0..{len(self._devs) - 1})")
        return self._devs[device]

    def lanes(self, device: int) -> Sequence[LaneInfo]:
        return (self._dev(device).lane,)

    def _stream(self, device: int, lane: LaneInfo | None):
        return lane.stream if lane is not None and lane.stream is not None else self._dev(device).stream

    def synchronize(self, device: int) -> None:
        d = self._dev(device)
        with cupy.cuda.Device(device):
            check(f"cudaStreamSynchronize(device {device})", d.stream.synchronize)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for ptr in list(self._pinned):
            try:
                cupy.cuda.runtime.hostUnregister(ptr)
            except Exception as exc:  # noqa: BLE001 (close never raises: one failed unregister must not keep the rest)
                log.debug("cuda close: hostUnregister failed: %s", exc)
        self._pinned.clear()
        for d in self._devs:
            with cupy.cuda.Device(d.index):
                for st in (d.stream, d.wstream, d.lstream):
                    try:
                        st.synchronize()
                    except Exception as exc:  # noqa: BLE001 (close never raises; the pool is freed below anyway)
                        log.debug("cuda close: stream synchronize failed: %s", exc)
                cupy.get_default_memory_pool().free_all_blocks()  # the pool of this device

    # -- host memory and transfers ------------------------------------------------------------
    def pin(self, host: np.ndarray) -> PinnedHost:
        if not host.flags.c_contiguous:
            raise BackendError("cuda pin: array must be C-contiguous")
        if host.nbytes == 0:
            return PinnedHost(host, False, None)
        ptr = host.ctypes.data
        # Portable: pinned for every device's context, not only the calling thread's current device (a worker
        # for GPU 1 would otherwise get a registration that GPU 1's copies treat as pageable).
        check(f"cudaHostRegister({host.nbytes} bytes)", cupy.cuda.runtime.hostRegister, ptr, host.nbytes,
              _HOST_REGISTER_PORTABLE)
        with self._lock:
            self._pinned[ptr] = host.nbytes
        return PinnedHost(host, True, ptr)

    def unpin(self, pinned: PinnedHost) -> None:
        ptr = pinned.token
        if ptr is None:
            return
        pinned.token = None
        with self._lock:
            self._pinned.pop(ptr, None)
        check(f"cudaHostUnregister({pinned.nbytes} bytes)", cupy.cuda.runtime.hostUnregister, ptr)

    def h2d(self, host: np.ndarray | PinnedHost, device: int, lane: LaneInfo | None = None) -> DeviceArray:
        d = self._dev(device)
        arr = host.array if isinstance(host, PinnedHost) else host
        if arr.dtype != np.uint64 or arr.ndim < 1 or arr.shape[-1] != 4:
            raise BackendError(f"cuda h2d: expected uint64 (..., 4) limbs, got {arr.dtype} {arr.shape}")
        arr = np.ascontiguousarray(arr)
        s = self._stream(device, lane)
        with cupy.cuda.Device(device), s:  # allocate on the stream that uses it (stream-ordered pool)
            dst = empty(arr.shape, np.uint64, f"h2d ({arr.nbytes} bytes)", device)
            check(f"cudaMemcpyAsync(H2D, {arr.nbytes} bytes)", dst.set, arr, stream=s)
            d.ntt.to_mont(dst, s)
        return DeviceArray(dst, device, arr.shape)

    def d2h(self, arr: DeviceArray, lane: LaneInfo | None = None) -> np.ndarray:
        d = self._dev(arr.device)
        s = self._stream(arr.device, lane)
        with cupy.cuda.Device(arr.device):
            with s:
                tmp = cupy.ascontiguousarray(arr.data).copy()
            d.ntt.from_mont(tmp, s)
            out = np.empty(tmp.shape, dtype=np.uint64)
            check(f"cudaMemcpyAsync(D2H, {out.nbytes} bytes)", tmp.get, stream=s, out=out)
            check("cudaStreamSynchronize(d2h)", s.synchronize)
        return out

    # -- scalar-field work --------------------------------------------------------------------
    def ntt(self, x: DeviceArray, *, inverse: bool, coset: bool, lane: LaneInfo | None = None) -> DeviceArray:
        d = self._dev(x.device)
        with cupy.cuda.Device(x.device):
            data = x.data if x.data.ndim == 3 else x.data.reshape(-1, x.data.shape[-2], 4)
            d.ntt.transform(data, inverse=inverse, coset=coset, stream=self._stream(x.device, lane))
        return x

    def h_eval(self, a: DeviceArray, b: DeviceArray, c: DeviceArray, *, lane: LaneInfo | None = None) -> DeviceArray:
        d = self._dev(a.device)
        if not (a.device == b.device == c.device):
            raise BackendError(f"cuda h_eval: arrays on devices {a.device}, {b.device}, {c.device}")
        with cupy.cuda.Device(a.device):
            d.ntt.h_eval(a.data, b.data, c.data, self._stream(a.device, lane))
        return a

    # -- group work ---------------------------------------------------------------------------
    def load_bases(self, name: str, points: Sequence[Any], device: int,
                   affine_limbs: np.ndarray | None = None) -> BasesHandle:
        d = self._dev(device)
        if affine_limbs is not None:
            if affine_limbs.shape != (len(points), 2, 6):
                raise BackendError(
                    f"cuda load_bases({name}): affine limbs {affine_limbs.shape} for {len(points)} points")
            limbs = affine_limbs
        elif len(points):
            limbs = g1_to_affine_limbs(list(points))
        else:
            limbs = np.zeros((0, 2, 6), dtype=np.uint64)
        with cupy.cuda.Device(device):  # on the load stream: another thread may be proving on d.stream
            limbs = np.ascontiguousarray(limbs, dtype=np.uint64)
            data = d.msm.load_bases(limbs, d.lstream, upload=_uploader(limbs.nbytes, self.key_staging))
            check(f"load_bases({name})", d.lstream.synchronize)
        return BasesHandle(name, device, len(limbs), data)

    def _finish(self, d: _Device, res, s, what: str, g2: bool = False):
        """Copy the XYZZ result (24 words, G2: 48) to the host (``d2h`` + ``sync`` phases) and make a point."""
        host = np.empty(48 if g2 else 24, dtype=np.uint64)
        with gputrace.phase("d2h", device=d.index, stream=s, bytes=host.nbytes, what=what):
            check(f"cudaMemcpyAsync(D2H {what} result)", res.get, stream=s, out=host)
        with gputrace.phase("sync", device=d.index, lane=d.lane.lane, kind="sync", waits_for=what):
            check(f"cudaStreamSynchronize({what})", s.synchronize)
        return xyzz_to_g2(host) if g2 else xyzz_to_g1(host)

    def msm_g1(self, bases: BasesHandle, scalars: np.ndarray | DeviceArray, *, plan: MsmPlan | None = None,
               lane: LaneInfo | None = None) -> Any:
        return self._msm(bases, scalars, plan, lane, g2=False)

    def msm_g2(self, bases: BasesHandle, scalars: np.ndarray | DeviceArray, *, lane: LaneInfo | None = None) -> Any:
        return self._msm(bases, scalars, None, lane, g2=True)

    def load_bases_g2(self, name: str, affine_limbs: np.ndarray, device: int) -> BasesHandle:
        d = self._dev(device)
        if affine_limbs.ndim != 4 or affine_limbs.shape[1:] != (2, 2, 6):
            raise BackendError(
                f"cuda load_bases_g2({name}): expected (n, 2, 2, 6) affine limbs, got {affine_limbs.shape}")
        with cupy.cuda.Device(device):
            limbs = np.ascontiguousarray(affine_limbs, dtype=np.uint64)
            data = d.msm2.load_bases(limbs, d.lstream, upload=_uploader(limbs.nbytes, self.key_staging))
            check(f"load_bases_g2({name})", d.lstream.synchronize)
        return BasesHandle(name, device, len(affine_limbs), data)

    def device_witness(self, plans, domain_size: int, device: int, lane: LaneInfo | None = None,
                       per_circuit: bool = False):
        d = self._dev(device)
        s = self._stream(device, lane)
        nb = len(plans)
        with cupy.cuda.Device(device), s:  # allocated and zero-filled on the stream that fills it
            abc = check(f"device_witness: a/b/c ({3 * nb} x {domain_size} x 32 bytes)", cupy.zeros,
                        (3 * nb, domain_size, 4), dtype=np.uint64)
            z = d.witness.generate(list(plans), abc, s, per_circuit=per_circuit)
        return DeviceArray(abc, device, abc.shape), [DeviceArray(z[j], device, z[j].shape) for j in range(nb)]

    # -- the MSM and batch-add engines (the queued calls of ``cuda.CudaBackend`` use them too) -----------------
    def _batch_add(self, bases: BasesHandle, indices: DeviceArray, bound: int, lane: LaneInfo | None, *,
                   queued: bool) -> Any:
        d = self._dev(bases.device)
        s = self._stream(bases.device, lane)
        if bound > bases.count:
            raise BackendError(f"cuda batch_add({bases.name}): {bound} scalars for {bases.count} bases")
        if indices.device != bases.device:
            raise BackendError(f"cuda batch_add({bases.name}): indices on device {indices.device}, "
                               f"bases on {bases.device}")
        with cupy.cuda.Device(bases.device), s:
            res = d.msm.sum_selected(bases.data, indices.data, s, sync_free=queued)
            if queued:
                return _Queued(bases.device, res, "g1")
            return self._finish(d, res, s, f"batch_add_g1({bases.name})")

    def _msm(self, bases: BasesHandle, scalars, plan, lane, *, g2: bool, queued: bool = False) -> Any:
        d = self._dev(bases.device)
        engine = d.msm2 if g2 else d.msm
        call = "msm_g2" if g2 else "msm_g1"
        s = self._stream(bases.device, lane)
        with cupy.cuda.Device(bases.device), s:
            if isinstance(scalars, DeviceArray):
                if scalars.device != bases.device:
                    raise BackendError(f"cuda {call}({bases.name}): scalars on device {scalars.device}, "
                                       f"bases on {bases.device}")
                with s:
                    sc = cupy.ascontiguousarray(scalars.data.reshape(-1, 4)).copy()
                d.ntt.from_mont(sc, s)
            else:
                host = np.ascontiguousarray(scalars, dtype=np.uint64).reshape(-1, 4)
                sc = empty(host.shape, np.uint64, f"{call}({bases.name}) scalars", bases.device)
                with gputrace.phase("h2d", device=d.index, stream=s, bytes=host.nbytes, what="scalars"):
                    check(f"cudaMemcpyAsync(H2D {call}({bases.name}) scalars)", sc.set, host, stream=s)
            if sc.shape[0] > bases.count:
                raise BackendError(f"cuda {call}({bases.name}): {sc.shape[0]} scalars for {bases.count} bases")
            res = engine.msm(bases.data, sc, plan.window if plan is not None else None, s, sync_free=queued)
            if queued:
                return _Queued(bases.device, res, "g2" if g2 else "g1")
            return self._finish(d, res, s, f"{call}({bases.name})", g2)

    def batch_add_g1(self, bases: BasesHandle, select: np.ndarray, *, lane: LaneInfo | None = None) -> Any:
        d = self._dev(bases.device)
        s = self._stream(bases.device, lane)
        idx = np.flatnonzero(np.asarray(select, dtype=bool)).astype(np.int64)
        if idx.size and idx[-1] >= bases.count:
            raise BackendError(f"cuda batch_add_g1({bases.name}): index {int(idx[-1])} >= {bases.count} bases")
        with cupy.cuda.Device(bases.device), s:
            didx = empty(idx.shape, np.int64, f"batch_add_g1({bases.name}) indices", bases.device)
            if idx.size:
                with gputrace.phase("h2d", device=d.index, stream=s, bytes=idx.nbytes, what="indices"):
                    check("cudaMemcpyAsync(H2D batch_add indices)", didx.set, idx, stream=s)
            res = d.msm.sum_selected(bases.data, didx, s)
            return self._finish(d, res, s, f"batch_add_g1({bases.name})")
