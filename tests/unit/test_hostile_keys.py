"""Keys: fresh random toxic waste by default (nobody can recompute it), reproducible TEST keys only
from an explicit seed, kept apart in the cache, and vk.json, prove and verify say which is which."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gputrace.prover.keygen import cache as keycache
from gputrace.prover.keygen import keys
from gputrace.prover.keygen.template import template_cs
from gputrace.prover.circuit import CircuitShape
from gputrace.prover.keygen.setup import generate

ROOT = Path(__file__).resolve().parents[2]
SHAPE = CircuitShape(1, 2)


def test_default_setup_is_random_and_a_seed_is_reproducible():
    cs = template_cs(SHAPE)
    a, b = generate(cs)[1], generate(cs)[1]
    assert a.alpha_g1 != b.alpha_g1 and a.delta_g2 != b.delta_g2
    s1, s2 = generate(cs, 5)[1], generate(cs, 5)[1]
    assert s1.alpha_g1 == s2.alpha_g1 and s1.delta_g2 == s2.delta_g2


def test_cache_keeps_test_keys_apart_and_vk_json_says_so(tmp_path):
    real = keycache.get_keys(SHAPE, tmp_path)
    doc = json.loads(real.vk_path.read_text())
    assert doc["test_key"] is False and "warning" not in doc and real.test_seed is None
    test = keycache.get_keys(SHAPE, tmp_path, seed=3)
    tdoc = json.loads(test.vk_path.read_text())
    assert tdoc["test_key"] is True and tdoc["test_key_seed"] == 3 and "forge" in tdoc["warning"]
    assert test.directory != real.directory and test.directory.name.endswith("-testseed3")
    assert keycache.get_keys(SHAPE, tmp_path).cached and keycache.get_keys(SHAPE, tmp_path, seed=3).cached
    assert tdoc["alpha_g1"] != doc["alpha_g1"]


def test_an_old_seeded_cache_is_not_used_as_a_real_key(tmp_path):
    cs = template_cs(SHAPE)
    pk, vk = generate(cs, 1)  # what every earlier gputrace cached, under the plain directory name
    d = keycache.key_directory(tmp_path, SHAPE, cs.fingerprint(), None)
    keys.save_keys(d, pk, vk, "c", {"seed": 1})
    assert json.loads((d / "vk.json").read_text())["test_key"] is True
    ks = keycache.get_keys(SHAPE, tmp_path)
    assert not ks.cached  # regenerated from fresh randomness
    doc = json.loads(ks.vk_path.read_text())
    assert doc["test_key"] is False and doc["alpha_g1"] != keys.vk_to_json(vk, "c", "f")["alpha_g1"]


def _gt(*args):
    return subprocess.run([sys.executable, "-m", "gputrace", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)


@pytest.mark.slow
def test_prove_and_verify_say_when_a_key_is_a_test_key(tmp_path):
    keys_dir = tmp_path / "keys"
    r = _gt("prove", "--challenges", "1", "--depth", "2", "--backend", "cpu", "--seed", "2", "--out", tmp_path / "t",
            "--key-dir", keys_dir, "--quiet")
    assert r.returncode == 0, r.stderr
    assert "TEST key from --seed 2" in r.stdout
    vk = tmp_path / "t" / "vk.json"
    assert json.loads(vk.read_text())["test_key"] is True
    v = _gt("verify", "--vk", vk, *sorted((tmp_path / "t").glob("proof-*.json")))
    assert v.returncode == 0 and "TEST KEY" in v.stderr
    r = _gt("prove", "--challenges", "1", "--depth", "2", "--backend", "cpu", "--out", tmp_path / "r",
            "--key-dir", keys_dir, "--quiet")
    assert r.returncode == 0, r.stderr
    assert "random single-party setup" in r.stdout and "TEST" not in r.stdout
    assert json.loads((tmp_path / "r" / "vk.json").read_text())["test_key"] is False
