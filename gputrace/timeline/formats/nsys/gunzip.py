"""A gzip-compressed Nsight Systems SQLite export (``rep.sqlite.gz``, how exports are shared and committed),
decompressed to a temporary file for the reader: SQLite reads only an uncompressed file.

``gunzipped(path)`` is a context manager giving the temporary file's path and removing it on exit (also on error).
Raises ``NsysFormatError`` naming ``path`` when the stream is damaged or holds no SQLite database, and OSError when
the temporary file cannot be written (a full disk: nothing of it is left behind).
"""

from __future__ import annotations

import contextlib
import gzip
import os
import shutil
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path

from gputrace.timeline.formats.nsys.sqlite import NsysFormatError, is_nsys_sqlite

_CHUNK = 4 << 20


@contextlib.contextmanager
def gunzipped(path: Path) -> Iterator[Path]:
    fd, tmp = tempfile.mkstemp(prefix="gputrace-nsys-", suffix=".sqlite")
    try:
        try:
            with gzip.open(path, "rb") as src, os.fdopen(fd, "wb") as dst:
                shutil.copyfileobj(src, dst, _CHUNK)
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise NsysFormatError(f"{path}: damaged gzip stream ({exc})") from None
        if not is_nsys_sqlite(tmp):
            raise NsysFormatError(f"{path}: a gzip file that holds no SQLite database (expected a compressed "
                                  "`nsys export --type sqlite`)")
        yield Path(tmp)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
