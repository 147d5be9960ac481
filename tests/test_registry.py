"""The executors' handler registries (egtile.ir.registry) and what codegen gathers from emitters
(headers, device code, scratch shared memory), plus ``ThreadLoop``'s index unflattening."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, replace

import pytest

from egtile.codegen import EMITTERS, Needs, Scratch, emit, generate, register_emitter, unregister_emitter
from egtile.errors import CodegenError, ResourceError
from egtile.ir import Leaf, SStmt, ThreadLoop, ThreadRange, TmaLoad, Var
from egtile.ir.registry import Registry
from egtile.ir.scheduled import unflatten, unflatten_c
from egtile.lower.sync import ACCESSES
from egtile.sim import SEMANTICS
from egtile.ir.printer import LISTINGS

from seed_schedules import bug2_schedule

import egtile.lower.driver  # noqa: E402,F401  what a compile loads: the fragment and wgmma nodes' access summaries
import egtile.rules  # noqa: E402,F401  and the rule modules' own nodes' handlers (the ping-pong's named barriers)

BUILTIN = set(SStmt.__args__)


def test_every_builtin_node_has_a_handler_in_every_executor():
    for reg in (EMITTERS, SEMANTICS, LISTINGS, ACCESSES):
        assert set(reg.classes()) >= BUILTIN, (reg.name, BUILTIN - set(reg.classes()))


def test_registry_stacks_handlers_and_finds_base_classes():
    class Base:
        pass

    class Derived(Base):
        pass

    reg: Registry[str] = Registry("test handlers", "handler", "test.register", KeyError)
    reg.register(Base, "base")
    assert reg.lookup(Derived) == "base"          # a subclass uses its base class's handler
    with pytest.raises(KeyError, match="already has a handler; pass replace=True"):
        reg.register(Base, "again")
    reg.register(Base, "shadow", replace=True)
    assert reg.lookup(Base) == "shadow"
    assert reg.unregister(Base) == "shadow" and reg.lookup(Base) == "base"
    reg.register(Derived, "derived")
    assert reg.lookup(Derived) == "derived" and reg.lookup(Base) == "base"
    reg.unregister(Derived)
    reg.unregister(Base)
    assert reg.classes() == ()
    with pytest.raises(KeyError, match=r"no handler is registered for scheduled statement .*Base in the test "
                                       r"handlers registry; register one with test\.register"):
        reg.lookup(Base)
    with pytest.raises(KeyError, match="has no handler to unregister"):
        reg.unregister(Base)
    with pytest.raises(KeyError, match="node class"):
        reg.register("Base", "x")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------------------
# codegen resources declared by an emitter


@dataclass(frozen=True)
class Probe:
    """A statement that stores one word into a scratch area."""

    name: str
    sid: int | None = None


def _probe(s: Probe, ctx) -> list[str]:
    return [f"reinterpret_cast<int*>({ctx.scratch(s.name)})[0] = eg_probe();"]


PROBE_CODE = "__device__ __forceinline__ int eg_probe() { return 7; }"


@pytest.fixture
def probe():
    register_emitter(Probe, _probe, headers=("egtile_common.cuh", "<cuda/std/cstdint>"), device_code=(PROBE_CODE,),
                     needs=lambda s, sched: Needs(scratch=(Scratch(s.name, 40 if s.name == "a" else 8, 64),)))
    yield
    unregister_emitter(Probe)


def test_an_emitter_brings_its_headers_device_code_and_scratch(probe):
    base = bug2_schedule()
    plain = generate(base)
    s = replace(base, body=base.body + (Probe("a"), Probe("b"), Probe("a")))
    g = generate(s)
    src = g.source
    assert src.count("#include <cuda/std/cstdint>") == 1 and src.count(PROBE_CODE) == 1
    assert src.index('#include "egtile_sync.cuh"') < src.index("#include <cuda/std/cstdint>") < src.index(PROBE_CODE)
    offs = {m[0]: int(m[1]) for m in re.findall(r"unsigned char\* eg_scratch_(\w+) = smem \+ (\d+);", src)}
    assert set(offs) == {"a", "b"} and all(o % 64 == 0 for o in offs.values())
    assert offs["a"] >= plain.smem_bytes and offs["b"] >= offs["a"] + 40 and g.smem_bytes == offs["b"] + 8
    assert src.count("= eg_probe();") == 3


def test_a_scratch_area_no_statement_declared_is_an_error(probe):
    register_emitter(Probe, _probe, replace=True)  # the same emitter without its needs
    try:
        with pytest.raises(CodegenError, match="scratch area 'a' is used but no statement declared it"):
            emit(replace(bug2_schedule(), body=(Probe("a"),)))
    finally:
        unregister_emitter(Probe)


def test_a_shared_alignment_the_array_cannot_give_is_refused(probe):
    register_emitter(Probe, _probe, replace=True, needs=lambda s, sched: Needs(shared_align=(("A_shared", 4096),)))
    try:
        with pytest.raises(ResourceError, match="4096-byte alignment of shared memory 'A_shared'"):
            emit(replace(bug2_schedule(), body=bug2_schedule().body + (Probe("a"),)))
    finally:
        unregister_emitter(Probe)


def test_a_larger_shared_alignment_moves_and_pads_the_buffer(probe):
    register_emitter(Probe, lambda s, ctx: [], replace=True,
                     needs=lambda s, sched: Needs(shared_align=(("B_shared", 256),)))
    try:
        s = bug2_schedule()
        src = emit(replace(s, body=s.body + (Probe("a"),)))
        off = int(re.search(r"B_shared = reinterpret_cast<half\*>\(smem \+ (\d+)\)", src)[1])
        assert off % 256 == 0
    finally:
        unregister_emitter(Probe)


def test_an_unregistered_node_inside_a_loop_names_its_class():
    s = bug2_schedule()
    with pytest.raises(CodegenError, match=r"test_registry\.Probe in the egtile\.codegen emitters registry"):
        emit(replace(s, body=s.body + (Probe("a"),)))
    assert Probe not in EMITTERS and TmaLoad in EMITTERS and Leaf in EMITTERS


# ----------------------------------------------------------------------------------------------------
# ThreadLoop unflattening


@pytest.mark.parametrize("extents", [(7,), (1,), (3, 5), (1, 4), (4, 1), (2, 1, 3), (1, 1, 6), (2, 3, 4, 5)])
def test_thread_loop_iterations_are_row_major_in_python_and_c(extents):
    loop = ThreadLoop(tuple(Var(f"v{d}") for d in range(len(extents))), extents, "partitioned",
                      ThreadRange(0, 128), ())
    space = list(itertools.product(*(range(e) for e in extents)))
    assert loop.trip_count == len(space)
    assert [loop.iteration(i) for i in range(loop.trip_count)] == space
    # the C digits, evaluated as C would for a non-negative counter (/ truncates, % is the remainder)
    exprs = loop.iteration_c("eg_i0")
    assert exprs == unflatten_c("eg_i0", extents)
    for i in range(loop.trip_count):
        got = tuple(eval(e.replace("eg_i0", str(i)).replace("/", "//")) for e in exprs)  # noqa: S307
        assert got == space[i] == unflatten(i, extents)
