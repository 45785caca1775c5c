"""``ProveOptions`` / ``ProveResult``: the stable in-process API of the prover.

``gputrace.prover.run_prove(options: ProveOptions) -> ProveResult`` (in ``pipeline.py``) is what
``gputrace prove``, ``gputrace demo`` and ``gputrace ab`` call. Keep these fields stable; add new
ones with defaults only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the backend interface imports numpy: options stay light at run time
    from .backends.base import ProverBackend

#: The seed's five optimisation switches (see docs/prover.md).
OPT_NAMES: tuple[str, ...] = ("a1", "a2", "a4", "b1", "d4")

#: Regression switches of the fast GPU path (device synthesis, the stream flow; docs/prover.md, "Regression
#: switches"). Each turns on a real code path that a team could plausibly have written to make the prover faster
#: or tidier, and that costs time at scale; ``null`` changes nothing (an A/B control that must never be called).
GPU_OPT_NAMES: tuple[str, ...] = ("pageable", "reload", "g2end", "syncmsm", "windows", "null")

#: Every switch ``--opt`` and ``gputrace ab`` accept.
ALL_OPT_NAMES: tuple[str, ...] = OPT_NAMES + GPU_OPT_NAMES

OPT_DESCRIPTIONS: dict[str, str] = {
    "a1": "A1 packed linear-combination storage (flat index/coefficient arrays instead of per-LC dicts)",
    "a2": "A2 pre-sized assignment vectors (allocated from the circuit's shape instead of grown by append)",
    "a4": "A4 parallel B_G2 MSMs across circuits (CPU pool) instead of one after another",
    "b1": "B1 pinning of the host buffers of every proof (host synthesis: the a/b/c vectors; the stream flow: the "
          "proving-key rows the proof uploads from), registered before it and unregistered after it",
    "d4": "D4 per-MSM tuning (window / narrow split) for L, A and B_G1 from their scalar popcounts",
    "pageable": "proving-key uploads straight from pageable host memory instead of the two page-locked staging chunks",
    "reload": "proving keys not resident: every proof re-reads its key queries from pk.npz and uploads them again",
    "g2end": "b_g2 batched: every circuit's G2 MSM after the last circuit's G1 work, instead of one per proof",
    "syncmsm": "a device synchronisation after every MSM (the host waits for each MSM before queueing the next)",
    "windows": "per-MSM windows for L, A and B_G1 by the seed's first D4 rule (log2(count) - 3, up to 16 bits)",
    "null": "a control switch that changes nothing (recorded in the trace's config only)",
}


def parse_opts(text: str | None) -> frozenset[str]:
    """Parse ``--opt``: a comma list of switch names (``ALL_OPT_NAMES``), or ``all`` (the seed's five,
    ``OPT_NAMES``) / ``none`` (case-insensitive).

    Raises ValueError naming the unknown switch.
    """
    if text is None:
        return frozenset()
    items = [t.strip().lower() for t in text.split(",") if t.strip()]
    if items in (["all"],):
        return frozenset(OPT_NAMES)
    if items in (["none"], []):
        return frozenset()
    bad = [t for t in items if t not in ALL_OPT_NAMES]
    if bad:
        raise ValueError(f"--opt: unknown switch {bad[0]!r} (choose from {', '.join(ALL_OPT_NAMES)}, all, none)")
    return frozenset(items)


def parse_size(text: str) -> int:
    """Parse ``--constraints``: an int or ``2^N`` / ``2**N``. Raises ValueError with the text."""
    t = text.strip().replace("**", "^")
    try:
        if "^" in t:
            base, exp = t.split("^", 1)
            value = int(base) ** int(exp)
        else:
            value = int(t)
    except ValueError:
        raise ValueError(f"--constraints: expected N or 2^N, got {text!r}") from None
    if value < 1:
        raise ValueError(f"--constraints: must be positive, got {text!r}")
    return value


#: ``--batch`` at most this many circuits per device: each one holds its witness and a/b/c vectors in memory
#: until the batch is proven (a larger run is several ``prove`` calls).
MAX_BATCH = 1024

#: The CPU backend runs at most this many worker lanes (``--devices``) per CPU the process may use.
CPU_LANES_PER_CPU = 4


def check_counts(batch: int, devices: int, backend: str | None = None) -> None:
    """ValueError naming the flag for a ``--batch`` outside 1..MAX_BATCH, a ``--devices`` below 1, or,
    for ``backend="cpu"``, more worker lanes than :func:`check_cpu_lanes` allows. Other backends bound
    ``--devices`` when they start: ``make_backend`` (the CPU fallback of ``auto``) and the CUDA
    backend's GPU count (``BackendUnavailable``)."""
    if batch < 1 or batch > MAX_BATCH:
        raise ValueError(f"--batch: circuits per device must be between 1 and {MAX_BATCH}, got {batch}")
    if devices < 1:
        raise ValueError(f"--devices must be >= 1, got {devices}")
    if backend == "cpu":
        check_cpu_lanes(devices)


