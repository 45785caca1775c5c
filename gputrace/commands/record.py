"""``gputrace record [options] -- python script.py args``: trace an unmodified CUDA Python program.

The program runs in a child interpreter (``python -m gputrace.commands._record_child``) whose environment
turns on CUDA activity collection (CUPTI: kernels, copies, memsets, synchronizations) and points
``NVTX_INJECTION64_PATH`` at the CUPTI library, so the program's NVTX ranges (any domain: PyTorch's
``torch.cuda.nvtx``, CuPy's, the ``nvtx`` package's) are collected as spans too. A child process because the
NVTX injection library is read at a process's first NVTX call, and the program gets an interpreter of its own.
The trace is OTLP JSON Lines (``view``, ``report``, ``export`` read it). Without CUDA or CUPTI the program still
runs and the host-side trace (its root span, and any gputrace phases it opens) is written; one line says that
no CUDA activity was collected.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = "gputrace.commands._record_child"


def register(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "record", help="trace an unmodified CUDA Python program: kernels, copies, syncs and NVTX ranges",
        description="Run `python script.py args` (or `python -m module args`) with CUDA activity collection "
                    "(CUPTI) and NVTX ranges as spans; write an OTLP JSON Lines trace.",
        usage="gputrace record [--trace FILE] [--no-cuda-activity] -- python script.py [args ...]",
    )
    p.add_argument("--trace", type=Path, default=Path("record.jsonl"), help="trace file (default record.jsonl)")
    p.add_argument("--no-cuda-activity", action="store_true", help="host-side trace only (no CUPTI)")
    p.add_argument("--service-name", default=None, help="resource service.name (default: the script's name)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- python script.py args (or python -m module args)")
    p.set_defaults(func=run)
    return p


def child_command(command: list[str]) -> list[str]:
    """The child's argv for ``python script.py args`` / ``python -m mod args``. Raises ValueError otherwise."""
    cmd = list(command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise ValueError("give the program to run after --, e.g. gputrace record -- python train.py")
    exe = cmd[0]
    base = os.path.basename(exe)
    if not base.startswith("python"):
        raise ValueError(f"record runs Python programs: expected `python script.py ...`, got {exe!r}")
    interp = sys.executable if exe in ("python", "python3") else exe
    rest = cmd[1:]
    if not rest:
        raise ValueError("give a script (python script.py) or a module (python -m module)")
    if rest[0] == "-m" and len(rest) < 2:
        raise ValueError("python -m needs a module name")
    if rest[0].startswith("-") and rest[0] != "-m":
        raise ValueError(f"interpreter option {rest[0]!r} is not supported: give `python script.py` or `python -m mod`")
    return [interp, "-m", CHILD, *rest]


def child_env(trace: Path, summary: Path, cuda_activity: bool, service_name: str | None) -> dict:
    """Environment of the child: where to write, and CUDA activity + NVTX collection when asked."""
    env = dict(os.environ)
    env["GPUTRACE_RECORD_TRACE"] = str(trace)
    env["GPUTRACE_RECORD_SUMMARY"] = str(summary)
    if service_name:
        env["GPUTRACE_RECORD_SERVICE"] = service_name
    env["GPUTRACE_CUDA_ACTIVITY"] = "1" if cuda_activity else "0"
    if cuda_activity and not env.get("NVTX_INJECTION64_PATH"):
        from gputrace.trace.cupti_collect import library_path

        lib = library_path()
        if lib:
            env["NVTX_INJECTION64_PATH"] = lib
    # The child imports gputrace from where this process found it.
    here = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = here + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def run(args) -> int:
    from gputrace.textsafe import visible

    try:
        argv = child_command(args.command)
    except ValueError as exc:
        print(f"error: {visible(exc)}", file=sys.stderr)
        return 2
    trace = args.trace
    try:
        trace.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(visible(f"error: {trace.parent}: {exc.strerror or exc}"), file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="gputrace-record-") as tmp:
        summary = Path(tmp) / "summary.json"
        env = child_env(trace, summary, not args.no_cuda_activity, args.service_name)
        try:
            rc = subprocess.call(argv, env=env)
        except OSError as exc:
            print(visible(f"error: {argv[0]}: {exc.strerror or exc}"), file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            rc = 130
        try:
            info = json.loads(summary.read_text())
        except (OSError, ValueError):
            print(f"error: the program ended before its trace was written (exit status {rc})", file=sys.stderr)
            return rc or 1
    print(visible(summary_line(info, trace)), file=sys.stderr)  # (info comes from the child: inert text)
    return rc


def summary_line(info: dict, trace: Path) -> str:
    """The closing line: what was written where, and whether CUDA activity was collected."""
    n, act, dropped = int(info.get("spans", 0)), int(info.get("activity_spans", 0)), int(info.get("dropped", 0))
    head = f"trace: {n} spans in {trace}"
    if dropped:
        head += f" ({dropped} dropped)"
    if act:
        return f"{head}; {act} from CUDA activity and NVTX ranges (CUPTI)"
    why = info.get("cuda_activity_error")
    if not info.get("cuda_activity_asked"):
        why = "--no-cuda-activity"
    return f"{head}; no CUDA activity was collected ({why or 'the program launched no CUDA work'})"
