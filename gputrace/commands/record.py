"""``gputrace record [options] -- COMMAND ...``: trace every Python process of an unmodified launch.

COMMAND runs as given (``python train.py``, ``python -m pkg``, ``python -c CODE``, ``torchrun ...``, a shell
script that starts Python), in its own process group, with an environment that makes every Python
interpreter of the tree record itself (``gputrace.trace.launch``: a ``sitecustomize`` bootstrap first on
``PYTHONPATH``). Each process writes its spans to a segment of its own in ``<trace>.d/`` (no process's death
can damage another's lines) with its pid, parent pid, host and rank as resource attributes; at the end
``record`` joins the segments into the one trace file (``--trace``, OTLP JSON Lines: ``view``, ``report``,
``export`` read it as one run, lanes grouped host > process > GPU > stream) and its closing line counts the
spans in that file (``gputrace.trace.launch.tracefile``). A ``--trace`` that another ``record`` is writing,
or that is a symbolic link, is refused. CUDA activity (CUPTI: kernels, copies, memsets,
synchronizations) and NVTX ranges of any domain are collected where CUPTI is available
(``NVTX_INJECTION64_PATH`` points at the CUPTI library); without it the host-side trace is written and one
line says why.

Signals: SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to ``record`` go to the whole process group of COMMAND,
and ``record`` waits for the program's own cleanup (its flush included); a third SIGINT kills the group.
When ``record`` runs in a terminal's foreground, the program's group gets the terminal (so Ctrl-C and
reading stdin go to it directly) and ``record`` takes it back at the end. The exit status is COMMAND's, as a
shell gives it (128 + N for a program killed by signal N: 130 SIGINT, 137 SIGKILL, 143 SIGTERM); where the
program died of SIGINT, ``record`` ends by SIGINT itself after writing its closing line, as the program did, so
a shell loop of ``record`` runs stops on one Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: Signals ``record`` forwards to the program's process group.
FORWARD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
#: After the launched command ends, how long ``record`` waits for the rest of its process group (processes
#: that outlived it, still flushing) before it reads the check-ins.
GROUP_GRACE_S = 5.0
#: How often ``record`` looks for Python processes of the launch that started without the recorder.
TICK_S = 0.25


def register(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "record", help="trace every Python process of a launch: phases, NVTX ranges, CUDA kernels, copies, syncs",
        description="Run COMMAND (python script.py, python -m mod, python -c CODE, torchrun ..., a shell script) "
                    "and record every Python process it starts into one OTLP JSON Lines trace, with CUDA "
                    "activity (CUPTI) and NVTX ranges where available.",
        usage="gputrace record [--trace FILE] [--no-cuda-activity] [--no-torch-capture] [--sample-hz N] "
              "[--service-name NAME] "
              "-- COMMAND [args ...]",
    )
    p.add_argument("--trace", type=Path, default=Path("record.jsonl"), help="trace file (default record.jsonl)")
    p.add_argument("--no-cuda-activity", action="store_true", help="host-side trace only (no CUPTI)")
    p.add_argument("--no-torch-capture", action="store_true",
                   help="do not record torch's forward/backward/optimizer.step/dataloader.next ranges and "
                        "torch.distributed collectives (sets GPUTRACE_TORCH_CAPTURE=0 for every process)")
    p.add_argument("--sample-hz", type=float, default=None, metavar="N",
                   help="Python stack samples per second of every thread of every process (0: off; default: "
                        "$GPUTRACE_SAMPLE_HZ, else 20)")
    p.add_argument("--service-name", default=None,
                   help="resource service.name of every process (default: each process's command)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [args ...]")
    p.set_defaults(func=run)
    return p


def launch_command(command: list[str]) -> list[str]:
    """The argv to run: COMMAND after ``--``, with a bare ``python``/``python3`` meaning this interpreter (the
    one gputrace is installed in). Raises ValueError when there is no command."""
    cmd = list(command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise ValueError("give the command to run after --, e.g. gputrace record -- python train.py")
    if cmd[0] in ("python", "python3"):
        cmd[0] = sys.executable
    return cmd


def launch_env(trace: Path, checkin: Path, site: Path, cuda_activity: bool, service_name: str | None,
               sample_hz: float | None = None, torch_capture: bool = True) -> dict:
    """Environment of the launch: the bootstrap first on PYTHONPATH, where to write (``trace``: the segment
    folder), CUDA activity + NVTX, the stack sampler's rate (``GPUTRACE_SAMPLE_HZ``; None: the environment's,
    else the sampler's default), the torch capture switch (``GPUTRACE_TORCH_CAPTURE``: off when
    ``torch_capture`` is False, else as the caller's environment says)."""
    from gputrace.trace.launch import ENV_CHECKIN, ENV_ROOT, ENV_RUN_ID, ENV_SERVICE, ENV_TRACE

    env = dict(os.environ)
    env[ENV_TRACE] = str(trace.resolve())
    env[ENV_CHECKIN] = str(checkin)
    env[ENV_RUN_ID] = secrets.token_hex(8)
    env[ENV_ROOT] = str(Path(__file__).resolve().parents[2])
    if service_name:
        env[ENV_SERVICE] = service_name
    else:
        env.pop(ENV_SERVICE, None)
    env["GPUTRACE_CUDA_ACTIVITY"] = "1" if cuda_activity else "0"
    if not torch_capture:
        env["GPUTRACE_TORCH_CAPTURE"] = "0"
    if sample_hz is not None:
        env["GPUTRACE_SAMPLE_HZ"] = f"{max(sample_hz, 0.0):g}"
    if cuda_activity and not env.get("NVTX_INJECTION64_PATH"):
        from gputrace.trace.cupti_collect import library_path

        lib = library_path()
        if lib:
            env["NVTX_INJECTION64_PATH"] = lib
    env["PYTHONPATH"] = str(site) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def write_bootstrap(folder: Path) -> Path:
    """A folder holding only ``sitecustomize.py`` (the launch bootstrap); returns it."""
    from gputrace.trace.launch import bootstrap

    site = folder / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(Path(bootstrap.__file__).read_text())
    return site


