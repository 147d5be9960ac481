"""Facts about a pipelined loop body: producers, consumers and the warp-specialization conditions.

Definition. ``body_facts(loop)`` gives, for each top-level statement of ``loop.body`` (index ``i``): its
``sid``, :func:`~egtile.analysis.producer.producer_kind` (with ``loop.var``), the names of the buffers it
reads and writes, and its :func:`~egtile.analysis.effect.effect`. A *producer* is a statement whose kind
is not ``none``; every other statement is a *consumer*. It then states the legality conditions of
splitting the body into a producer warpgroup and consumer warpgroup(s) that run ahead of each other by
up to ``num_stages`` iterations, each as a named :class:`~egtile.verdict.Verdict`:

1. ``has_producer``: at least one statement is a producer (else there is nothing to specialize).
2. ``producers_shared_from_global``: every producer writes only ``shared`` memory and reads only
   ``global`` memory (so the producer needs nothing the consumers compute).
3. ``no_producer_reads_consumer_write``: no producer reads a buffer a consumer writes (the producer runs
   ahead; it would read a value from the wrong iteration).
4. ``no_consumer_writes_producer_buffer``: no consumer writes a buffer a producer writes (WAW: the two
   warpgroups would race on it).

The e-graph derives the same facts by rule (``egtile.schedule.dataflow``: ``producer``, ``consumer``,
``guarded``; ``egtile.rules.warp_specialize``: the conditions); this module is their test oracle
(``tests/test_dataflow_oracle.py``).

Conservative choices are those of the underlying analyses (pointer accesses touch the whole buffer;
an unknown pointer aliases every buffer).
"""

from __future__ import annotations

from dataclasses import dataclass

from egtile.analysis.access import names, overlaps, reads, writes
from egtile.analysis.effect import Effect, effect
from egtile.analysis.producer import ProducerKind, producer_kind
from egtile.ir import For
from egtile.verdict import Verdict


@dataclass(frozen=True)
class StmtFacts:
    """Facts of one top-level statement of a loop body.

    Attributes:
        index: position in ``loop.body``.
        sid: the statement's id.
        producer_kind: ``tma``, ``cp_async``, ``simt`` or ``none`` (consumer).
        reads: names of the buffers it may read.
        writes: names of the buffers it may write.
        scopes: scope of every buffer it touches, as sorted ``(name, scope)`` pairs.
        effect: ``local`` or ``nonlocal``.
    """

    index: int
    sid: int
    producer_kind: ProducerKind
    reads: frozenset[str]
    writes: frozenset[str]
    scopes: tuple[tuple[str, str], ...]
    effect: Effect

    @property
    def is_producer(self) -> bool:
        return self.producer_kind != "none"


@dataclass(frozen=True)
class PipelineFacts:
    """Summary of a pipelined loop body (see the module docstring).

    Attributes:
        loop_sid: the loop's id.
        stmts: one :class:`StmtFacts` per top-level body statement, in order.
        has_producer, producers_shared_from_global, no_producer_reads_consumer_write,
        no_consumer_writes_producer_buffer: the warp-specialization conditions.
    """

    loop_sid: int
    stmts: tuple[StmtFacts, ...]
    has_producer: Verdict
    producers_shared_from_global: Verdict
    no_producer_reads_consumer_write: Verdict
    no_consumer_writes_producer_buffer: Verdict

    @property
    def producers(self) -> tuple[StmtFacts, ...]:
        return tuple(s for s in self.stmts if s.is_producer)

    @property
    def consumers(self) -> tuple[StmtFacts, ...]:
        return tuple(s for s in self.stmts if not s.is_producer)

    @property
    def producer_buffers(self) -> frozenset[str]:
        """Names of every buffer a producer writes (what the ``full``/``empty`` mbarriers guard)."""
        return frozenset().union(*(s.writes for s in self.producers))

    @property
    def conditions(self) -> tuple[Verdict, ...]:
        return (self.has_producer, self.producers_shared_from_global, self.no_producer_reads_consumer_write,
                self.no_consumer_writes_producer_buffer)

    @property
    def warp_specializable(self) -> bool:
        """Every warp-specialization condition holds."""
        return all(c.ok for c in self.conditions)


def _stmt_facts(i: int, s, loop: For) -> StmtFacts:
    r, w = reads(s), writes(s)
    scopes = tuple(sorted({(a.buffer, a.scope) for a in r | w}))
    return StmtFacts(i, s.sid, producer_kind(s, loop.var), names(r), names(w), scopes, effect(s))


def _cond(name: str, failures: list[str]) -> Verdict:
    return Verdict.of(failures)


def _label(f: StmtFacts) -> str:
    return f"statement {f.index} (sid {f.sid}, {f.producer_kind})"


def body_facts(loop: For) -> PipelineFacts:
    """Summarize ``loop``'s body for the pipelining / warp-specialization rules.

    Args:
        loop: usually a ``pipelined`` loop; any ``For`` is accepted (the facts do not depend on its kind).
    """
    stmts = tuple(_stmt_facts(i, s, loop) for i, s in enumerate(loop.body))
    producers = [f for f in stmts if f.is_producer]
    consumers = [f for f in stmts if not f.is_producer]

    has = [] if producers else [f"no statement of loop sid {loop.sid} is a producer (a global-to-shared copy)"]
    shape: list[str] = []
    for p in producers:
        scope = dict(p.scopes)
        bad_w = sorted(b for b in p.writes if scope.get(b) != "shared")
        bad_r = sorted(b for b in p.reads if scope.get(b) != "global")
        if bad_w:
            shape.append(f"{_label(p)} writes non-shared {', '.join(bad_w)}")
        if bad_r:
            shape.append(f"{_label(p)} reads non-global {', '.join(bad_r)}")
    raw: list[str] = []
    waw: list[str] = []
    for p in producers:
        for c in consumers:
            hit = overlaps(p.reads, c.writes)
            if hit:
                raw.append(f"{_label(p)} reads {', '.join(sorted(hit))}, which consumer {_label(c)} writes")
            hit = overlaps(c.writes, p.writes)
            if hit:
                waw.append(f"consumer {_label(c)} writes {', '.join(sorted(hit))}, which {_label(p)} writes")

    return PipelineFacts(
        loop_sid=loop.sid,
        stmts=stmts,
        has_producer=_cond("has_producer", has),
        producers_shared_from_global=_cond("producers_shared_from_global", shape),
        no_producer_reads_consumer_write=_cond("no_producer_reads_consumer_write", raw),
        no_consumer_writes_producer_buffer=_cond("no_consumer_writes_producer_buffer", waw),
    )
