"""The one entrance (gputrace.timeline.load): sniffing, run splitting, progressive steps, and
leniency on damaged gzip files (every complete line before the damage is kept)."""

from __future__ import annotations

import ast
import gzip
import io
import zlib
from pathlib import Path

import pytest

from gputrace.otlp.encode import encode_request
from gputrace.timeline import TraceFormatError, iter_load, read_trace
from gputrace.timeline._lines import GzipStream, LineSplitter, iter_lines
from gputrace.timeline.formats.chrome.export import write_chrome
from gputrace.timeline.load import UnreadableTrace, load_runs, load_steps, read_any, read_as, sniff

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


def _line(i: int, n: int = 5, run: str = "r1") -> bytes:
    spans = [dict(trace_id=bytes([1 + i % 200]) * 16, span_id=i * 100 + k + 1, name="ntt", start_ns=1_000 + i * 10 + k,
                  end_ns=1_005 + i * 10 + k, attributes={"gputrace.device": 0, "gputrace.lane": "stream:0"})
             for k in range(n)]
    return encode_request({"host.name": "h", "gputrace.run_id": run}, spans)


def _lines_file(tmp_path, nlines: int, name="t.jsonl") -> tuple[Path, bytes]:
    data = b"".join(_line(i) + b"\n" for i in range(nlines))
    p = tmp_path / name
    p.write_bytes(data)
    return p, data


# ---- sniffing and reading any format -----------------------------------------------------
def test_sniff_by_content_not_name(tmp_path):
    tl = read_trace(DATA / "sample_2gpu.jsonl")
    chrome = tmp_path / "trace.jsonl"  # a Chrome file with an OTLP-looking name
    write_chrome(tl, chrome)
    gz = tmp_path / "chrome.bin"
    gz.write_bytes(gzip.compress(chrome.read_bytes()))
    otlp_gz = tmp_path / "x.json"
    otlp_gz.write_bytes(gzip.compress((DATA / "sample_2gpu.jsonl").read_bytes()))
    sq = tmp_path / "r.txt"
    sq.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    assert [sniff(p) for p in (chrome, gz, otlp_gz, DATA / "sample_2gpu.jsonl", sq)] == [
        "chrome", "chrome", "otlp", "otlp", "nsys"]
    both = read_any([chrome, otlp_gz])
    assert both.n == 2 * tl.n


def _kineto_doc(devices: int, pretty: bool, first: str = "schemaVersion") -> bytes:
    """A torch.profiler export as a machine of ``devices`` GPUs writes it: its header (schemaVersion,
    deviceProperties of every GPU, or a ``metadata`` block) comes before ``traceEvents``."""
    import json

    props = [{"id": i, "name": "NVIDIA B200", "totalGlobalMem": 191503138816, "computeMajor": 10,
              "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
              "regsPerBlock": 65536, "warpSize": 32, "sharedMemPerBlock": 49152, "numSms": 148,
              "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 232448,
              "sharedMemPerMultiprocessor": 233472} for i in range(devices)]
    head = ({"schemaVersion": 1, "deviceProperties": props} if first == "schemaVersion"
            else {"metadata": {"profiler": {"notes": "x" * 5000}}})
    doc = {**head, "traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.0, "dur": 5.0,
         "args": {"device": 0, "stream": 7, "correlation": 1}},
        {"ph": "X", "cat": "user_annotation", "name": "step", "pid": 1, "tid": 1, "ts": 0.0, "dur": 20.0}]}
    return json.dumps(doc, indent=4 if pretty else None).encode()


@pytest.mark.parametrize("pretty", [True, False])
@pytest.mark.parametrize("first", ["schemaVersion", "metadata"])
def test_a_profiler_export_whose_trace_events_come_late_is_chrome(tmp_path, pretty, first):
    """torch.profiler on an 8-GPU machine writes 8 deviceProperties (on one line: 16 GPUs; or a tool its
    metadata) before traceEvents, past the 4 KiB the sniffer reads: such files were taken for OTLP JSON Lines
    and refused."""
    raw = _kineto_doc(8 if pretty else 16, pretty, first)
    assert raw.index(b'"traceEvents"') > 4096
    p = tmp_path / "trace.json.gz"
    p.write_bytes(gzip.compress(raw))
    assert sniff(p) == "chrome"
    tl = read_any(p)
    assert "k" in tl.phases and "step" in tl.phases


