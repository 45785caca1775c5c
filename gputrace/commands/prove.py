"""``gputrace prove``: batched Groth16 proofs of the Merkle/Poseidon circuit, every phase traced."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any


def register(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "prove", help="prove a batch of circuits with the reference Groth16 prover, traced",
        description="Prove K-challenge Merkle inclusion circuits (Poseidon, BLS12-381 Groth16) in batches "
                    "per device, write proofs + vk.json, record every phase to a trace.",
    )
    size = p.add_argument_group("circuit size (either --constraints or --challenges with --depth)")
    size.add_argument("--constraints", default=None, help="target constraint count: N or 2^N (default 2^10)")
    size.add_argument("--challenges", type=int, default=None, help="K challenged leaves")
    size.add_argument("--depth", type=int, default=None, help="tree depth D")
    p.add_argument("--batch", type=int, default=1, help="circuits per device (default 1)")
    p.add_argument("--devices", type=int, default=1, help="devices (CPU backend: worker lanes) (default 1)")
    p.add_argument("--backend", choices=("auto", "cpu", "cuda"), default="auto", help="default auto")
    p.add_argument("--opt", default="none", help="switches (comma list): the seed's a1,a2,a4,b1,d4 and the GPU "
                   "regression switches pageable,reload,g2end,syncmsm,windows,null (docs/prover.md); "
                   "all (the seed's five) or none")
    p.add_argument("--trace", type=Path, default=None, help="write the trace here (OTLP JSON lines)")
    p.add_argument("--otlp", default=None, help="also export over OTLP (grpc, http or an endpoint URL)")
    p.add_argument("--out", type=Path, default=Path("gputrace-out"), help="output directory (default gputrace-out)")
    p.add_argument("--key-dir", type=Path, default=None, help="key cache (default OUT/keys)")
    p.add_argument("--seed", type=int, default=None,
                   help="make a reproducible TEST key from this seed (anyone who knows it can forge proofs; "
                        "vk.json says so) and seed the trees with it; default: keys from fresh randomness, "
                        "trees seed 1")
    p.add_argument("--synthesis-workers", type=int, default=None, metavar="N",
                   help="synthesis processes (default one per CPU; 1 = in the main process); with more than "
                        "the circuits in the batch, each circuit is split over N // circuits of them")
    add_placement_options(p)
    p.add_argument("--keygen", choices=("auto", "host", "device"), default="auto",
                   help="where missing keys are generated: host (Python, CPU processes), device (CUDA: fixed-base "
                        "multiples and the QAP on the GPU) or auto (the device when one is visible; default); "
                        "the same key bytes either way")
    p.add_argument("--cuda-activity", action="store_true",
                   help="also record every kernel, copy, memset and sync wait with CUPTI (CUDA backend; needs "
                        "cupti-python), as child spans of the phases (same as GPUTRACE_CUDA_ACTIVITY=1)")
    p.add_argument("--no-verify", action="store_true", help="skip verifying the proofs")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)
    return p


def add_placement_options(p) -> None:
    """``--synthesis``, ``--b-g2`` and ``--device-flow``: where the witness and the G2 MSM run, and how a device's
    circuits are ordered (``ProveOptions.synthesis/b_g2/device_flow``)."""
    where = ("auto", "host", "device")
    p.add_argument("--synthesis", choices=where, default="auto",
                   help="witness generation: host (Python processes; A1, A2 and B1 act there), device (from a "
                        "plan, on the GPU) or auto (device where the backend can; default)")
    p.add_argument("--b-g2", dest="b_g2", choices=where, default="auto",
                   help="the G2 MSM b_g2: host (CPU pool, overlapping the GPU; A4 acts there), device or auto "
                        "(default)")
    p.add_argument("--device-flow", dest="device_flow", choices=("stream", "stream-sync", "batch"), default="stream",
                   help="with device synthesis: stream (default; the next circuits' witnesses are made on a second "
                        "stream while the current one is proven, keys upload inside prove, results come back once "
                        "per circuit), stream-sync (the same, each MSM's point read back as it ends) or batch (a "
                        "device's whole batch of witnesses first, then the MSMs)")


def options_from_args(args):
    """Build ``ProveOptions`` from parsed arguments; ValueError with the flag name on bad values."""
    from gputrace.prover.options import ProveOptions, check_counts, parse_opts, parse_size

    check_counts(args.batch, args.devices, args.backend)
    if args.synthesis_workers is not None and args.synthesis_workers < 1:
        raise ValueError(f"--synthesis-workers must be >= 1, got {args.synthesis_workers}")
    if args.constraints is not None and (args.challenges is not None or args.depth is not None):
        raise ValueError("give either --constraints or --challenges/--depth, not both")
    constraints = parse_size(args.constraints) if args.constraints is not None else (
        None if args.challenges is not None or args.depth is not None else 1 << 10)
    from gputrace.prover.field import TWO_ADICITY

    if constraints is not None and constraints > 1 << TWO_ADICITY:
        # No NTT domain is larger; the shape picker would otherwise fall back to a tiny circuit.
        raise ValueError(f"--constraints: at most 2^{TWO_ADICITY} (the largest NTT domain of the BLS12-381 "
                         f"scalar field), got {args.constraints!r}")
    return ProveOptions(
        constraints=constraints, challenges=args.challenges, depth=args.depth, batch=args.batch,
        devices=args.devices, backend=args.backend, opts=parse_opts(args.opt), out_dir=args.out,
        key_dir=args.key_dir, trace=args.trace, otlp=args.otlp, seed=1 if args.seed is None else args.seed,
        key_seed=args.seed, verify=not args.no_verify,
        synthesis_workers=args.synthesis_workers, synthesis=args.synthesis, b_g2=args.b_g2,
        device_flow=args.device_flow, keygen=getattr(args, "keygen", "auto"),
    )


def lane_column(label: str) -> str:
    """The summary's column name for a prover lane label, in the names ``report`` and the TUI use
    (``gputrace.analysis.lanes``): ``host`` -> ``CPU``, ``cpu:N`` (a CPU-backend worker lane) ->
    ``CPU thread:cpu-worker-N``, ``cuda:N`` -> ``GPU N``."""
    from gputrace.analysis.lanes import device_name

    kind, _, index = label.partition(":")
    if label == "host":
        return device_name(-1)
    if kind == "cpu" and index:
        return f"{device_name(-1)} thread:cpu-worker-{index}"
    if kind == "cuda" and index.isdigit():
        return device_name(int(index))
    return label


def summary_table(result):
    """A rich Table: phases as rows, lanes as columns (named as ``report`` names them), seconds in cells."""
    from rich.table import Table

    from gputrace.phases import PHASES

    labels = sorted({lab for _, lab in result.phase_seconds}, key=lambda s: (s != "host", s))
    names = {n for n, _ in result.phase_seconds}
    head = ("setup", "load_bases")
    order = [n for n in (*head, *PHASES, "verify") if n in names] + sorted(names - set(PHASES) - {*head, "verify"})
    t = Table(title=f"per-phase seconds ({result.backend}, {result.constraints} constraints/circuit)")
    t.add_column("phase")
    for lab in labels:
        t.add_column(lane_column(lab), justify="right")
    for n in order:
        secs = result.phase_seconds
        t.add_row(n, *(f"{secs[(n, lab)]:.3f}" if (n, lab) in secs else "" for lab in labels))
    return t


def key_kind(vk_path) -> str:
    """'TEST key from --seed N' or 'random single-party setup', from what ``vk.json`` says about itself."""
    import json

    try:
        doc = json.loads(Path(vk_path).read_text())
    except (OSError, ValueError, RecursionError):
        return "key kind unknown"
    if isinstance(doc, dict) and doc.get("test_key"):
        return f"TEST key from --seed {doc.get('test_key_seed')}: anyone can forge proofs for it"
    return "random single-party setup"


def keys_summary(result) -> str:
    """Where the run's keys came from and what kind they are: 'keys loaded from the cache in 0.03 s (random
    single-party setup)' or 'keys generated in 2.27 s (TEST key from --seed 2: ...)'."""
    how = "loaded from the cache" if result.key_cached else "generated"
    return f"keys {how} in {result.setup_s:.2f} s ({key_kind(result.vk_path)})"


