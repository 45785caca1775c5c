"""Ranks and collectives: communication time per rank, its overlap with compute, and stragglers.

* A row's **rank** is its resource's ``gputrace.rank`` (written by ``gputrace record`` from ``RANK``, and by
  the Kineto reader from ``distributedInfo.rank``), else ``rank`` / ``distributedInfo.rank``; a trace
  with no rank attribute has no ranks and this module reports nothing.
* **Communication** rows: NCCL kernels (``ncclKernel_*``, ``ncclDevKernel_*``: device time) and, where a
  rank has none, the host-side collectives that torch.distributed records (``c10d::allreduce_`` ...,
  ``nccl:all_reduce``, ``gloo:all_reduce``) and the program's own ranges named after a collective
  (``all_reduce``, ``allreduce``, ``all_gather``, ``reduce_scatter``, ``broadcast``, ``all_to_all``, ``barrier``:
  a ``gputrace.phase``, an NVTX range or a ``record_function`` around the call, which is what ``gputrace record``
  sees of a gloo or MPI collective on the host). Per rank one kind is used, in this order: ``c10d::`` calls,
  then such named ranges, then the backend's annotations, so a collective is not counted twice.
  Compute: every other kernel.
* Per rank: ``comm_ns`` (union of its communication), ``overlap_ns`` (the part of it during compute kernels
  of that rank) and ``exposed_ns`` = comm − overlap: communication nothing hid.
* **Collectives matched across ranks**: per rank, the calls of each collective name in time order (the
  n-th ``c10d::allreduce_`` of every rank is one collective; NCCL kernels per name and stream). A
  collective's *arrival* on a rank is the call's start; the rank that arrived last made the others wait
  ``last arrival − own arrival``. Arrivals compare across processes only on one clock: processes of
  one host share it (CUPTI and Kineto timestamps are the host's epoch clock); across hosts the
  recorder's clock alignment bounds the error (docs/record.md).

Pure; any thread. :func:`collectives` returns plain JSON-able data.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np

from gputrace import activity as A
from gputrace.analysis._common import merged_pairs
from gputrace.analysis.activity_index import KERNEL, activity_index
from gputrace.timeline.model import Timeline

RANK_KEYS = ("gputrace.rank", "rank", "distributedInfo.rank")
_NCCL_KERNEL = re.compile(r"^(?:void\s+)?nccl(?:Dev)?Kernel_|^ncclKernel|^ncclDevKernel")
_HOST_COLLECTIVE = re.compile(
    r"^(?:c10d::(?:allreduce|allgather|all_gather|reduce_scatter|_reduce_scatter|broadcast|alltoall|all_to_all|"
    r"reduce|gather|scatter|barrier|_allgather)\w*|(?:nccl|gloo):\w+)$")
#: A program's own range around a collective call, named after it (exactly; any case).
_NAMED_COLLECTIVE = re.compile(
    r"^(?:all_?reduce|all_?gather|reduce_?scatter|broadcast|all_?to_?all|barrier)$", re.IGNORECASE)


def is_collective_name(name: str) -> bool:
    """Whether a host span name is a collective call (torch.distributed's, or a range named after one)."""
    return bool(_HOST_COLLECTIVE.match(name) or _NAMED_COLLECTIVE.match(name))


def is_comm_kernel(name: str) -> bool:
    """Whether a kernel name (full or short) is an NCCL communication kernel."""
    return bool(_NCCL_KERNEL.search(name.strip()))


def rank_of(res: Mapping) -> int | None:
    """The rank a resource names (see the module docstring), or None."""
    for k in RANK_KEYS:
        v = res.get(k)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        if isinstance(v, str) and v.strip().isdigit():
            return int(v)
    return None


def _union(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if len(s) == 0:
        return s, e
    o = np.argsort(s, kind="stable")
    s, e = s[o], e[o]
    run_end = np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > run_end[:-1]
    idx = np.flatnonzero(new)
    return s[new], np.maximum.reduceat(e, idx)


def _covered(s: np.ndarray, e: np.ndarray, cs: np.ndarray, ce: np.ndarray) -> int:
    """Total length of the union (s, e) covered by the union (cs, ce)."""
    s, e = _union(s, e)
    cs, ce = _union(cs, ce)
    tot = 0
    j = 0
    for a, b in zip(s.tolist(), e.tolist(), strict=True):
        while j < len(cs) and ce[j] <= a:
            j += 1
        k = j
        while k < len(cs) and cs[k] < b:
            tot += max(0, min(b, int(ce[k])) - max(a, int(cs[k])))
            k += 1
    return tot


def collectives(tl: Timeline, top: int = 20) -> dict:
    """``{"ranks": [...], "collectives": [...], "stragglers": [...]}``; empty lists when the trace has fewer
    than one rank. ``ranks``: per rank ``rank``, ``source`` ("nccl kernels" / "host calls"), ``comm_ns``,
    ``overlap_ns``, ``exposed_ns``, ``calls``, ``intervals`` (its communication on the epoch clock, ``[start,
    end]`` pairs: ``_common.merged_pairs``), ``compute_ns`` (the union of its compute kernels: what could hide
    its communication, the bound of the exposed-comm finding). ``collectives`` (at most ``top``, longest wait
    first): ``name``,
    ``index`` (n-th of that name), ``last_rank``, ``wait_ns`` (summed over the other ranks), ``waits``
    ({rank: ns}). ``stragglers``: per rank that arrived last at least once, most often last first: ``rank``,
    ``last`` (how many collectives), ``of`` (matched collectives), ``caused_ns`` (the others' summed wait),
    ``median_wait_ns`` (per collective it was last at)."""
    empty: dict = {"ranks": [], "collectives": [], "stragglers": []}
    ranks_of_res = [rank_of(r) for r in tl.resources]
    if tl.n == 0 or not any(r is not None for r in ranks_of_res):
        return empty
    c = tl.cols
    res = c["resource"]
    row_rank = np.full(tl.n, -1, np.int64)
    for i, rk in enumerate(ranks_of_res):
        if rk is not None:
            row_rank[res == i] = rk
    idx = activity_index(tl)
    kr = idx.rows[idx.what == KERNEL]
    ks, ke = idx.start[idx.what == KERNEL], idx.end[idx.what == KERNEL]
    kcomm = np.array([is_comm_kernel(str(tl.attrs.get(int(r), {}).get(A.KERNEL_NAME, tl.name_of(int(r)))))
                      for r in kr.tolist()], bool)
    phase_names = tl.phases
    host_coll = np.zeros(tl.n, bool)
    coll_ids = [i for i, p in enumerate(phase_names) if _HOST_COLLECTIVE.match(p) or _NAMED_COLLECTIVE.match(p)]
    if coll_ids:
        host_coll = np.isin(c["phase"], np.asarray(coll_ids))
    ranks_out, events = [], {}  # events: rank -> list of (name, key, start)
    for rk in sorted({int(x) for x in row_rank.tolist() if x >= 0}):
        on = row_rank[kr] == rk
        comm_k = on & kcomm
        if comm_k.any():
            cs, ce, source = ks[comm_k], ke[comm_k], "nccl kernels"
            ev = [(tl.name_of(int(r)), int(idx.stream[np.searchsorted(idx.rows, r)]), int(s))
                  for r, s in zip(kr[comm_k].tolist(), cs.tolist(), strict=True)]
        else:
            hr = np.flatnonzero(host_coll & (row_rank == rk))
            # One kind per collective: the calls (c10d::...), else the program's own named ranges, else the
            # backend's own annotations (gloo:/nccl:).
            hn = [(r, phase_names[int(c["phase"][r])]) for r in hr.tolist()]
            calls = ([r for r, n in hn if n.startswith("c10d::")]
                     or [r for r, n in hn if _NAMED_COLLECTIVE.match(n)] or [r for r, _ in hn])
            use = np.asarray(calls, np.int64)
            cs, ce, source = c["start"][hr], c["end"][hr], "host calls"
            ev = [(phase_names[int(c["phase"][r])], -1, int(c["start"][r])) for r in use.tolist()]
        comm = int((_union(cs, ce)[1] - _union(cs, ce)[0]).sum()) if len(cs) else 0
        comp = on & ~kcomm
        overlap = _covered(cs, ce, ks[comp], ke[comp]) if len(cs) and comp.any() else 0
        compute = int((_union(ks[comp], ke[comp])[1] - _union(ks[comp], ke[comp])[0]).sum()) if comp.any() else 0
        ranks_out.append({"rank": rk, "source": source, "comm_ns": comm, "overlap_ns": overlap,
                          "exposed_ns": comm - overlap, "calls": len(ev), "intervals": merged_pairs(cs, ce),
                          "compute_ns": compute})
        events[rk] = sorted(ev, key=lambda t: t[2])
    matched: list[dict] = []
    if len(events) >= 2:
        per: dict[int, dict[tuple, list[int]]] = {}
        for rk, ev in events.items():
            d: dict[tuple, list[int]] = {}
            for name, key, s in ev:
                d.setdefault((name, key), []).append(s)
            per[rk] = d
        keys = set.intersection(*(set(d) for d in per.values()))
        for k in sorted(keys, key=str):
            n = min(len(per[rk][k]) for rk in per)
            for i in range(n):
                arr = {rk: per[rk][k][i] for rk in per}
                last = max(arr, key=lambda rk: arr[rk])
                waits = {rk: arr[last] - t for rk, t in arr.items() if rk != last}
                matched.append({"name": k[0], "index": i, "last_rank": last, "wait_ns": int(sum(waits.values())),
                                "waits": {str(rk): int(w) for rk, w in waits.items()}, "start": int(arr[last])})
    strag: dict[int, list[int]] = {}
    for m in matched:
        strag.setdefault(m["last_rank"], []).append(m["wait_ns"])
    # The straggler is the rank last most often (a one-off, such as a profiler starting late on one rank,
    # does not make a straggler); ``median_wait_ns``: what one collective typically cost the others.
    stragglers = [{"rank": rk, "last": len(v), "of": len(matched), "caused_ns": int(sum(v)),
                   "median_wait_ns": int(np.median(v))} for rk, v in strag.items()]
    stragglers.sort(key=lambda s: (-s["last"], -s["caused_ns"]))
    matched.sort(key=lambda m: -m["wait_ns"])
    return {"ranks": ranks_out, "collectives": matched[:top], "matched": len(matched), "stragglers": stragglers}
