"""``ArgsSharer``: big ``args`` dicts of other tools' Chrome traces kept as a ``TemplateAttrs`` over one
shared dict per distinct static part (``chrome_foreign`` passes dicts of ``SHARE_MIN_KEYS`` keys or more).

A PyTorch-profiler (Kineto) kernel event carries 13 ``args``, of which only the ids (``External id``,
``correlation``) change from launch to launch of one kernel; the rest (device, stream, grid, block,
occupancy, ...) repeats. A dict per kernel costs ~1 KB; a ``TemplateAttrs`` over the shared template
costs ~170 bytes. Sharing loses nothing: two rows share a template only if their ``args`` with the
varying values replaced by ``null`` have byte-equal JSON encodings, which is exact in key order, value
types (``1``, ``1.0`` and ``true`` differ) and nested values; each row keeps its own varying values.
The number of templates is bounded: a trace whose static parts do not repeat stops being shared
once it is reached, having kept little more than its dicts would. Not thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from gputrace.timeline.row_attrs import TemplateAttrs

__all__ = ["ArgsSharer"]

#: Keys whose values change from event to event of one kernel/copy (kept per row, never shared).
VARYING = ("External id", "correlation", "Ev Idx", "Sequence number", "bytes", "memory bandwidth (GB/s)")
#: Distinct templates kept at most; once reached, sharing stops (the rows keep their dicts).
MAX_TEMPLATES = 4096


class ArgsSharer:
    """``views(dicts)``: each decoded ``args`` dict (owned by the caller's reader) itself or an equal
    ``TemplateAttrs``, with the same keys in the same order."""

    def __init__(self) -> None:
        self._templates: dict[bytes, dict] = {}
        self._plans: dict[tuple, tuple[tuple, dict]] = {}  # key order -> (its varying keys, them -> None)
        self._encode = msgspec.json.Encoder().encode
        self.enabled = True

    def views(self, dicts: list[dict]) -> list[Mapping]:
        """A Mapping equal to each of ``dicts`` (in place, so one loop: this runs once per device event).
        A dict that becomes a template is changed in place (its varying values set to None) and must not
        be changed again by the caller; the others are returned as they were."""
        plans, templates, encode = self._plans, self._templates, self._encode
        out: list[Mapping] = []
        for a in dicts:
            if not self.enabled:
                out.append(a)
                continue
            order = tuple(a)
            plan = plans.get(order)
            if plan is None:
                ks = tuple(k for k in VARYING if k in a)
                plan = (ks, dict.fromkeys(ks))
                if len(plans) < MAX_TEMPLATES:
                    plans[order] = plan
            ks, nulls = plan
            vs = tuple(map(a.__getitem__, ks))
            a.update(nulls)  # in place: every key keeps its position
            try:
                text = encode(a)
            except (TypeError, ValueError, OverflowError):  # a value JSON cannot hold exactly: keep the dict
                a.update(zip(ks, vs, strict=True))
                out.append(a)
                continue
            shared = templates.get(text)
            if shared is None:
                if len(templates) >= MAX_TEMPLATES:
                    self.enabled = False
                    a.update(zip(ks, vs, strict=True))  # back as it was (same positions)
                    out.append(a)
                    continue
                templates[text] = shared = a
            out.append(TemplateAttrs(shared, ks, vs))
        return out