def exit_status(returncode: int) -> int:
    """A Popen return code as a shell reports it: 128 + N for a process killed by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def command_status(status: int) -> int:
    """What ``run`` returns for the program's shell-style ``status``: ``-SIGINT`` where it died of SIGINT
    (Ctrl-C), which ``gputrace.cli.main`` turns into ending ``record`` by SIGINT too, so that a shell loop of
    ``record`` runs stops on one Ctrl-C as a loop of the plain program does (the shell sees 130 either way)."""
    return -signal.SIGINT if status == 128 + signal.SIGINT else status


def run(args) -> int:
    from gputrace.textsafe import visible
    from gputrace.trace.launch.tracefile import TraceRefused, claim

    try:
        argv = launch_command(args.command)
    except ValueError as exc:
        print(f"error: {visible(exc)}", file=sys.stderr)
        return 2
    trace = args.trace
    try:
        claimed = claim(trace)
    except TraceRefused as exc:
        print(visible(f"error: {exc}"), file=sys.stderr)
        return 2
    except OSError as exc:
        print(visible(f"error: {trace}: {exc.strerror or exc}"), file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="gputrace-record-") as tmp:
        checkin = Path(tmp) / "procs"
        checkin.mkdir()
        site = write_bootstrap(Path(tmp))
        env = launch_env(Path(claimed.folder), checkin, site, not args.no_cuda_activity, args.service_name,
                         getattr(args, "sample_hz", None),
                         torch_capture=not getattr(args, "no_torch_capture", False))
        from gputrace.trace.launch.watch import Watch

        watch = Watch(0, str(site))
        try:
            rc = run_group(argv, env, tick=lambda pgid: _scan(watch, pgid))
        except OSError as exc:
            print(visible(f"error: {argv[0]}: {exc.strerror or exc}"), file=sys.stderr)
            claimed.release()
            return 127 if isinstance(exc, FileNotFoundError) else 126
        infos = read_checkins(checkin)
    try:
        segments = claimed.finish()
    except OSError as exc:
        print(visible(f"error: joining the segments into {trace}: {exc.strerror or exc}; they are in "
                      f"{claimed.folder} (gputrace view {claimed.folder} reads them)"), file=sys.stderr)
        return rc or 1
    unrecorded = watch.unrecorded({i["pid"] for i in infos if isinstance(i.get("pid"), int)})
    if not infos:
        print(visible(not_python_line(argv)), file=sys.stderr)
    else:
        # (infos come from the program's processes: made inert by visible)
        print(visible(summary_line(infos, trace, not args.no_cuda_activity, segments)), file=sys.stderr)
    if unrecorded:
        print(visible(unrecorded_line(unrecorded)), file=sys.stderr)
    return command_status(rc)


def _scan(watch, pgid: int) -> None:
    watch.root = pgid
    watch.scan()


def unrecorded_line(unrecorded: list) -> str:
    """What ``record`` says about Python processes of the launch that started without the recorder."""
    n = len(unrecorded)
    shown = "; ".join(f"pid {u.pid} `{u.command}` ({u.why})" for u in unrecorded[:3])
    more = f"; and {n - 3} more" if n > 3 else ""
    return (f"record: {n} python process{'es' * (n != 1)} started without the recorder, not in the trace: "
            f"{shown}{more} (keep PYTHONPATH's first entry and GPUTRACE_RECORD_* in a child's environment; "
            f"docs/record.md, Limits)")


def run_group(argv: list[str], env: dict, tick=None) -> int:
    """Run ``argv`` in a process group of its own, forwarding ``FORWARD`` signals to the group; wait for it
    (and up to ``GROUP_GRACE_S`` for the rest of the group). ``tick(pgid)``, if given, is called every
    ``TICK_S`` while waiting. Returns the shell-style exit status. Raises OSError when the command cannot be
    started."""
    kw: dict = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
    proc = subprocess.Popen(argv, env=env, **kw)
    pgid = proc.pid
    counts: dict[int, int] = {}

    def forward(signum, frame) -> None:
        counts[signum] = counts.get(signum, 0) + 1
        sig = signal.SIGKILL if signum == signal.SIGINT and counts[signum] >= 3 else signum
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
            os.killpg(pgid, signal.SIGCONT)  # (a stopped process acts on the signal only once continued)

    saved = {}
    for s in FORWARD:
        with contextlib.suppress(ValueError, OSError):  # (not the main thread: no forwarding)
            saved[s] = signal.signal(s, forward)
    terminal = _give_terminal(pgid)
    try:
        while True:
            try:
                returncode = proc.wait(timeout=TICK_S if tick else None)
                break
            except subprocess.TimeoutExpired:
                tick(pgid)
        _wait_group(pgid, GROUP_GRACE_S, tick)
    finally:
        if terminal is not None:
            _take_terminal(terminal)
        for s, h in saved.items():
            signal.signal(s, h)
    return exit_status(returncode)


def _give_terminal(pgid: int) -> int | None:
    """Make ``pgid`` the terminal's foreground group when we hold the terminal; returns our group to restore."""
    try:
        if not os.isatty(0) or os.tcgetpgrp(0) != os.getpgrp():
            return None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.setpgid(pgid, pgid)  # (the child may not have done it yet)
        mine = os.getpgrp()
        _tcsetpgrp(pgid)
        return mine
    except OSError:
        return None


