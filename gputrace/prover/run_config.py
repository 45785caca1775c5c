"""What a run's options resolve to before anything runs: the circuit shape (``resolve_shape``), where
``synthesis`` and ``b_g2`` run (``_where``, ``_resolved``) and the ``gputrace.config.*`` attributes a run records
(``config_attrs``, ``config_for``).

Pure functions of ``ProveOptions`` (and the backend, once made), run on the caller's thread. They raise ValueError
for bad options (half a shape, an unknown mode, ``device`` on a backend that cannot run it there; the shape checks
of ``circuit.py``) and nothing else.
"""

from __future__ import annotations

from .backends.base import ProverBackend
from .circuit import CircuitShape, shape_for_constraints, validate_shape
from .options import ALL_OPT_NAMES, ProveOptions


def resolve_shape(o: ProveOptions) -> CircuitShape:
    if o.challenges is not None or o.depth is not None:
        if o.challenges is None or o.depth is None:
            raise ValueError("--challenges and --depth go together")
        return validate_shape(o.challenges, o.depth)
    if o.constraints is None:
        raise ValueError("give --constraints or --challenges with --depth")
    return shape_for_constraints(o.constraints)


def _resolved(mode: str, backend: str, supported: bool | None) -> str:
    """Where ``synthesis``/``b_g2`` runs (``host``/``device``); ``auto`` when the backend is not known yet."""
    if mode != "auto":
        return mode
    if supported is not None:
        return "device" if supported else "host"
    return {"cpu": "host", "cuda": "device"}.get(backend, "auto")


def config_attrs(o: ProveOptions, shape: CircuitShape, backend: str, obj: ProverBackend | None = None) -> dict:
    cfg: dict[str, object] = {name: (name in o.opts) for name in ALL_OPT_NAMES}
    obj = obj if obj is not None else o.backend_object
    cfg.update(backend=backend, batch=o.batch, devices=o.devices if o.backend_object is None else
               o.backend_object.device_count(), constraints=shape.constraints,
               challenges=shape.challenges, depth=shape.depth,
               synthesis=_resolved(o.synthesis, backend, None if obj is None else obj.supports_device_witness),
               b_g2=_resolved(o.b_g2, backend, None if obj is None else obj.supports_g2), device_flow=o.device_flow)
    return cfg


def config_for(options: ProveOptions) -> dict:
    """The ``gputrace.config.*`` attributes a run with ``options`` records, for callers that call
    ``gputrace.configure(config=...)`` themselves (``configure_tracer=False``). ``backend`` is the
    requested one (``auto`` is not resolved here; ``ProveResult.config`` has the one used)."""
    return config_attrs(options, resolve_shape(options), options.backend)


def _where(o: ProveOptions, what: str, supported: bool, backend: ProverBackend) -> bool:
    """True when ``what`` (``synthesis`` or ``b_g2``) runs on the device. ValueError for a bad choice."""
    mode = getattr(o, what)
    if mode not in ("auto", "host", "device"):
        raise ValueError(f"{what} must be 'auto', 'host' or 'device', got {mode!r}")
    if mode == "device" and not supported:
        raise ValueError(f"{what}='device': the {backend.name} backend cannot run it on a device")
    return mode != "host" and supported