def test_otlp_documents_stay_otlp_whatever_their_layout(tmp_path):
    import json

    from gputrace.timeline.formats.chrome.sniff import is_chrome

    line = _line(0)
    assert not is_chrome(line)
    assert not is_chrome(json.dumps(json.loads(line), indent=2).encode())  # one request, pretty-printed
    assert not is_chrome(b'{"other": 1}')  # one line, no Chrome key: the native reader says what it is
    assert is_chrome(b'{\n  "other": 1,\n  "traceEvents": []}')
    assert is_chrome(b'{\n  "anything": {"a": 1}\n}')  # a document over several lines is not JSON Lines


def test_read_as_refuses_unknown_kind(tmp_path):
    with pytest.raises(ValueError, match="unknown trace format 'pcap'"):
        read_as(DATA / "sample_2gpu.jsonl", "pcap")


def test_load_runs_splits_a_file_by_run_id(tmp_path):
    p = tmp_path / "two.jsonl"
    p.write_bytes(_line(0, run="a") + b"\n" + _line(5, run="b") + b"\n")
    tls, labels = load_runs([p])
    assert labels == ["two.jsonl#0", "two.jsonl#1"] and [t.n for t in tls] == [5, 5]


def test_load_steps_reads_every_format_and_refuses_missing_files(tmp_path):
    tl = read_trace(DATA / "sample_2gpu.jsonl")
    chrome = tmp_path / "c.json"
    write_chrome(tl, chrome)
    steps = list(load_steps([str(DATA / "sample_2gpu.jsonl"), str(chrome)]))
    last = [s for s in steps if s.snapshot is not None][-1]
    assert last.snapshot().n == 2 * tl.n and last.done_bytes == last.total_bytes
    with pytest.raises(UnreadableTrace, match="no such file"):
        list(load_steps([str(tmp_path / "nope.jsonl")]))
    (tmp_path / "empty.jsonl").write_bytes(b"")
    with pytest.raises(UnreadableTrace, match="empty file"):
        list(load_steps([str(tmp_path / "empty.jsonl")]))


# ---- damaged gzip: everything before the damage ------------------------------------------
def _complete_lines_before(data: bytes) -> int:
    """Complete lines in what a plain zlib decompressor recovers from ``data`` (the oracle)."""
    d = zlib.decompressobj(wbits=31)
    out = d.decompress(data)
    return out.count(b"\n")


@pytest.mark.parametrize("cut", [0.3, 0.6, 0.97])
def test_lenient_truncated_gzip_keeps_every_complete_line(tmp_path, cut):
    _, data = _lines_file(tmp_path, 3000)
    gz = gzip.compress(data, compresslevel=1)
    bad = gz[: int(len(gz) * cut)]
    p = tmp_path / "cut.jsonl.gz"
    p.write_bytes(bad)
    want = _complete_lines_before(bad)
    assert want > 0
    tl = read_trace(p, lenient=True)
    assert tl.n == 5 * want
    assert tl.load_report.reasons["bad gzip"] == 1
    # the progressive reader (what `view` uses) keeps the same lines
    last = list(iter_load(p, lenient=True, interval=0.0))[-1]
    assert last.timeline.n == 5 * want
    steps = [s for s in load_steps([str(p)]) if s.snapshot is not None]
    assert steps[-1].snapshot().n == 5 * want
    with pytest.raises(TraceFormatError, match="corrupt or truncated gzip stream"):
        read_trace(p)


def test_lenient_corrupt_gzip_keeps_the_lines_before_the_damage(tmp_path):
    _, data = _lines_file(tmp_path, 3000)
    gz = bytearray(gzip.compress(data, compresslevel=1))
    at = len(gz) // 2
    gz[at:at + 64] = b"\xff" * 64  # garbage in the middle of the deflate stream
    p = tmp_path / "bad.gz"
    p.write_bytes(bytes(gz))
    tl = read_trace(p, lenient=True)
    assert 0 < tl.n < 5 * 3000 and tl.n % 5 == 0
    assert tl.load_report.reasons["bad gzip"] == 1


def test_gzip_stream_reads_several_members_like_gzip():
    a, b = b"first\nline\n" * 1000, b"second member\n" * 3000
    data = gzip.compress(a) + gzip.compress(b)
    s = GzipStream(io.BytesIO(data))
    got = []
    while chunk := s.read(777):
        got.append(chunk)
    assert b"".join(got) == gzip.decompress(data)


