"""Recorded R1CS fingerprints: find a cached key without synthesizing the circuit.

The key cache needs the template circuit's R1CS fingerprint to name and check a key, and computing it
means building the whole constraint system (38.7 s of a 45 s key load at 2^20). A **record** maps
everything the fingerprint depends on to the fingerprint, so a key-cache hit skips the synthesis:

* the circuit id and shape (K, D), and the template instance (its seed and A1/A2 switches);
* ``SOURCE_MODULES``: a digest of the source bytes of every module the synthesis and the digest
  run (``witness.build_cs`` and what it imports inside gputrace: circuit, r1cs, poseidon, field;
  ``tests/unit/test_keycache_fingerprint.py`` checks this list against their imports);
* the Python implementation and version (``random`` and int behaviour the digest relies on).

Records live in ``<key_dir>/fingerprints/<circuit>-K<k>-D<d>-<key16>.json`` (one per shape and
source version) and hold their whole key, compared field by field on reading. A record that is
missing, unreadable, malformed or for another key reads as None (a debug log line only): the caller
builds the R1CS, as without records. The source digest is of the code this process runs: of the bytes
``source_snapshot`` read when ``gputrace.prover`` was imported, before the modules themselves (not of
the files as they are when this module is imported, which may be later); a record is written only while
the files on disk still have that digest, so a record never pairs new source with a fingerprint computed
by old code.

Not thread-safe per se, but writes are atomic (temporary file + ``os.replace``), so concurrent
processes sharing a key directory see either no record or a whole one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from .. import (
    source_snapshot,
    witness,  # noqa: F401  (loads every module in SOURCE_MODULES, so module_files() finds them)
)

log = logging.getLogger(__name__)

RECORD_FORMAT = 1
RECORD_DIR = "fingerprints"
#: A record is about 400 bytes; a bigger file is not read (see ``read``).
MAX_RECORD_BYTES = 4096
#: Modules whose source determines the template R1CS and its fingerprint (listed in ``source_snapshot``).
SOURCE_MODULES = source_snapshot.SOURCE_MODULES
_FINGERPRINT = re.compile(r"[0-9a-f]{40}")


def module_files(names: tuple[str, ...] = SOURCE_MODULES) -> dict[str, Path] | None:
    """The source file of each (imported) module, or None if one has none (e.g. a frozen build)."""
    out = {}
    for name in names:
        f = getattr(sys.modules.get(name), "__file__", None)
        if not f or not f.endswith(".py"):
            log.debug("fingerprint records off: no source file for %s", name)
            return None
        out[name] = Path(f)
    return out


def source_digest(files: Mapping[str, Path] | None) -> str | None:
    """blake2b over (module name, source bytes) of each file, in name order; None if one is unreadable."""
    if files is None:
        return None
    sources = {}
    for name in files:
        try:
            sources[name] = Path(files[name]).read_bytes()
        except OSError as e:
            log.debug("fingerprint records off: cannot read %s: %s", files[name], e)
            return None
    return _digest(sources)


def _digest(sources: Mapping[str, bytes]) -> str:
    h = hashlib.blake2b(digest_size=20)
    for name in sorted(sources):
        data = sources[name]
        h.update(f"{name}:{len(data)}:".encode())
        h.update(data)
    return h.hexdigest()


def loaded_digest(files: Mapping[str, Path] | None,
                  snapshot: Mapping[str, tuple[Path, bytes]] | None) -> str | None:
    """The digest (as ``source_digest``) of the bytes in ``snapshot`` (``source_snapshot.SNAPSHOT``: read
    before the modules were imported); None if there is none or a module in ``files`` came from another file."""
    if files is None or snapshot is None or set(files) != set(snapshot):
        return None
    for name, path in files.items():
        if Path(path).resolve() != Path(snapshot[name][0]).resolve():
            log.debug("fingerprint records off: %s imported from %s, not %s", name, path, snapshot[name][0])
            return None
    return _digest({name: data for name, (_, data) in snapshot.items()})


#: The digest of the sources as imported by this process (None: records are not used).
LOADED_SOURCES: str | None = loaded_digest(module_files(), source_snapshot.SNAPSHOT)


def record_key(circuit: str, challenges: int, depth: int, template_seed: int, template_opts,
               sources: str | None = None) -> dict | None:
    """Everything a recorded fingerprint depends on, as a JSON-able dict (None: records off).

    ``sources`` defaults to ``LOADED_SOURCES`` (read at call time, so tests can patch it).
    """
    sources = LOADED_SOURCES if sources is None else sources
    if sources is None:
        return None
    return {
        "format": RECORD_FORMAT, "circuit": circuit, "challenges": challenges, "depth": depth,
        "template_seed": template_seed, "template_opts": sorted(template_opts), "sources": sources,
        "python": f"{sys.implementation.name}-{sys.version_info[0]}.{sys.version_info[1]}",
    }


def record_path(key_dir: Path, key: dict) -> Path:
    tag = hashlib.blake2b(json.dumps(key, sort_keys=True).encode(), digest_size=8).hexdigest()
    return Path(key_dir) / RECORD_DIR / f"{key['circuit']}-K{key['challenges']}-D{key['depth']}-{tag}.json"


def read(key_dir: Path, key: dict) -> str | None:
    """The recorded fingerprint for ``key``, or None (no record, or one that cannot be trusted)."""
    path = record_path(key_dir, key)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_RECORD_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as e:
        log.debug("ignoring unreadable fingerprint record %s: %s", path, e)
        return None
    if len(data) > MAX_RECORD_BYTES:  # not one of ours; and deep nesting can overflow the C stack of json
        log.debug("ignoring fingerprint record %s: over %d bytes", path, MAX_RECORD_BYTES)
        return None
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as e:  # bad JSON or bad UTF-8; nested deeper than the recursion limit
        log.debug("ignoring unreadable fingerprint record %s: %s", path, e)
        return None
    if not isinstance(doc, dict) or doc.get("key") != key:
        log.debug("ignoring fingerprint record %s: written for another key", path)
        return None
    fp = doc.get("fingerprint")
    if not isinstance(fp, str) or not _FINGERPRINT.fullmatch(fp):
        log.debug("ignoring fingerprint record %s: malformed fingerprint %r", path, fp)
        return None
    return fp


def write(key_dir: Path, key: dict, fingerprint: str) -> bool:
    """Record ``fingerprint`` for ``key``; False (and a debug line) when not written.

    Not written when the source files on disk no longer match ``key['sources']`` (edited since this
    process imported them: the fingerprint came from the old code) or the directory is not writable.
    """
    if source_digest(module_files()) != key["sources"]:
        log.debug("fingerprint record not written: the circuit sources changed since they were imported")
        return False
    path = record_path(key_dir, key)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump({"key": key, "fingerprint": fingerprint}, f, sort_keys=True)
        os.replace(tmp, path)
        return True
    except OSError as e:
        log.debug("fingerprint record %s not written: %s", path, e)
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return False
