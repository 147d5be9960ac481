"""Register fragments: when a ``T.alloc_fragment`` buffer can live in registers, and how its users run then.

Hardware fact (PTX ISA §5.1 "State Spaces", §9.7.15.5.1.1 "Matrix Fragments for wgmma"): registers are
private to a thread. A fragment in registers is therefore a *layout* (:class:`egtile.layout.Fragment`):
element ``(row, col)`` exists in exactly one thread's registers, and only that thread can read or write
it. The tensor-core instructions fix such layouts for their accumulators (``wgmma.mma_async``'s D), so a
``T.gemm`` lowered to wgmma puts its accumulator in registers in the layout of its tiling
(:mod:`egtile.rules.mma`, whose declaration names the layout; the lowering collects it before lowering
anything, ``Decision.layouts``). Every other statement touching that fragment then runs *by layout*
(:mod:`egtile.ir.fragment`): each thread does the part of it that its own elements need.

A statement can run by layout exactly when each thread's part touches only its own elements
(``fragment-users-admit-registers``, derived in the e-graph over every statement touching the fragment,
from the per-statement oracle ``frag-register-blocker``):

* ``T.clear`` / ``T.fill`` of the whole fragment; ``T.copy`` from or to the whole fragment (source and
  destination elements pair by row-major position, so the owner of fragment element ``e`` moves position
  ``e``); a SIMT ``T.gemm`` accumulating into the whole fragment (each owner computes its elements from
  rows of A and columns of B in shared memory);
* a ``T.Parallel`` nest whose extents are the fragment's shape, starting at 0, in which every access of
  the fragment is ``frag[i, j]`` with ``i, j`` the nest's own variables in order, and which writes some
  non-local buffer (so that it cannot be *replicated*: a replicated loop would read elements the thread
  does not hold): iteration ``(i, j)`` runs once, on the owner of ``(i, j)``.

* a row reduction ``T.reduce_*(X, r, dim=1)`` into a 1-D fragment (a row fragment, replicated over the
  threads holding the row: :class:`egtile.layout.RowFragment`), a ``T.Parallel(M, N)`` nest accessing rows
  ``r[i]`` with ``X[i, j]``, a ``T.Parallel(M)`` over row fragments that writes only fragments and locals (every
  replica runs row ``i``), a whole ``T.copy`` between two fragments of one shape (a cast keeps the layout), and a
  ``T.gemm`` whose A is a 16-bit fragment when a register-A wgmma fits (``wgmma-rs-options``,
  :mod:`egtile.rules.mma`);
* a row fragment stored to memory: a ``T.Parallel(M)`` over row fragments that writes only global or shared memory,
  and a ``T.copy`` of a whole row fragment into one row of memory (``T.copy(logsum, Lse[b, h, rows])``): row ``i``
  is stored by its first replica alone (``LayoutLoop.once``: the thread whose replication digits are 0), a clipped
  copy's rows past the tensor's edge not at all; a nest that writes registers *and* memory stays in shared memory
  (every replica must write the registers, one may store);
* a read of a *column vector* in a ``T.Parallel(M, N)`` nest: a 1-D fragment that some nest indexes by another
  variable than its first (``S[i, j] = T.if_then_else(mask[j], ...)``,
  :func:`egtile.lower.fragment_layouts.column_vectors`). It has no row layout, so it is tied to no fragment
  and stays in shared memory, where the thread running ``(i, j)`` reads it like any shared buffer (the CTA
  barrier after its writers comes from :mod:`egtile.lower.sync`); a reduction into one keeps its source's
  group in shared memory. So does a *gathered* fragment, one of two or more dimensions that a nest only reads at
  another element than the iteration's own (``B_local[i, j // 2]``, unpacking a packed operand) and that nothing else
  ties (:func:`egtile.lower.fragment_layouts.gathered`).

Fragments tied by such statements form a *group* (``frag_link``, derived in the e-graph): the condition
judges every user of every fragment of the accumulator's group, and their layouts follow from the
decision's (:mod:`egtile.lower.fragment_layouts`).

Everything else keeps the group in shared memory (egtile's default placement, always legal): a reduction
along another dim, a pointer to it (``T.address_of``), a partial region, an element access at another
index, a block-level scalar access, a ``T.copy`` out of a 1-D fragment into anything but one row of memory, a
fragment as a gemm operand B. Two statements that fix different layouts of one fragment are
a :class:`~egtile.errors.ScheduleError` naming both (no conversion is implemented).

Register pressure. A group in registers may need more registers at once than the consumer threads' ``setmaxnreg``
allocation: then ptxas spills some to local memory (legal, slower). That is not a reason to move the group to
shared memory, where its gemms run on SIMT cores (and TileLang's flash-attention example at its own defaults,
128x128 blocks at 128 threads, overflowed 227 KB): :func:`spill_of` estimates the group's peak of live registers
(backward liveness over the kernel, :func:`live_peak`) and the registers beyond the allocation, and the wgmma
costs (:mod:`egtile.rules.mma`) charge each spilled register a store and a reload per iteration, so the e-graph
keeps the group in registers exactly when that is cheaper than the alternatives, and ``explain()`` says so
(:func:`spill_notes`). What cannot spill is refused: a wgmma's accumulator and register A, which stay in registers
until its ``wait_group``, must fit :func:`inflight_limit`.

The lowerings of the statements that touch a fragment (``tile``, ``copy_simt``, ``partitioned``,
``vectorized``) ask :func:`by_layout` first; it returns the by-layout form when the fragment is in
registers.
"""

from __future__ import annotations

from dataclasses import dataclass

from egglog import Bool, String, eq, i64, ne, relation, rule, var

from egtile.analysis import own_reads, own_writes
from egtile.errors import ScheduleError
from egtile.ir import Const, Copy, Fill, For, Gemm, Reduce, Store, ThreadLoop, ThreadRange, Var
from egtile.ir.fragment import FragmentOp, LayoutLoop, RowReduce
from egtile.layout.errors import LayoutError
from egtile.layout.fragment import Fragment, RowFragment, row_projection
from egtile.schedule import dataflow as D
from egtile.schedule.rule import FactSpec, Violation, stmt_condition
from egtile.schedule.schema import Block, Stmt, fact
from egtile.verdict import Verdict

