"""Chrome Trace Event / Perfetto JSON: read (``read``: ``read_chrome``, ``read_chrome_head``, ``from_chrome``)
and write (``export``: ``write_chrome``, ``to_chrome``; streamed by ``stream``).

Writer — opens in ui.perfetto.dev and chrome://tracing:

* one *process* per host CPU and one per (host, GPU), named by ``process_name`` metadata and ordered
  by ``process_sort_index`` (GPUs of a host first, as in the TUI);
* one *thread* per lane (``stream:N`` / ``thread:NAME``) with ``thread_name`` / ``thread_sort_index``;
* one ``X`` complete event per span, ``ts``/``dur`` in microseconds as floats relative to the first
  span (so nanoseconds survive; the epoch origin is ``otherData.t0_epoch_ns``);
* spans with device times (``gpu_start``/``gpu_end``) on a GPU lane are drawn at device time, with
  the host enqueue times kept in ``args``;
* ``X`` events on one thread must nest (Perfetto drops or flags the others), so a span that only
  partly overlaps a span already on its thread goes to an extra thread ``<lane> (overlap N)``;
* flow arrows (``s``/``f`` pairs) from each span to its children on other lanes (host phase -> the
  GPU work under it), unless ``flows=False``;
* GPU activity spans (kernels, copies, memsets, syncs from CUPTI or an Nsight import) carry Kineto's
  categories (``kernel``, ``gpu_memcpy``, ``gpu_memset``, ``cuda_sync``) and arguments (``device``,
  ``stream``, ``correlation``/``External id``, ``grid``, ``block``, ``registers per thread``, ``shared
  memory``), so Holistic Trace Analysis and other PyTorch-profiler tools find them;
* written as a stream of chunks (``stream``), with a progress callback.

Reader — gputrace's own files round-trip (lanes, ids and attributes are restored from ``otherData`` and
``args``); other tools' traces (PyTorch profiler / Kineto, ``chrome://tracing`` recordings) map ``X`` events
and ``B``/``E`` pairs onto lanes: events with ``args.device`` and ``args.stream`` (Kineto GPU activity) go to
that GPU's stream lane, the rest to ``thread:<thread_name>``. Nesting comes from time containment per lane
(``gputrace.timeline.nesting``); a GPU event whose ``args.correlation`` matches a CPU runtime call gets that
call's enclosing span as its parent. Instant, counter, flow and async events are skipped (counted in the
``skipped`` entry of ``from_chrome``'s ``stats``). Modules: ``read`` (the entrance), ``events`` (the
accumulator and its per-event path), ``fields`` (field checks, ``ChromeFormatError``), ``scan`` (the
streaming JSON scanner), ``typed`` and ``batch`` (our own files, column-wise), ``foreign`` (other tools'
events), ``args_share``, ``kineto``
(PyTorch-profiler rows onto the GPU-activity conventions; ``kineto_roles``, ``kineto_device``,
``kineto_mapping``).

Pure functions; no threads. Errors name the file and the event index. Importing this package imports none
of its modules (the format table loads them by name).
"""
