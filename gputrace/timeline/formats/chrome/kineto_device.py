"""The attributes a Kineto device row (``kernel`` / ``gpu_memcpy`` / ``gpu_memset``) gets as an activity span:
those that depend only on its category and name (``device_name_attrs``: activity, demangled kernel name, copy
and memset kinds, span name), and the plan that adds the launching API call and Kineto's per-launch args
(``device_plan`` for a plain dict, ``template_plan`` for rows that share one args template).

``kineto_mapping`` calls these once per distinct name or args template, not per row. Pure; any thread.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from operator import itemgetter
from typing import Any

from gputrace import activity as A
from gputrace.kernel_names import demangle

__all__ = ["device_name_attrs", "device_plan", "template_plan"]

_MEMCPY = re.compile(r"Memcpy\s+(\w+)(?:\s*\((\w[\w ]*?)\s*->\s*(\w[\w ]*?)\))?")
_MEMSET = re.compile(r"Memset\s*\((\w[\w ]*?)\)")


def _memcpy_attrs(name: str) -> dict:
    m = _MEMCPY.match(name)
    if not m:
        return {A.MEMCPY_KIND: "unknown", A.MEMCPY_SRC: "UNKNOWN", A.MEMCPY_DST: "UNKNOWN"}
    kind = A.copy_kind(m.group(1))
    src, dst = A.memory_kind(m.group(2)), A.memory_kind(m.group(3))
    # Kineto writes the device side as "Device"; a copy without the bracket names no kinds.
    return {A.MEMCPY_KIND: kind, A.MEMCPY_SRC: src, A.MEMCPY_DST: dst}


def device_name_attrs(k: str, name: str) -> tuple[dict[str, Any], str]:
    """(the activity attributes that depend only on a device row's category ``k`` (one of
    ``kineto_roles.DEVICE_CATS``) and Kineto name ``name``, the span name: the kernel's short name,
    ``[CUDA memcpy KIND]``, ``[CUDA memset]``). A new dict each call."""
    static: dict[str, Any] = {A.SOURCE: "kineto"}
    if k == "kernel":
        full = demangle(name)
        static[A.ACTIVITY], static[A.KERNEL_NAME] = "kernel", full
        short = A.short_kernel_name(full)
    elif k == "gpu_memcpy":
        static[A.ACTIVITY] = "memcpy"
        static.update(_memcpy_attrs(name))
        short = A.memcpy_name(static[A.MEMCPY_KIND])
    else:
        static[A.ACTIVITY] = "memset"
        m = _MEMSET.match(name)
        static[A.MEMSET_KIND] = A.memory_kind(m.group(1)) if m else "UNKNOWN"
        short = A.MEMSET_NAME
    return static, short


#: Kineto args of a device row -> activity attribute; the value is copied as Kineto wrote it (present or not).
#: Kineto's "shared memory" is static plus dynamic (a kernel CUPTI reports as 0 + 512 bytes reads 512 there).
_DEVICE_FIELDS: tuple[tuple[str, str], ...] = (
    ("stream", A.STREAM), ("correlation", A.CORRELATION), ("registers per thread", A.REGISTERS),
    ("shared memory", A.SHARED_TOTAL), ("grid", A.GRID), ("block", A.BLOCK))


def device_plan(dev: tuple[dict, int], fixed: Mapping, per_row_keys: tuple, cat: str,
                api: str | None) -> tuple[dict, int, list]:
    """(static attributes, short-name id, per-row fields ``[(index in per_row_keys, attribute)]``) of a device
    row whose args are ``fixed`` apart from ``per_row_keys`` (a ``TemplateAttrs`` overlay); ``dev`` is the
    row's (``device_name_attrs`` attributes, span-name id), not modified. The attributes come in one order
    whichever of them are per-row (``template_plan`` keeps it): the source's, the API, the fields in
    ``_DEVICE_FIELDS`` order (the launch start is added last, by the caller)."""
    static, short_id = dev
    static = dict(static)
    if api is not None:
        static[A.API] = api
    fields = []
    for src, dst in _DEVICE_FIELDS:
        if cat != "kernel" and dst not in (A.STREAM, A.CORRELATION):
            continue
        if src in per_row_keys:
            fields.append((per_row_keys.index(src), dst))
            static[dst] = None  # its place in the order; the value is the row's
        elif src in fixed:
            static[dst] = fixed[src]
    return static, short_id, fields


def template_plan(dev: tuple[dict, int], shared: Mapping, keys: tuple, cat: str, api: str | None,
                  launched: bool) -> tuple[dict, tuple, Any, int]:
    """How rows sharing one args template (``shared``, per-row ``keys``) become activity rows sharing one new
    template: (the template, the overlay's keys, ``itemgetter`` of the overlay values the new per-row
    attributes copy (None: none), short-name id). The overlay is the row's own values, then those copies,
    then the launching call's start when ``launched``; the template orders the keys as a plain dict of the
    same row gets them (``device_plan``), so both iterate alike."""
    static, short_id, fields = device_plan(dev, shared, keys, cat, api)
    new_keys = tuple(dst for _, dst in fields) + ((A.LAUNCH_API_START,) if launched else ())
    tpl = dict(shared)
    tpl.update(static)  # per-row fields hold None here: placeholders, as the reader's templates have
    if launched:
        tpl[A.LAUNCH_API_START] = 0
    idx = [i for i, _ in fields]
    pick: Any = None
    if len(idx) == 1:
        i0 = idx[0]
        pick = lambda v: (v[i0],)  # noqa: E731 (itemgetter of one index gives the value, not a tuple)
    elif idx:
        pick = itemgetter(*idx)
    return tpl, keys + new_keys, pick, short_id