# ----------------------------------------------------------------------------------------------------
# The per-statement oracle


def nest_of(ctx, sid: int) -> tuple[For, tuple[Var, ...], tuple[int, ...], frozenset[int]] | None:
    """The block-level ``T.Parallel`` around statement ``sid`` of a parallel body, with the variables and
    extents of its folded nest (perfectly nested static parallel loops, as the thread mapping folds them)
    and the sids of the folded loops; ``None`` outside one or for a symbolic range."""
    outer = None
    for a in ctx.ancestors(sid):
        if isinstance(a, For) and a.kind == "parallel" and ctx.context[a.sid] == "block":
            outer = a
    if outer is None:
        return None
    vars_: list[Var] = []
    extents: list[int] = []
    folded: set[int] = set()
    cur = outer
    while True:
        if not (isinstance(cur.start, Const) and isinstance(cur.stop, Const)):
            return None
        vars_.append(cur.var)
        extents.append(int(cur.stop.value) - int(cur.start.value))
        folded.add(cur.sid)
        if int(cur.start.value) != 0:
            return None
        inner = cur.body[0] if len(cur.body) == 1 else None
        if isinstance(inner, For) and inner.kind == "parallel" and isinstance(inner.start, Const) \
                and isinstance(inner.stop, Const):
            cur = inner
            continue
        return outer, tuple(vars_), tuple(extents), frozenset(folded)


def _own_index(a, vars_: tuple[Var, ...]) -> bool:
    r = a.region
    if r is None or any(e != 1 for e in r.extents) or len(r.offsets) != len(vars_):
        return False
    return all(isinstance(o, Var) and o.name == v.name for o, v in zip(r.offsets, vars_))


def _nest_blocker(ctx, outer: For, extents: tuple[int, ...]) -> str | None:
    """Why the whole ``T.Parallel`` nest ``outer`` cannot run by a register layout (``None``: it can). A nest
    that touches row fragments and no 2-D fragment of its shape writes either registers (fragments and locals:
    every replica runs each row, each on its own copy) or memory (the first replica of each row stores it), not
    both; a 2-D nest must touch a 2-D fragment of its shape (the layout that says which thread runs ``(i, j)``)."""
    frags, nonlocal_writes, register_writes = _nest_accesses(outer)
    two = [f for f in frags if len(ctx.kernel.buffer(f).shape) == 2]
    if two:
        return None
    if len(extents) != 1:
        return f"a T.Parallel over {extents} touches only row fragments ({', '.join(sorted(frags))}), no 2-D fragment"
    if nonlocal_writes and register_writes:
        return (f"a T.Parallel over row fragments ({', '.join(sorted(frags))}) writes registers "
                f"({', '.join(sorted(register_writes))}), which every replica of a row must write, and "
                f"{', '.join(sorted(nonlocal_writes))}, which only one replica may store")
    return None  # registers only: every replica; memory only: the first replica of each row (LayoutLoop.once)


def _nest_accesses(outer: For) -> tuple[set[str], set[str], set[str]]:
    """The fragments a ``T.Parallel`` nest touches, the global/shared buffers it writes, and the fragments and
    locals it writes."""
    from egtile.ir import walk

    frags: set[str] = set()
    memory: set[str] = set()
    registers: set[str] = set()
    for st in walk(outer.body):
        if isinstance(st, For):
            continue
        for a in (*own_reads(st), *own_writes(st)):
            if a.scope == "fragment":
                frags.add(a.buffer)
        for a in own_writes(st):
            (registers if a.scope in ("fragment", "local") else memory).add(a.buffer)
    return frags, memory, registers


