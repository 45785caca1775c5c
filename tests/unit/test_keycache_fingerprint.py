"""Recorded R1CS fingerprints: a key-cache hit does not synthesize the circuit; a changed circuit does.

See gputrace/prover/keygen/fingerprint_record.py. Keys are generated once per module (shape K1-D2) and each test
works on its own copy of the key directory, without records unless it writes them.
"""

import ast
import importlib.util
import json
import logging
import shutil

import pytest

import gputrace
from gputrace.prover.circuit import CIRCUIT_ID, CircuitShape
from gputrace.prover.keygen import cache as keycache, fingerprint_record as fr, keys, template

SHAPE = CircuitShape(1, 2)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """A key directory with generated K1-D2 keys (no records) and the fingerprint built the slow way."""
    d = tmp_path_factory.mktemp("fp-keys")
    ks = keycache.get_keys(SHAPE, d, seed=1)
    shutil.rmtree(d / fr.RECORD_DIR, ignore_errors=True)
    assert ks.fingerprint == template.template_cs(SHAPE).fingerprint()
    return d, ks.fingerprint


@pytest.fixture
def key_dir(reference, tmp_path):
    d = tmp_path / "keys"
    shutil.copytree(reference[0], d)
    return d


@pytest.fixture
def builds(monkeypatch):
    """Counts template syntheses (calls of build_cs from keygen.template)."""
    calls = []
    real = template.build_cs

    def counting(*a, **kw):
        calls.append(a[0])
        return real(*a, **kw)

    monkeypatch.setattr(template, "build_cs", counting)
    return calls


def _forbid_build(monkeypatch):
    def boom(*a, **kw):
        raise AssertionError("build_cs called on a fingerprint-record hit")

    monkeypatch.setattr(template, "build_cs", boom)


def _record(key_dir, shape=SHAPE):
    key = fr.record_key(CIRCUIT_ID, shape.challenges, shape.depth, template.TEMPLATE_SEED, template.TEMPLATE_OPTS)
    return fr.record_path(key_dir, key)


def _traced_get_keys(*args, **kw):
    sink = gputrace.MemorySink()
    gputrace.configure(sinks=[sink], config={"test": "keycache"}, collect_gpu_info=False)
    try:
        ks = keycache.get_keys(*args, **kw)
    finally:
        gputrace.shutdown()
    (span,) = [s for s in sink.spans if s["name"] == "setup_fingerprint"]
    return ks, span["attributes"].get("fingerprint.record")


def test_hit_does_not_build_the_r1cs(key_dir, reference, monkeypatch):
    ks, status = _traced_get_keys(SHAPE, key_dir, seed=1)  # no record yet: builds, records
    assert (ks.cached, ks.fingerprint, status) == (True, reference[1], "miss")
    assert json.loads(_record(key_dir).read_text())["fingerprint"] == reference[1]
    real_build = template.build_cs
    _forbid_build(monkeypatch)
    hit, status = _traced_get_keys(SHAPE, key_dir, seed=1)
    assert status == "hit"
    assert (hit.cached, hit.fingerprint, hit.directory) == (True, ks.fingerprint, ks.directory)
    assert hit.pk.fingerprint == reference[1] and hit.pk.num_vars == ks.pk.num_vars
    # A key from another seed is another TEST key: generated in its own directory, same fingerprint
    # (a cached key used whatever --seed said let a seed-1 key stand in for every seed).
    monkeypatch.setattr(template, "build_cs", real_build)
    other = keycache.get_keys(SHAPE, key_dir, seed=7)
    assert (other.cached, other.fingerprint) == (False, reference[1]) and other.directory != ks.directory


def test_changed_circuit_source_rebuilds(key_dir, reference, builds, monkeypatch, tmp_path):
    # Point the source digest at copies of the circuit modules, so the test can edit "the circuit".
    src = tmp_path / "src"
    src.mkdir()
    copies = {}
    for name, path in fr.module_files().items():
        copies[name] = src / path.name
        shutil.copy(path, copies[name])
    monkeypatch.setattr(fr, "module_files", lambda names=fr.SOURCE_MODULES: dict(copies))
    monkeypatch.setattr(fr, "LOADED_SOURCES", fr.source_digest(copies))
    keycache.get_keys(SHAPE, key_dir, seed=1)
    keycache.get_keys(SHAPE, key_dir, seed=1)
    assert len(builds) == 1  # built once, then a hit
    old_record = _record(key_dir)

    # An edit to any module changes the digest, so the old record does not apply: the R1CS is built again.
    with open(copies["gputrace.prover.r1cs"], "a") as f:
        f.write("\n# changed\n")
    assert fr.source_digest(copies) != fr.LOADED_SOURCES
    monkeypatch.setattr(fr, "LOADED_SOURCES", fr.source_digest(copies))
    ks = keycache.get_keys(SHAPE, key_dir, seed=1)
    assert len(builds) == 2 and ks.fingerprint == reference[1]
    assert _record(key_dir) != old_record and _record(key_dir).exists()

    # Source edited after this process imported it: the fingerprint comes from the old code, so it is
    # used for this run but not recorded against the new source.
    with open(copies["gputrace.prover.poseidon"], "a") as f:
        f.write("\n# changed again\n")
    monkeypatch.setattr(fr, "LOADED_SOURCES", "0" * 40)
    keycache.get_keys(SHAPE, key_dir, seed=1)
    assert len(builds) == 3 and not _record(key_dir).exists()


