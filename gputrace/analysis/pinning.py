"""Pinning economics: what host-memory pinning cost next to the transfers it bought.

Pinning (``cudaHostRegister``) makes host-to-device copies faster but costs time itself
(the seed's 8.6 s). Per device this module adds up ``pin``/``unpin`` time and bytes and the
``h2d`` time and bytes, and states the break-even: pinned transfers including the pin and
unpin cost run at ``effective_gbps``; pinning pays off only if pageable copies would have
been slower than that. Given a measured pageable bandwidth (for example from a baseline run
without pinning) it also gives the net saving. Pure numpy; any thread.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from gputrace.analysis._common import PIN_KIND, fmt_ns
from gputrace.analysis.lanes import device_name
from gputrace.timeline.model import Timeline

GIB = float(1 << 30)


@dataclass(frozen=True)
class PinningReport:
    """Pinning economics for one device (``device`` None: all devices together).

    Times in ns, bandwidths in GB/s (1e9 bytes/s), bytes -1 when no span recorded any.

    * ``pin_count``/``pin_ns``/``pin_bytes``, ``unpin_count``/``unpin_ns``/``unpin_bytes``:
      host durations and recorded bytes of ``pin`` / ``unpin`` spans (``pin``: phase ``pin`` or
      kind ``pin`` other than ``unpin``).
    * ``pin_ns_per_gib``, ``unpin_ns_per_gib``: cost per GiB (NaN without bytes).
    * ``h2d_count``/``h2d_ns``/``h2d_bytes``/``h2d_gbps``: ``h2d`` spans, device time where
      recorded (else host time) and the bandwidth achieved.
    * ``overhead_ns`` = pin_ns + unpin_ns; ``effective_gbps``: h2d bytes over (h2d + overhead)
      time, the break-even pageable bandwidth.
    * ``pageable_gbps``: the reference given by the caller (NaN if none); then
      ``saved_ns`` (pageable copy time minus pinned copy time), ``net_ns`` (saved minus
      overhead; negative means pinning lost time) and ``reuses_to_break_even`` (how many
      times the pinned bytes must be transferred for the saving to repay the overhead).
    """

    device: int | None
    pin_count: int
    pin_ns: int
    pin_bytes: int
    unpin_count: int
    unpin_ns: int
    unpin_bytes: int
    pin_ns_per_gib: float
    unpin_ns_per_gib: float
    h2d_count: int
    h2d_ns: int
    h2d_bytes: int
    h2d_gbps: float
    overhead_ns: int
    effective_gbps: float
    pageable_gbps: float
    saved_ns: float
    net_ns: float
    reuses_to_break_even: float

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        who = "all devices" if self.device is None else device_name(self.device)
        parts = [f"{who}: pin+unpin {fmt_ns(self.overhead_ns)}"]
        if self.pin_bytes > 0:
            parts.append(f"for {self.pin_bytes / GIB:.3g} GiB ({fmt_ns(self.pin_ns_per_gib)}/GiB to pin)")
        if self.h2d_count and self.h2d_bytes > 0:
            parts.append(f"bought h2d of {self.h2d_bytes / GIB:.3g} GiB in {fmt_ns(self.h2d_ns)} "
                         f"at {self.h2d_gbps:.3g} GB/s")
            parts.append(f"break-even: pays off only if pageable copies run below {self.effective_gbps:.3g} GB/s")
        elif self.h2d_count:
            parts.append(f"h2d took {fmt_ns(self.h2d_ns)} (bytes not recorded: no bandwidth or break-even)")
        if not np.isnan(self.net_ns):
            verdict = "saved" if self.net_ns >= 0 else "lost"
            parts.append(f"at {self.pageable_gbps:.3g} GB/s pageable, pinning {verdict} {fmt_ns(abs(self.net_ns))}")
        return "; ".join(parts)


def _sum(mask: np.ndarray, vals: np.ndarray) -> int:
    return int(vals[mask].sum()) if mask.any() else 0


def _bytes(mask: np.ndarray, nb: np.ndarray) -> int:
    v = nb[mask]
    v = v[v >= 0]
    return int(v.sum()) if len(v) else -1


def _report(device, c, pin, unpin, h2d, h2d_dur, pageable_gbps) -> PinningReport:
    host = c["end"] - c["start"]
    nb = c["nbytes"]
    pin_ns, unpin_ns = _sum(pin, host), _sum(unpin, host)
    pin_b, unpin_b = _bytes(pin, nb), _bytes(unpin, nb)
    h_ns, h_b = _sum(h2d, h2d_dur), _bytes(h2d, nb)
    over = pin_ns + unpin_ns
    nan = float("nan")
    h_gbps = h_b / h_ns if h_ns > 0 and h_b > 0 else nan
    eff = h_b / (h_ns + over) if (h_ns + over) > 0 and h_b > 0 else nan
    saved = net = reuses = nan
    if pageable_gbps and pageable_gbps > 0 and h_b > 0:
        saved = h_b / pageable_gbps - h_ns
        net = saved - over
        reuses = over / saved if saved > 0 else float("inf")
    return PinningReport(
        device=device,
        pin_count=int(pin.sum()),
        pin_ns=pin_ns,
        pin_bytes=pin_b,
        unpin_count=int(unpin.sum()),
        unpin_ns=unpin_ns,
        unpin_bytes=unpin_b,
        pin_ns_per_gib=pin_ns / (pin_b / GIB) if pin_b > 0 else nan,
        unpin_ns_per_gib=unpin_ns / (unpin_b / GIB) if unpin_b > 0 else nan,
        h2d_count=int(h2d.sum()),
        h2d_ns=h_ns,
        h2d_bytes=h_b,
        h2d_gbps=h_gbps,
        overhead_ns=over,
        effective_gbps=eff,
        pageable_gbps=float(pageable_gbps) if pageable_gbps else nan,
        saved_ns=saved,
        net_ns=net,
        reuses_to_break_even=reuses,
    )


def pinning_economics(tl: Timeline, pageable_gbps: float | None = None) -> list[PinningReport]:
    """One report per device that has any pin, unpin or h2d span, then an all-devices total
    (``device=None``) when there is more than one. Empty list when the trace has none."""
    c = tl.cols
    ph = c["phase"]
    pid, uid, hid = tl.phase_id("pin"), tl.phase_id("unpin"), tl.phase_id("h2d")
    unpin = (ph == uid) if uid >= 0 else np.zeros(tl.n, bool)
    pin = (((ph == pid) if pid >= 0 else False) | (c["kind"] == PIN_KIND)) & ~unpin
    h2d = (ph == hid) if hid >= 0 else np.zeros(tl.n, bool)
    gd = tl.gpu_duration()
    h2d_dur = np.where(gd >= 0, gd, c["end"] - c["start"])
    any_ = pin | unpin | h2d
    if not any_.any():
        return []
    dev = np.where(c["device"] < 0, -1, c["device"]).astype(np.int64)
    devices = sorted(set(dev[any_].tolist()))
    out = [_report(d, c, pin & (dev == d), unpin & (dev == d), h2d & (dev == d), h2d_dur, pageable_gbps)
           for d in devices]
    if len(devices) > 1:
        out.append(_report(None, c, pin, unpin, h2d, h2d_dur, pageable_gbps))
    return out


def pinning_summary(reports: list[PinningReport], wall_ns: int) -> str:
    """One line on what pinning cost in total, shown on every report's first screen whatever the
    stalls cut (a 113 ms pin+unpin in a 153 s run falls under it): its share of the wall time, the
    bytes pinned, and the break-even pageable bandwidth where h2d bytes were recorded; or that the
    trace has no pin/unpin spans. ``reports``: `pinning_economics` output."""
    tot = next((r for r in reports if r.device is None), reports[0] if len(reports) == 1 else None)
    if tot is None or tot.pin_count + tot.unpin_count == 0:
        return "pinning: no pin/unpin spans in this trace"
    n = sum(1 for r in reports if r.device is not None and r.overhead_ns)
    share = f" ({tot.overhead_ns / wall_ns:.2%} of the {fmt_ns(wall_ns)} wall)" if wall_ns > 0 else ""
    line = (f"pinning: pin+unpin cost {fmt_ns(tot.overhead_ns)}{share}, {tot.pin_count} pin and "
            f"{tot.unpin_count} unpin span{'s' * (tot.unpin_count != 1)}" + (f" on {n} devices" if n > 1 else ""))
    if tot.pin_bytes > 0:
        line += f", {tot.pin_bytes / GIB:.3g} GiB pinned"
    if tot.h2d_bytes > 0 and not np.isnan(tot.effective_gbps):
        line += f"; pays off only if pageable h2d runs below {tot.effective_gbps:.3g} GB/s"
    if not np.isnan(tot.net_ns):
        verdict = "saved" if tot.net_ns >= 0 else "lost"
        line += f"; at {tot.pageable_gbps:.3g} GB/s pageable it {verdict} {fmt_ns(abs(tot.net_ns))}"
    return line