def register_blocker(ctx, s) -> Verdict:
    """``frag-register-blocker``: statement ``s`` (a leaf) touches a fragment in a way that no register layout
    can serve (module docstring); the verdict's reasons say how. Holds (``ok``) when it blocks."""
    if isinstance(s, (For,)) or not hasattr(s, "sid"):
        return Verdict.fail("not a leaf statement")
    accesses = [(a, False) for a in own_reads(s)] + [(a, True) for a in own_writes(s)]
    frags = [(a, w) for a, w in accesses if a.scope == "fragment"]
    if not frags:
        return Verdict.fail("touches no fragment")
    if any(a.via_pointer for a, _ in frags):
        return Verdict(True, ("hands a pointer to a fragment to an extern call",))
    if ctx.context.get(s.sid) == "thread":
        nest = nest_of(ctx, s.sid)
        if nest is None:
            return Verdict(True, ("touches a fragment inside a T.Parallel whose nest is not static from 0",))
        outer, vars_, extents, _ = nest
        peers = len(nest_fragments_2d(ctx, outer)) > 1
        resident = _shared_resident(ctx)
        for a, _w in frags:
            buf = ctx.kernel.buffer(a.buffer)
            shape = tuple(buf.shape)
            if a.buffer in resident:
                continue  # a column vector or gathered fragment stays in shared memory, read by whichever thread runs (i, j)
            if peers and len(shape) == 2:
                continue  # peer fragments: judged by frag-peer-blocker (fragment-peers-in-lockstep)
            if len(shape) == 1 and shape[0] == extents[0]:
                if not _own_index(a, vars_[:1]):
                    return Verdict(True, (f"accesses row fragment {a.buffer} at another index than the loop's row "
                                          f"({vars_[0].name})",))
                continue
            if shape != extents:
                return Verdict(True, (f"a T.Parallel over {extents} touches fragment {a.buffer} of shape {shape}",))
            if not _own_index(a, vars_):
                return Verdict(True, (f"accesses fragment {a.buffer} at another index than the loop's own element "
                                      f"({', '.join(v.name for v in vars_)})",))
        why = _nest_blocker(ctx, outer, extents)
        if why:
            return Verdict(True, (why,))
        return Verdict.fail("every fragment access is at the iteration's own element or row")
    match s:
        case Reduce(src=src, dst=dst, dim=dim):
            if dst.name in _column_vectors(ctx):
                return Verdict(True, (f"T.reduce into {dst.name}, which a T.Parallel reads at a column: a column vector "
                                      "stays in shared memory",))
            if src.scope != "fragment" or dst.scope != "fragment":
                return Verdict(True, (f"T.reduce between {src.name} ({src.scope}) and {dst.name} ({dst.scope}): a row "
                                      "reduction in registers needs both fragments",))
            if len(src.shape) != 2 or dim not in (1, -1) or tuple(dst.shape) != (src.shape[0],):
                return Verdict(True, (f"T.reduce of {src.name} {tuple(src.shape)} along dim {dim} into {dst.name} "
                                      f"{tuple(dst.shape)}: only a reduction over dim 1 into the rows runs by layout",))
            return Verdict.fail("a row reduction into the source's row fragment (partials, then shuffles)")
        case Gemm(a=ra, b=rb, c=rc):
            if rb.buffer.scope == "fragment":
                return Verdict(True, ("a fragment is a T.gemm operand B (wgmma reads B from shared memory)",))
            if ra.buffer.scope == "fragment":
                from egtile.rules.mma import wgmma_rs_options

                mask, why = wgmma_rs_options(ctx, s)
                if not mask:
                    return Verdict(True, ("a fragment is a T.gemm operand A and no register-A wgmma fits: "
                                          + "; ".join(why[:3]),))
                return Verdict.fail("A from registers (register-A wgmma)")
            if not rc.whole:
                return Verdict(True, ("the T.gemm accumulator is a part of the fragment",))
            return Verdict.fail("accumulates into the whole fragment")
        case Copy() | Fill():
            regions = [r for r in ((s.src, s.dst) if isinstance(s, Copy) else (s.dst,)) if r.buffer.scope == "fragment"]
            if any(not r.whole for r in regions):
                return Verdict(True, ("touches a part of a fragment",))
            if isinstance(s, Copy) and s.src.buffer.scope == "fragment" and len(s.src.buffer.shape) == 1 \
                    and s.dst.buffer.scope != "fragment" and s.src.buffer.name not in _column_vectors(ctx) \
                    and tuple(e for e in s.dst.extents if e != 1) != tuple(s.src.buffer.shape):
                return Verdict(True, (f"a T.copy out of 1-D fragment {s.src.buffer.name} into a region of "
                                      f"{s.dst.buffer.name} that is not one row of its length",))
            if isinstance(s, Copy) and s.src.buffer.scope == "fragment" and s.dst.buffer.scope == "fragment" \
                    and tuple(s.src.buffer.shape) != tuple(s.dst.buffer.shape):
                return Verdict(True, ("copies one fragment into another of a different shape (two layouts)",))
            return Verdict.fail("moves the whole fragment")
        case Store():
            return Verdict(True, ("a block-level scalar store touches a fragment",))
        case _:
            return Verdict(True, (f"a block-level {type(s).__name__} touches a fragment",))


def _column_vectors(ctx) -> frozenset[str]:
    """The kernel's column vectors (:func:`egtile.lower.fragment_layouts.column_vectors`: 1-D fragments a ``T.Parallel``
    nest reads at its column; they stay in shared memory and tie to no register layout)."""
    from egtile.lower.fragment_layouts import column_vectors

    key = ("column-vectors",)
    if key not in ctx._memo:
        ctx._memo[key] = column_vectors(ctx.kernel)
    return ctx._memo[key]


def _shared_resident(ctx) -> frozenset[str]:
    """Column vectors and gathered fragments (:func:`egtile.lower.fragment_layouts.shared_resident`): they stay in
    shared memory, where a ``T.Parallel`` iteration reads them at any element."""
    from egtile.lower.fragment_layouts import shared_resident

    key = ("shared-resident",)
    if key not in ctx._memo:
        ctx._memo[key] = shared_resident(ctx.kernel)
    return ctx._memo[key]


def nest_fragments_2d(ctx, outer: For) -> frozenset[str]:
    """The 2-D fragments the ``T.Parallel`` nest ``outer`` touches (more than one: they are *peers*)."""
    from egtile.ir import walk

    key = ("nest-fragments-2d", outer.sid)
    if key not in ctx._memo:
        names: set[str] = set()
        for st in walk(outer.body):
            if isinstance(st, For):
                continue
            names |= {a.buffer for a in (*own_reads(st), *own_writes(st))
                      if a.scope == "fragment" and len(ctx.kernel.buffer(a.buffer).shape) == 2}
        names -= _shared_resident(ctx)  # read like shared buffers: no register layout to keep in lockstep
        ctx._memo[key] = frozenset(names)
    return ctx._memo[key]


def peer_blocker(ctx, s) -> Verdict:
    """``frag-peer-blocker``: leaf ``s`` inside a ``T.Parallel`` nest that touches several 2-D fragments (peers)
    accesses one of them where no common register layout serves it: a fragment of another shape than the nest's
    extents, or an element other than the iteration's own ``(i, j)``. Holds (``ok``) when it blocks.

    Why that is the whole condition: the peers of a nest are tied by ``frag_link`` (one group) and the lowering
    gives them one layout (:mod:`egtile.lower.fragment_layouts`, the ``same`` link), so element ``(i, j)`` of
    each is in the same thread's registers at the same value slot; an access at ``(i, j)`` is then that thread's
    own, while an access at ``(j, i)`` or of a fragment of another shape is an element another thread holds
    (PTX ISA 5.1: registers are private to a thread)."""
    if isinstance(s, For) or not hasattr(s, "sid") or ctx.context.get(s.sid) != "thread":
        return Verdict.fail("not a leaf inside a T.Parallel")
    nest = nest_of(ctx, s.sid)
    if nest is None:
        return Verdict.fail("not in a static T.Parallel nest (frag-register-blocker judges it)")
    outer, vars_, extents, _ = nest
    peers = nest_fragments_2d(ctx, outer)
    if len(peers) < 2:
        return Verdict.fail("the nest touches at most one 2-D fragment: no peers")
    for a in (*own_reads(s), *own_writes(s)):
        if a.scope != "fragment" or a.buffer not in peers:
            continue
        shape = tuple(ctx.kernel.buffer(a.buffer).shape)
        if shape != tuple(extents):
            return Verdict(True, (f"a T.Parallel over {extents} touches peer fragment {a.buffer} of shape {shape}",))
        if a.via_pointer or not _own_index(a, vars_):
            return Verdict(True, (f"accesses peer fragment {a.buffer} at another index than the loop's own element "
                                  f"({', '.join(v.name for v in vars_)}): the thread running the iteration does not "
                                  "hold it",))
    return Verdict.fail("every peer fragment is accessed at the iteration's own element")