def _take_terminal(pgid: int) -> None:
    with contextlib.suppress(OSError):
        _tcsetpgrp(pgid)


def _tcsetpgrp(pgid: int) -> None:
    old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # a background group may not take the terminal
    try:
        os.tcsetpgrp(0, pgid)
    finally:
        signal.signal(signal.SIGTTOU, old)


def _wait_group(pgid: int, timeout: float, tick=None) -> None:
    deadline = time.monotonic() + timeout
    next_tick = 0.0
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        if tick and time.monotonic() >= next_tick:
            tick(pgid)
            next_tick = time.monotonic() + TICK_S
        time.sleep(0.05)


def read_checkins(folder: Path) -> list[dict]:
    """The check-in records of the launch's processes (``gputrace.trace.launch.process``), unreadable ones
    skipped."""
    out = []
    for p in sorted(folder.glob("*.json")):
        try:
            info = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(info, dict):
            out.append(info)
    return out


def not_python_line(argv: list[str]) -> str:
    """What ``record`` says when no Python process of the launch checked in."""
    cmd = shlex.join(argv)
    if os.path.basename(argv[0]).startswith("python"):
        return (f"record: no process of `{cmd}` was recorded, so no trace was written: an interpreter started with "
                f"-I, -E or -S skips the bootstrap on PYTHONPATH, and one that cannot import gputrace says so above "
                f"(docs/record.md, Limits)")
    return (f"record: `{cmd}` started no Python process that gputrace could record, so no trace was written "
            f"(record traces Python programs and the Python processes they start). For other programs use Nsight "
            f"Systems: `nsys profile -o rep --trace cuda,nvtx --export sqlite {cmd}`, then `gputrace view "
            f"rep.sqlite`.")