def progress_bar(err, batch: int, devices: int, quiet: bool):
    """The run's progress bar on ``err`` and its ``ProveOptions.progress`` callback. The total (a synthesis and a
    proof per circuit) is known before the run, so the bar never shows an unknown total; until the first event
    it says ``keys`` (setup runs first)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                        TimeElapsedColumn(), console=err, disable=quiet or not err.is_terminal)
    task = progress.add_task("keys", total=2 * batch * devices)

    def on_progress(event: str, done: int, total: int) -> None:
        progress.update(task, completed=done, total=total, description=f"proving ({event})")

    return progress, on_progress


def trace_delivery_warnings() -> list[str]:
    """One warning per sink of the run's recorder that did not deliver every span (a collector down or
    refusing, a full disk), with its last error: the run's summary (``gputrace.trace.shutdown()`` returns
    it again once the run has shut the recorder down). Empty when everything arrived."""
    from gputrace.textsafe import visible
    from gputrace.trace import shutdown

    out = []
    for s in shutdown().sinks:
        if s.dropped or (s.errors and not s.exported):
            why = f"; last error: {s.errors[-1]}" if s.errors else ""
            out.append(visible(f"warning: {s.name}: {s.dropped} of {s.exported + s.dropped} spans not delivered{why}"))
    return out


class Interrupts:
    """Ctrl-C during a run, as a terminal sends it (SIGINT to the whole process group), on the main thread.

    The first SIGINT raises ``KeyboardInterrupt`` there, as Python's default does: ``run_prove`` then cancels its
    threads, ends its worker processes (which ignore SIGINT, ``prover/processes.py``), closes the backend and
    flushes the trace. A second SIGINT, or that cleanup (and the interpreter's exit) taking longer than
    ``grace_s``, ends the process at once: its worker processes killed, ``interrupted`` on stderr unless the
    command already said it, exit status 130. ``hit``: a SIGINT came (whatever the run then raised is the
    interrupt's doing). Off the main thread (where Python delivers no signal) it does nothing."""

    def __init__(self, grace_s: float = 10.0) -> None:
        self.grace_s = grace_s
        self.hit = False
        self.reported = False
        self.done = False
        self._old: Callable[[int, FrameType | None], Any] | int | None = None

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc) -> None:
        # After an interrupt the handler stays: a second Ctrl-C while the interpreter exits must not print a
        # KeyboardInterrupt traceback from its shutdown. After ``finished`` SIGINT stays ignored.
        if self._old is not None and not self.hit and not self.done:
            signal.signal(signal.SIGINT, self._old)

    def finished(self) -> None:
        """The command's work is done and the process is about to exit (the CLI's ``prove`` only): from here a
        SIGINT is ignored. Without it a Ctrl-C that came as the run ended, once the interpreter's finalisation
        had reset the handler to the default action, ended the process by the signal (status -2, no word)
        after a run that had succeeded (seen under load in test_prove_interrupt)."""
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            self.done = True

    def report(self) -> int:
        """Say ``interrupted`` (once) and return the exit status, 130. The cleanup is done: from here on a
        SIGINT is ignored, since the interpreter's finalisation resets a Python-level handler to the default
        action, and a Ctrl-C in that window would end the process by the signal instead of with 130."""
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        if not self.reported:
            self.reported = True
            print("interrupted", file=sys.stderr, flush=True)
        return 130

    def _on_sigint(self, signum, frame) -> None:
        if self.hit:
            self._hard_exit()
        self.hit = True
        timer = threading.Timer(self.grace_s, self._hard_exit)
        timer.daemon = True
        timer.start()
        raise KeyboardInterrupt

    def _hard_exit(self) -> None:
        import multiprocessing

        for child in multiprocessing.active_children():
            child.kill()
        if not self.reported:
            self.reported = True
            os.write(2, b"interrupted\n")
        os._exit(130)


def run(args) -> int:
    with Interrupts() as interrupts:
        try:
            status = _run(args)
            interrupts.finished()
            return status
        except BaseException:
            if interrupts.hit:  # the KeyboardInterrupt, or whatever the run's cleanup raised after it
                return interrupts.report()
            raise


def _run(args) -> int:
    from rich.console import Console

    from gputrace.prover.backends.base import BackendUnavailable
    from gputrace.prover.keygen.keys import KeyError_, KeyMismatchError
    from gputrace.prover.pipeline import run_prove
    from gputrace.prover.r1cs import UnsatisfiedConstraint

    err = Console(stderr=True)
    try:
        opts = options_from_args(args)
    except ValueError as exc:
        err.print(f"error: {exc}", soft_wrap=True, markup=False, highlight=False)
        return 2
    progress, opts.progress = progress_bar(err, opts.batch, opts.devices, args.quiet)
    if args.cuda_activity:
        import os

        os.environ["GPUTRACE_CUDA_ACTIVITY"] = "1"  # read by gputrace.configure() inside run_prove
    try:
        with progress:
            result = run_prove(opts)
    except (ValueError, BackendUnavailable, KeyError_, KeyMismatchError, UnsatisfiedConstraint) as exc:
        err.print(f"error: {exc}", soft_wrap=True)
        return 2
    except OSError as exc:  # trace file, output or key directory not writable
        err.print(f"error: {exc.filename or ''}: {exc.strerror or exc}", soft_wrap=True)
        return 2
    out = Console()
    if result.notice:
        err.print(result.notice, soft_wrap=True)
    for line in trace_delivery_warnings():
        err.print(line, soft_wrap=True, markup=False, highlight=False)
    out.print(summary_table(result))
    n = len(result.proof_paths)
    ok = sum(result.verified)
    out.print(
        f"{n} proofs ({result.challenges} challenges x depth {result.depth}) in {result.wall_s:.2f} s; "
        f"{keys_summary(result)}; "
        + (f"verified {ok}/{n}" if result.verified else "not verified"),
        soft_wrap=True,
    )
    out.print(f"proofs and vk.json in {opts.out_dir}" + (f"; trace in {opts.trace}" if opts.trace else ""),
              soft_wrap=True)
    return 0 if (not result.verified or ok == n) else 1
