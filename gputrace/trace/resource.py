"""Resource attributes of a run (who/where/what was traced). Built once by ``configure()``."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from typing import Any

from gputrace import __version__


def _flatten(prefix: str, d: Mapping[str, Any], out: dict) -> None:
    for k, v in d.items():
        key = f"{prefix}.{k}"
        if isinstance(v, Mapping):
            _flatten(key, v, out)
        elif isinstance(v, (str, bool, int, float)):
            out[key] = v
        elif v is None:
            out[key] = "None"
        elif isinstance(v, (list, tuple)) and all(isinstance(x, (str, bool, int, float)) for x in v):
            out[key] = list(v)
        else:
            out[key] = str(v)


def build_resource(
    service_name: str,
    run_id: str,
    config: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
    *,
    collect_gpu_info: bool = True,
) -> dict:
    """service.name, host.name, process.pid, gputrace.run_id, gputrace.version, gputrace.config.* (nested
    mappings flattened with dots), per GPU ``gputrace.gpu.N.model/uuid/driver`` (when ``collect_gpu_info``
    and known), then ``extra`` (wins on clashes). Raises ValueError if ``config`` is not a mapping."""
    if config is not None and not isinstance(config, Mapping):
        raise ValueError(f"config must be a mapping of switch name -> value, got {type(config).__name__}")
    res: dict[str, Any] = {
        "service.name": service_name,
        "host.name": socket.gethostname(),
        "process.pid": os.getpid(),
        "gputrace.run_id": run_id,
        "gputrace.version": __version__,
    }
    if config:
        _flatten("gputrace.config", config, res)
    if collect_gpu_info:
        from gputrace.trace.environment import collect_environment

        env = collect_environment()
        for k, v in env.items():
            if k.startswith("gpu.") and k != "gpu.count" and not k.endswith("memory_bytes"):
                res["gputrace." + k] = v
        if env.get("git.commit"):
            res["gputrace.git.commit"] = env["git.commit"]
    if extra:
        res.update(extra)
    return res
