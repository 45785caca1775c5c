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
  lane proves; keys of 1 MB and more go through two page-locked 16 MB chunks,
  ``cuda_host._upload_staged``). Arrays made on the witness lane and read on the lane are kept referenced by the
  pipeline until the lane has synchronised past their last use (the pool rule below).

Errors: ``BackendUnavailable`` without CuPy or a GPU (or fewer GPUs than asked); ``BackendError``
naming the failing CUDA call otherwise, with byte counts for out-of-memory.
Threads: calls for different devices may run concurrently; one device is used by one thread at a time.
Streams: each device's stream is non-blocking (no implicit order with the legacy default stream), so every
device buffer, temporary or not, is allocated and filled on the stream that reads it: CuPy's memory pool
is stream-ordered, and a block freed under another stream could be reused and overwritten while queued
work still reads it (a 2^18 proof failed to verify that way in an earlier version).

Where the code lives: ``cuda_core.CudaCore`` (devices, host memory and transfers, NTT, the calls that read their
result back; ``CudaBackend`` extends it), ``cuda_host`` (page-locked staging and copy-back buffers; its
``STAGE_MIN_BYTES`` and ``STAGE_CHUNK`` are re-exported here) and this module: the stream flow's calls (witness
lane, events, tail splits on the device, queued results and ``collect``/``results``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

try:
    import cupy
except ImportError as exc:  # pragma: no cover - exercised on machines without CuPy
    from .base import BackendUnavailable

    raise BackendUnavailable(f"CuPy is not installed ({exc})") from exc

import gputrace

from ..msm_plan import MsmPlan
from ..tail_split import ones_indices_counted, split_tail
from .base import BackendError, BasesHandle, DeviceArray, LaneInfo, TailSplit
from .cuda_core import CudaCore, _Device, _Queued
from .cuda_host import STAGE_CHUNK, STAGE_MIN_BYTES, _copy_back, _pinned_empty
from .cuda_kernels import check
from .cuda_msm import xyzz_to_g1, xyzz_to_g2
from .cuda_ntt import mont_limbs

__all__ = ["STAGE_CHUNK", "STAGE_MIN_BYTES", "CudaBackend", "CudaCore"]


class _Collected:
    """``collect``'s handle: the page-locked copy of every item, the event after it, what it must keep alive."""

    __slots__ = ("host", "event", "layout", "keep")

    def __init__(self, host: np.ndarray, event, layout: list, keep) -> None:
        self.host, self.event, self.layout, self.keep = host, event, layout, keep


class CudaBackend(CudaCore):
    """CUDA implementation of ``ProverBackend`` over ``devices`` GPUs (0 .. devices-1)."""

    name = "cuda"
    supports_device_witness = True
    supports_g2 = True

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
