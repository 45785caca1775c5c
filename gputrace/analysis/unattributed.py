"""Unattributed time: the part of a parent span not covered by any of its children.

The seed's 8.6 s gap between the wrapper timer (44.2 s) and the inner timer (35.6 s) is
exactly this: time inside ``prove`` that no recorded sub-phase explains (there, host-memory
pinning). A child covers its parent while its host *or* device side is active (so a host
``ntt`` enqueue whose kernels run longer still covers the wait for them).

Only *host* parents are examined by default (no device times, kind other than ``gpu``): a
GPU phase such as ``msm_h`` with a small copy child is not 99 % "unattributed", it is its
own kernel work; what a GPU phase leaves unexplained is the launch gaps between its kernels,
measured from GPU activity spans (`gpu_activity`), not from child spans. Pure numpy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gputrace.analysis._common import GPU_KIND, fmt_ns, merged_pairs_by_group, offsets_from_counts, uncovered
from gputrace.timeline.model import Timeline


@dataclass
class Unattributed:
    """Unattributed time per parent span, columnar, largest ``unattributed_ns`` first.

    * ``row``: the parent's row; ``phase``: phase id into ``phases``; ``device``: its device.
    * ``duration_ns``: the parent's host duration; ``covered_ns``: the union of its children
      (clipped to it); ``unattributed_ns`` = duration - covered; ``fraction`` = that / duration.
    * Uncovered pieces for drawing, CSR: entry ``i``'s pieces are
      ``piece_offsets[i]:piece_offsets[i+1]`` of ``piece_start``/``piece_end`` (epoch ns).
    """

    row: np.ndarray
    phase: np.ndarray
    device: np.ndarray
    duration_ns: np.ndarray
    covered_ns: np.ndarray
    unattributed_ns: np.ndarray
    fraction: np.ndarray
    piece_offsets: np.ndarray
    piece_start: np.ndarray
    piece_end: np.ndarray
    phases: list[str]

    def __len__(self) -> int:
        return int(len(self.row))

    def pieces(self, i: int) -> list[tuple[int, int]]:
        a, b = int(self.piece_offsets[i]), int(self.piece_offsets[i + 1])
        return list(zip(self.piece_start[a:b].tolist(), self.piece_end[a:b].tolist(), strict=True))

    def by_path(self, tl: Timeline) -> list[dict]:
        """Totals per phase path (``prove/ntt``): ``{"path", "count", "duration_ns",
        "unattributed_ns", "fraction", "intervals"}``, largest first. ``tl`` is the Timeline analysed.
        ``intervals``: the union of the path's uncovered pieces over its instances, ``[start, end]`` pairs on
        the epoch clock (instances in parallel processes overlap there: the union is the wall time they took;
        at most ``MAX_INTERVALS`` pairs, see ``_common.merged_pairs``)."""
        acc: dict[str, list[int]] = {}
        entry_path = np.zeros(len(self.row), np.int64)  # entry -> position of its path in acc
        for i, (p, d, u) in enumerate(zip(tl.paths(self.row), self.duration_ns.tolist(), self.unattributed_ns.tolist(),
                                          strict=True)):
            a = acc.setdefault(p, [len(acc), 0, 0, 0])
            entry_path[i] = a[0]
            a[1] += 1
            a[2] += d
            a[3] += u
        owner = np.repeat(np.arange(len(self.row)), np.diff(self.piece_offsets))
        pairs = merged_pairs_by_group(entry_path[owner], self.piece_start, self.piece_end, len(acc))
        out: list[dict[str, Any]] = [
            {"path": p, "count": c, "duration_ns": d, "unattributed_ns": u, "fraction": u / d if d else 0.0,
             "intervals": pairs[k]} for p, (k, c, d, u) in acc.items()]
        out.sort(key=lambda x: -x["unattributed_ns"])
        return out

    def describe(self, i: int, tl: Timeline) -> str:
        r = int(self.row[i])
        return (
            f"{tl.path(r)}: {fmt_ns(self.unattributed_ns[i])} of {fmt_ns(self.duration_ns[i])} "
            f"({self.fraction[i]:.0%}) not covered by any child span"
        )


def unattributed_time(tl: Timeline, min_ns: int = 0, min_fraction: float = 0.0, parents: str = "host",
                      among: np.ndarray | None = None) -> Unattributed:
    """Every span that has children, with its unattributed time, kept when
    ``unattributed_ns >= min_ns`` and ``fraction >= min_fraction`` (and > 0).

    ``parents``: ``"host"`` (default) examines host parents only (see module docstring);
    ``"all"`` every parent, GPU phases included. ``among``: a boolean mask over the rows; only rows
    it marks may be parents (the report passes ``api_calls.phase_mask``: a framework operator such as
    Kineto's ``aten::addmm`` or a CUDA API call is not a phase, and the time it spends in itself is its
    own work, not time "no phase explains"); every row still covers its parent as a child. None: any
    row. Raises ValueError on another ``parents`` value or a mask of the wrong length."""
    if parents not in ("host", "all"):
        raise ValueError(f"unattributed_time: parents must be 'host' or 'all', got {parents!r}")
    if among is not None and len(among) != tl.n:
        raise ValueError(f"unattributed_time: among has {len(among)} rows, the timeline {tl.n}")
    c = tl.cols
    n = tl.n
    par = c["parent"]
    has_kids = np.zeros(n, bool)
    if n:
        has_kids[par[par >= 0]] = True
    if parents == "host":
        has_kids &= (c["gpu_start"] < 0) & (c["kind"] != GPU_KIND)
    if among is not None:
        has_kids &= np.asarray(among, bool)
    g0, g1 = c["gpu_start"], c["gpu_end"]
    dev_ok = (g0 >= 0) & (g1 >= g0)
    cs = np.where(dev_ok, np.minimum(c["start"], g0), c["start"])
    ce = np.where(dev_ok, np.maximum(c["end"], g1), c["end"])
    kids = np.flatnonzero(par >= 0)
    prow, pstart, pend = uncovered(tl, has_kids, kids, cs, ce)
    dur_all = c["end"] - c["start"]
    un = (np.bincount(prow, weights=(pend - pstart).astype(np.float64), minlength=n).astype(np.int64) if n
          else np.zeros(0, np.int64))
    rows = np.flatnonzero(has_kids)
    u = un[rows]
    d = dur_all[rows]
    frac = np.where(d > 0, u / np.maximum(d, 1), 0.0)
    keep = (u > 0) & (u >= min_ns) & (frac >= min_fraction)
    rows, u, d, frac = rows[keep], u[keep], d[keep], frac[keep]
    o = np.argsort(-u, kind="stable")
    rows, u, d, frac = rows[o], u[o], d[o], frac[o]
    # Pieces grouped in the output row order.
    rank = np.full(n, -1, np.int64)
    rank[rows] = np.arange(len(rows))
    pr = rank[prow] if len(prow) else np.zeros(0, np.int64)
    sel = pr >= 0
    pr, ps, pe = pr[sel], pstart[sel], pend[sel]
    po = np.lexsort((ps, pr))
    pr, ps, pe = pr[po], ps[po], pe[po]
    offs = offsets_from_counts(np.bincount(pr, minlength=len(rows)))
    return Unattributed(
        row=rows,
        phase=c["phase"][rows].astype(np.int64),
        device=c["device"][rows].astype(np.int64),
        duration_ns=d,
        covered_ns=d - u,
        unattributed_ns=u,
        fraction=frac,
        piece_offsets=offs,
        piece_start=ps,
        piece_end=pe,
        phases=list(tl.phases),
    )
