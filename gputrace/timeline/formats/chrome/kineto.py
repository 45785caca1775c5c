"""PyTorch-profiler (Kineto) traces onto gputrace's GPU-activity conventions (docs/trace-format.md,
"GPU activity"; docs/interop.md, "PyTorch profiler traces").

The Chrome reader turns a Kineto trace into spans that keep Kineto's ``args`` and category
(``chrome.cat``); :func:`map_kineto` then rewrites that Timeline so that every analysis sees the same
rows a CUPTI recording or an Nsight import gives:

* ``kernel`` / ``gpu_memcpy`` / ``gpu_memset`` -> kernel / memcpy / memset activity spans
  (``gputrace.activity``, ``gputrace.source = "kineto"``, ``cuda.kernel.name`` (demangled full name),
  ``cuda.stream``, ``cuda.correlation_id``, grid/block/registers, ``cuda.memcpy.kind`` and the source and
  destination memory kinds parsed from ``Memcpy HtoD (Pageable -> Device)``, ``cuda.memset.kind``;
  span name: the kernel's short name, ``[CUDA memcpy HtoD]``, ``[CUDA memset]``), each a child of the
  innermost *phase* around its launching API call (found through the call's ``correlation``).
* ``cuda_runtime`` / ``cuda_driver`` -> API calls (``gputrace.role = "api"``, ``cuda.api``; Kineto's
  ``correlation`` stays in their args) on their own lane ``api:THREAD`` beside the thread's lane; a kernel
  or copy gets ``cuda.api`` and ``cuda.launch.api_start_ns`` from its launching call. ``cudaStreamSynchronize``,
  ``cudaDeviceSynchronize``, ``cudaEventSynchronize`` (and the driver's ``cuStream/Ctx/EventSynchronize``)
  are also sync activity spans (``[CUDA sync stream]`` ...) on the thread's lane, with the trace's device
  when it has one.
* ``user_annotation`` (``record_function``, ``ProfilerStep#N``) -> phases, as NVTX ranges are.
* ``cpu_op`` / ``python_function`` -> framework operators (``gputrace.role = "op"``): kept, drawn and
  used for nesting and for "what the host ran", but not phases.
* profiler bookkeeping -> ``gputrace.role = "profiler"``: the ``Trace`` span ``PyTorch Profiler (0)``,
  ``overhead`` rows (``Activity Buffer Request``), ``gpu_user_annotation`` (the device-side copy of an
  annotation: no device time of its own). Rows of any other category (or none) are phases, as in any
  Chrome trace. The reader has already put ``gpu_user_annotation`` rows on the lane ``annotations:stream N``
  of their GPU, next to that stream's lane (``events._Events._lanes``: the GPU of the trace's device rows on
  the row's pid/tid, else of a process labelled ``GPU N``, else a host thread lane as before); their role
  keeps them out of GPU busy, idle gaps, findings and the phases tables wherever they sit.

The header's ``distributedInfo`` becomes resource attributes (``gputrace.rank``,
``gputrace.world_size``, ``distributedInfo.*``), with ``gputrace.source = "kineto"``.

A Kineto trace is recognised by its categories, not by its device rows: a CPU-only ``torch.profiler``
trace (``activities=[ProfilerActivity.CPU]``: annotations, operators and the ``Trace`` span, no kernel or
CUDA API row) is mapped as well, so its bookkeeping and operators are never phases either. A Chrome trace
with none of Kineto's own categories (the sets below except ``Trace`` / ``overhead``, which are common
words) is returned unchanged. Pure apart from the reader's own attribute dicts, which gain the new keys in
place (a shared ``TemplateAttrs`` gets a new template instead); any thread.

Modules: ``kineto_roles`` (which row is what: categories, roles, host-wait APIs, the correlation -> API call
index), ``kineto_device`` (a device row's activity attributes and their plan per args template),
``kineto_mapping`` (the one pass: launch join, rewrite by role, ``api:`` lanes, the new Timeline) and this
module (the entrance and the header's resource attributes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gputrace.timeline.formats.chrome.kineto_mapping import KinetoMapping
from gputrace.timeline.formats.chrome.kineto_roles import KINETO_SYNC_APIS, is_kineto
from gputrace.timeline.model import Timeline

__all__ = ["KINETO_SYNC_APIS", "is_kineto", "map_kineto", "kineto_resource"]


def kineto_resource(head: Mapping[str, Any]) -> dict:
    """Resource attributes from a Kineto header (``distributedInfo``, versions); ``{}`` for none."""
    res: dict[str, Any] = {}
    di = head.get("distributedInfo") if isinstance(head, Mapping) else None
    if isinstance(di, Mapping):
        for k in ("backend", "rank", "world_size", "pg_count"):
            v = di.get(k)
            if isinstance(v, (int, str)) and not isinstance(v, bool):
                res[f"distributedInfo.{k}"] = v
        if isinstance(di.get("rank"), int):
            res["gputrace.rank"] = di["rank"]
        if isinstance(di.get("world_size"), int):
            res["gputrace.world_size"] = di["world_size"]
    for k in ("cuda_driver_version", "cuda_runtime_version", "cupti_version"):  # not trace_id: it differs every run
        v = head.get(k) if isinstance(head, Mapping) else None
        if isinstance(v, (int, str)) and not isinstance(v, bool):
            res[f"kineto.{k}"] = v
    return res


def map_kineto(tl: Timeline, head: Mapping[str, Any] | None = None) -> Timeline:
    """``tl`` with Kineto's rows mapped onto the GPU-activity conventions (see the module docstring);
    ``tl`` itself when it is not a Kineto trace.

    Cost: one pass over the rows with per-row work of a few dict operations; whatever depends only on a
    kernel's name, an API name or an args template is computed once per distinct value. The reader's own
    attribute dicts (which it owns, and which category-shared dicts share by category) gain the new keys
    in place; shared ``TemplateAttrs`` get one new template per (template, name)."""
    if tl.n == 0 or not is_kineto(tl):
        return tl
    m = KinetoMapping(tl)
    m.map_rows()
    m.place_api_calls()
    m.apply_updates()
    return m.build(kineto_resource(head or {}))