PEER_BLOCKER = FactSpec(
    "frag-peer-blocker", "the statement accesses a peer fragment of its T.Parallel nest (another 2-D fragment the "
    "nest touches) of another shape or at another element than the iteration's own (egtile.rules.fragment)",
    peer_blocker, scope="any")


REGISTER_BLOCKER = FactSpec(
    "frag-register-blocker", "the statement touches a fragment in a way no register layout serves: a reduction, a "
    "pointer, a partial region, another element than a T.Parallel iteration's own, a gemm operand A/B "
    "(egtile.rules.fragment)", register_blocker, scope="any")

# ----------------------------------------------------------------------------------------------------
# The condition (derived in the e-graph): every user of the written fragment admits a register layout


def _blocking_witnesses(ctx, condition: str, blocker: str, sid: int, default_why: str):
    """``(statement, fragment, why)`` for each statement that blocks ``condition`` at ``sid``: the witnesses the
    e-graph derived, with the reasons the ``blocker`` fact's oracle gave for that statement."""
    for a, _b, buf in ctx.witnesses(condition, sid):
        if a >= 0 and a in ctx.facts.stmts:
            v = ctx.encoding.verdicts.get((blocker, a))
            yield a, buf, "; ".join(v.reasons) if v is not None and v.reasons else default_why


def _explain_users(ctx, sid: int) -> str:
    out = []
    acc = ctx.facts.writes(sid) if sid in ctx.facts.stmts else set()
    for a, buf, why in _blocking_witnesses(ctx, "fragment-users-admit-registers", "frag-register-blocker", sid,
                                           "it reads it without writing a non-local buffer"):
        tie = "" if buf in acc else " (tied to the accumulator by a row reduction, a cast copy or a T.Parallel nest, so the whole group stays in shared memory)"
        out.append(f"{ctx.describe(a)} keeps fragment {buf}{tie} in shared memory: {why}")
    return "; ".join(dict.fromkeys(out)) or "a statement keeps the fragment in shared memory"


frag_link = relation("frag_link", String, String)
"""``frag_link(a, b)``: fragments ``a`` and ``b`` are tied by a statement that touches both (a row reduction, a
cast copy, a ``T.Parallel`` nest over a fragment and its rows), transitively: one register layout fixes the
other's (:mod:`egtile.lower.fragment_layouts`), so if one moves to registers, both do."""


def _link_rules():
    x, i, a, b, c = var("x", Stmt), var("i", i64), var("a", String), var("b", String), var("c", String)
    blk = var("blk", Block)
    frag = (D.scope(a, String("fragment")), D.scope(b, String("fragment")), ne(a).to(b))
    touch = ((D.reads, D.reads), (D.reads, D.writes), (D.writes, D.reads), (D.writes, D.writes))
    for k, (ta, tb) in enumerate(touch):
        yield rule(D.leaf(x, i), ta(x, a), tb(x, b), *frag, name=f"frag-link:leaf:{k}").then(frag_link(a, b))
        yield rule(eq(x).to(Stmt.par(i, blk)), ta(x, a), tb(x, b), *frag, name=f"frag-link:par:{k}").then(
            frag_link(a, b))
    yield rule(frag_link(a, b), frag_link(b, c), ne(a).to(c), name="frag-link:transitive").then(frag_link(a, c))


LINK_RULES = tuple(_link_rules())


def _user_violations(w):
    # w.st: the gemm whose accumulator would move to registers; w.b: that accumulator (the buffer it writes);
    # w.sc: a fragment of its group (frag_link), whose users must admit registers too
    acc = (D.writes(w.st, w.b), D.scope(w.b, String("fragment")))
    for buf, member in ((w.b, ()), (w.sc, (frag_link(w.b, w.sc),))):
        yield Violation((*acc, *member, D.leaf(w.x, w.i), D.reads(w.x, buf), fact(String("frag-register-blocker"), w.i)),
                        w.i, -1, buf)
        yield Violation((*acc, *member, D.leaf(w.x, w.i), D.writes(w.x, buf), fact(String("frag-register-blocker"), w.i)),
                        w.i, -1, buf)
        # a T.Parallel that touches it and writes only local buffers could be replicated
        yield Violation((*acc, *member, eq(w.x).to(Stmt.par(w.i, w.blk)), D.reads(w.x, buf),
                         eq(D.nonlocal_(w.x)).to(Bool(False))), w.i, -1, buf)


USERS_ADMIT_REGISTERS = stmt_condition(
    "fragment-users-admit-registers",
    "every statement that touches the accumulator can run by its register layout (egtile.rules.fragment)",
    _user_violations, _explain_users, derive=LINK_RULES, oracles=(REGISTER_BLOCKER,))

def _peer_violations(w):
    # as _user_violations: a leaf touching the accumulator or a fragment of its group, blocked as a peer access
    acc = (D.writes(w.st, w.b), D.scope(w.b, String("fragment")))
    for buf, member in ((w.b, ()), (w.sc, (frag_link(w.b, w.sc),))):
        for touch in (D.reads, D.writes):
            yield Violation((*acc, *member, D.leaf(w.x, w.i), touch(w.x, buf), fact(String("frag-peer-blocker"), w.i)),
                            w.i, -1, buf)


