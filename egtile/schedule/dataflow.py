"""Dataflow in the e-graph: base relations per statement, and the facts side conditions read, derived by rule.

The encoder loads *base relations* once, from the statements' own syntax (:mod:`egtile.schedule.facts`):

* ``own_read(sid, buf)`` / ``own_write(sid, buf)``: buffers statement ``sid`` itself reads / writes (a leaf
  statement: all of them; a loop or branch: its bounds or condition only, its body comes by rule);
  ``own_ptr(sid, buf)``: the access goes through a pointer handed to an extern call (``T.address_of``);
  ``"*"`` (:data:`ANY_BUFFER`) is a pointer of unknown target;
* ``scope(buf, scope)``; ``kind(sid, k)`` with ``k`` in store, copy, fill, gemm, reduce, atomic, extern,
  opaque (an extern with no pointer that is not declared pure), for, if, pipelined; ``prefer(sid, inst)``
  (a copy's ``prefer_instruction``);
* ``index_var(sid, var)``: a shared-memory write of ``sid`` has an index that mentions ``var``;
  ``addr_var(sid, var)`` / ``addr_load(sid)``: a copy's region offsets mention ``var`` / load from memory;
* ``loop_var(L, var)``, ``var_kind(var, kind)`` (``block`` for a ``T.Kernel`` index, ``loop`` for a loop
  variable), ``num_stages(L)``, ``kernel_threads(T)``;
* ``leaf_work(sid)``: the cost model's cycles of one execution of a leaf statement;
* ``root(blk)``: the kernel body.

Everything else is derived here by egglog rules over the statement *terms*, so that a statement or list a
rule creates gets its facts exactly like an encoded one (egg's ``make``). Negation is sound by
stratification: each stratum is saturated before the next, and a stratum only negates (through an explicit
``False`` default and an ``or`` merge) facts of earlier strata; rewrites run only after the whole support
schedule is at its fixpoint (egglog notes §3.3). The strata:

1. **access and structure** (positive): ``sid_of``; ``reads``/``writes``/``ptr`` of every statement (a
   compound one: the union over its bodies) and of every *whole* list (the kernel body, each statement
   body: ``list_reads`` ...; not their proper suffixes, which would cost cells x buffers rows; a condition
   that needs the rest of a list derives it for the lists and buffers it asks about, as
   :mod:`egtile.rules.fission` does); ``has(st, kind)``; ``moves(st, var)`` (``var`` a pipelined loop's); ``whole(st, buf)`` (a reduce); per pipelined body form ``B`` of loop
   ``L`` (``pipelined(L, B)``; a rule that rewrites a body builds a new form, never edits one in place):
   ``body_of(L, B)``, ``member_at(st, B, i)``; what is read and written *outside* each list item
   (``outside_read``/``outside_write``, top-down from the kernel body), for ``local`` buffers (stratum 4
   adds the buffers a pipeline's barriers guard: the only two kinds a condition asks about, so the rows
   stay linear in the statement count when every statement has its own buffer); ``enclosed(st)``;
   the cost summaries ``items(blk)`` (leaf statements) and ``work(blk)`` (their cycles).
2. **effects**: ``nonlocal(st)`` (:func:`egtile.analysis.effect`'s definition), ``escapes(st)`` (writes a
   local buffer read outside it), ``disqualified(st)`` (cannot be a producer whatever the loop),
   ``moves_loop(st, B)`` (its shared destination moves with the loop variable), ``reads_any``/``writes_any``.
3. **roles**: ``producer(st, B)`` / ``consumer(st, B)`` (:func:`egtile.analysis.producer_kind`'s definition),
   ``guarded(B, buf)`` (every buffer a producer writes: what ``full``/``empty`` guard, all producer kinds).
4. **guards**: ``reads_guarded(B, st)`` / ``writes_guarded(B, st)`` for every member, and ``clist_of(cell,
   B)``: the body form a consumer list cell belongs to; a ``guarded-read`` / ``guarded-write`` witness per
   member and buffer (what ``explain()`` names when a barrier cannot move past it); ``outside_read`` /
   ``outside_write`` for the guarded buffers.
5. **facts**, then 6. **checks**: the rules' own derivations and violation rules (``fails``, ``fails_st``,
   ``witness``; see :class:`egtile.schedule.rule.Condition`).
7. **expansion**: the list helpers (``producers``, ``consumers``, and the rules' own) expand into lists.

``egtile.analysis`` computes the same facts in Python; it stays as the test oracle (a property test checks
that both agree on the soundness suite's random programs).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from egglog import Bool, String, eq, function, i64, i64Like, ne, relation, rewrite, rule, ruleset, set_, var

from egtile.schedule.schema import Block, Stmt, fact

ANY_BUFFER = "*"

# ----------------------------------------------------------------------------------------------------
# Base relations (loaded by the encoder)

own_read = relation("own_read", i64, String)
own_write = relation("own_write", i64, String)
own_ptr = relation("own_ptr", i64, String)
scope = relation("scope", String, String)
kind = relation("kind", i64, String)
prefer = relation("prefer", i64, String)
index_var = relation("index_var", i64, String)
addr_var = relation("addr_var", i64, String)
addr_load = relation("addr_load", i64)
loop_var = relation("loop_var", i64, String)
var_kind = relation("var_kind", String, String)
kernel_threads = relation("kernel_threads", i64)
root = relation("root", Block)


@function
def num_stages(loop: i64Like) -> i64:
    """``num_stages`` of pipelined loop ``loop``."""


@function
def leaf_work(sid: i64Like) -> i64:
    """Cycles one thread spends on one execution of leaf statement ``sid`` (:func:`egtile.schedule.cost.leaf_cost`)."""


# ----------------------------------------------------------------------------------------------------
# Derived (see the module docstring for the strata)


@function
def sid_of(st: Stmt) -> i64:
    """The statement id of an encoded statement e-class."""


reads = relation("reads", Stmt, String)
writes = relation("writes", Stmt, String)
ptr = relation("ptr", Stmt, String)
list_cell = relation("list_cell", Block, Block)
"""``list_cell(L, c)``: ``c`` is whole list ``L`` or one of its suffixes (``L``: the kernel body or a statement
body, :data:`child`)."""
list_member = relation("list_member", Block, Stmt)
"""``list_member(L, st)``: ``st`` is an item of whole list ``L`` (the head of one of its cells)."""
list_reads = relation("list_reads", Block, String)
"""``list_reads(L, buf)``: an item of *whole* list ``L`` reads ``buf`` (likewise ``list_writes``, ``list_ptr``,
``list_has``, ``list_moves``, ``list_whole``). Derived for the kernel body and for every statement body
(a loop's, a branch's, a ``T.Parallel``'s, each pipelined body form), not for their proper suffixes."""
list_writes = relation("list_writes", Block, String)
list_ptr = relation("list_ptr", Block, String)
has = relation("has", Stmt, String)
list_has = relation("list_has", Block, String)
moves = relation("moves", Stmt, String)
"""``moves(st, var)``: a shared-memory write in ``st`` has an index mentioning ``var``, a ``T.Pipelined`` loop's
variable (the only variables :func:`moves_loop` asks about)."""
list_moves = relation("list_moves", Block, String)
whole = relation("whole", Stmt, String)
"""``whole(st, buf)``: a ``T.reduce`` in ``st`` takes all of ``buf`` (no region, so no stage index)."""
list_whole = relation("list_whole", Block, String)
stmt_of = relation("stmt_of", Stmt, i64)
"""An encoded statement e-class and the tile-IR statement it stands for (its own rows)."""
leaf = relation("leaf", Stmt, i64)
"""An encoded leaf statement (scalar, copy, tile op, or a statement of a ``T.Parallel`` body)."""
child = relation("child", Stmt, Block)
"""A body list of an encoded compound statement (a loop's body, a branch's two lists)."""
loop_child = relation("loop_child", Stmt, Block)
"""The body list of an encoded loop (serial, parallel or pipelined)."""
body_of = relation("body_of", i64, Block)
cell_at = relation("cell_at", Block, Block, i64)
member_at = relation("member_at", Stmt, Block, i64)
nested = relation("nested", Block)
"""A list that is a (part of a) statement body: reached from the kernel body through compound statements."""
in_loop = relation("in_loop", Block)
enclosed = relation("enclosed", Stmt)
in_data_branch = relation("in_data_branch", Block)
"""A list that is (part of) a side of a block-level branch whose condition reads memory, or nested in one."""
under_data_branch = relation("under_data_branch", Stmt)
"""An item of an ``in_data_branch`` list: whether it runs is known only when the kernel runs."""
after_read = relation("after_read", Block, String)
"""``after_read(c, buf)``: an item of list cell ``c`` (a suffix of a nested list) reads ``buf``, for the buffers
:func:`_outside_rules` tracks only (likewise ``after_write``)."""
after_write = relation("after_write", Block, String)
before_read = relation("before_read", Block, String)
before_write = relation("before_write", Block, String)
outside_read = relation("outside_read", Stmt, String)
outside_write = relation("outside_write", Stmt, String)
kernel_write = relation("kernel_write", String)
producer = relation("producer", Stmt, Block)
consumer = relation("consumer", Stmt, Block)
guarded = relation("guarded", Block, String)
clist_of = relation("clist_of", Block, Block)
clist_root = relation("clist_root", Block, Block)
"""``clist_root(B, C)``: ``C`` is the whole consumer list expanded from body form ``B``."""
witness = relation("witness", String, i64, i64, i64, String)
"""``witness(condition, subject sid, a, b, buf)``: why a condition fails there (statement ids or numbers
``a``, ``b`` and a buffer name; ``-1`` / ``""`` when unused), for ``explain()``."""


def _or(old, new):
    return old | new


@function(merge=lambda old, new: old.min(new))
def items(b: Block) -> i64:
    """Leaf statements in a list (markers count 0): every equivalent form has the same number."""


@function(merge=lambda old, new: old.min(new))
def work(b: Block) -> i64:
    """Cycles of one execution of every leaf statement in a list (every equivalent form has the same)."""


@function(merge=lambda old, new: old.min(new))
def st_items(st: Stmt) -> i64:
    """Leaf statements in a statement."""


@function(merge=lambda old, new: old.min(new))
def st_work(st: Stmt) -> i64:
    """Cycles of one execution of every leaf statement in a statement."""


@function(merge=_or)
def nonlocal_(st: Stmt) -> Bool:
    """The statement may change memory another thread observes, or does something whose count matters."""


@function(merge=_or)
def escapes(st: Stmt) -> Bool:
    """The statement writes a ``local`` buffer that a statement outside it reads."""


@function(merge=_or)
def disqualified(st: Stmt) -> Bool:
    """The statement can never be a pipeline producer (writes non-shared, reads non-global, goes through a
    pointer, or contains an extern, an atomic or a compute tile op)."""


@function(merge=_or)
def moves_loop(st: Stmt, body: Block) -> Bool:
    """Member ``st`` of pipelined body ``body`` writes shared memory at an index that mentions the loop
    variable (the pipeline would give each stage its own copy of a destination that already moves)."""


@function(merge=_or)
def reads_any(st: Stmt) -> Bool:
    """The statement reads some buffer."""


@function(merge=_or)
def writes_any(st: Stmt) -> Bool:
    """The statement writes some buffer."""


@function(merge=_or)
def reads_guarded(body: Block, st: Stmt) -> Bool:
    """Member ``st`` may read a buffer the barriers of pipelined body ``body`` guard."""


@function(merge=_or)
def writes_guarded(body: Block, st: Stmt) -> Bool:
    """Member ``st`` may write a buffer the barriers of pipelined body ``body`` guard."""


@function(merge=_or)
def fails(condition: String, body: Block) -> Bool:
    """A side condition over a pipelined body form fails (explicit ``False`` default, then ``True`` by rule)."""


@function(merge=_or)
def fails_st(condition: String, st: Stmt) -> Bool:
    """A side condition over a statement fails."""


# ----------------------------------------------------------------------------------------------------
# The rules

_LEAVES = ("scalar", "copy", "tile", "leaf")
_ONE_BODY = ("par", "loop", "pipelined", "inner_loop")
_TWO_BODIES = ("branch", "inner_branch")
NOT_PRODUCER_KINDS = ("extern", "opaque", "atomic", "gemm", "reduce")


def _access_rules() -> Iterator[Any]:
    st, h = var("st", Stmt), var("h", Stmt)
    s, n, m, w1, w2 = var("s", i64), var("n", i64), var("m", i64), var("w1", i64), var("w2", i64)
    b, k = var("b", String), var("k", String)
    body, other, r, blk = var("body", Block), var("other", Block), var("r", Block), var("blk", Block)
    ctx = var("ctx", String)
    # Each encoded constructor names its statement (``stmt_of``) and its body lists (``child``); everything
    # else is written once over those.
    for name in _LEAVES:
        yield rule(eq(st).to(getattr(Stmt, name)(s))).then(set_(sid_of(st)).to(s), stmt_of(st, s), leaf(st, s))
    for name in _ONE_BODY:
        yield rule(eq(st).to(getattr(Stmt, name)(s, body))).then(set_(sid_of(st)).to(s), stmt_of(st, s),
                                                                  child(st, body))
        yield rule(eq(st).to(getattr(Stmt, name)(s, body)), eq(n).to(items(body)), eq(w1).to(work(body))).then(
            set_(st_items(st)).to(n), set_(st_work(st)).to(w1))
    for name in _TWO_BODIES:
        term = getattr(Stmt, name)(s, body, other)
        yield rule(eq(st).to(term)).then(set_(sid_of(st)).to(s), stmt_of(st, s), child(st, body), child(st, other))
        yield rule(eq(st).to(term), eq(n).to(items(body)), eq(m).to(items(other)), eq(w1).to(work(body)),
                   eq(w2).to(work(other))).then(set_(st_items(st)).to(n + m), set_(st_work(st)).to(w1 + w2))
    yield rule(leaf(st, s), eq(n).to(leaf_work(s))).then(set_(st_items(st)).to(1), set_(st_work(st)).to(n))
    # A statement's own accesses (a leaf: all of them; a compound: its head), then its bodies'.
    yield rule(stmt_of(st, s), own_read(s, b)).then(reads(st, b))
    yield rule(stmt_of(st, s), own_write(s, b)).then(writes(st, b))
    yield rule(stmt_of(st, s), own_ptr(s, b)).then(ptr(st, b))
    yield rule(stmt_of(st, s), kind(s, k)).then(has(st, k))
    # Only a pipelined loop's variable is asked about (moves_loop): tracking every T.Parallel's own index
    # variable up through every list suffix would cost statements x variables rows.
    yield rule(leaf(st, s), index_var(s, k), loop_var(n, k), kind(n, String("pipelined"))).then(moves(st, k))
    yield rule(leaf(st, s), kind(s, String("reduce")), own_read(s, b)).then(whole(st, b))
    yield rule(leaf(st, s), kind(s, String("reduce")), own_write(s, b)).then(whole(st, b))
    # List summaries, for whole lists only (the kernel body and every statement body): each one's cells
    # and members once, then the union of its members' rows. Summarizing every list suffix instead would
    # cost (cells x buffers) rows, quadratic in the statement count when statements have their own buffers.
    yield rule(root(blk)).then(list_cell(blk, blk))
    yield rule(child(st, body)).then(list_cell(body, body))
    yield rule(list_cell(blk, other), eq(other).to(Block.cons(h, r))).then(list_cell(blk, r), list_member(blk, h))
    for item, lst in ((reads, list_reads), (writes, list_writes), (ptr, list_ptr), (has, list_has),
                      (moves, list_moves), (whole, list_whole)):
        yield rule(child(st, body), lst(body, b)).then(item(st, b))
        yield rule(list_member(blk, h), item(h, b)).then(lst(blk, b))
    # An issued statement is the statement (same accesses, same leaves).
    yield rule(eq(st).to(Stmt.issue(h, ctx)), eq(s).to(sid_of(h))).then(set_(sid_of(st)).to(s))
    yield rule(eq(st).to(Stmt.issue(h, ctx)), eq(n).to(st_items(h)), eq(w1).to(st_work(h))).then(
        set_(st_items(st)).to(n), set_(st_work(st)).to(w1))
    for marker in (Stmt.wait_full, Stmt.release_empty):
        yield rule(eq(st).to(marker(s))).then(set_(st_items(st)).to(0), set_(st_work(st)).to(0))
    # Lists: leaf counts and work add up (markers have neither).
    yield rule(eq(blk).to(Block.nil())).then(set_(items(blk)).to(0), set_(work(blk)).to(0))
    yield rule(eq(blk).to(Block.cons(h, r)), eq(n).to(items(r)), eq(m).to(st_items(h)), eq(w1).to(work(r)),
               eq(w2).to(st_work(h))).then(set_(items(blk)).to(n + m), set_(work(blk)).to(w1 + w2))


def _inside(lists, items) -> Iterator[Any]:
    """``lists(blk)`` marks a list inside some construct: its suffixes and the bodies of its items are inside it
    too, and each of its items is marked ``items(h)``."""
    h, body, r, blk = var("h", Stmt), var("body", Block), var("r", Block), var("blk", Block)
    yield rule(lists(blk), eq(blk).to(Block.cons(h, r))).then(lists(r), items(h))
    yield rule(lists(blk), eq(blk).to(Block.cons(h, r)), child(h, body)).then(lists(body))


def _structure_rules() -> Iterator[Any]:
    st, h = var("st", Stmt), var("h", Stmt)
    s, i = var("s", i64), var("i", i64)
    b = var("b", String)
    body, r, blk, c = (var(x, Block) for x in ("body", "r", "blk", "c"))
    # Pipelined body forms and their members with positions.
    yield rule(eq(st).to(Stmt.pipelined(s, body))).then(body_of(s, body), cell_at(body, body, 0))
    yield rule(cell_at(body, c, i), eq(c).to(Block.cons(h, r))).then(member_at(h, body, i), cell_at(body, r, i + 1))
    # Lists reached from the kernel body through compound statements, and those inside a loop.
    for name in _ONE_BODY:
        yield rule(eq(st).to(getattr(Stmt, name)(s, body))).then(loop_child(st, body))
    yield rule(root(blk)).then(nested(blk))
    yield rule(nested(blk), eq(blk).to(Block.cons(h, r))).then(nested(r))
    yield rule(nested(blk), eq(blk).to(Block.cons(h, r)), child(h, body)).then(nested(body))
    yield rule(nested(blk), eq(blk).to(Block.cons(h, r)), loop_child(h, body)).then(in_loop(body))
    yield from _inside(in_loop, enclosed)
    # A branch on data (its condition reads a buffer: own_read of the branch itself is its condition's) and the
    # lists inside it; a branch on block indices and constants only is static, traced like straight-line code.
    other = var("other", Block)
    yield rule(nested(blk), eq(blk).to(Block.cons(h, r)), eq(h).to(Stmt.branch(s, body, other)),
               own_read(s, b)).then(in_data_branch(body), in_data_branch(other))
    yield from _inside(in_data_branch, under_data_branch)
    yield from _outside_rules(lambda b: (scope(b, String("local")),))
    yield rule(root(blk), list_writes(blk, b)).then(kernel_write(b))


def _outside_rules(tracked) -> Iterator[Any]:
    """``before_*`` / ``outside_*`` for the buffers ``b`` with ``tracked(b)`` (premises) only.

    What is accessed outside each item: everything before it in its list (or outside the list), and the
    rest of its list; a compound item's bodies start with what is outside the item plus its own head.
    Derived for every buffer, these relations hold (list cells x buffers) rows, which grows with the square
    of the statement count when every statement has its own buffer; the conditions ask about two kinds of
    buffer only (a ``local`` buffer a statement writes: :func:`escapes`; a buffer a pipeline's barriers
    guard: the warp-specialization conditions), so each is tracked in the stratum that knows it.
    """
    h = var("h", Stmt)
    s = var("s", i64)
    b = var("b", String)
    body, r, blk = var("body", Block), var("r", Block), var("blk", Block)
    for rel, own, after, before, outside in ((reads, own_read, after_read, before_read, outside_read),
                                             (writes, own_write, after_write, before_write, outside_write)):
        yield rule(nested(blk), eq(blk).to(Block.cons(h, r)), before(blk, b)).then(before(r, b), outside(h, b))
        yield rule(nested(blk), eq(blk).to(Block.cons(h, r)), rel(h, b), *tracked(b)).then(before(r, b),
                                                                                           after(blk, b))
        yield rule(nested(blk), eq(blk).to(Block.cons(h, r)), after(r, b)).then(after(blk, b))
        yield rule(nested(blk), eq(blk).to(Block.cons(h, r)), after(r, b)).then(outside(h, b))
        yield rule(nested(blk), eq(blk).to(Block.cons(h, r)), child(h, body), outside(h, b)).then(before(body, b))
        yield rule(nested(blk), eq(blk).to(Block.cons(h, r)), child(h, body), stmt_of(h, s), own(s, b),
                   *tracked(b)).then(before(body, b))


def _guarded_outside_rules() -> Iterator[Any]:
    """What is accessed outside each item, for the buffers a pipelined body form's barriers guard (the
    warp-specialization conditions ask whether the loop's guarded buffers are accessed outside the loop)."""
    g = var("g", Block)
    yield from _outside_rules(lambda b: (guarded(g, b),))


def _effect_rules() -> Iterator[Any]:
    st, h = var("st", Stmt), var("h", Stmt)
    s, i = var("s", i64), var("i", i64)
    b, sc, v = var("b", String), var("sc", String), var("v", String)
    body = var("body", Block)
    yield rule(eq(s).to(sid_of(st))).then(
        set_(nonlocal_(st)).to(Bool(False)), set_(escapes(st)).to(Bool(False)),
        set_(disqualified(st)).to(Bool(False)), set_(reads_any(st)).to(Bool(False)),
        set_(writes_any(st)).to(Bool(False)))
    # nonlocal: a write of a non-local buffer, an atomic, an opaque extern (egtile.analysis.effect 1-4).
    yield rule(writes(st, b), scope(b, sc), ne(sc).to(String("local"))).then(set_(nonlocal_(st)).to(Bool(True)))
    for k in ("atomic", "opaque"):
        yield rule(has(st, String(k))).then(set_(nonlocal_(st)).to(Bool(True)))
    yield rule(writes(st, b), scope(b, String("local")), outside_read(st, b)).then(set_(escapes(st)).to(Bool(True)))
    yield rule(reads(st, b)).then(set_(reads_any(st)).to(Bool(True)))
    yield rule(writes(st, b)).then(set_(writes_any(st)).to(Bool(True)))
    # A producer writes only shared and reads only global memory, directly, by data movement alone.
    yield rule(writes(st, b), scope(b, sc), ne(sc).to(String("shared"))).then(set_(disqualified(st)).to(Bool(True)))
    yield rule(reads(st, b), scope(b, sc), ne(sc).to(String("global"))).then(set_(disqualified(st)).to(Bool(True)))
    yield rule(ptr(st, b)).then(set_(disqualified(st)).to(Bool(True)))
    for k in NOT_PRODUCER_KINDS:
        yield rule(has(st, String(k))).then(set_(disqualified(st)).to(Bool(True)))
    yield rule(member_at(st, body, i)).then(set_(moves_loop(st, body)).to(Bool(False)))
    yield rule(member_at(st, body, i), body_of(s, body), loop_var(s, v), moves(st, v)).then(
        set_(moves_loop(st, body)).to(Bool(True)))


def _role_rules() -> Iterator[Any]:
    st = var("st", Stmt)
    s, i = var("s", i64), var("i", i64)
    b = var("b", String)
    body = var("body", Block)
    yield rule(member_at(st, body, i), eq(disqualified(st)).to(Bool(False)), eq(moves_loop(st, body)).to(Bool(False)),
               eq(reads_any(st)).to(Bool(True)), eq(writes_any(st)).to(Bool(True))).then(producer(st, body))
    yield rule(member_at(st, body, i), eq(disqualified(st)).to(Bool(True))).then(consumer(st, body))
    yield rule(member_at(st, body, i), eq(moves_loop(st, body)).to(Bool(True))).then(consumer(st, body))
    yield rule(member_at(st, body, i), eq(reads_any(st)).to(Bool(False))).then(consumer(st, body))
    yield rule(member_at(st, body, i), eq(writes_any(st)).to(Bool(False))).then(consumer(st, body))
    yield rule(producer(st, body), writes(st, b)).then(guarded(body, b))


def _guard_rules() -> Iterator[Any]:
    st, h = var("st", Stmt), var("h", Stmt)
    s, i, L = var("s", i64), var("i", i64), var("L", i64)
    b, b2 = var("b", String), var("b2", String)
    body, c, r = var("body", Block), var("c", Block), var("r", Block)
    yield rule(member_at(st, body, i)).then(set_(reads_guarded(body, st)).to(Bool(False)),
                                            set_(writes_guarded(body, st)).to(Bool(False)))
    yield rule(member_at(st, body, i), reads(st, b), guarded(body, b), body_of(L, body), eq(s).to(sid_of(st))).then(
        set_(reads_guarded(body, st)).to(Bool(True)), witness(String("guarded-read"), s, L, -1, b))
    yield rule(member_at(st, body, i), writes(st, b), guarded(body, b), body_of(L, body), eq(s).to(sid_of(st))).then(
        set_(writes_guarded(body, st)).to(Bool(True)), witness(String("guarded-write"), s, L, -1, b))
    # A pointer of unknown target ("*") may touch any guarded buffer.
    any_ = String(ANY_BUFFER)
    yield rule(member_at(st, body, i), reads(st, any_), guarded(body, b2)).then(
        set_(reads_guarded(body, st)).to(Bool(True)))
    yield rule(member_at(st, body, i), writes(st, any_), guarded(body, b2)).then(
        set_(writes_guarded(body, st)).to(Bool(True)))
    # Consumer-list cells know the body form they were expanded from (the barrier rules' conditions read it).
    yield rule(eq(c).to(Block.consumers(s, body, r))).then(clist_of(c, body))
    yield rule(eq(c).to(Block.consumers(s, body, body))).then(clist_root(body, c))
    yield rule(clist_of(c, body), eq(c).to(Block.cons(h, r))).then(clist_of(r, body))


def _expansion_rules() -> Iterator[Any]:
    st = var("st", Stmt)
    s = var("s", i64)
    body, r = var("body", Block), var("r", Block)
    ctx = var("ctx", String)
    yield rewrite(Block.producers(body, Block.nil(), ctx)).to(Block.nil())
    yield rewrite(Block.producers(body, Block.cons(st, r), ctx)).to(
        Block.cons(Stmt.issue(st, ctx), Block.producers(body, r, ctx)), producer(st, body))
    yield rewrite(Block.producers(body, Block.cons(st, r), ctx)).to(Block.producers(body, r, ctx), consumer(st, body))
    yield rewrite(Block.consumers(s, body, Block.nil())).to(Block.cons(Stmt.release_empty(s), Block.nil()))
    yield rewrite(Block.consumers(s, body, Block.cons(st, r))).to(
        Block.cons(st, Block.consumers(s, body, r)), consumer(st, body))
    yield rewrite(Block.consumers(s, body, Block.cons(st, r))).to(Block.consumers(s, body, r), producer(st, body))


STRATA: tuple[tuple[str, tuple[Any, ...]], ...] = (
    ("access", tuple(_access_rules()) + tuple(_structure_rules())),
    ("effects", tuple(_effect_rules())),
    ("roles", tuple(_role_rules())),
    ("guards", tuple(_guard_rules()) + tuple(_guarded_outside_rules())),
)
"""The core strata, in order (conditions and expansion follow; see :func:`support`)."""

EXPANSION: tuple[Any, ...] = tuple(_expansion_rules())


def support(facts: tuple[Any, ...] = (), checks: tuple[Any, ...] = (), expansions: tuple[Any, ...] = ()):
    """The support schedule: every core stratum saturated in order, then the rules' facts, their checks,
    then the list expansions; repeated until nothing changes (new lists get their facts in the next round)."""
    parts = [ruleset(*rules, name=f"egtile-{name}").saturate() for name, rules in STRATA]
    if facts:
        parts.append(ruleset(*facts, name="egtile-facts").saturate())
    if checks:
        parts.append(ruleset(*checks, name="egtile-checks").saturate())
    parts.append(ruleset(*(EXPANSION + tuple(expansions)), name="egtile-expansion").saturate())
    out = parts[0]
    for p in parts[1:]:
        out = out + p
    return out.saturate()


__all__ = [
    "ANY_BUFFER", "EXPANSION", "after_read", "after_write", "list_cell", "list_member", "list_ptr", "list_moves", "NOT_PRODUCER_KINDS", "STRATA", "addr_load", "addr_var", "var_kind", "body_of", "cell_at", "clist_of", "clist_root", "consumer", "disqualified", "enclosed", "escapes", "in_data_branch", "under_data_branch",
    "fails", "fails_st", "guarded", "has", "index_var", "items", "kernel_threads", "kernel_write", "kind",
    "leaf_work", "list_has", "list_reads", "list_writes", "loop_var", "member_at", "moves", "moves_loop",
    "nested", "nonlocal_", "num_stages", "outside_read", "outside_write", "own_ptr", "own_read", "own_write",
    "prefer", "producer", "ptr", "reads", "reads_any", "reads_guarded", "root", "scope", "sid_of", "st_items",
    "st_work", "support", "whole", "list_whole", "witness", "work", "writes", "writes_any", "writes_guarded",
]
