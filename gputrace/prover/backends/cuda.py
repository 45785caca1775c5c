"""The CUDA backend: ``ProverBackend`` on NVIDIA GPUs through CuPy and the kernels in ``prover/kernels``.

What each call does (docs/gpu.md repeats this):

* One ``_Device`` per GPU: a non-blocking CUDA stream (``lanes(d)[0].stream``), an ``FrNtt`` and a
  ``G1Msm`` engine (kernels compiled once per device, cached). The pipeline runs one worker thread
  per device, so circuits are split across GPUs and each GPU's work is queued on its own stream;
  ``b_g2`` stays on the pipeline's CPU pool and overlaps it.
* Device scalar arrays (``DeviceArray.data``) are CuPy ``(..., 4)`` uint64 in **Montgomery form**:
  ``h2d`` converts after the copy, ``d2h`` and the MSMs convert back (on a copy).
* ``pin`` is ``cudaHostRegister`` of the caller's array (B1: real page-locking, no copy); ``unpin`` is
  ``cudaHostUnregister``. ``h2d`` from a pinned array is an asynchronous copy on the lane's stream; from a
  pageable array the driver stages it (the copy the seed's pinning removed).
* ``ntt``/``h_eval`` queue kernels on the lane's stream and return at once; the pipeline's phases carry
  ``stream=`` so their device times come from CUDA events. ``msm_g1``/``batch_add_g1`` return host points:
  each ends with a ``d2h`` phase (the 192-byte result) and a ``sync`` phase (the host waiting for the
  stream), so host-blocked time is visible in the trace. Host scalars are moved in an ``h2d`` phase.
  The queued calls (``msm_g1_queued``, ``msm_g2_queued``, ``batch_add_queued``, ``d2h_queued``; the stream flow)
  read nothing back (``G1Msm.msm(..., sync_free=True)``) and leave their results on the device; ``collect`` copies
  a circuit's results into page-locked memory behind an event (one ``d2h`` phase) and ``results`` waits for it,
  possibly on another thread, then releases the arrays the queued work read.
* ``MsmPlan.window`` (D4) sets the Pippenger window; ``narrow_bits`` is the CPU's knob and unused here.
* Three streams per GPU: the lane's (proving), the witness lane's (``witness_lane``: witnesses and their tail
  splits, generated while the lane proves the circuit before; ``record_event``/``wait_event`` order the two) and
  a load stream for ``load_bases`` (synchronous calls, so the pipeline may load from another thread while the
  lane proves; keys of 1 MB and more go through two page-locked 16 MB chunks, ``_upload_staged``). Arrays made on
  the witness lane and read on the lane are kept referenced by the pipeline until the lane has synchronised past
  their last use (the pool rule below).

Errors: ``BackendUnavailable`` without CuPy or a GPU (or fewer GPUs than asked); ``BackendError``
naming the failing CUDA call otherwise, with byte counts for out-of-memory.
Threads: calls for different devices may run concurrently; one device is used by one thread at a time.
Streams: each device's stream is non-blocking (no implicit order with the legacy default stream), so every
device buffer, temporary or not, is allocated and filled on the stream that reads it: CuPy's memory pool
is stream-ordered, and a block freed under another stream could be reused and overwritten while queued
work still reads it (a 2^18 proof failed to verify that way in an earlier version).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

try:
    import cupy
except ImportError as exc:  # pragma: no cover - exercised on machines without CuPy
    from .base import BackendUnavailable

    raise BackendUnavailable(f"CuPy is not installed ({exc})") from exc

import gputrace

from ..encoding import g1_to_affine_limbs
from ..host_copy import parallel_copy
from ..msm_plan import MsmPlan
from ..tail_split import ones_indices_counted, split_tail
from .base import (
    BackendError,
    BackendUnavailable,
    BasesHandle,
    DeviceArray,
    LaneInfo,
    PinnedHost,
    ProverBackend,
    TailSplit,
    check_gpu_count,
)
from .cuda_kernels import check, empty
from .cuda_msm import G1Msm, G2Msm, xyzz_to_g1, xyzz_to_g2
from .cuda_ntt import FrNtt, mont_limbs
from .cuda_witness import MerkleWitness

log = logging.getLogger(__name__)

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


class _Queued:
    """A result left on the device by a queued call: ``words`` (device uint64), ``kind`` "g1", "g2" or "limbs"."""

    __slots__ = ("device", "words", "kind", "shape")

    def __init__(self, device: int, words, kind: str, shape: tuple = ()) -> None:
        self.device, self.words, self.kind, self.shape = device, words, kind, shape


class _Collected:
    """``collect``'s handle: the page-locked copy of every item, the event after it, what it must keep alive."""

    __slots__ = ("host", "event", "layout", "keep")

    def __init__(self, host: np.ndarray, event, layout: list, keep) -> None:
        self.host, self.event, self.layout, self.keep = host, event, layout, keep


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