# ---- line splitting ----------------------------------------------------------------------
def test_one_line_over_many_chunks_is_whole():
    line = b"x" * 100_000
    f = io.BytesIO(line + b"\nab\n" + line)
    out = list(iter_lines(f, chunk=1000))
    assert [(len(ln), t) for ln, t, _ in out] == [(100_000, True), (2, True), (100_000, False)]
    assert out[-1][2] == len(f.getvalue())


def test_line_splitter_keeps_pieces_without_copying_them_per_chunk():
    sp = LineSplitter()
    for _ in range(1000):
        assert sp.push(b"y" * 10) == []
    assert len(sp._parts) == 1000  # pieces held, joined once at the newline
    assert sp.push(b"z\nw") == [b"y" * 10_000 + b"z"]
    assert sp.rest() == b"w" and not sp.pending


# ---- layout: one entrance, no import cycle -----------------------------------------------
def _imports(path: Path) -> set[str]:
    mods = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            mods.add(node.module)
        elif isinstance(node, ast.Import):
            mods.update(a.name for a in node.names)
    return mods


def test_the_format_table_is_light_and_every_role_resolves():
    """Importing the table imports no reader (its roles are dotted names, imported on first use), and every
    name in it is a function; the format packages import nothing when imported themselves."""
    import subprocess
    import sys

    code = ("import sys, gputrace.timeline.formats as f, gputrace.timeline.formats.chrome, "
            "gputrace.timeline.formats.nsys, gputrace.timeline.formats.otlp_jsonl\n"
            "print(sorted(m for m in sys.modules if m.startswith('gputrace.timeline.') or m == 'numpy'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["['gputrace.timeline.formats',", "'gputrace.timeline.formats.chrome',",
                                  "'gputrace.timeline.formats.nsys',", "'gputrace.timeline.formats.otlp_jsonl']"]
    from gputrace.timeline.formats import FORMATS, NATIVE

    roles = ("sniff", "read", "read_head", "read_steps", "write", "convert")
    for fmt in FORMATS.values():
        for role in roles:
            if fmt.has(role):
                assert callable(fmt.function(role)), (fmt.name, role)
            else:
                with pytest.raises(ValueError, match=fmt.name):
                    fmt.function(role)
    assert FORMATS[NATIVE].sniff is None  # the fallback
    assert [f.name for f in FORMATS.values() if f.sniff is None and f.has("read")] == [NATIVE]


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _all_imports(path: Path, module: str) -> set[str]:
    """Every module ``path`` imports, at any depth of its code (function-level imports count), relative
    imports resolved, ``from pkg import mod`` counted as ``pkg.mod`` when that is a module."""
    mods = set()
    pkg = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            mods.add(base)
            mods.update(f"{base}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            mods.update(a.name for a in node.names)
    return mods


def test_no_import_cycle_in_the_read_side_the_receiver_or_the_codec():
    """No cycle among the modules of gputrace.timeline, gputrace.interop and gputrace.otlp, counting the
    imports inside functions (which hide cycles from a plain import) and the package ``__init__``s."""
    files = [f for d in ("timeline", "interop", "otlp") for f in (ROOT / "gputrace" / d).rglob("*.py")]
    files.append(ROOT / "gputrace" / "json_depth.py")
    mods = {_module_of(f): f for f in files}
    graph = {m: sorted(i for i in _all_imports(f, m) if i in mods and i != m) for m, f in mods.items()}
    # A module's package __init__ runs before it: a package that imports its own submodule is no cycle.
    for m in graph:
        graph[m] = [i for i in graph[m] if not m.startswith(i + ".")]
    state: dict[str, int] = {}
    cycles = []

    def visit(m: str, stack: list[str]) -> None:
        state[m] = 1
        for i in graph[m]:
            if state.get(i) == 1:
                cycles.append(stack[stack.index(i):] + [i])
            elif i not in state:
                visit(i, [*stack, i])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert cycles == []


def test_only_the_entrance_reaches_the_formats_from_outside_timeline():
    """CLI, TUI, analysis, prover and recorder go through gputrace.timeline.load; the commands may read the
    format table itself (names and summaries) but no format's modules."""
    offenders = []
    for pkg in ("commands", "tui", "analysis", "prover", "trace", "cli.py"):
        base = ROOT / "gputrace" / pkg
        for f in ([base] if base.is_file() else base.rglob("*.py")):
            bad = {m for m in _imports(f) if m.startswith("gputrace.timeline.formats.")}
            if bad:
                offenders.append((f.relative_to(ROOT).as_posix(), sorted(bad)))
    assert offenders == []
