"""The join shapes of Kafka Streams and what each one is: one registered definition per shape.

The spec's validation, the topic plan, the batch order, the reference engine, the kernel's driver side and
backfill read a shape's traits from :data:`SHAPES` instead of listing shapes themselves, so adding a shape is
one entry here, its step functions in ``core/semantics``, its kernel class in ``java/kernel`` (one entry in
``Kernel.java`` and ``spark/kernel.kernel_join``) and its scenarios.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Role(StrEnum):
    STREAM = "stream"
    TABLE = "table"
    GLOBAL_TABLE = "global_table"


class Shape(StrEnum):
    STREAM_STREAM = "stream-stream"
    STREAM_TABLE = "stream-table"
    STREAM_GLOBALTABLE = "stream-globaltable"
    TABLE_TABLE = "table-table"
    TABLE_TABLE_FK = "table-table-fk"


class Kind(StrEnum):
    INNER = "inner"
    LEFT = "left"
    OUTER = "outer"


#: At equal effective timestamps, global-table updates go first, then table updates, then stream records
#: (a table update at time t is visible to a stream record at time t). See docs/SEMANTICS.md §2.
ROLE_RANK: dict[Role, int] = {Role.GLOBAL_TABLE: 0, Role.TABLE: 1, Role.STREAM: 2}


@dataclass(frozen=True)
class ShapeTraits:
    """What a join shape is, independent of any engine."""

    shape: Shape
    #: the roles of the left and the right input
    left: Role
    right: Role
    #: the kinds Kafka Streams offers for it
    kinds: frozenset[Kind]
    #: its result is a table: each result replaces the previous one of its key, so an aggregate after it
    #: subtracts the old contribution; otherwise a stream, to which an aggregate only adds
    table_result: bool
    #: both inputs are read partition by partition, side by side: they must be co-partitioned
    copartitioned: bool
    #: ``join.window`` (required), ``join.grace`` (allowed), ``join.key_selector``, ``join.foreign_key``
    windowed: bool = False
    grace: bool = False
    key_selector: bool = False
    foreign_key: bool = False

    @property
    def stream_result(self) -> bool:
        return not self.table_result


_ALL = frozenset(Kind)
_INNER_LEFT = frozenset({Kind.INNER, Kind.LEFT})

SHAPES: dict[Shape, ShapeTraits] = {
    traits.shape: traits
    for traits in (
        ShapeTraits(Shape.STREAM_STREAM, Role.STREAM, Role.STREAM, _ALL, table_result=False, copartitioned=True,
                    windowed=True, grace=True),
        ShapeTraits(Shape.STREAM_TABLE, Role.STREAM, Role.TABLE, _INNER_LEFT, table_result=False, copartitioned=True,
                    grace=True),
        ShapeTraits(Shape.STREAM_GLOBALTABLE, Role.STREAM, Role.GLOBAL_TABLE, _INNER_LEFT, table_result=False,
                    copartitioned=False, key_selector=True),
        ShapeTraits(Shape.TABLE_TABLE, Role.TABLE, Role.TABLE, _ALL, table_result=True, copartitioned=True),
        ShapeTraits(Shape.TABLE_TABLE_FK, Role.TABLE, Role.TABLE, _INNER_LEFT, table_result=True,
                    copartitioned=False, foreign_key=True),
    )
}  # fmt: skip


def traits(shape: Shape) -> ShapeTraits:
    return SHAPES[shape]
