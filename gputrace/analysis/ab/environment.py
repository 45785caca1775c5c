"""Environment check for comparisons: do the runs being compared come from the same setup?

Each run's resource attributes carry its environment (GPU model/UUID/driver per device, git
commit, ``gputrace.config.*`` switches, host, versions; see gputrace/trace/resource.py).
Configuration fields that differ *between* the sides are the point of an A/B test and are
listed as such; any other difference (or a configuration that differs *within* a side) is
a warning that names the field and its values. Pure; any thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

#: Attributes that change every run by design.
#: Resource attributes that differ between any two runs by nature (ids, start times, the CUPTI clock offset measured
#: in each process, the number of records a run made): never an environment difference.
VOLATILE = frozenset({"process.pid", "gputrace.run_id", "service.instance.id", "process.start_time",
                      "gputrace.cupti.clock_bracket_ns", "gputrace.cupti.clock_max_drift_ns",
                      "gputrace.cupti.clock_offset_first_ns", "gputrace.cupti.clock_offset_ns",
                      "gputrace.cupti.records"})
CONFIG_PREFIX = "gputrace.config."


@dataclass
class EnvironmentCheck:
    """Result of `check_environment`.

    * ``config_diffs``: config field -> {"base": [values], "variant": [values]} for switches
      that differ between the sides (expected in an A/B test).
    * ``differences``: every other differing field -> {"base": [...], "variant": [...]}
      (``None`` = absent in some run).
    * ``warnings``: one line per problem, naming fields; empty when environments match.
    """

    config_diffs: dict[str, dict[str, list]] = field(default_factory=dict)
    differences: dict[str, dict[str, list]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.warnings

    def to_dict(self) -> dict:
        return {"ok": self.ok, "warnings": self.warnings, "config_diffs": self.config_diffs,
                "differences": self.differences}

    def config_summary(self) -> str:
        """The differing switches on one line, e.g. ``b1: False -> True, d4: False -> True`` ('' if none)."""
        return ", ".join(
            f"{k.removeprefix('gputrace.config.')}: {'/'.join(map(str, v['base']))} -> "
            f"{'/'.join(map(str, v['variant']))}"
            for k, v in self.config_diffs.items()
        )


def _vals(resources: Sequence[dict], key: str) -> list:
    out = []
    for r in resources:
        v = r.get(key)
        v = tuple(v) if isinstance(v, list) else v
        if v not in out:
            out.append(v)
    return out


def _short(vals: list) -> str:
    return ", ".join("absent" if v is None else repr(v) for v in vals[:4]) + (" ..." if len(vals) > 4 else "")


def check_environment(base: Sequence[dict], variant: Sequence[dict], ignore: Sequence[str] = ()) -> EnvironmentCheck:
    """Compare the resource attributes of the base runs and the variant runs."""
    chk = EnvironmentCheck()
    skip = VOLATILE | set(ignore)
    # Emulated/injected costs (gputrace.emulated.*) are reported by compare on their own line.
    keys = sorted({k for r in list(base) + list(variant) for k in r
                   if not str(k).startswith("gputrace.emulated.")} - skip)
    for k in keys:
        bv, vv = _vals(base, k), _vals(variant, k)
        if len(bv) <= 1 and len(vv) <= 1 and bv == vv:
            continue
        entry = {"base": list(bv), "variant": list(vv)}
        if k.startswith(CONFIG_PREFIX):
            if len(bv) > 1 or len(vv) > 1:
                side = "baseline" if len(bv) > 1 else "variant"
                chk.differences[k] = entry
                chk.warnings.append(f"{side} runs differ among themselves in {k}: {_short(bv if len(bv) > 1 else vv)}")
            else:
                chk.config_diffs[k] = entry
            continue
        chk.differences[k] = entry
        if bv != vv and len(bv) <= 1 and len(vv) <= 1:
            chk.warnings.append(f"environment differs: {k} is {_short(bv)} in the baseline but {_short(vv)} "
                                "in the variant")
        else:
            chk.warnings.append(f"environment differs: {k} takes values baseline [{_short(bv)}], "
                                f"variant [{_short(vv)}]")
    return chk
