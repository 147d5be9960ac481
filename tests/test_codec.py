"""egtile.codec: data-only round trips of every IR dataclass, and strict, type-directed decoding."""

from __future__ import annotations

import dataclasses
import json
import math
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
    return typing.get_type_hints(cls)  # as the codec resolves them: each base's fields in its own module


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


def _tile_statement_classes():
    """Every tile-IR statement class: the dataclasses of egtile.ir with a statement id and a source line."""
    out = []
    for cls in ir_classes():
        names = {f.name for f in dataclasses.fields(cls)}
        if {"sid", "loc"} <= names:
            out.append(cls)
    return out


def _scheduled_statement_classes():
    """Every scheduled-IR statement class: those of the statement union and every class with a listing
    (each scheduled statement needs one to be printed), after importing every executor's registrations."""
    import egtile.codegen  # noqa: F401  (registrations)
    import egtile.lower.protocol  # noqa: F401
    import egtile.sim  # noqa: F401
    import egtile.verifier  # noqa: F401
    from egtile.ir.printer import LISTINGS
    from egtile.ir.scheduled import SStmt

    return sorted(set(typing.get_args(SStmt)) | set(LISTINGS.classes()), key=lambda c: c.__name__)


def test_every_ir_module_is_searched():
    """ir_classes finds the classes of every module of egtile.ir by itself (no list to keep up to date)."""
    import importlib
    import pkgutil

    import egtile.ir

    found = set(ir_classes())
    for info in pkgutil.iter_modules(egtile.ir.__path__):
        module = importlib.import_module(f"egtile.ir.{info.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == module.__name__:
                assert obj in found, obj


@pytest.mark.parametrize("cls", _tile_statement_classes(), ids=lambda c: c.__name__)
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_tile_statement_round_trips_in_a_loop_body(cls, data):
    """A statement of each class inside a ``For`` body (a ``tuple[Stmt, ...]`` field) decodes: a tile statement
    class that the statement union ``egtile.ir.kernel.Stmt`` does not admit (by name or as a subclass of
    one it names) fails here, not as a silent schedule-cache miss."""
    from egtile.ir import For

    stmt = data.draw(strategy(cls, MAX_DEPTH - 1))
    loop = For(7, Var("i", "int32"), Const(0, "int32"), Const(4, "int32"), "serial", (stmt, stmt))
    text = CODEC.dumps(loop)
    back = CODEC.loads(text, For)
    assert type(back.body[0]) is cls and CODEC.dumps(back) == text


@pytest.mark.parametrize("cls", _scheduled_statement_classes(), ids=lambda c: c.__name__)
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_scheduled_statement_round_trips_in_a_loop_body(cls, data):
    """Likewise for the scheduled IR: each statement class inside a ``SeqLoop`` body
    (``tuple[SStmt, ...]``); a new node with a listing but outside ``egtile.ir.scheduled.SStmt`` fails here."""
    from egtile.ir import SeqLoop

    stmt = data.draw(strategy(cls, MAX_DEPTH - 1))
    loop = SeqLoop(Var("i", "int32"), Const(0, "int32"), Const(4, "int32"), (stmt,))
    text = CODEC.dumps(loop)
    back = CODEC.loads(text, SeqLoop)
    assert type(back.body[0]) is cls and CODEC.dumps(back) == text


def test_a_subclass_is_admitted_where_its_base_is_declared_and_nothing_else():
    from egtile.ir import If
    from egtile.ir.protocol import BarrierWait, RoleBlock

    block = RoleBlock(3, Const(True, "bool"), (), (), groups=(1,))
    back = CODEC.loads(CODEC.dumps(block), If)
    assert back == block and type(back) is RoleBlock
    wait = json.loads(CODEC.dumps(BarrierWait(4, "full", Const(0, "int32"), Const(0, "int32"))))
    with pytest.raises(CodecError, match="not one of"):
        CODEC.decode(wait, If)  # a statement of another class where an If is declared
    with pytest.raises(CodecError, match="not one of"):
        CODEC.decode(json.loads(CODEC.dumps(block)), Const)  # nor as an Expr


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