def check_cpu_lanes(devices: int) -> None:
    """ValueError naming ``--devices`` when the CPU backend would run more than CPU_LANES_PER_CPU
    worker lanes per CPU this process may use."""
    from gputrace.prover.host_msm import cpu_threads

    cap = CPU_LANES_PER_CPU * cpu_threads()
    if devices > cap:
        raise ValueError(f"--devices: the CPU backend runs at most {cap} worker lanes here "
                         f"({CPU_LANES_PER_CPU} per CPU, {cap // CPU_LANES_PER_CPU} CPUs), got {devices}")


@dataclass
class ProveOptions:
    """Everything one ``run_prove`` call needs.

    Circuit size: either ``constraints`` (target count; K and D are picked) or both
    ``challenges`` (K) and ``depth`` (D). ``batch``: circuits per device; ``devices``: devices
    (CPU: worker lanes). ``opts``: subset of OPT_NAMES. ``out_dir``: proofs, ``vk.json`` and (unless
    ``key_dir`` is given) the key cache. ``trace``: OTLP JSON-lines path or None. ``configure_tracer``:
    when False the caller has already called ``gputrace.configure`` (tests with a MemorySink, demo).
    ``progress``: optional callback ``(event, done, total)`` called from worker threads.
    ``backend_object``: an already constructed ``ProverBackend`` (tests, custom backends); overrides ``backend``
    and ``devices`` (its ``device_count()`` is used); ``run_prove`` still closes it.
    ``synthesis_workers``: synthesis processes (None = one per CPU; 1 = synthesis in the host thread, no
    processes). With more workers than circuits each circuit is split into ``workers // circuits`` parts.
    ``synthesis``: ``"host"`` (R1CS built in Python processes; A1/A2 act here), ``"device"`` (the witness
    generated on the device from a plan, ``witness_plan.py``; ValueError if the backend cannot) or ``"auto"``
    (device where the backend supports it). ``b_g2``: ``"host"`` (the G2 MSM on the CPU pool, overlapping the
    device work; A4 acts here), ``"device"`` (a G2 MSM on the device after ``msm_b_g1``) or ``"auto"``.
    ``keygen``: where missing keys are generated (``keygen.cache.get_keys``): ``"host"`` (template R1CS in
    Python, CPU process pool), ``"device"`` (the circuit's block and a CUDA device) or ``"auto"`` (the
    device when CuPy sees one); the keys are the same bytes either way.
    ``device_flow`` (only with device synthesis): ``"stream"`` (default: witnesses made on a second stream while
    the circuit before is proven, each circuit proven alone, its tail split on the device, keys loaded while the
    first circuit starts: ``device_flow.py``) or ``"batch"`` (the earlier flow: a device's whole batch
    synthesized first, the assignments copied back for the host's tail work; kept for A/B).
    """

    constraints: int | None = 1 << 10
    challenges: int | None = None
    depth: int | None = None
    batch: int = 1
    devices: int = 1
    backend: str = "cpu"
    opts: frozenset[str] = frozenset()
    out_dir: Path = Path("gputrace-out")
    key_dir: Path | None = None
    trace: Path | None = None
    otlp: str | None = None
    configure_tracer: bool = True
    seed: int = 1
    #: None: keys from fresh random toxic waste; an int: a reproducible TEST key from that seed
    #: (anyone who knows it can forge proofs; ``vk.json`` says so). ``gputrace prove --seed N`` sets both.
    key_seed: int | None = None
    verify: bool = True
    progress: Callable[[str, int, int], None] | None = None
    synthesis_workers: int | None = None
    backend_object: ProverBackend | None = None
    synthesis: str = "auto"
    b_g2: str = "auto"
    keygen: str = "auto"
    device_flow: str = "stream"


@dataclass
class ProveResult:
    """What ``run_prove`` returns.

    ``proof_paths``: one ``proof-<circuit>.json`` per circuit; ``vk_path``; ``verified``: per circuit
    (empty if verification was off); ``phase_seconds``: {(phase, device_label): total seconds}
    measured by the pipeline itself (same intervals as the spans); ``wall_s``: the whole batch;
    ``setup_s``: key generation or load; ``backend``: the backend really used; ``notice``: e.g. the
    auto-fallback message; ``config``: the resource attributes recorded (``gputrace.config.*``).
    """

    proof_paths: list[Path]
    vk_path: Path
    verified: list[bool]
    phase_seconds: dict[tuple[str, str], float]
    wall_s: float
    setup_s: float
    backend: str
    constraints: int
    challenges: int
    depth: int
    notice: str | None = None
    config: Mapping[str, object] = field(default_factory=dict)
    key_cached: bool = False
