"""egtile.codec: data-only round trips of every IR dataclass, and strict, type-directed decoding."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import types
import typing
from typing import Literal, Union

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from egtile.codec import Codec, CodecError, ir_classes
from egtile.errors import SourceLoc
from egtile.ir import Buffer, Const, Expr, FenceProxyAsync, Kernel, Scheduled, SyncThreads, ThreadRange, Var

CODEC = Codec(ir_classes())
LEAVES = {Const, Var, SourceLoc, ThreadRange, Buffer, FenceProxyAsync, SyncThreads}
MAX_DEPTH = 2


def _hints(cls):
    return typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))


def strategy(tp, depth: int = 0):
    """Values of type ``tp``, built from the type hints alone (so every IR dataclass is covered, including
    ones added later). Beyond MAX_DEPTH, tuples are empty and unions pick leaf classes."""
    origin = typing.get_origin(tp)
    if tp is type(None) or tp is None:
        return st.none()
    if tp is bool:
        return st.booleans()
    if tp is int:
        return st.integers(-(2 ** 70), 2 ** 70)
    if tp is float:
        return st.floats(allow_nan=True, allow_infinity=True)
    if tp is str:
        return st.text(max_size=8)
    if origin is Literal:
        return st.sampled_from(typing.get_args(tp))
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            if depth >= MAX_DEPTH:
                return st.just(())
            return st.lists(strategy(args[0], depth + 1), max_size=2).map(tuple)
        return st.tuples(*(strategy(a, depth + 1) for a in args))
    if origin in (Union, types.UnionType):
        alts = typing.get_args(tp)
        if depth >= MAX_DEPTH:
            leafy = [a for a in alts if a in LEAVES or not dataclasses.is_dataclass(a)]
            alts = tuple(leafy) or alts
        return st.one_of(*(strategy(a, depth + 1) for a in alts))
    if dataclasses.is_dataclass(tp):
        return st.builds(tp, **{n: strategy(t, depth + 1) for n, t in _hints(tp).items()
                                if n in {f.name for f in dataclasses.fields(tp)}})
    raise AssertionError(f"no strategy for {tp!r}")


def _has_nan(text: str) -> bool:
    return "NaN" in text


@pytest.mark.parametrize("cls", ir_classes(), ids=lambda c: c.__name__)
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_ir_dataclass_round_trips(cls, data):
    value = data.draw(strategy(cls))
    text = CODEC.dumps(value)
    back = CODEC.loads(text, cls)
    assert type(back) is cls
    assert CODEC.dumps(back) == text  # fields excluded from == (loc) survive too
    if not _has_nan(text):
        assert back == value


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(st.integers(), st.floats(), st.booleans()))
def test_const_values_keep_their_python_type_and_sign(v):
    back = CODEC.loads(CODEC.dumps(Const(v, "float32")), Const)
    assert type(back.value) is type(v)
    if isinstance(v, float):
        assert (math.isnan(v) and math.isnan(back.value)) or (back.value == v and
                                                             math.copysign(1, back.value) == math.copysign(1, v))


def test_seed_schedules_round_trip():
    from seed_schedules import bug1_schedule, bug2_schedule

    for s in (bug1_schedule(), bug2_schedule()):
        back = CODEC.loads(CODEC.dumps(s), Scheduled)
        assert back == s and CODEC.dumps(back) == CODEC.dumps(s)


def test_decoding_refuses_unknown_classes_fields_and_types():
    good = json.loads(CODEC.dumps(Const(1, "int32")))
    for bad, why in [
        ({**good, "$": "Popen"}, "not one of"),
        ({**good, "extra": 1}, "unknown"),
        ({k: v for k, v in good.items() if k != "dtype"}, "missing"),
        ({**good, "dtype": 5}, "expected a string"),
        ({**good, "value": [1]}, "matches none"),
        ({**good, "$": "Var"}, "not one of"),  # a Var where a Const is expected
    ]:
        with pytest.raises(CodecError, match=why):
            CODEC.decode(bad, Const)
    with pytest.raises(CodecError, match="is not one of"):  # a Literal field
        CODEC.decode(json.loads(CODEC.dumps(Buffer("x", (4,), "float32", "global")).replace("global", "hbm")), Buffer)
    with pytest.raises(CodecError, match="not valid JSON"):
        CODEC.loads("[" * 100_000, Expr)
    with pytest.raises(CodecError):
        CODEC.loads('{"$": "Kernel"}', Kernel)
    with pytest.raises(CodecError, match="cannot encode"):
        CODEC.encode(object())


_BUG2 = None


def _bug2_doc():
    global _BUG2
    if _BUG2 is None:
        from seed_schedules import bug2_schedule

        _BUG2 = CODEC.dumps(bug2_schedule())
    return json.loads(_BUG2)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_mutated_encodings_decode_to_a_well_typed_value_or_raise_codec_error(data):
    """Replace one node of an encoded schedule by arbitrary JSON: decoding either refuses it with
    CodecError or returns a Scheduled whose re-encoding is valid; never another exception."""
    doc = _bug2_doc()
    nodes = []

    def collect(x, path):
        nodes.append(path)
        if isinstance(x, dict):
            for k, v in x.items():
                collect(v, path + (k,))
        elif isinstance(x, list):
            for i, v in enumerate(x):
                collect(v, path + (i,))

    collect(doc, ())
    path = data.draw(st.sampled_from(nodes[1:]))
    junk = data.draw(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4),
                                  lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
                                  max_leaves=5))
    parent = doc
    for p in path[:-1]:
        parent = parent[p]
    parent[path[-1]] = junk
    try:
        back = CODEC.decode(doc, Scheduled)
    except CodecError:
        return
    assert isinstance(back, Scheduled)
    CODEC.loads(CODEC.dumps(back), Scheduled)