class CudaBackend(ProverBackend):
    """CUDA implementation of ``ProverBackend`` over ``devices`` GPUs (0 .. devices-1)."""

    name = "cuda"
    supports_device_witness = True
    supports_g2 = True

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

    # -- the stream flow: witness lane, events, tails on the device -------------------------------
    def witness_lane(self, device: int) -> LaneInfo:
        return self._dev(device).wlane

    def record_event(self, lane: LaneInfo):
        s = self._stream(lane.index, lane)
        with cupy.cuda.Device(lane.index):
            ev = cupy.cuda.Event(disable_timing=True)
            check("cudaEventRecord(witness ready)", ev.record, s)
        return ev

    def wait_event(self, lane: LaneInfo, event) -> None:
        if event is None:
            return
        s = self._stream(lane.index, lane)
        with cupy.cuda.Device(lane.index):
            check("cudaStreamWaitEvent(witness ready)", s.wait_event, event)

    def _one(self, d: _Device, s):
        """The value 1 (Montgomery) on ``s``'s device, made once per stream (no pageable upload per split)."""
        key = int(s.ptr)
        one = d.consts.get(key)
        if one is None:
            with s:
                one = cupy.asarray(mont_limbs([1])[0])
            d.consts[key] = one
        return one

    def split_tail(self, z: DeviceArray, num_inputs: int, lane: LaneInfo | None = None) -> TailSplit:
        d = self._dev(z.device)
        s = self._stream(z.device, lane)

        def canonical(t):  # a canonical copy, for D4's counters
            c = t.copy()
            d.ntt.from_mont(c, s)
            return c

        with cupy.cuda.Device(z.device), s:  # every array on the stream that computes it
            mask, tail, stats = split_tail(cupy, z.data.reshape(-1, 4), self._one(d, s), canonical, num_inputs)
            # The counters come back on this (witness) lane, behind an event: ``finish_tail`` waits for the
            # witness, not for the proving lane's queue.
            host = _pinned_empty(stats.size)
            _copy_back(host, stats, s, "tail counters")
            ev = cupy.cuda.Event(disable_timing=True)
            check("cudaEventRecord(tail counters)", ev.record, s)
        return TailSplit(DeviceArray(tail, z.device, tail.shape), num_inputs, pending=(mask, stats, host, ev))

    def finish_tail(self, split: TailSplit, lane: LaneInfo | None = None) -> TailSplit:
        """Waits only for the counters' event (the witness lane up to this split), then queues the ones' indices
        on ``lane`` without reading anything else back; ``pending`` keeps the mask (made on the witness lane,
        read on ``lane``) referenced as long as the split."""
        dev = split.tail.device
        s = self._stream(dev, lane)
        mask, stats, host, ev = split.pending
        check("cudaEventSynchronize(tail counters)", ev.synchronize)
        counts = np.array(host, dtype=np.uint64)  # the pinned block goes back to the pool
        with cupy.cuda.Device(dev), s:
            try:
                idx, idx_l = ones_indices_counted(cupy, mask, int(counts[6]), int(counts[7]), split.num_inputs)
            except ValueError as exc:
                raise BackendError(f"cuda finish_tail: {exc}") from exc
        split.ones = DeviceArray(idx, dev, idx.shape)
        split.ones_l = DeviceArray(idx_l, dev, idx_l.shape)
        split.stats, split.pending = counts, (mask, stats)
        return split

    def batch_add_indices(self, bases: BasesHandle, indices: DeviceArray, *, bound: int,
                          lane: LaneInfo | None = None) -> Any:
        return self._batch_add(bases, indices, bound, lane, queued=False)

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

    # -- queued results (the stream flow): nothing read back until ``results`` -------------------------
    def msm_g1_queued(self, bases: BasesHandle, scalars: DeviceArray, *, plan: MsmPlan | None = None,
                      lane: LaneInfo | None = None) -> Any:
        return self._msm(bases, scalars, plan, lane, g2=False, queued=True)

    def msm_g2_queued(self, bases: BasesHandle, scalars: DeviceArray, *, lane: LaneInfo | None = None) -> Any:
        return self._msm(bases, scalars, None, lane, g2=True, queued=True)

    def batch_add_queued(self, bases: BasesHandle, indices: DeviceArray, *, bound: int,
                         lane: LaneInfo | None = None) -> Any:
        return self._batch_add(bases, indices, bound, lane, queued=True)

    def d2h_queued(self, arr: DeviceArray, lane: LaneInfo | None = None) -> Any:
        d = self._dev(arr.device)
        s = self._stream(arr.device, lane)
        with cupy.cuda.Device(arr.device), s:
            tmp = cupy.ascontiguousarray(arr.data).copy()
            d.ntt.from_mont(tmp, s)
        return _Queued(arr.device, tmp, "limbs", tuple(tmp.shape))

    def collect(self, items, lane: LaneInfo | None = None, keep=None) -> Any:
        items = list(items)
        if not items:
            return _Collected(np.zeros(0, dtype=np.uint64), None, [], keep)
        dev = items[0].device
        if any(q.device != dev for q in items):
            raise BackendError("cuda collect: results of several devices in one call")
        d = self._dev(dev)
        s = self._stream(dev, lane)
        with cupy.cuda.Device(dev), s:
            flat = cupy.concatenate([q.words.reshape(-1) for q in items])
            host = _pinned_empty(flat.size)
            with gputrace.phase("d2h", device=d.index, stream=s, bytes=flat.nbytes, what="results"):
                _copy_back(host, flat, s, f"{len(items)} results")
            ev = cupy.cuda.Event(disable_timing=True)
            check("cudaEventRecord(results)", ev.record, s)
        layout = [(q.kind, int(q.words.size), q.shape) for q in items]
        return _Collected(host, ev, layout, (keep, flat, items))

    def results(self, handle) -> list:
        if handle.event is not None:
            check("cudaEventSynchronize(results)", handle.event.synchronize)
        out, off = [], 0
        for kind, size, shape in handle.layout:
            w = np.array(handle.host[off: off + size])
            off += size
            out.append(xyzz_to_g1(w) if kind == "g1" else xyzz_to_g2(w) if kind == "g2" else w.reshape(shape))
        handle.keep = handle.host = None  # the lane is past every use: the blocks may go back to the pools
        return out

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
