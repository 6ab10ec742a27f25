"""Join semantics as small per-key/per-task state classes and step functions, one module per shape family.

Step functions take ``(state, record, stream_time, ...)``, mutate the state and return a :class:`Step`:
the join results (before the joiner is applied) and whether the record was dropped as late. The
reference engine (:mod:`streamjoin.core.reference`) wires them to inputs, joiners, dead letters and
aggregation. The rules are written down in ``docs/SEMANTICS.md``.
"""

from streamjoin.core.semantics.common import Result, Side, Step, hashable, key_order

__all__ = ["Result", "Side", "Step", "hashable", "key_order"]
