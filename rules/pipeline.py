"""Loop schedule of ``T.Pipelined``: serial, or warp-specialized (:mod:`egtile.rules.warp_specialize`).

Hardware fact (PTX ISA §9.7.13.15 "mbarrier"): an mbarrier counts phases; ``try_wait.parity P`` returns
once the phase of parity ``P`` has completed. A pipeline with ``S`` buffer versions ("stages") gives
iteration ``k`` of ``T.Pipelined(start, stop)`` the stage and phase of its *normalized* index
``r = k - start``:

* stage ``r % S`` (which buffer version and which barrier of the ``full``/``empty`` arrays), and
* parity ``(r / S) & 1`` (``r & 1`` when ``S == 1``): the barrier of stage ``s`` completes one phase
  per round of ``S`` iterations, starting from phase 0.

Normalizing matters: with ``start = 3`` and ``S = 2``, iteration 3 must use stage 0 and parity 0; the
absolute index would give stage 1 and a barrier that never completed (the ``absolute-stage-parity``
mutant). Trip counts of 0, 1, fewer than ``S`` or not a multiple of ``S`` need nothing special: each
executed iteration uses its own round's phase, and unexecuted ones are never waited for. The producer
waits on ``empty[s]`` with parity ``parity ^ 1``: in round 0 the barrier's phase -1 counts as complete
(fresh barrier, phase 0 pending, parity 1 differs), so the producer fills all ``S`` stages before its
first real wait.

The serial schedule (always legal) runs the body as written by every thread; the lowering puts a CTA
barrier between statements that exchange data through shared memory (including across iterations).

Cost terms: ``serial_pipeline_cost`` (two ``__syncthreads`` per iteration) vs ``ws_pipeline_cost``.
"""

from __future__ import annotations

from egglog import function, i64, i64Like

from egtile.ir import SeqLoop
from egtile.lower.phase import phase_exprs  # noqa: F401 - re-exported for rule authors
from egtile.schedule import cost as C
from egtile.schedule.decision import Decision, static
from egtile.schedule.rule import Rule
from egtile.schedule.schema import Block, Stmt


@function
def serial(sid: i64Like, body: Block) -> Stmt:
    """A pipelined loop run as a plain serial loop by every thread."""


def _lower_serial(n, lw, ctx):
    loop = lw.facts.stmts[n.sid]
    head = lw.head(n.sid, ctx)
    return [SeqLoop(loop.var, head.start, head.stop, lw.block(n.lists[0], ctx), sid=n.sid)]


SERIAL = Decision("serial", serial, (("sid", i64), ("body", Block)), "decision",
                  static(C.serial_pipeline_cost(), "serial_pipeline_cost(): two CTA barriers per iteration"),
                  lower=_lower_serial, label="serial loop")

pipeline_serial = Rule(
    name="pipeline-serial", stage="pipeline",
    doc="T.Pipelined -> a plain serial loop run by every thread: the program's own semantics (T.Pipelined is "
        "serial; num_stages only permits overlap). Always legal.",
    variables=(("sid", i64), ("body", Block)),
    lhs=lambda v: Stmt.pipelined(v.sid, v.body),
    rhs=lambda v: serial(v.sid, v.body),
    conditions=(),
)

RULES = (pipeline_serial,)
DECISIONS = (SERIAL,)

__all__ = ["DECISIONS", "RULES", "SERIAL", "phase_exprs", "pipeline_serial", "serial"]
