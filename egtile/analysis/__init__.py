"""Pure dataflow analyses of tile IR: IR in, frozen facts out; nothing is cached or mutated.

* :mod:`.access`: ``reads``, ``writes`` (buffer, scope, region; pointers reach whole buffers);
* :mod:`.effect`: ``effect`` (local | nonlocal) and ``nonlocal_reason``;
* :mod:`.producer`: ``producer_kind`` (tma | cp_async | simt | none), ``tma_eligibility``,
  ``cp_async_eligibility``;
* :mod:`.vector`: ``vector_width`` (a T.Parallel nest's vector access width, a hardware oracle);
* :mod:`.positions`: ``earliest_read``, ``last_access``;
* :mod:`.body`: ``body_facts`` (per-statement facts and warp-specialization conditions).

The scheduler derives the same facts inside the e-graph (:mod:`egtile.schedule.dataflow`); these
analyses are the test oracle that checks it (``tests/test_dataflow_oracle.py``) and compute the hardware
oracles (TMA tensor-map limits, cp.async widths).
"""

from egtile.analysis.access import (
    ANY_BUFFER, Access, free_vars, mentions, names, overlaps, own_reads, own_writes, reads, writes,
)
from egtile.analysis.effect import Effect, effect, nonlocal_reason
from egtile.analysis.vector import vector_width
from egtile.analysis.positions import buffer_names, earliest_read, last_access
from egtile.analysis.body import PipelineFacts, StmtFacts, body_facts
from egtile.analysis.producer import (
    Eligibility, ProducerKind, cp_async_bytes, cp_async_eligibility, producer_kind, tma_eligibility,
)

__all__ = [
    "ANY_BUFFER", "Access", "free_vars", "mentions", "names", "overlaps", "own_reads", "own_writes", "reads", "writes",
    "Effect", "effect", "nonlocal_reason",
    "buffer_names", "earliest_read", "last_access",
    "PipelineFacts", "StmtFacts", "body_facts",
    "vector_width",
    "Eligibility", "ProducerKind", "cp_async_bytes", "cp_async_eligibility", "producer_kind", "tma_eligibility",
]