def summary_line(infos: list[dict], trace: Path | str, cuda_activity: bool = True,
                 segments: list | None = None) -> str:
    """The closing line: what was written where, by how many processes, and whether CUDA activity was
    collected (and why not). With ``segments`` (``gputrace.otlp.segments.Segment``: what the joined file
    holds, per writer) the span counts are the file's, not what the processes sent."""

    def total(key: str) -> int:
        n = 0
        for i in infos:
            v = i.get(key, 0)
            n += v if isinstance(v, int) else 0
        return n

    act, dropped = total("activity_spans"), total("dropped")
    if segments is None:
        n = total("spans")
        procs = len(infos)
    else:
        n = sum(s.spans - s.sample_batches for s in segments)  # (stack-sample batches are said as samples)
        pids = {i.get("pid") for i in infos if isinstance(i.get("pid"), int)} | {s.pid for s in segments if s.spans}
        procs = max(len(pids), 1)
    spans = f"{n} span{'s' * (n != 1)}"
    head = f"trace: {spans} in {trace}"
    if procs > 1:
        head = f"trace: {spans} from {procs} processes in {trace}"
    if dropped:
        head += f" ({dropped} dropped)"
    samples = total("samples")
    if samples:
        head += f", with {samples} Python stack sample{'s' * (samples != 1)}"
    unfinished = [i for i in infos if not i.get("final")]
    if unfinished:
        k = len(unfinished)
        named = ", ".join(f"pid {i.get('pid', '?')} ({i.get('label', '?')})" for i in unfinished[:3])
        named += f" and {k - 3} more" if k > 3 else ""
        head += (f"; {k} process{'es' * (k != 1)} ended without a final flush (killed?): {named}: the phases "
                 f"still open then are missing, and what was not yet written (the last 0.5 s of spans, up to "
                 f"2 s of CUDA activity)")
    cut = sum(s.cut_bytes for s in segments or ())
    if cut:
        k = sum(1 for s in segments or () if s.cut_bytes)
        head += f"; {k} cut last line{'s' * (k != 1)} ({cut} bytes) left out"
    if act:
        return f"{head}; {act} from CUDA activity and NVTX ranges (CUPTI)"
    why = next((i["cuda_activity_error"] for i in infos if isinstance(i.get("cuda_activity_error"), str)), None)
    if not cuda_activity:
        why = "--no-cuda-activity"
    return f"{head}; no CUDA activity was collected ({why or 'the program launched no CUDA work'})"
