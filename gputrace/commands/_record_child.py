"""The child interpreter of ``gputrace record``: record, run the program as ``__main__``, write the trace.

``python -m gputrace.commands._record_child script.py args`` (or ``-m module args``). Reads
``GPUTRACE_RECORD_TRACE`` (trace file), ``GPUTRACE_RECORD_SUMMARY`` (JSON summary for the parent),
``GPUTRACE_RECORD_SERVICE`` and ``GPUTRACE_CUDA_ACTIVITY``. The program runs inside one root span named
``python <script>`` (its gputrace phases, CUDA activity and top-level NVTX ranges hang under it); its exit status is this
process's exit status.
"""

from __future__ import annotations

import json
import os
import runpy
import sys


def main(argv: list[str]) -> int:
    import logging

    import gputrace
    from gputrace.trace import records
    from gputrace.trace.recorder import get_recorder

    module = argv[0] == "-m"
    target = argv[1] if module else argv[0]
    prog_args = argv[2:] if module else argv[1:]
    label = f"python -m {target}" if module else f"python {os.path.basename(target)}"
    # The parent's closing line says whether CUDA activity was collected (and why not): no second warning.
    logging.getLogger("gputrace.trace").setLevel(logging.ERROR)
    rec = gputrace.configure(
        trace_file=os.environ["GPUTRACE_RECORD_TRACE"],
        service_name=os.environ.get("GPUTRACE_RECORD_SERVICE") or os.path.basename(target),
        resource={"process.command_args": [target, *prog_args]},
        cuda_markers=True,
    )
    root = gputrace.phase(label, kind="host")
    root.__enter__()  # entered here, closed in finally: gputrace phases of the program nest under it
    if rec.join is not None:
        # CUDA work outside any phase or NVTX range carries the root's external id: register the root's ids
        # now (its span is exported only at the end) so that work is not held back until then.
        with rec._drain_lock:  # ids come from the exporter's IdSource; the join is the exporter's
            tid, sid = records._ids_of(root, rec.ids)
            start = root.t0 + rec.epoch_offset_ns
            rec.join.root = (tid, sid, start)
            if root.xid:
                rec.join.register_phase(root.xid, tid, sid, start)
    rc = 0
    err: BaseException | None = None
    sys.argv = [target, *prog_args]
    try:
        if module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
            runpy.run_path(target, run_name="__main__")
    except SystemExit as e:
        code = e.code
        rc = code if isinstance(code, int) else (0 if code is None else 1)
        if rc:
            err = e
    except BaseException as e:  # the program's own failure: reported like python would, status 1
        import traceback

        traceback.print_exc()
        rc, err = 1, e
    finally:
        root.__exit__(type(err) if err is not None else None, err, None)
        rec = get_recorder() or rec  # (the program may have configured its own recorder)
        summary = gputrace.shutdown()
        _write_summary(summary, rec)
    return rc


def _write_summary(summary, rec) -> None:
    path = os.environ.get("GPUTRACE_RECORD_SUMMARY")
    if not path:
        return
    info = {
        "spans": summary.spans_recorded,
        "dropped": summary.spans_dropped,
        "activity_spans": rec.activity_spans,
        "cuda_activity_asked": rec.cupti is not None or rec.cuda_activity_error is not None,
        "cuda_activity_error": rec.cuda_activity_error,
        "sink_errors": [e for s in summary.sinks for e in s.errors],
    }
    from gputrace.atomic_write import write_atomic

    write_atomic(path, json.dumps(info))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print("usage: python -m gputrace.commands._record_child script.py [args] | -m module [args]", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