def test_digest_covers_each_module_byte(tmp_path):
    files = {}
    for name, path in fr.module_files().items():
        files[name] = tmp_path / path.name
        shutil.copy(path, files[name])
    base = fr.source_digest(files)
    assert base == fr.LOADED_SOURCES
    for name, path in files.items():
        data = path.read_bytes()
        path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
        assert fr.source_digest(files) != base, name
        path.write_bytes(data)
    assert fr.source_digest(files) == base
    path.unlink()
    assert fr.source_digest(files) is None  # unreadable source: no records at all


@pytest.mark.parametrize("content", [
    b"", b"\xff\xfe garbage", b'{"key": ', b"[1, 2]", b'"just a string"',
    None,  # filled in below: a record for another shape
    b'{"key": KEY, "fingerprint": 7}', b'{"key": KEY, "fingerprint": "abc"}', b'{"key": KEY}',
    b'{"key": KEY, "fingerprint": "' + b"G" * 40 + b'"}',
    "directory", b"[" * 100_000, b"[" * 4000,
], ids=["empty", "binary", "truncated", "list", "string", "other-key", "fp-int", "fp-short", "fp-missing",
        "fp-not-hex", "directory", "huge-nested", "nested"])
def test_corrupt_record_rebuilds_silently(key_dir, reference, builds, content, caplog):
    path = _record(key_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    key = fr.record_key(CIRCUIT_ID, 1, 2, template.TEMPLATE_SEED, template.TEMPLATE_OPTS)
    if content == "directory":
        path.mkdir()
    elif content is None:
        other = dict(key, depth=3)
        path.write_text(json.dumps({"key": other, "fingerprint": reference[1]}))
    else:
        path.write_bytes(content.replace(b"KEY", json.dumps(key).encode()))
    with caplog.at_level(logging.DEBUG, logger="gputrace"):
        ks = keycache.get_keys(SHAPE, key_dir, seed=1)
    assert len(builds) == 1 and ks.cached and ks.fingerprint == reference[1]
    assert all(r.levelno <= logging.DEBUG for r in caplog.records), [r.getMessage() for r in caplog.records]
    if content != "directory":  # replaced by a good record: the next lookup is a hit
        keycache.get_keys(SHAPE, key_dir, seed=1)
        assert len(builds) == 1


def test_wrong_recorded_fingerprint_without_keys_is_rebuilt(key_dir, reference, builds, caplog):
    key = fr.record_key(CIRCUIT_ID, 1, 2, template.TEMPLATE_SEED, template.TEMPLATE_OPTS)
    path = fr.record_path(key_dir, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"key": key, "fingerprint": "ab" * 20}))
    ks = keycache.get_keys(SHAPE, key_dir, seed=1)
    assert len(builds) == 1 and ks.cached and ks.fingerprint == reference[1]
    assert "stale" in caplog.text
    assert json.loads(path.read_text())["fingerprint"] == reference[1]


def test_record_is_per_shape_and_template(key_dir, reference, monkeypatch):
    keycache.get_keys(SHAPE, key_dir, seed=1)  # records K1-D2
    k = dict(circuit=CIRCUIT_ID, challenges=1, depth=2, template_seed=-1, template_opts={"a1"})
    paths = {fr.record_path(key_dir, fr.record_key(**dict(k, **change)))
             for change in ({}, {"challenges": 2}, {"depth": 3}, {"template_seed": 0}, {"template_opts": set()},
                            {"sources": "1" * 40})}
    assert len(paths) == 6
    _forbid_build(monkeypatch)
    with pytest.raises(AssertionError, match="build_cs called"):  # another shape: no record of its own
        keycache.get_keys(CircuitShape(1, 3), key_dir, seed=1)
    monkeypatch.setattr(template, "TEMPLATE_SEED", 5)
    with pytest.raises(AssertionError, match="build_cs called"):  # another template instance
        keycache.get_keys(SHAPE, key_dir, seed=1)
    monkeypatch.setattr(template, "TEMPLATE_SEED", -1)
    assert keycache.get_keys(SHAPE, key_dir, seed=1).fingerprint == reference[1]