def _explain_peers(ctx, sid: int) -> str:
    out = [f"{ctx.describe(a)} keeps fragment {buf} in shared memory: {why}"
           for a, buf, why in _blocking_witnesses(ctx, "fragment-peers-in-lockstep", "frag-peer-blocker", sid,
                                                  "a peer access another thread holds")]
    return "; ".join(dict.fromkeys(out)) or "a T.Parallel accesses a peer fragment at another element"


PEERS_IN_LOCKSTEP = stmt_condition(
    "fragment-peers-in-lockstep",
    "every T.Parallel nest over several 2-D fragments of the accumulator's group (peers: the loop's fragment and "
    "the others, one layout by the same-link) accesses each at the iteration's own element and has each one's "
    "shape, so that one thread holds element (i, j) of all of them at one value slot (egtile.rules.fragment)",
    _peer_violations, _explain_peers, derive=LINK_RULES, oracles=(PEER_BLOCKER,))

# ----------------------------------------------------------------------------------------------------
# Register pressure: what a group in registers costs when it does not fit (ptxas spills)

SPILL_RESERVE = 24
"""Registers per consumer thread beside the live fragments at their peak (addresses, loop counters, the softmax's
temporaries). Calibrated with ``ptxas -v`` (NVRTC 13.5, sm_90a, S = 1024, 2026-12-02) against :func:`live_peak`:
examples/flash_attention.py at 128 consumer threads (setmaxnreg 240), peak 208: no spill at 128x64 blocks and head
dim 128, 60 bytes of spill stores at 128x128 and head dim 64 (so the reserve errs low); at 256 threads (232), peak
136: none. TileLang's example at its defaults (128x128, head dim 128, 128 threads), peak 272, estimate 56: ptxas
spills (1920 bytes of spill stores, a 1176-byte stack frame) and serializes the wgmmas (C7512)."""
INFLIGHT_RESERVE = 16
"""Registers per consumer thread beside one wgmma's accumulator and register A while its group is in flight (its
two descriptors, the stage address, the loop counter). Those registers cannot spill: PTX ISA 9.7.15.7 makes an
access to them before ``wgmma.wait_group`` undefined, so ptxas must hold them all until the wait."""
LOCAL_BYTES_PER_CYCLE = 64
"""Local memory (the spill slots) goes through L1: one 128-byte warp access (32 lanes x 4 bytes) per two cycles of
an SM's L1 (Hopper: 64 KB of L1 per sub-partition pair; an estimate of the same order as shared memory's
SMEM_BYTES_PER_CYCLE halved, since a spilled store also allocates a line)."""


def fragment_registers(kernel, name: str, threads: int) -> int:
    """Registers per thread that fragment ``name`` takes in a wgmma register layout over ``threads`` consumer threads:
    a 2-D fragment's elements are distributed without replication (``numel x bits / 32 / threads``); a row
    fragment is replicated over the 4 threads of a quad (PTX ISA 9.7.15.5.1.1.1: a row of the accumulator is held
    by one quad), so ``rows x 4 / threads`` values, one register each."""
    from math import ceil

    from egtile.ir import dtype as lookup

    b = kernel.buffer(name)
    if len(b.shape) == 1:
        return ceil(b.shape[0] * 4 / threads)
    return ceil(b.numel * lookup(b.dtype).bytes * 8 / 32 / threads)


def _units(stmts):
    """The statements at which liveness is judged: leaves and whole ``T.Parallel`` nests (one unit each: a nest runs
    by the layout element by element, its reads and writes at one point), serial loops and ``if``s recursed."""
    from egtile.ir import If

    for s in stmts:
        if isinstance(s, For) and s.kind != "parallel":
            yield ("loop", s)
        elif isinstance(s, If):
            yield ("if", s)
        else:
            yield ("leaf", s)


def _kills(kernel, s, names: frozenset[str]) -> frozenset[str]:
    """The fragments of ``names`` that unit ``s`` overwrites whole (their value before ``s`` is dead after it): a
    tile statement writing the whole fragment, or a ``T.Parallel`` nest of the fragment's shape storing its own
    element outside any ``if``."""
    from egtile.analysis import writes

    out = set()
    if isinstance(s, For):
        nest_vars, extents, cur = [], [], s
        while isinstance(cur, For) and cur.kind == "parallel" and isinstance(cur.start, Const) \
                and isinstance(cur.stop, Const) and int(cur.start.value) == 0:
            nest_vars.append(cur.var)
            extents.append(int(cur.stop.value))
            cur = cur.body[0] if len(cur.body) == 1 else None
        for st in _flat(s.body):
            if not isinstance(st, Store):
                continue
            for a in own_writes(st):
                if a.buffer in names and tuple(kernel.buffer(a.buffer).shape) == tuple(extents) \
                        and _own_index(a, tuple(nest_vars)):
                    out.add(a.buffer)
        return frozenset(out)
    for a in writes(s):
        if a.buffer in names and a.region is not None and a.region.whole:
            out.add(a.buffer)
    return frozenset(out)


def _flat(stmts):
    """Leaves of a nest's body, outside any ``if`` (a store under a condition does not overwrite the whole fragment)."""
    for st in stmts:
        if isinstance(st, For):
            yield st
            yield from _flat(st.body)
        elif hasattr(st, "then_body"):
            continue
        else:
            yield st


