"""``gputrace demo``: a traced, batched Groth16 proof run, verified, then its timeline.

Argument wiring only: the proof run is `gputrace.prover.pipeline.run_prove`, the tables come
from the ``prove`` and ``report`` commands, the timeline is `gputrace.tui.app.GputraceApp`.
On a terminal the viewer opens; otherwise (CI, pipes) the first screen is written as SVG. Without
a GPU (the run's trace has no GPU lanes) it then also shows the committed 2 x H200 trace, labelled
as recorded elsewhere, so the first picture holds the GPU idle gaps the product is about.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "demo",
        help="prove a small batch with every phase traced, verify it, then open the timeline",
        description="Run the reference Groth16 prover on a small batch (2 devices x 2 circuits by default), "
                    "write proofs, keys and an OTLP JSON Lines trace under --out, print per-phase tables and "
                    "the stall report, then open the timeline (or write it as SVG when not on a terminal).",
    )
    p.add_argument("--constraints", default="2^10", help="constraints per circuit: N or 2^N (default 2^10)")
    p.add_argument("--batch", type=int, default=2, help="circuits per device (default 2)")
    p.add_argument("--devices", type=int, default=2, help="devices; CPU backend: worker lanes (default 2)")
    p.add_argument("--backend", choices=("auto", "cpu", "cuda"), default="auto", help="default auto")
    p.add_argument("--opt", default="all", help="switches a1,a2,a4,b1,d4, all or none (default all)")
    p.add_argument("--out", type=Path, default=Path("gputrace-demo"), help="output folder (default gputrace-demo)")
    p.add_argument("--no-view", action="store_true", help="do not open the timeline at the end")
    p.add_argument("--screenshot", type=Path, default=None,
                   help="write the timeline's first screen here as SVG (default OUT/timeline.svg off a terminal)")
    p.set_defaults(func=run)
    return p


#: What to install for the GPU path (pyproject.toml's extras; CuPy wheels are per CUDA major version).
GPU_INSTALL_HINT = ("hint: this machine has an NVIDIA driver but CuPy is not installed, so the demo runs on the CPU; "
                    "for the GPU: pip install -e '.[gpu]' (CUDA 13 drivers; '.[gpu-cuda12]' for CUDA 12)")


def nvidia_driver_present() -> bool:
    """An NVIDIA driver is installed here: ``nvidia-smi`` on PATH or ``/proc/driver/nvidia`` (Linux)."""
    import shutil

    return shutil.which("nvidia-smi") is not None or Path("/proc/driver/nvidia").exists()


def gpu_install_hint(backend: str) -> str | None:
    """The one-line install hint when ``backend`` may use a GPU (auto, cuda), the machine has an NVIDIA driver
    and CuPy cannot be imported; else None."""
    import importlib.util

    if backend == "cpu" or importlib.util.find_spec("cupy") is not None or not nvidia_driver_present():
        return None
    return GPU_INSTALL_HINT


def run(args) -> int:
    from gputrace.commands import prove as prove_cmd

    hint = gpu_install_hint(args.backend)
    if hint is not None:
        print(hint, file=sys.stderr, flush=True)
    out: Path = args.out
    trace = out / "trace.jsonl"
    if trace.exists():
        trace.unlink()  # the file sink appends; a demo shows one run
    rc = prove_cmd.run(_parse(prove_cmd, [
        "prove", "--constraints", str(args.constraints), "--batch", str(args.batch), "--devices", str(args.devices),
        "--backend", args.backend, "--opt", args.opt, "--trace", str(trace), "--out", str(out),
    ]))
    if rc != 0:
        return rc
    rc = _report(trace)
    if rc != 0:
        return rc
    if args.no_view:
        print(f"open the timeline with: gputrace view {trace}")
        return 0
    from gputrace.commands import view as view_cmd

    on_terminal = sys.stdout.isatty() and sys.stdin.isatty()
    shot = args.screenshot or (None if on_terminal else out / "timeline.svg")
    argv = ["view", str(trace)] + (["--screenshot", str(shot)] if shot else [])
    rc = view_cmd.run(_parse(view_cmd, argv))
    if rc == 0 and _gpu_count(trace) == 0:
        rc = _show_h200(None if shot is None else Path(shot).with_name("h200-timeline.svg"))
    return rc


#: A run recorded on real GPUs, committed with the repository: what the demo shows where there are none.
H200_TRACE = Path(__file__).resolve().parents[2] / "benchmarks" / "traces" / "multi-2_20-2gpu.jsonl.gz"
H200_LABEL = "recorded on 2 × NVIDIA H200 (benchmarks/traces/multi-2_20-2gpu.jsonl.gz), not on this machine"


def _gpu_count(trace: Path) -> int:
    from gputrace.timeline.load import read_any

    try:
        tl = read_any([trace], lenient=True)
    except (OSError, ValueError):
        return -1
    return len({(ln.host, ln.device) for ln in tl.lanes if ln.device >= 0})


def _show_h200(shot: Path | None) -> int:
    """No GPU here: the GPU story (idle gaps while the host synthesises) from the committed H200 trace,
    labelled as such; opened in the viewer, or written next to the demo's own screenshot."""
    print(f"\nThis machine ran the prover without a GPU, so its timeline has no GPU rows. Next: a 2^20 batch "
          f"{H200_LABEL}.")
    if not H200_TRACE.is_file():  # an installed package without the repository's benchmarks/
        print("(that trace ships with the source repository: benchmarks/traces/; its picture is "
              "docs/img/multi-gpu-2_20.svg)")
        return 0
    from gputrace.tui.app import GputraceApp, screenshot_svg

    app = GputraceApp([str(H200_TRACE)], title=H200_LABEL, focus="prove")
    if shot is None:
        app.run()
        return 0
    from gputrace.atomic_write import write_atomic

    write_atomic(shot, screenshot_svg(app, (160, 40)))
    print(f"wrote {shot}")
    return 0


def _parse(command, argv: list[str]) -> argparse.Namespace:
    """Parse ``argv`` with ``command``'s own parser, so every option gets its default."""
    parser = argparse.ArgumentParser(prog="gputrace")
    command.register(parser.add_subparsers())
    return parser.parse_args(argv)


def _report(trace: Path) -> int:
    """Print the stall/pinning report of ``trace`` (the ``gputrace report`` tables)."""
    from gputrace.commands import report as report_cmd

    return report_cmd.run(_parse(report_cmd, ["report", "--top", "5", str(trace)]))
