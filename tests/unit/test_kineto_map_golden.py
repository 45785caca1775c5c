"""Characterization of the Kineto mapping (``map_kineto``) on the committed PyTorch-profiler fixtures: a sha256 per
part of the mapped Timeline (each column, the phase / lane / resource tables, names, attributes and which rows share
an attribute template) against ``tests/golden/kineto_mapped.json``, so a refactor that changes any mapped value,
key order or sharing fails here and names the part. After an intended change of the mapping (or of the Chrome
reader, the demangler...), regenerate with ``GPUTRACE_UPDATE_GOLDEN=1`` and review the digests that moved."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from gputrace.timeline.formats.chrome.read import read_chrome
from gputrace.timeline.model import Timeline
from gputrace.timeline.row_attrs import RowAttrs

TESTS = Path(__file__).resolve().parents[1]
FIXTURES = ("train_kineto.json.gz", "train_kineto_cpu.json.gz", "dist_rank0.json.gz", "dist_rank1.json.gz")
GOLDEN = TESTS / "golden" / "kineto_mapped.json"


def _sha(x: object) -> str:
    return hashlib.sha256(x if isinstance(x, bytes) else repr(x).encode()).hexdigest()


def parts(tl: Timeline) -> dict[str, str]:
    """Digest of each part of ``tl``: columns (dtype, shape, bytes), tables, names, attributes as each row
    iterates them (type, items in order) and the template-sharing pattern (rows numbered by first shared dict)."""
    out = {f"col.{k}": _sha((str(v.dtype), v.shape, v.tobytes())) for k, v in sorted(tl.cols.items())}
    out["phases"] = _sha(list(tl.phases))
    out["lanes"] = _sha(list(tl.lanes))
    out["resources"] = _sha([list(r.items()) for r in tl.resources])
    out["names"] = _sha(list(tl.names.items()))
    out["attrs"] = _sha([(r, type(a).__name__, list(dict(a).items())) for r, a in tl.attrs.items()])
    shared: dict[int, int] = {}
    out["attrs.sharing"] = _sha([(r, shared.setdefault(id(a.shared), len(shared)), a.keys_)
                                 for r, a in tl.attrs.items() if isinstance(a, RowAttrs)])
    return out


def _mapped() -> dict[str, dict[str, str]]:
    return {f: parts(read_chrome(TESTS / "data" / "foreign" / f)) for f in FIXTURES}


def test_mapped_fixtures_match_golden():
    got = _mapped()
    if os.environ.get("GPUTRACE_UPDATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(GOLDEN.read_text())
    for f in FIXTURES:
        moved = sorted(k for k in want[f].keys() | got[f].keys() if want[f].get(k) != got[f].get(k))
        assert not moved, f"{f}: mapped parts differ from {GOLDEN.name}: {moved}"


@pytest.mark.parametrize("f", FIXTURES[:1])
def test_digest_sees_a_changed_attribute(f):
    """The digests are sensitive to one attribute value (so the golden test can fail)."""
    tl = read_chrome(TESTS / "data" / "foreign" / f)
    before = parts(tl)
    r, a = next((r, a) for r, a in tl.attrs.items() if type(a) is dict)
    a["x"] = 1
    assert parts(tl)["attrs"] != before["attrs"]