def live_peak(kernel, names: frozenset[str], regs: dict[str, int]) -> tuple[int, int | None, tuple[str, ...]]:
    """The most registers per thread that fragments of ``names`` hold at once (``regs``: each one's), with the statement
    where it peaks and the fragments live there: backward liveness over the kernel's statements, a serial loop's body
    iterated to its fixpoint (a fragment read before it is overwritten in the body, such as attention's ``acc_o``, is
    live through the whole loop), and at each statement the larger of what is live before and after it (a cast copy
    can retire its source element by element: the two are not counted together)."""
    from egtile.analysis import reads
    from egtile.ir import If

    best = [0, None, ()]

    def size(live) -> int:
        return sum(regs[n] for n in live)

    def note(live, sid) -> None:
        if size(live) > best[0]:
            best[:] = [size(live), sid, tuple(sorted(live))]

    def back(stmts, live: frozenset[str]) -> frozenset[str]:
        for kind, s in reversed(list(_units(stmts))):
            if kind == "loop":
                at_exit = live
                cur = live
                for _ in range(4):
                    nxt = at_exit | _quiet(back, s.body, cur)
                    if nxt == cur:
                        break
                    cur = nxt
                live = at_exit | back(s.body, cur)
            elif kind == "if":
                live = back(s.then_body, live) | back(s.else_body or (), live) | \
                    frozenset(a.buffer for a in own_reads(s) if a.buffer in names)
            else:
                after = live
                used = frozenset(a.buffer for a in reads(s) if a.buffer in names)
                live = (after - _kills(kernel, s, names)) | used
                note(after, s.sid)
                note(live, s.sid)
        return live

    def _quiet(fn, stmts, live):
        saved = list(best)
        out = fn(stmts, live)
        best[:] = saved
        return out

    back(kernel.body, frozenset())
    return best[0], best[1], best[2]


@dataclass(frozen=True)
class Spill:
    """The register estimate of a fragment group in registers: ``peak`` registers per thread held at once by its
    fragments (at statement ``at``, ``live`` there), ``available`` the consumer threads' ``setmaxnreg`` allocation,
    ``spilled`` = ``peak + SPILL_RESERVE - available`` when positive (what ptxas moves to local memory, an
    estimate), ``cost`` the cycles per block iteration charged for it, ``gemms`` the group's T.gemm statements."""

    group: tuple[str, ...]
    peak: int
    at: int | None
    live: tuple[str, ...]
    available: int
    spilled: int
    cost: int
    gemms: tuple[int, ...]


_SPILLS: dict[int, tuple[object, dict[str, Spill]]] = {}


def spill_of(kernel, acc: str) -> Spill:
    """:class:`Spill` of the fragment group of accumulator ``acc`` (:func:`egtile.lower.fragment_layouts.group_of`)
    when it lives in registers over the kernel's threads.

    Cost: each spilled register is stored and reloaded once per loop iteration by every consumer thread, through
    L1 (``2 x spilled x 4 bytes x threads / LOCAL_BYTES_PER_CYCLE``), plus one L1 latency exposed; a lower bound
    (ptxas may reload a slot more than once)."""
    from math import ceil

    from egtile.ir import walk
    from egtile.lower.fragment_layouts import group_of
    from egtile.rules import warp_specialize as WS
    from egtile.schedule import cost as C

    hit = _SPILLS.get(id(kernel))
    if hit is None or hit[0] is not kernel:
        hit = (kernel, {})
        _SPILLS.clear()
        _SPILLS[id(kernel)] = hit
    memo = hit[1]
    if acc in memo:
        return memo[acc]
    threads = kernel.threads
    group = group_of(kernel, acc)
    regs = {n: fragment_registers(kernel, n, threads) for n in group}
    peak, at, live = live_peak(kernel, frozenset(group), regs)
    available = WS.consumer_regs(threads)
    spilled = max(0, peak + SPILL_RESERVE - available)
    cost = 0 if not spilled else ceil(2 * spilled * 4 * threads / LOCAL_BYTES_PER_CYCLE) + C.SHARED_LATENCY
    gemms = tuple(sorted(st.sid for st in walk(kernel.body) if isinstance(st, Gemm) and st.c.buffer.name in group))
    out = Spill(tuple(sorted(group)), peak, at, live, available, spilled, cost, gemms)
    memo[acc] = out
    return out


def spill_cost(kernel, g) -> int:
    """The share of T.gemm ``g`` in its accumulator group's spill cost (split evenly among the group's gemms, so that
    a schedule with every one of them on the tensor core pays it once)."""
    from math import ceil

    sp = spill_of(kernel, g.c.buffer.name)
    return ceil(sp.cost / max(1, len(sp.gemms))) if sp.spilled else 0


def inflight_limit(threads: int) -> int:
    """Registers per thread one wgmma may keep in flight (accumulator plus register A): the consumers' ``setmaxnreg``
    allocation less :data:`INFLIGHT_RESERVE`."""
    from egtile.rules import warp_specialize as WS

    return WS.consumer_regs(threads) - INFLIGHT_RESERVE


def spill_notes(n, ctx):
    """``explain()``'s note on a wgmma whose accumulator group does not fit the registers (at the group's last gemm)."""
    from egtile.ir import Decision as Made

    kernel = ctx.facts.kernel
    g = ctx.facts.stmts.get(n.sid)
    if not isinstance(g, Gemm) or g.c.buffer.scope != "fragment":
        return []
    sp = spill_of(kernel, g.c.buffer.name)
    if not sp.spilled or n.sid != sp.gemms[-1]:
        return []
    where = ctx.facts.describe(sp.at) if sp.at is not None and sp.at in ctx.facts.stmts else "a statement"
    return [Made("fragment-registers", n.sid, "registers, beyond the budget (ptxas spills)",
                 f"fragments {', '.join(sp.group)} stay in registers: at their peak ({where}) "
                 f"{', '.join(sp.live)} hold {sp.peak} registers per thread, plus about {SPILL_RESERVE} others, against "
                 f"the {sp.available} of setmaxnreg at {kernel.threads} consumer threads: about {sp.spilled} registers per "
                 f"thread spill to local memory (ptxas; an estimate), charged {sp.cost} cycles per iteration to the "
                 f"group's gemms; extracted because no cheaper alternative holds (the shared-memory placement runs "
                 f"the gemms on SIMT cores); more threads (T.Kernel(..., threads=)) or smaller blocks avoid the spill")]


# ----------------------------------------------------------------------------------------------------
# Lowering by layout (called by the lowerings of tile, copy_simt, partitioned and vectorized)


def _fragments_of(stmt, lw) -> list[tuple[str, object]]:
    names = sorted({a.buffer for a in (*own_reads(stmt), *own_writes(stmt))
                    if a.scope == "fragment" and lw.fragment(a.buffer) is not None})
    return [(n, lw.fragment(n)) for n in names]


