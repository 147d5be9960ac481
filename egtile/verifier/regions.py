"""Symbolic footprints: which elements of a buffer an access touches, and which thread touches each.

An access of a tile (a ``TileOp`` operand, a TMA box) or of a ``ThreadLoop``'s elements is described
without listing its elements:

**Piece.** The image of an iteration box under an affine map that is *monomial*: buffer dimension ``d``
is either constant or ``base_d + step_d * t_d`` with ``t_d`` in ``[0, size_d)`` (``step_d >= 1``), each
iteration variable drives at most one dimension, and the variables that drive none are *free*
(``(size, pcoef)``: the element is touched once per value). Every iteration has a *position*
``pos = pos0 + sum_d pcoef_d * t_d + sum_j pcoef_j * w_j`` (its row-major index in the tile op or the
``ThreadLoop``), which decides

* who runs it, the *owner*: ``const t`` (one thread: an elected thread, a one-thread range) or
  ``rank b, c`` (thread ``b + pos % c``: element ``e`` of a tile op belongs to rank ``e % c``,
  iteration ``i`` of a partitioned ``ThreadLoop`` to rank ``i % c``), or none (every thread of the
  agent, e.g. replicated code or a gemm operand);
* whether the agent runs it at all, the *filter* ``(c, r0, r1)``: only iterations with
  ``pos % c in [r0, r1)`` (the agent's ranks when a tile op or ``ThreadLoop`` spans several agents).

**Points.** An explicit set of flat element indices with one owner each (``-1``: none, ``-2``: several).
The tracer falls back to it where an index is not monomial-affine (e.g. ``(i + 1) % n``); its size is
charged to the verification budget.

**Unknown.** An index that depends on data: possibly any element, no owner (as the enumerating
verifier does).

**Decisions** (exact, never sampled). For two pieces the per-dimension intersection of their
arithmetic progressions is again a progression ``x1 + L * u`` (Chinese remainder theorem), so both
pieces' iteration indices, positions and hence owners and filters are affine in ``u`` (and the free
variables). Owners and filters only use ``pos mod c``; an affine form modulo ``c`` is periodic in
``u_d`` with period ``c / gcd(coef_d, c)``, and the box is a product, so the set of residue tuples over
the whole box equals the set over the box cut to ``min(size, lcm of those periods)`` per dimension:
deciding "some common element passes both filters" or "every common element has the same owner in
both" enumerates at most that reduced grid (a few hundred points for real tiles, independent of the
tile's size up to the thread count). Where even the reduced grid or a materialization exceeds
:data:`GRID_LIMIT` / :data:`MATERIALIZE_LIMIT`, the answer is conservative (overlap: yes; same
thread: no), which can only add violations.

The semantics match the enumerating verifier's ``elements`` / ``owners``
(:mod:`egtile.verifier.reference.trace`): an access's owners exist only if every part of it has an owner
and no element gets two (:attr:`Footprint.consistent`); two accesses are *same-thread* when both have
owners and agree on every common element; flat element indices are compared (in-bounds accesses, as
every executor requires).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

GRID_LIMIT = 1 << 18
MATERIALIZE_LIMIT = 1 << 20

NONE_OWNER = -1
MULTI_OWNER = -2


@dataclass(frozen=True)
class Owner:
    """``const``: thread ``base``; ``rank``: thread ``base + (pos // group) % count`` (``group`` > 1: a
    vectorized ``ThreadLoop``, whose groups of ``group`` consecutive iterations go to one rank)."""

    kind: Literal["const", "rank"]
    base: int
    count: int = 1
    group: int = 1

    @property
    def modulus(self) -> int:
        """The owner is a function of ``pos`` modulo this."""
        return self.count * self.group

    def of(self, residue):
        """The thread owning positions with ``pos % modulus == residue`` (ints or arrays)."""
        return self.base + residue // self.group


@dataclass(frozen=True)
class Piece:
    """A monomial-affine set of elements with its owner (see the module docstring)."""

    dims: tuple[tuple[int, int, int], ...]
    pcoef: tuple[int, ...]
    free: tuple[tuple[int, int], ...]
    pos0: int
    owner: Owner | None
    filt: tuple[int, int, int] | None

    @property
    def iterations(self) -> int:
        n = 1
        for _, _, s in self.dims:
            n *= s
        for s, _ in self.free:
            n *= s
        return n


def piece(dims, pcoef, free, pos0: int, owner: Owner | None, filt) -> Piece | None:
    """A canonical :class:`Piece`, or ``None`` when it is empty."""
    nd, npc = [], []
    for (b, s, n), c in zip(dims, pcoef):
        if n <= 0:
            return None
        if n == 1:
            nd.append((b, 1, 1))
            npc.append(0)
        else:
            nd.append((b, s, n))
            npc.append(c)
    nf = []
    for n, c in free:
        if n <= 0:
            return None
        if n > 1:
            nf.append((n, c))
    if owner is not None and owner.kind == "rank" and owner.count == 1:
        owner = Owner("const", owner.base)
    if filt is not None:
        cnt, r0, r1 = filt
        r0, r1 = max(r0, 0), min(r1, cnt)
        if r0 >= r1:
            return None
        filt = None if (r0 == 0 and r1 == cnt) else (cnt, r0, r1)
    return Piece(tuple(nd), tuple(npc), tuple(sorted(nf)), pos0, owner, filt)


@dataclass(frozen=True, eq=False)
class Points:
    """Explicit elements: sorted unique flat indices and one owner per index (-1 none, -2 several)."""

    flat: np.ndarray
    owner: np.ndarray


@dataclass(eq=False)
class Footprint:
    """What one access event touches: pieces (or ``unknown``: possibly any element, no owner)."""

    shape: tuple[int, ...]
    pieces: tuple[Piece | Points, ...]
    unknown: bool = False
    _consistent: bool | None = field(default=None, repr=False)
    _sole: int | None = field(default=None, repr=False)
    _bbox: tuple[tuple[int, int], ...] | None = field(default=None, repr=False)


def _strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    st, acc = [], 1
    for e in reversed(shape):
        st.append(acc)
        acc *= e
    return tuple(reversed(st))


def _prog_meet(p, q) -> tuple[int, int, int]:
    """Intersection of ``{pb + ps t : t < pn}`` and ``{qb + qs t : t < qn}`` as ``(x1, L, m)``."""
    pb, ps, pn = p
    qb, qs, qn = q
    g = math.gcd(ps, qs)
    if (qb - pb) % g:
        return 0, 1, 0
    m_q = qs // g
    k = ((qb - pb) // g) * pow(ps // g, -1, m_q) % m_q if m_q > 1 else 0
    x0 = pb + ps * k
    lcm = ps * m_q
    lo, hi = max(pb, qb), min(pb + ps * (pn - 1), qb + qs * (qn - 1))
    x1 = lo + (x0 - lo) % lcm
    if x1 > hi:
        return 0, 1, 0
    return x1, lcm, (hi - x1) // lcm + 1


class Form:
    """``(c0 + sum coefs[d] * u[d]) mod mod`` over a box."""

    __slots__ = ("c0", "coefs", "mod")

    def __init__(self, c0: int, coefs: list[int], mod: int) -> None:
        self.c0, self.coefs, self.mod = c0, coefs, mod


class TooLarge(Exception):
    pass


def _residues(sizes: list[int], forms: list[Form], budget: Budget | None) -> list[np.ndarray]:
    """Each form's residue over the reduced grid (same point order for every form)."""
    red = []
    for d, m in enumerate(sizes):
        per = 1
        for f in forms:
            a = f.coefs[d] % f.mod
            if a:
                per = math.lcm(per, f.mod // math.gcd(a, f.mod))
        red.append(min(m, per))
    total = math.prod(red)
    if total > GRID_LIMIT:
        raise TooLarge
    if budget is not None:
        budget.charge(total)
    if total == 0:
        return [np.zeros(0, dtype=np.int64) for _ in forms]
    out = []
    for f in forms:
        # row-major over the reduced box, one dimension at a time (outer sums)
        v = np.array([f.c0 % f.mod], dtype=np.int64)
        for d, r in enumerate(red):
            a = f.coefs[d] % f.mod
            v = (v[:, None] + (a * np.arange(r, dtype=np.int64))[None, :]).reshape(-1) if a else np.repeat(v, r)
        out.append(v % f.mod)
    return out


class Budget:
    """Counts the verifier's work; :meth:`charge` raises the limit error past ``limit`` units."""

    def __init__(self, limit: int, on_exceed) -> None:
        self.limit = limit
        self.used = 0
        self.on_exceed = on_exceed

    def charge(self, n: int) -> None:
        self.used += n
        if self.used > self.limit:
            self.on_exceed(self.used)


class Space:
    """Decisions on footprints, with interning and caches (one per verification)."""

    def __init__(self, budget: Budget | None = None) -> None:
        self.budget = budget
        self._pieces: dict[Piece, Piece] = {}
        self._fps: dict[tuple, Footprint] = {}
        self._overlap: dict[tuple[int, int], bool] = {}
        self._member_masks: dict[int, tuple[Points, np.ndarray]] = {}
        self._agree: dict[tuple[int, int], bool] = {}
        self._internal: dict[int, bool] = {}
        self._mat: dict[int, Points | None] = {}
        self._keep: list = []  # keeps Points alive so that their ids stay unique

    # -- construction ---------------------------------------------------------------------------------

    def footprint(self, shape: tuple[int, ...], pieces, unknown: bool = False) -> Footprint:
        """The canonical footprint made of ``pieces`` (``Piece``/``Points``; ``None`` entries ignored)."""
        if unknown:
            key = (shape, "unknown")
            got = self._fps.get(key)
            if got is None:
                got = self._fps[key] = Footprint(shape, (), True)
            return got
        canon: list[Piece | Points] = []
        for p in pieces:
            if p is None:
                continue
            if isinstance(p, Piece):
                canon.append(self._pieces.setdefault(p, p))
            else:
                if len(p.flat):
                    self._keep.append(p)
                    canon.append(p)
        uniq = list({id(p): p for p in canon}.values())
        uniq.sort(key=id)
        key = (shape, tuple(id(p) for p in uniq))
        got = self._fps.get(key)
        if got is None:
            got = self._fps[key] = Footprint(shape, tuple(uniq))
        return got

    @staticmethod
    def empty(fp: Footprint) -> bool:
        return not fp.unknown and not fp.pieces

    def points(self, shape: tuple[int, ...], flat: np.ndarray, owner: np.ndarray) -> Points | None:
        """Canonical :class:`Points` from possibly repeated ``flat`` indices (owners merged)."""
        if len(flat) == 0:
            return None
        order = np.lexsort((owner, flat))
        flat, owner = flat[order], owner[order]
        uniq, start, counts = np.unique(flat, return_index=True, return_counts=True)
        lo, hi = owner[start], owner[start + counts - 1]  # smallest and largest owner of each element
        own = np.where((lo == hi) & (lo >= 0), lo, np.where((lo == NONE_OWNER) & (hi == NONE_OWNER), NONE_OWNER,
                                                             MULTI_OWNER))
        p = Points(uniq.astype(np.int64), own.astype(np.int64))
        self._keep.append(p)
        return p

    # -- decisions ------------------------------------------------------------------------------------

    def overlaps(self, f: Footprint, g: Footprint) -> bool:
        """Do ``f`` and ``g`` share an element (always, when either is unknown)?"""
        if f.unknown or g.unknown:
            return True
        if not f.pieces or not g.pieces:
            return False
        if f is g:
            return True
        for p in f.pieces:
            for q in g.pieces:
                if self._piece_overlap(p, q, f.shape):
                    return True
        return False

    def consistent(self, f: Footprint) -> bool:
        """Does every element of ``f`` have exactly one owner (the enumerating verifier's ``owners``)?"""
        if f._consistent is None:
            f._consistent = self._consistent(f)
        return f._consistent

    def same_thread(self, f: Footprint, g: Footprint) -> bool:
        """Is every element both touch touched by one and the same thread in both?"""
        if f.unknown or g.unknown:
            return False
        if not self.consistent(f) or not self.consistent(g):
            # only the elements both touch matter: a piece that meets nothing of the other footprint does not (a
            # statement reading S[2i], S[2i + 1], S[2i + 2] after S[2i + 1] was written: element 2i + 2 has two
            # readers, but no writer)
            f2 = self.footprint(f.shape, [p for p in f.pieces if any(self._piece_overlap(p, q, f.shape)
                                                                     for q in g.pieces)])
            g2 = self.footprint(g.shape, [q for q in g.pieces if any(self._piece_overlap(p, q, f.shape)
                                                                     for p in f.pieces)])
            if (len(f2.pieces), len(g2.pieces)) == (len(f.pieces), len(g.pieces)) or \
                    not self.consistent(f2) or not self.consistent(g2):
                return False
            f, g = f2, g2
        for p in f.pieces:
            for q in g.pieces:
                if not self._agree_pieces(p, q, f.shape):
                    return False
        return True

    def sole_owner(self, f: Footprint) -> int | None:
        """The one thread that owns every element of ``f``, or ``None`` (several, or no owners)."""
        if f._sole is None:
            f._sole = self._sole(f)
        return None if f._sole < 0 else f._sole

    def single_owner(self, pieces) -> int | None:
        """The one thread owning every iteration of ``pieces``, else ``None`` (several, or none given)."""
        found: set[int] = set()
        for p in pieces:
            got = self._owners_of(p)
            if got is None:
                return None
            found |= got
            if len(found) > 1:
                return None
        return found.pop() if len(found) == 1 else None

    def bbox(self, f: Footprint) -> tuple[tuple[int, int], ...]:
        """Per dimension ``(lo, hi)`` (inclusive) of every element ``f`` may touch."""
        if f._bbox is None:
            if f.unknown or not f.pieces:
                f._bbox = tuple((0, e - 1) for e in f.shape)
            else:
                lo = [None] * len(f.shape)
                hi = [None] * len(f.shape)
                for p in f.pieces:
                    if isinstance(p, Piece):
                        rng = [(b, b + s * (n - 1)) for b, s, n in p.dims]
                    else:
                        coords = np.array(np.unravel_index(p.flat, f.shape)) if f.shape else np.zeros((0, 1))
                        rng = [(int(c.min()), int(c.max())) for c in coords]
                    for d, (a, b) in enumerate(rng):
                        lo[d] = a if lo[d] is None else min(lo[d], a)
                        hi[d] = b if hi[d] is None else max(hi[d], b)
                f._bbox = tuple(zip(lo, hi))  # type: ignore[arg-type]
        return f._bbox

    # -- pieces ---------------------------------------------------------------------------------------

    def _consistent(self, f: Footprint) -> bool:
        if f.unknown or not f.pieces:
            return not f.unknown
        for p in f.pieces:
            if isinstance(p, Piece):
                if p.owner is None or not self._internal_ok(p):
                    return False
            elif bool((p.owner < 0).any()):
                return False
        ps = f.pieces
        for i, p in enumerate(ps):
            for q in ps[i + 1:]:
                if not self._agree_pieces(p, q, f.shape):
                    return False
        return True

    def _sole(self, f: Footprint) -> int:
        if not self.consistent(f) or not f.pieces:
            return -1
        got = self.single_owner(f.pieces)
        return -1 if got is None else got

    def _owners_of(self, p) -> set[int] | None:
        """The threads owning some iteration of ``p`` (``None``: an iteration without owner, or too many
        to list)."""
        if isinstance(p, Points):
            u = set(np.unique(p.owner).tolist())
            return None if any(x < 0 for x in u) else u
        o = p.owner
        if o is None:
            return None
        if o.kind == "const":
            return {o.base}
        sizes = [n for _, _, n in p.dims] + [n for n, _ in p.free]
        coefs = list(p.pcoef) + [c for _, c in p.free]
        if p.filt is None and o.group == 1:
            # two iterations one step apart along a dimension whose step moves the rank: two owners
            if any(n > 1 and c % o.count for n, c in zip(sizes, coefs)):
                return {o.base, o.base + 1}
            return {o.base + p.pos0 % o.count}
        if p.filt is not None and p.filt[0] == o.modulus and p.filt[2] - p.filt[1] == o.group:
            if p.filt[1] % o.group == 0:
                return {o.of(p.filt[1])}  # the filter keeps one rank
        forms = [Form(p.pos0, coefs, o.modulus)]
        if p.filt is not None:
            forms.append(Form(p.pos0, coefs, p.filt[0]))
        try:
            res = _residues(sizes, forms, self.budget)
        except TooLarge:
            return None
        r = res[0]
        if p.filt is not None:
            r = r[(res[1] >= p.filt[1]) & (res[1] < p.filt[2])]
        vals = np.unique(o.of(r))
        return {int(x) for x in vals[:2]} if len(vals) else set()

    def _internal_ok(self, p: Piece) -> bool:
        """Does every element of ``p`` have one owner, whichever free-variable value touches it?"""
        got = self._internal.get(id(p))
        if got is not None:
            return got
        ok = True
        o = p.owner
        if p.free and o is not None and o.kind == "rank":
            nf = len(p.free)
            sizes = [n for _, _, n in p.dims] + [n for n, _ in p.free] * 2
            zero = [0] * nf
            fc = [c for _, c in p.free]
            own1 = Form(p.pos0, list(p.pcoef) + fc + zero, o.modulus)
            own2 = Form(p.pos0, list(p.pcoef) + zero + fc, o.modulus)
            forms = [own1, own2]
            if p.filt is not None:
                forms += [Form(p.pos0, list(p.pcoef) + fc + zero, p.filt[0]),
                          Form(p.pos0, list(p.pcoef) + zero + fc, p.filt[0])]
            try:
                res = _residues(sizes, forms, self.budget)
                mask = np.ones(len(res[0]), dtype=bool)
                if p.filt is not None:
                    mask = (res[2] >= p.filt[1]) & (res[2] < p.filt[2]) & (res[3] >= p.filt[1]) & (res[3] < p.filt[2])
                ok = bool(np.all(o.of(res[0][mask]) == o.of(res[1][mask])))
            except TooLarge:
                ok = False
        self._internal[id(p)] = ok
        return ok

    def _meet_forms(self, p: Piece, q: Piece):
        """The common box of ``p`` and ``q`` and each one's position as an affine form over it."""
        sizes: list[int] = []
        pc, qc = p.pos0, q.pos0
        pcoefs: list[int] = []
        qcoefs: list[int] = []
        for (pd, qd, ap, aq) in zip(p.dims, q.dims, p.pcoef, q.pcoef):
            x1, lcm, m = _prog_meet(pd, qd)
            if m == 0:
                return None
            sizes.append(m)
            # t_p = (x1 - pb)/ps + (lcm/ps) u
            tp0, tps = (x1 - pd[0]) // pd[1], lcm // pd[1]
            tq0, tqs = (x1 - qd[0]) // qd[1], lcm // qd[1]
            pc += ap * tp0
            qc += aq * tq0
            pcoefs.append(ap * tps)
            qcoefs.append(aq * tqs)
        nfp, nfq = len(p.free), len(q.free)
        sizes += [n for n, _ in p.free] + [n for n, _ in q.free]
        pcoefs += [c for _, c in p.free] + [0] * nfq
        qcoefs += [0] * nfp + [c for _, c in q.free]
        return sizes, pc, pcoefs, qc, qcoefs

    def _piece_overlap(self, p, q, shape) -> bool:
        key = (id(p), id(q))
        got = self._overlap.get(key)
        if got is None:
            got = self._overlap[key] = self._overlap[(id(q), id(p))] = self._decide_overlap(p, q, shape)
        return got

    def _decide_overlap(self, p, q, shape) -> bool:
        if isinstance(p, Points) or isinstance(q, Points):
            a, b = self._mat_points(p, shape), self._mat_points(q, shape)
            if a is None or b is None:
                return True
            if not a.flat.size or not b.flat.size:
                return False
            if a.flat.size < b.flat.size:
                a, b = b, a
            # One membership mask per (larger) point set, reused for every piece it meets: a gather per pair
            # instead of intersect1d's sort of both sets (the register fragments' by-layout pieces meet
            # hundreds of others).
            mask = self._members(a)
            bf = b.flat[(b.flat >= 0) & (b.flat < mask.size)]
            return bool(mask[bf].any())
        met = self._meet_forms(p, q)
        if met is None:
            return False
        if p.filt is None and q.filt is None:
            return True
        sizes, pc, pco, qc, qco = met
        forms = []
        if p.filt is not None:
            forms.append(Form(pc, pco, p.filt[0]))
        if q.filt is not None:
            forms.append(Form(qc, qco, q.filt[0]))
        try:
            res = _residues(sizes, forms, self.budget)
        except TooLarge:
            return True
        mask = np.ones(len(res[0]), dtype=bool)
        i = 0
        for f in (p.filt, q.filt):
            if f is not None:
                mask &= (res[i] >= f[1]) & (res[i] < f[2])
                i += 1
        return bool(mask.any())

    def _agree_pieces(self, p, q, shape) -> bool:
        key = (id(p), id(q))
        got = self._agree.get(key)
        if got is None:
            got = self._agree[key] = self._agree[(id(q), id(p))] = self._decide_agree(p, q, shape)
        return got

    def _decide_agree(self, p, q, shape) -> bool:
        """Every element in both has, in both, owners and the same one."""
        if isinstance(p, Points) or isinstance(q, Points):
            a, b = self._mat_points(p, shape), self._mat_points(q, shape)
            if a is None or b is None:
                return False
            common, ia, ib = np.intersect1d(a.flat, b.flat, assume_unique=True, return_indices=True)
            if not common.size:
                return True
            oa, ob = a.owner[ia], b.owner[ib]
            return bool(np.all((oa >= 0) & (oa == ob)))
        met = self._meet_forms(p, q)
        if met is None:
            return True
        if p.owner is None or q.owner is None:
            return not self._decide_overlap(p, q, shape)
        po, qo = p.owner, q.owner
        if po.kind == "const" and qo.kind == "const" and not p.free and not q.free:
            return po.base == qo.base or not self._decide_overlap(p, q, shape)
        sizes, pc, pco, qc, qco = met
        zero = [0] * len(sizes)
        # a const owner needs no residue: a modulus-1 form contributes nothing to the grid
        forms = [Form(pc, pco, po.modulus) if po.kind == "rank" else Form(0, zero, 1),
                 Form(qc, qco, qo.modulus) if qo.kind == "rank" else Form(0, zero, 1)]
        if p.filt is not None:
            forms.append(Form(pc, pco, p.filt[0]))
        if q.filt is not None:
            forms.append(Form(qc, qco, q.filt[0]))
        try:
            res = _residues(sizes, forms, self.budget)
        except TooLarge:
            return False
        own_p = po.of(res[0]) if po.kind == "rank" else np.full(len(res[0]), po.base)
        own_q = qo.of(res[1]) if qo.kind == "rank" else np.full(len(res[1]), qo.base)
        mask = np.ones(len(res[0]), dtype=bool)
        i = 2
        for f in (p.filt, q.filt):
            if f is not None:
                mask &= (res[i] >= f[1]) & (res[i] < f[2])
                i += 1
        return bool(np.all(own_p[mask] == own_q[mask]))

    def _members(self, a: Points) -> np.ndarray:
        """A boolean mask over flat element indices ``0 .. max(a)``, true at ``a``'s points (cached per point
        set; ``a`` is not empty, its indices are not negative)."""
        got = self._member_masks.get(id(a))
        if got is None or got[0] is not a:
            mask = np.zeros(int(a.flat.max()) + 1, dtype=bool)
            mask[a.flat] = True
            got = self._member_masks[id(a)] = (a, mask)
        return got[1]

    def _mat_points(self, p, shape) -> Points | None:
        """``p`` as explicit points (``None``: too large to materialize)."""
        if isinstance(p, Points):
            return p
        got = self._mat.get(id(p), False)
        if got is not False:
            return got  # type: ignore[return-value]
        out = None
        n = p.iterations
        if n <= MATERIALIZE_LIMIT:
            if self.budget is not None:
                self.budget.charge(n)
            st = _strides(shape)
            sizes = [s for _, _, s in p.dims] + [s for s, _ in p.free]
            axes = [a.reshape(-1) for a in np.meshgrid(*[np.arange(s, dtype=np.int64) for s in sizes],
                                                        indexing="ij")] if sizes else []
            total = n
            flat = np.zeros(total, dtype=np.int64)
            pos = np.full(total, p.pos0, dtype=np.int64)
            for d, (b, s, _) in enumerate(p.dims):
                x = b + s * axes[d] if axes else np.full(total, b, dtype=np.int64)
                flat += x * st[d]
                pos += p.pcoef[d] * axes[d] if axes else 0
            for j, (_, c) in enumerate(p.free):
                pos += c * axes[len(p.dims) + j]
            if p.owner is None:
                own = np.full(total, NONE_OWNER, dtype=np.int64)
            elif p.owner.kind == "const":
                own = np.full(total, p.owner.base, dtype=np.int64)
            else:
                own = p.owner.of(pos % p.owner.modulus)
            if p.filt is not None:
                keep = (pos % p.filt[0] >= p.filt[1]) & (pos % p.filt[0] < p.filt[2])
                flat, own = flat[keep], own[keep]
            out = self.points(shape, flat, own)
        self._mat[id(p)] = out
        return out


def flat_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides of ``shape`` (elements)."""
    return _strides(shape)
