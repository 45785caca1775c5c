"""``ArgsSharer``: big ``args`` dicts of other tools' Chrome traces shared as ``TemplateAttrs``, exactly."""

from __future__ import annotations

import copy

import msgspec
import pytest

import gputrace.timeline.formats.chrome.args_share as args_share
from gputrace.timeline.formats.chrome.args_share import ArgsSharer
from gputrace.timeline.row_attrs import TemplateAttrs


def _kernel(i: int, **over) -> dict:
    a = {"External id": i, "queued": 0, "device": 0, "stream": 7, "correlation": 1000 + i,
         "registers per thread": 24, "blocks per SM": 0.5, "grid": [64, 1, 1], "chrome.cat": "kernel"}
    a.update(over)
    return a


def _exact(m) -> bytes:
    return msgspec.json.encode(dict(m))


def test_repeated_kernels_share_one_template_and_read_back_exactly():
    rows = [_kernel(i) for i in range(50)]
    want = copy.deepcopy(rows)
    views = ArgsSharer().views(rows)
    assert all(type(v) is TemplateAttrs for v in views)
    assert len({id(v.shared) for v in views}) == 1
    for v, w in zip(views, want, strict=True):
        assert _exact(v) == _exact(w) and list(v) == list(w) and v == w and len(v) == len(w)
        assert v["correlation"] == w["correlation"] and v.get("nope", 3) == 3 and "grid" in v and "x" not in v


@pytest.mark.parametrize("key, values", [
    ("registers per thread", [24, 24.0, True]),  # equal under ==, not the same JSON
    ("blocks per SM", [0.0, -0.0]),
    ("grid", [[64, 1, 1], [64.0, 1, 1], [64, 1, True]]),
])
def test_values_equal_under_eq_but_of_other_types_get_their_own_template(key, values):
    rows = [_kernel(i, **{key: values[i % len(values)]}) for i in range(12)]
    want = copy.deepcopy(rows)
    views = ArgsSharer().views(rows)
    assert [_exact(v) for v in views] == [_exact(w) for w in want]
    assert len({id(v.shared) for v in views}) == len(values)


def test_varying_keys_absent_null_or_in_another_place_keep_order_and_values():
    rows = [_kernel(1), _kernel(2, correlation=None), {k: v for k, v in _kernel(3).items() if k != "External id"},
            {"correlation": 5, **_kernel(4)}, _kernel(5, meta={"External id": 9})]
    want = copy.deepcopy(rows)
    views = ArgsSharer().views(rows)
    assert [(list(v), _exact(v)) for v in views] == [(list(w), _exact(w)) for w in want]
    assert views[4]["meta"] == {"External id": 9}  # only top-level keys vary


def test_unencodable_value_keeps_the_dict_as_it_was():
    odd = _kernel(1, obj=object())
    order = list(odd)
    [v] = ArgsSharer().views([odd])
    assert v is odd and list(v) == order and v["External id"] == 1 and v["correlation"] == 1001


def test_sharing_stops_at_the_template_bound_and_keeps_the_rest_unchanged(monkeypatch):
    monkeypatch.setattr(args_share, "MAX_TEMPLATES", 3)
    rows = [_kernel(i, stream=i) for i in range(6)]  # every static part differs
    want = copy.deepcopy(rows)
    sharer = ArgsSharer()
    views = sharer.views(rows)
    assert [type(v) for v in views] == [TemplateAttrs] * 3 + [dict] * 3 and not sharer.enabled
    assert all(v is r for v, r in zip(views[3:], rows[3:], strict=True))
    assert [(list(v), _exact(v)) for v in views] == [(list(w), _exact(w)) for w in want]
    later = _kernel(0, stream=0)  # would match a template, but sharing has stopped
    assert sharer.views([later])[0] is later


def test_template_attrs_repr_and_dict():
    [v] = ArgsSharer().views([_kernel(1)])
    assert dict(v) == _kernel(1) and repr(v).startswith("TemplateAttrs({'External id': 1,")