def _the_fragment(stmt, lw, what: str):
    frags = _fragments_of(stmt, lw)
    if not frags:
        return None
    if len({f for _, f in frags}) > 1:
        raise ScheduleError(f"{what} touches register fragments {', '.join(n for n, _ in frags)} with different "
                            "layouts; a statement runs by one layout", getattr(stmt, "loc", None))
    return frags[0]


def _threads(f, ctx, sid, lw) -> ThreadRange:
    t = ThreadRange(0, f.num_threads)
    if not (ctx.threads.begin <= t.begin and t.end <= ctx.threads.end):
        raise ScheduleError(f"statement sid {sid} touches a register fragment held by threads [0, {t.end}) but runs on "
                            f"threads [{ctx.threads.begin}, {ctx.threads.end})", lw.facts.stmts[sid].loc)
    return t


def tile_by_layout(sid: int, lw, ctx) -> list | None:
    """A ``T.fill`` / ``T.copy`` / SIMT ``T.gemm`` / row ``T.reduce`` touching a register fragment, run by its
    layout (``None``: no register fragment; lower it as usual)."""
    stmt = lw.stmt(sid, ctx)
    src = lw.facts.stmts[sid]
    if isinstance(src, Reduce):
        return _reduce_by_layout(stmt, lw, ctx)
    if isinstance(src, Copy) and lw.fragment(src.src.buffer.name) is not None \
            and lw.fragment(src.dst.buffer.name) is not None:
        # a fragment-to-fragment copy (a cast): the destination has the source's layout
        f = lw.fragment(src.src.buffer.name)
        return [FragmentOp(stmt, src.src.buffer.name, _threads(f, ctx, sid, lw))]
    if isinstance(src, Gemm) and lw.fragment(src.a.buffer.name) is not None:
        raise ScheduleError(f"T.gemm (sid {sid}) takes A from register fragment {src.a.buffer.name}: only a register-A "
                            "wgmma can read it (each thread holds a part of A), but the schedule lowers it otherwise",
                            src.loc)
    if isinstance(src, Copy) and isinstance(lw.fragment(src.src.buffer.name), RowFragment) \
            and src.dst.buffer.scope != "fragment":
        return _row_store(stmt, lw, ctx)
    hit = _the_fragment(src, lw, f"statement sid {sid}")
    if hit is None:
        return None
    name, f = hit
    if not isinstance(stmt, (Copy, Fill, Gemm)):
        raise ScheduleError(f"{type(stmt).__name__} (sid {sid}) cannot run by the layout of register fragment {name}",
                            lw.facts.stmts[sid].loc)
    return [FragmentOp(stmt, name, _threads(f, ctx, sid, lw))]


def _row_store(stmt: Copy, lw, ctx) -> list:
    """``T.copy(rows, dst)`` out of a row register fragment into one row of global or shared memory: element ``i``
    stored by the first replica of row ``i`` (a :class:`LayoutLoop` with ``once``), under the region's edge guard when
    it is clipped (elements past the tensor's edge are not written)."""
    from egtile.ir import BinOp, Load, SIf
    from egtile.ir.scheduled import Leaf

    name = stmt.src.buffer.name
    f = lw.fragment(name)
    i = Var(f"eg_row_{stmt.sid}")
    (axis,) = [d for d, e in enumerate(stmt.dst.extents) if e != 1]
    at = tuple(BinOp("+", o, i) if d == axis else o for d, o in enumerate(stmt.dst.offsets))
    body = (Leaf(Store(stmt.sid, stmt.dst.buffer, at, Load(lw.facts.kernel.buffer(name), (i,)), stmt.loc)),)
    if stmt.dst.clip:
        inside = None
        for d, e in enumerate(at):
            c = BinOp("and", BinOp(">=", e, Const(0, "int32")), BinOp("<", e, Const(int(stmt.dst.buffer.shape[d]), "int32")))
            inside = c if inside is None else BinOp("and", inside, c)
        body = (SIf(inside, body),)
    return [LayoutLoop((i,), (f.rows,), name, _threads(f, ctx, stmt.sid, lw), body, sid=stmt.sid, once=True)]


def _reduce_by_layout(stmt: Reduce, lw, ctx) -> list | None:
    fs, fd = lw.fragment(stmt.src.name), lw.fragment(stmt.dst.name)
    if fs is None and fd is None:
        return None
    if fs is None or fd is None or not isinstance(fd, RowFragment) or fd.with_bits(32) != row_projection(fs, 32):
        raise ScheduleError(f"T.reduce (sid {stmt.sid}) of {stmt.src.name} into {stmt.dst.name}: the destination is not in "
                            "the row projection of the source's register layout", stmt.loc)
    threads = _threads(fs, ctx, stmt.sid, lw)
    try:
        lanes, groups = fd.warp_lanes(), fd.cross_warp_groups
    except LayoutError as e:
        raise ScheduleError(f"T.reduce (sid {stmt.sid}) of {stmt.src.name}: {e}", stmt.loc) from None
    if groups == 1:
        return [RowReduce(stmt, stmt.src.name, threads, lanes)]
    return cross_warp_reduce(stmt, lw, threads, lanes, groups)


def cross_warp_reduce(stmt: Reduce, lw, threads: ThreadRange, lanes: tuple[int, ...], groups: int,
                      slots: int | None = None) -> list:
    """A row reduction whose rows have replicas in ``groups`` warps apart (an N split of the accumulator over
    warpgroups, :mod:`egtile.rules.mma` ``wgmma-rows-across-warpgroups``): shuffles within each warp, each warp's
    partial stored to a ``groups x rows`` shared scratch of the statement's own, then every replica folds the
    groups' partials of its rows (:class:`~egtile.ir.fragment.RowCombine`). The CTA barriers between the stores
    and the loads, and between the loads and the next stores, follow from the accesses (:mod:`egtile.lower.sync`).
    ``slots``: the scratch slots the nodes use (``groups``; fewer is the ``row-combine-one-slot`` mutant)."""
    from egtile.ir import Buffer
    from egtile.ir.fragment import RowCombine
    from egtile.tilemath import reduce_accumulator

    slots = groups if slots is None else slots
    rows = stmt.dst.shape[0]
    acc = str(reduce_accumulator(stmt.src.dtype, stmt.dst.dtype))
    scratch = lw.scratch_buffer(("row-partials", stmt.sid),
                                Buffer(f"{stmt.dst.name}_wg_partials", (slots, rows), acc, "shared"))
    return [RowReduce(stmt, stmt.src.name, threads, lanes, scratch=scratch, groups=slots),
            RowCombine(stmt, stmt.src.name, threads, scratch, slots)]