def test_foreign_key_behind_a_record_is_still_refused(key_dir, reference, tmp_path, monkeypatch):
    """A record only names the directory: the key in it is still checked against the fingerprint."""
    keycache.get_keys(SHAPE, key_dir, seed=1)
    directory = keycache.key_directory(key_dir, SHAPE, reference[1], 1)
    other = keycache.get_keys(CircuitShape(1, 3), tmp_path / "other", seed=1)
    shutil.copy(other.directory / "pk.npz", directory / "pk.npz")
    _forbid_build(monkeypatch)
    with pytest.raises(keys.KeyMismatchError):
        keycache.get_keys(SHAPE, key_dir, seed=1)


def _gputrace_imports(module: str) -> set[str]:
    spec = importlib.util.find_spec(module)
    tree = ast.parse(open(spec.origin, "rb").read())
    package = module if spec.submodule_search_locations else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
            found.add(base)
            for a in node.names:
                found.add(f"{base}.{a.name}")  # a submodule, or a name (dropped below)
    return {m for m in found if m.startswith("gputrace.") and _is_module_file(m)}


def _is_module_file(name: str) -> bool:
    """A plain module (not a package, not a name defined inside a module)."""
    try:
        spec = importlib.util.find_spec(name)
    except ModuleNotFoundError:  # "a.b.NAME" where a.b is a module
        return False
    return spec is not None and spec.submodule_search_locations is None and str(spec.origin).endswith(".py")


def test_source_modules_are_the_import_closure_of_build_cs():
    """Add a module to SOURCE_MODULES when the circuit starts importing it, or stale keys go unnoticed."""
    seen, todo = set(), ["gputrace.prover.witness"]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(_gputrace_imports(m))
    assert seen == set(fr.SOURCE_MODULES)


def test_source_edited_between_import_and_record_module_is_not_recorded(tmp_path):
    """The digest is of the code that runs: a circuit module edited after it was imported but before
    fingerprint_record was (a long-lived process, an editor saving mid-run) must not get its new source
    paired with the old code's fingerprint. Runs on a copy of the package in a subprocess."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    pkg = Path(gputrace.__file__).parent
    shutil.copytree(pkg, tmp_path / "gputrace", ignore=shutil.ignore_patterns("__pycache__"))
    script = f"""
import gputrace, gputrace.prover.circuit
assert gputrace.__file__.startswith({str(tmp_path)!r}), gputrace.__file__
with open(gputrace.prover.circuit.__file__, "a") as f:
    f.write("\\n# edited after import\\n")
from gputrace.prover.keygen import fingerprint_record as fr
from gputrace.prover.circuit import CIRCUIT_ID
key = fr.record_key(CIRCUIT_ID, 1, 2, -1, {{"a1"}})
print(fr.LOADED_SOURCES == fr.source_digest(fr.module_files()), fr.write({str(tmp_path / "keys")!r}, key, "ab" * 20))
"""
    env = dict(os.environ, PYTHONPATH=str(tmp_path), PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False"]  # digest of the imported bytes; nothing recorded


def test_loaded_digest_is_of_the_snapshot_and_needs_its_files(tmp_path):
    from gputrace.prover import source_snapshot

    files = fr.module_files()
    assert fr.loaded_digest(files, source_snapshot.SNAPSHOT) == fr.LOADED_SOURCES == fr.source_digest(files)
    assert fr.loaded_digest(files, None) is None and fr.loaded_digest(None, source_snapshot.SNAPSHOT) is None
    moved = dict(files, **{"gputrace.prover.r1cs": tmp_path / "r1cs.py"})
    assert fr.loaded_digest(moved, source_snapshot.SNAPSHOT) is None  # imported from another file


def test_second_load_of_an_unchanged_key_is_served_from_memory(key_dir, monkeypatch):
    """One process proving twice (``gputrace ab``) reads pk.npz once; a rewritten file is read again."""
    keycache.drop_resident()
    reads = []
    real = keys.load_pk

    def counting(path, **kw):
        reads.append(path)
        return real(path, **kw)

    monkeypatch.setattr(keys, "load_pk", counting)
    first = keycache.get_keys(SHAPE, key_dir, seed=1)
    second = keycache.get_keys(SHAPE, key_dir, seed=1)
    assert len(reads) == 1 and second.pk is first.pk
    pk_path = first.directory / "pk.npz"
    data = pk_path.read_bytes()
    pk_path.write_bytes(data)  # same bytes, new mtime: the file may have changed, so it is read again
    third = keycache.get_keys(SHAPE, key_dir, seed=1)
    assert len(reads) == 2 and third.pk is not first.pk
    keycache.drop_resident()


def test_key_load_phase_says_where_the_key_came_from(key_dir, tmp_path):
    keycache.drop_resident()
    trace = tmp_path / "t.jsonl"
    gputrace.configure(trace_file=str(trace))
    try:
        keycache.get_keys(SHAPE, key_dir, seed=1)
        keycache.get_keys(SHAPE, key_dir, seed=1)
    finally:
        gputrace.shutdown()
        keycache.drop_resident()
    text = trace.read_text()
    assert text.count('"key.source"') == 2
    assert '"stringValue":"file"' in text.replace(" ", "") and '"stringValue":"memory"' in text.replace(" ", "")
