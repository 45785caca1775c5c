"""docker-compose.yml and deploy/otelcol.yaml: Docker does not run in CI, so check the files.

The checks are the ones that break a local collector silently: a component referenced by a
pipeline but never defined (the collector refuses to start), a port published on all
interfaces, an unpinned image, a file exporter writing somewhere the host cannot see.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
OTELCOL = ROOT / "deploy" / "otelcol.yaml"


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def otelcol() -> dict:
    return yaml.safe_load(OTELCOL.read_text())


def _ports(service: dict) -> list[tuple[str, int, int]]:
    out = []
    for p in service.get("ports", []):
        m = re.fullmatch(r"(?P<ip>[0-9.]+):(?P<host>\d+):(?P<cont>\d+)(/tcp)?", str(p))
        assert m, f"port {p!r} must be HOST_IP:HOST_PORT:CONTAINER_PORT"
        out.append((m["ip"], int(m["host"]), int(m["cont"])))
    return out


def _port_of(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1])


def test_images_are_pinned(compose):
    images = {name: svc["image"] for name, svc in compose["services"].items()}
    assert images["otelcol"].startswith("otel/opentelemetry-collector-contrib:")
    assert images["jaeger"].startswith("jaegertracing/jaeger:")
    for name, image in images.items():
        repo, _, tag = image.partition(":")
        assert tag and tag != "latest", f"{name}: image {image!r} is not pinned"
        assert re.fullmatch(r"\d+\.\d+\.\d+", tag), f"{name}: tag {tag!r} is not an exact version"
    assert images["jaeger"].split(":")[1].startswith("2."), "Jaeger must be v2 (OTLP native)"


def test_ports_are_loopback_only(compose):
    seen = 0
    for name, svc in compose["services"].items():
        for ip, host, _ in _ports(svc):
            assert ip == "127.0.0.1", f"{name} publishes {host} on {ip}"
            seen += 1
    assert seen >= 4


def test_collector_ports_match_receivers(compose, otelcol):
    published = {cont: host for _, host, cont in _ports(compose["services"]["otelcol"])}
    protocols = otelcol["receivers"]["otlp"]["protocols"]
    assert _port_of(protocols["grpc"]["endpoint"]) == 4317 and published[4317] == 4317
    assert _port_of(protocols["http"]["endpoint"]) == 4318 and published[4318] == 4318
    # Inside the container the receivers must listen on all interfaces, or the
    # published ports reach nothing.
    assert protocols["grpc"]["endpoint"].startswith("0.0.0.0:")
    assert protocols["http"]["endpoint"].startswith("0.0.0.0:")
    assert _port_of(otelcol["extensions"]["health_check"]["endpoint"]) in published
    jaeger_ports = {cont for _, _, cont in _ports(compose["services"]["jaeger"])}
    assert 16686 in jaeger_ports


def test_pipeline_wiring_is_complete(otelcol):
    service = otelcol["service"]
    for ext in service.get("extensions", []):
        assert ext in otelcol["extensions"], f"extension {ext} used but not defined"
    used = {"receivers": set(), "processors": set(), "exporters": set()}
    for pname, pipe in service["pipelines"].items():
        assert pname.split("/")[0] in {"traces", "metrics", "logs"}
        assert pipe["receivers"] and pipe["exporters"], f"pipeline {pname} is empty"
        for section in used:
            for comp in pipe.get(section, []):
                assert comp in (otelcol.get(section) or {}), f"{pname}: {section[:-1]} {comp} not defined"
                used[section].add(comp)
    for section, names in used.items():
        defined = set(otelcol.get(section) or {})
        assert defined == names, f"{section} defined but unused: {defined - names}"
    traces = service["pipelines"]["traces"]
    assert traces["processors"][0] == "memory_limiter", "memory_limiter must run first"
    kinds = {e.split("/")[0] for e in traces["exporters"]}
    assert {"otlp_grpc", "file"} <= kinds


def test_exporters_reach_jaeger_and_the_host_file(compose, otelcol):
    jaeger = otelcol["exporters"]["otlp_grpc/jaeger"]
    host, port = jaeger["endpoint"].rsplit(":", 1)
    assert host == "jaeger" and host in compose["services"] and int(port) == 4317
    assert jaeger["tls"]["insecure"] is True
    # Jaeger v2 listens on localhost unless told otherwise; the collector is another container.
    assert compose["services"]["jaeger"]["environment"]["JAEGER_LISTEN_HOST"] == "0.0.0.0"
    fexp = otelcol["exporters"]["file/jsonl"]
    assert fexp["format"] == "json"  # OTLP JSON lines, what gputrace reads
    # The file must land in a bind mount, so `gputrace view` on the host can open it.
    cont_dir = str(Path(fexp["path"]).parent)
    mounts = {}
    for v in compose["services"]["otelcol"]["volumes"]:
        src, dst = v.split(":")[:2]
        mounts[dst] = src
    assert cont_dir in mounts, f"{cont_dir} is not mounted from the host"
    assert mounts[cont_dir] == "./runs/collector"
    # The config the collector loads is ours.
    assert mounts["/etc/otelcol-contrib/config.yaml"] == "./deploy/otelcol.yaml"
    cmd = compose["services"]["otelcol"]["command"]
    assert "--config=/etc/otelcol-contrib/config.yaml" in cmd


def test_health_check_probes_both_services(compose, otelcol):
    probe = compose["services"]["healthcheck"]
    test = " ".join(probe["healthcheck"]["test"])
    port = _port_of(otelcol["extensions"]["health_check"]["endpoint"])
    assert f"http://otelcol:{port}/" in test
    assert "http://jaeger:16686/" in test
    assert set(probe["depends_on"]) == {"otelcol", "jaeger"}


def test_docs_walk_the_whole_path():
    doc = (ROOT / "docs" / "interop.md").read_text()
    for needle in (
        "docker compose up -d",
        "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317",
        "http://127.0.0.1:16686",
        "gputrace view runs/collector/traces.jsonl",
    ):
        assert needle in doc, f"docs/interop.md lacks {needle!r}"