def op_by_layout(stmt, lw, ctx) -> list | None:
    """Tile statement ``stmt`` (built by a lowering, already restaged) run by the layout of the register
    fragment it touches (``None``: it touches none)."""
    hit = _the_fragment(stmt, lw, f"statement sid {stmt.sid}")
    if hit is None:
        return None
    name, f = hit
    return [FragmentOp(stmt, name, _threads(f, ctx, stmt.sid, lw))]


def parallel_by_layout(n, lw, ctx, loops: list) -> list | None:
    """A ``T.Parallel`` nest (already lowered to ``loops``, one ``ThreadLoop``) touching a register fragment,
    as a :class:`LayoutLoop` (``None``: no register fragment)."""
    from egtile.ir import walk

    src = lw.facts.stmts[n.sid]
    frags: dict[str, object] = {}
    for st in walk((src,)):
        if not isinstance(st, For):
            for name, f in _fragments_of(st, lw):
                frags[name] = f
    if not frags:
        return None
    two = {n: f for n, f in frags.items() if isinstance(f, Fragment)}
    rows = {n: f for n, f in frags.items() if isinstance(f, RowFragment)}
    drivers = two or rows
    if len({_unbits(f) for f in drivers.values()}) > 1:
        named = ", ".join(f"{k} ({getattr(v, 'name', v)})" for k, v in sorted(drivers.items()))
        raise ScheduleError(f"T.Parallel (sid {n.sid}) touches register fragments {named} with "
                            "different layouts: a loop by layout runs element (i, j) of each on one thread", src.loc)
    name, f = sorted(drivers.items())[0]
    if two:
        proj = row_projection(f, 32)
        bad = [r for r, rf in rows.items() if rf.with_bits(32) != proj]
        if bad:
            raise ScheduleError(f"T.Parallel (sid {n.sid}) accesses {', '.join(bad)} at the rows of register fragment "
                                f"{name}, but not in the row projection of its layout", src.loc)
    (tl,) = loops
    shape = (f.rows, f.cols) if isinstance(f, Fragment) else (f.rows,)
    if not isinstance(tl, ThreadLoop) or tuple(tl.extents) != shape:
        raise ScheduleError(f"T.Parallel (sid {n.sid}) over {getattr(tl, 'extents', '?')} does not cover register "
                            f"fragment {name} {shape}", src.loc)
    row_names = tuple(sorted(rows if two else set(rows) - {name}))
    peers = tuple(sorted(set(two) - {name}))
    # over row fragments alone, a nest that writes only memory stores each row once (its first replica)
    once = not two and not _nest_accesses(src)[2]
    return [LayoutLoop(tl.vars, tl.extents, name, _threads(f, ctx, n.sid, lw), tl.body, sid=n.sid, rows=row_names,
                       peers=peers, once=once)]


def _unbits(f):
    from dataclasses import replace

    return f.with_bits(32) if isinstance(f, RowFragment) else replace(f, value_bits=32, name="")


__all__ = ["INFLIGHT_RESERVE", "SPILL_RESERVE", "Spill", "fragment_registers", "inflight_limit", "live_peak", "spill_cost",
           "spill_notes", "spill_of", "LINK_RULES", "MUTANTS", "PEER_BLOCKER", "PEERS_IN_LOCKSTEP", "REGISTER_BLOCKER", "nest_fragments_2d", "peer_blocker", "frag_link", "mutant", "USERS_ADMIT_REGISTERS", "nest_of", "op_by_layout", "parallel_by_layout",
           "register_blocker", "tile_by_layout"]


# ----------------------------------------------------------------------------------------------------
# Mutants (soundness tests of the checkers: tests/test_rules_attention.py)

MUTANTS: dict[str, str] = {
    "row-reduce-wrong-lanes": "the row reduction shuffles over lanes xor 4, 8 (other rows of the quad's warp) "
                              "instead of the lanes that hold the row's replicas (xor 1, 2 for the wgmma accumulator)",
    "row-combine-one-slot": "the cross-warpgroup row reduction (an N split) stores every warpgroup's partial in slot 0 "
                            "of the shared scratch and folds only that slot: the warpgroups' stores race, and each row "
                            "keeps one warpgroup's columns",
}
"""Lowering mutants of the by-layout row reduction; the simulator and the verifier must each catch every one."""


def mutant(name: str):
    """The builtin ruleset with row-fragment mutant ``name`` (:data:`MUTANTS`) applied.

    Raises:
        KeyError: unknown name (the message lists the known ones).
    """
    from dataclasses import replace

    from egtile.rules import builtin, structure

    match name:
        case "row-reduce-wrong-lanes":
            base = structure.TILE.lower

            def lower(n, lw, ctx):
                return [replace(x, lanes=tuple(b * 4 for b in x.lanes)) if isinstance(x, RowReduce) else x
                        for x in base(n, lw, ctx)]

            d = replace(structure.TILE, lower=lower)
        case "row-combine-one-slot":
            from egtile.ir.fragment import RowCombine

            base = structure.TILE.lower

            def lower(n, lw, ctx):
                return [replace(x, groups=1) if isinstance(x, (RowCombine, RowReduce)) and x.groups > 1 else x
                        for x in base(n, lw, ctx)]

            d = replace(structure.TILE, lower=lower)
        case _:
            raise KeyError(f"unknown row-fragment mutant {name!r}; known: {sorted(MUTANTS)}")
    return builtin().replace_decision(d, name=f"mutant:{name}")
