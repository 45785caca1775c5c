"""A gzip-compressed Nsight Systems export (rep.sqlite.gz) opens like the plain one; damaged or foreign content is
one NsysFormatError naming the file; the decompressed copy never outlives the read."""

from __future__ import annotations

import gzip
import tempfile
from pathlib import Path

import numpy as np
import pytest

from gputrace.timeline.formats import sniff
from gputrace.timeline.formats.nsys.read import NsysFormatError, read_nsys
from gputrace.timeline.load import read_any

FOREIGN = Path(__file__).resolve().parents[1] / "data" / "foreign"


def _leftovers() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("gputrace-nsys-*")}


def test_compressed_export_reads_as_the_plain_one(foreign_nsys_sqlite, nsys):
    before = _leftovers()
    gz = FOREIGN / "train_nsys.sqlite.gz"
    assert sniff(gz) == "nsys"
    tl = read_nsys(gz)
    assert tl.n == nsys.n and list(tl.names.items()) == list(nsys.names.items())
    for k in ("start", "end", "device", "kind"):
        assert np.array_equal(tl.cols[k], nsys.cols[k]), k
    def other(rs):
        return [{k: v for k, v in r.items() if k != "nsys.report"} for r in rs]

    assert other(tl.resources) == other(nsys.resources)
    assert {r["nsys.report"] for r in tl.resources} == {"train_nsys.sqlite.gz"}  # the file given, not the copy
    assert read_any([gz]).n == nsys.n
    assert _leftovers() == before


def test_damaged_or_foreign_gzip_names_the_file(tmp_path, foreign_nsys_sqlite):
    before = _leftovers()
    cut = tmp_path / "cut.sqlite.gz"
    cut.write_bytes((FOREIGN / "train_nsys.sqlite.gz").read_bytes()[:5000])
    with pytest.raises(NsysFormatError, match=r"cut\.sqlite\.gz: damaged gzip stream"):
        read_nsys(cut)
    other = tmp_path / "notes.sqlite.gz"
    other.write_bytes(gzip.compress(b"not a database at all" * 10))
    with pytest.raises(NsysFormatError, match=r"notes\.sqlite\.gz: a gzip file that holds no SQLite database"):
        read_nsys(other)
    assert _leftovers() == before
