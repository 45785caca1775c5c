"""Fr helpers and point encodings."""

import random

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point, G2Point

from gputrace.prover import encoding, field
from gputrace.prover.field import R

# Published compressed encodings of the generators (zcash bls12_381 / blst / IETF BLS draft).
G1_GEN_HEX = ("97f1d3a73197d7942695638c4fa9ac0fc3688c4f9774b905a14e3a3f171bac586c55e83ff97a1aeffb3af00adb22c6bb")
G2_GEN_HEX = ("93e02b6052719f607dacd3a088274f65596bd0d09920b61ab5da61bbdc7f5049334cf11213945d57e5ac7d055d042b7e"
              "024aa2b2f08f0a91260805272dc51051c6e47ad4fa403b02b4510b647ae3d1770bac0326a805bbefd48056c8c121bdb8")


def test_generator_encodings_match_published_values():
    assert encoding.g1_to_hex(G1Point()) == G1_GEN_HEX
    assert encoding.g2_to_hex(G2Point()) == G2_GEN_HEX
    assert encoding.g1_from_hex(G1_GEN_HEX) == G1Point()
    assert encoding.g2_from_hex(G2_GEN_HEX) == G2Point()


def test_limbs_roundtrip_and_layout():
    rng = random.Random(3)
    xs = [rng.randrange(R) for _ in range(50)] + [0, 1, R - 1, 1 << 64]
    limbs = field.ints_to_limbs(xs)
    assert limbs.dtype == np.uint64 and limbs.shape == (len(xs), 4)
    assert limbs[-1].tolist() == [0, 1, 0, 0]  # little-endian limbs
    assert field.limbs_to_ints(limbs) == xs
    assert [int(s) for s in field.limbs_to_scalars(limbs)] == xs
    assert field.bit_lengths(limbs).tolist() == [x.bit_length() for x in xs]
    assert field.popcounts(limbs).tolist() == [bin(x).count("1") for x in xs]


def test_check_canonical_names_the_bad_element():
    limbs = field.ints_to_limbs([1, 2, 3])
    limbs[1] = field.ints_to_limbs([R - 1])[0]
    field.check_canonical(limbs)
    bad = np.frombuffer(R.to_bytes(32, "little"), dtype="<u8").astype(np.uint64)
    limbs[2] = bad
    with pytest.raises(field.FieldError, match="element 2"):
        field.check_canonical(limbs, "a")


def test_roots_of_unity_and_inverses():
    w = field.root_of_unity(1 << 10)
    assert pow(w, 1 << 10, R) == 1 and pow(w, 1 << 9, R) == R - 1
    with pytest.raises(ValueError):
        field.root_of_unity(12)
    xs = [3, 5, R - 2]
    assert [x * y % R for x, y in zip(xs, field.batch_inv(xs))] == [1, 1, 1]
    with pytest.raises(ZeroDivisionError, match="index 1"):
        field.batch_inv([1, 0])


def test_affine_limbs_roundtrip_including_identity():
    g = G1Point()
    pts = [g, G1Point.identity(), g + g]
    limbs = encoding.g1_to_affine_limbs(pts)
    assert limbs.shape == (3, 2, 6) and not limbs[1].any()
    x = int.from_bytes(limbs[0, 0].tobytes(), "little")
    y = int.from_bytes(limbs[0, 1].tobytes(), "little")
    assert (y * y - x ** 3 - 4) % encoding.Q == 0
    assert encoding.g1_from_affine_limbs(limbs) == pts
    limbs[2, 1, 0] ^= 1
    with pytest.raises(encoding.EncodingError, match="row 2"):
        encoding.g1_from_affine_limbs(limbs)


@pytest.mark.parametrize("text,msg", [("zz", "not valid hex"), ("00" * 47, "expected 48 bytes"),
                                      ("00" * 48, "compression flag not set"), ("80" + "00" * 47, "not a valid"),
                                      (5, "expected a hex string")])
def test_bad_point_hex_names_where(text, msg):
    with pytest.raises(encoding.EncodingError, match=msg) as ei:
        encoding.g1_from_hex(text, "proof.json: field 'a'")
    assert "proof.json: field 'a'" in str(ei.value)
