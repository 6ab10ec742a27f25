"""Chained joins (issue 38) as cases: Kafka Streams' own multi-join tests, ported with their inputs and expected
outputs, and a stream enrichment of two tables. Each case is a spec with ``joins:`` (or a stream-stream
self-join), its records (file order, one task) and, where Kafka's test states it, the output it expects per
input record. ``tests/unit/test_reference_chains.py`` checks the reference engine against those expected
outputs; ``tests/oracle/test_chained_joins.py`` checks it against Kafka Streams 4.1.1 (``TopologyTestDriver``),
record for record.

Sources (apache/kafka, ``streams/src/test/java/org/apache/kafka/streams/integration/``):

* ``AbstractJoinIntegrationTest.java``: the inputs ``inputWithoutOutOfOrderData`` and ``leftInput`` (every key
  ``ANY_UNIQUE_KEY = 0L`` unless given; a Long key, a String value; ``null`` a null value), the joiner
  ``value1 + "-" + value2`` (Java's string concatenation: a null side is ``"null"``), timestamps relative to the
  test's base time (0 here);
* ``StreamStreamJoinIntegrationTest.java``: ``testMultiInner`` (A join B join B, windows of 10 s and grace 24 h)
  and ``testSelfJoin`` (``leftStream.join(leftStream)`` with ``topology.optimization=all``: KIP-862's self-join);
* ``TableTableJoinIntegrationTest.java``: ``testInnerInner`` ... ``testOuterOuter`` (``leftTable.<kind>(rightTable)
  .<kind>(rightTable)``), the expected lists of the record cache disabled (the duplicates there are KAFKA-6443:
  the right table feeds both stages);
* ``KTableKTableForeignKeyInnerJoinMultiIntegrationTest.java``: ``shouldInnerJoinMultiPartitionQueryable`` (table1
  of Float values, foreign key ``Integer.toString((int) value)`` into table2, then foreign key ``10`` if the first
  result contains ``value2=10`` else ``0`` into table3). Float-free here: table1's values are hundredths as longs
  (streamjoin's value formats have no float), printed back as ``1.33``, so the expected result is Kafka's.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from streamjoin.core.records import Record
from streamjoin.core.shapes import SHAPES, Role, Shape
from streamjoin.core.spec import PipelineSpec, parse_spec

KEY = 0  # ANY_UNIQUE_KEY
WINDOW = {"before": "10s", "after": "10s"}
GRACE = "24h"
DASH = "chained_cases:dash"


def dash(key: Any, left: Any, right: Any) -> str:
    """Kafka's tests' joiner, ``value1 + "-" + value2``: a null side prints as ``null``."""
    return f"{'null' if left is None else left}-{'null' if right is None else right}"


@dataclass(frozen=True)
class ChainCase:
    """A spec, its records (file order, partition 0) and what Kafka's test expects per input record (None: the
    test states no per-record output), or the final table it expects (``final``)."""

    name: str
    spec: PipelineSpec
    records: tuple[Record, ...]
    expected: tuple[tuple[tuple[Any, int], ...], ...] | None = None
    final: dict[Any, Any] | None = None
    #: the last join result Kafka's test expects (value, ts), where it checks only that
    last: tuple[Any, int] | None = None
    #: a generated case's group (its stage shapes)
    group: str = ""
    source: str = ""
    functions: dict[str, Callable[..., Any]] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.name


def _spec(name: str, inputs: dict[str, Any], joins: list[dict[str, Any]], **extra: Any) -> PipelineSpec:
    data = {"name": name, "inputs": inputs, "joins": joins, "output": {"topic": "out"}, "dead_letter_topic": "dlq",
            **extra}  # fmt: skip
    return parse_spec(data, name)


def _records(rows: list[tuple[str, Any, Any, int]]) -> tuple[Record, ...]:
    return tuple(Record(topic, key, value, ts) for topic, key, value, ts in rows)


# AbstractJoinIntegrationTest.inputWithoutOutOfOrderData: (topic, key, value, ts)
INPUT_WITHOUT_OUT_OF_ORDER = [
    ("left", KEY, None, 1), ("right", KEY, None, 2), ("left", KEY, "A", 3), ("right", KEY, "a", 4),
    ("left", KEY, "B", 5), ("right", KEY, "b", 6), ("left", KEY, None, 7), ("right", KEY, None, 8),
    ("left", KEY, "C", 9), ("right", KEY, "c", 10), ("right", KEY, None, 11), ("left", KEY, None, 12),
    ("right", KEY, None, 13), ("right", KEY, "d", 14), ("left", KEY, "D", 15), ("left", None, "E", 16),
    ("right", None, "e", 17),
]  # fmt: skip
# AbstractJoinIntegrationTest.input: the same with out-of-order records
INPUT = [
    ("left", KEY, None, 1), ("right", KEY, None, 2), ("left", KEY, "A", 3), ("right", KEY, "a", 4),
    ("left", KEY, "B", 5), ("right", KEY, "b", 6), ("left", KEY, None, 7), ("right", KEY, None, 8),
    ("left", KEY, "C", 9), ("right", KEY, "c", 10), ("right", KEY, None, 11), ("left", KEY, None, 12),
    ("right", KEY, None, 13), ("right", KEY, "d", 7), ("left", KEY, "D", 6), ("left", KEY, None, 2),
    ("right", KEY, None, 3), ("right", KEY, "e", 14), ("left", KEY, "E", 15), ("left", KEY, None, 10),
    ("right", KEY, None, 9), ("left", KEY, "F", 4), ("right", KEY, "f", 3),
]  # fmt: skip
# AbstractJoinIntegrationTest.leftInput, each at ++eventTimestamp from the base time
LEFT_INPUT = [("left", KEY, None, 1), ("left", KEY, "A", 2), ("left", KEY, "B", 3), ("left", KEY, None, 4),
              ("left", KEY, "C", 5), ("left", KEY, None, 6), ("left", KEY, "D", 7)]  # fmt: skip


def _long_inputs(role: str, *names: str) -> dict[str, Any]:
    return {name: {"topic": name, "role": role, "key": {"format": "long"}} for name in names}


def _stream_stage(left: str | None, right: str) -> dict[str, Any]:
    stage = {"shape": "stream-stream", "kind": "inner", "right": right, "window": WINDOW, "grace": GRACE,
             "joiner": {"function": DASH}}  # fmt: skip
    return stage if left is None else {**stage, "left": left}


def _expected(per_record: list[list[tuple[Any, int]] | None]) -> tuple[tuple[tuple[Any, int], ...], ...]:
    return tuple(tuple(rows or ()) for rows in per_record)


STREAM_STREAM_STREAM_INNER_INNER = ChainCase(
    name="stream_stream_stream_inner_inner",
    source="StreamStreamJoinIntegrationTest.testMultiInner",
    spec=_spec(
        "multi_inner",
        _long_inputs("stream", "left", "right"),
        [_stream_stage("left", "right"), _stream_stage(None, "right")],
    ),
    records=_records(INPUT_WITHOUT_OUT_OF_ORDER),
    expected=_expected(
        [
            None,
            None,
            None,
            [("A-a-a", 4)],
            [("B-a-a", 5)],
            [("A-b-a", 6), ("B-b-a", 6), ("A-a-b", 6), ("B-a-b", 6), ("A-b-b", 6), ("B-b-b", 6)],
            None,
            None,
            [("C-a-a", 9), ("C-a-b", 9), ("C-b-a", 9), ("C-b-b", 9)],
            [
                ("A-c-a", 10),
                ("A-c-b", 10),
                ("B-c-a", 10),
                ("B-c-b", 10),
                ("C-c-a", 10),
                ("C-c-b", 10),
                ("A-a-c", 10),
                ("B-a-c", 10),
                ("A-b-c", 10),
                ("B-b-c", 10),
                ("C-a-c", 10),
                ("C-b-c", 10),
                ("A-c-c", 10),
                ("B-c-c", 10),
                ("C-c-c", 10),
            ],
            None,
            None,
            None,
            [
                ("A-d-a", 14),
                ("A-d-b", 14),
                ("A-d-c", 14),
                ("B-d-a", 14),
                ("B-d-b", 14),
                ("B-d-c", 14),
                ("C-d-a", 14),
                ("C-d-b", 14),
                ("C-d-c", 14),
                ("A-a-d", 14),
                ("B-a-d", 14),
                ("A-b-d", 14),
                ("B-b-d", 14),
                ("C-a-d", 14),
                ("C-b-d", 14),
                ("A-c-d", 14),
                ("B-c-d", 14),
                ("C-c-d", 14),
                ("A-d-d", 14),
                ("B-d-d", 14),
                ("C-d-d", 14),
            ],
            [
                ("D-a-a", 15),
                ("D-a-b", 15),
                ("D-a-c", 15),
                ("D-a-d", 15),
                ("D-b-a", 15),
                ("D-b-b", 15),
                ("D-b-c", 15),
                ("D-b-d", 15),
                ("D-c-a", 15),
                ("D-c-b", 15),
                ("D-c-c", 15),
                ("D-c-d", 15),
                ("D-d-a", 15),
                ("D-d-b", 15),
                ("D-d-c", 15),
                ("D-d-d", 15),
            ],
            None,
            None,
        ]
    ),
)

STREAM_STREAM_SELF_JOIN_INNER = ChainCase(
    name="stream_stream_self_join_inner",
    source="StreamStreamJoinIntegrationTest.testSelfJoin",
    spec=parse_spec(
        {
            "name": "self_join",
            "inputs": _long_inputs("stream", "left"),
            "output": {"topic": "out"},
            "dead_letter_topic": "dlq",
            "join": {
                "shape": "stream-stream",
                "kind": "inner",
                "left": "left",
                "right": "left",
                "window": WINDOW,
                "grace": GRACE,
                "joiner": {"function": DASH},
            },
        }
    ),
    records=_records(LEFT_INPUT),
    expected=_expected(
        [
            None,
            [("A-A", 2)],
            [("B-A", 3), ("A-B", 3), ("B-B", 3)],
            None,
            [("C-A", 5), ("C-B", 5), ("A-C", 5), ("B-C", 5), ("C-C", 5)],
            None,
            [("D-A", 7), ("D-B", 7), ("D-C", 7), ("A-D", 7), ("B-D", 7), ("C-D", 7), ("D-D", 7)],
        ]
    ),
)

_KIND = {"join": "inner", "leftJoin": "left", "outerJoin": "outer"}
#: TableTableJoinIntegrationTest's multi-joins, cache disabled: test -> (first join, second join, expected per record)
TABLE_MULTI_JOINS: dict[str, tuple[str, str, list[list[tuple[Any, int]] | None]]] = {
    "testInnerInner": (
        "join", "join",
        [
            None,
            None,
            None,
            [("A-a-a", 4), ("A-a-a", 4)],
            [("B-a-a", 5)],
            [("B-b-b", 6), ("B-b-b", 6)],
            [(None, 7)],
            None,
            None,
            [("C-c-c", 10), ("C-c-c", 10)],
            None,
            None,
            None,
            None,
            [("D-d-d", 15)],
            None,
            None,
        ],
    ),
    "testInnerLeft": (
        "join", "leftJoin",
        [
            None,
            None,
            None,
            [("A-a-a", 4), ("A-a-a", 4)],
            [("B-a-a", 5)],
            [("B-b-b", 6), ("B-b-b", 6)],
            [(None, 7)],
            None,
            None,
            [("C-c-c", 10), ("C-c-c", 10)],
            [(None, 11)],
            None,
            None,
            None,
            [("D-d-d", 15)],
            None,
            None,
        ],
    ),
    "testInnerOuter": (
        "join", "outerJoin",
        [
            None,
            None,
            None,
            [("A-a-a", 4), ("A-a-a", 4)],
            [("B-a-a", 5)],
            [("B-b-b", 6), ("B-b-b", 6)],
            [("null-b", 7)],
            [(None, 8)],
            None,
            [("C-c-c", 10), ("C-c-c", 10)],
            [(None, 11), (None, 11)],
            None,
            None,
            [("null-d", 14)],
            [("D-d-d", 15)],
            None,
            None,
        ],
    ),
    "testLeftInner": (
        "leftJoin", "join",
        [
            None,
            None,
            None,
            [("A-a-a", 4), ("A-a-a", 4)],
            [("B-a-a", 5)],
            [("B-b-b", 6), ("B-b-b", 6)],
            [(None, 7)],
            None,
            None,
            [("C-c-c", 10), ("C-c-c", 10)],
            [(None, 11)],
            None,
            None,
            None,
            [("D-d-d", 15)],
            None,
            None,
        ],
    ),
    "testLeftLeft": (
        "leftJoin", "leftJoin",
        [
            None,
            None,
            [("A-null-null", 3)],
            [("A-a-a", 4), ("A-a-a", 4)],
            [("B-a-a", 5)],
            [("B-b-b", 6), ("B-b-b", 6)],
            [(None, 7)],
            None,
            [("C-null-null", 9)],
            [("C-c-c", 10), ("C-c-c", 10)],
            [("C-null-null", 11), ("C-null-null", 11)],
            [(None, 12)],
            None,
            None,
            [("D-d-d", 15)],
            None,
            None,
        ],
    ),
    "testLeftOuter": (
        "leftJoin", "outerJoin",
        [
            None,
            None,
            [("A-null-null", 3)],
            [("A-a-a", 4), ("A-a-a", 4)],
            [("B-a-a", 5)],
            [("B-b-b", 6), ("B-b-b", 6)],
            [("null-b", 7)],
            [(None, 8)],
            [("C-null-null", 9)],
            [("C-c-c", 10), ("C-c-c", 10)],
            [("C-null-null", 11), ("C-null-null", 11)],
            [(None, 12)],
            None,
            [("null-d", 14)],
            [("D-d-d", 15)],
            None,
            None,
        ],
    ),
    "testOuterInner": (
        "outerJoin", "join",
        [
            None,
            None,
            None,
            [("A-a-a", 4), ("A-a-a", 4)],
            [("B-a-a", 5)],
            [("B-b-b", 6), ("B-b-b", 6)],
            [("null-b-b", 7)],
            None,
            None,
            [("C-c-c", 10), ("C-c-c", 10)],
            [(None, 11)],
            None,
            None,
            [("null-d-d", 14), ("null-d-d", 14)],
            [("D-d-d", 15)],
            None,
            None,
        ],
    ),
    "testOuterLeft": (
        "outerJoin", "leftJoin",
        [
            None,
            None,
            [("A-null-null", 3)],
            [("A-a-a", 4), ("A-a-a", 4)],
            [("B-a-a", 5)],
            [("B-b-b", 6), ("B-b-b", 6)],
            [("null-b-b", 7)],
            [(None, 8)],
            [("C-null-null", 9)],
            [("C-c-c", 10), ("C-c-c", 10)],
            [("C-null-null", 11), ("C-null-null", 11)],
            [(None, 12)],
            None,
            [("null-d-d", 14), ("null-d-d", 14)],
            [("D-d-d", 15)],
            None,
            None,
        ],
    ),
    "testOuterOuter": (
        "outerJoin", "outerJoin",
        [
            None,
            None,
            [("A-null-null", 3)],
            [("A-a-a", 4), ("A-a-a", 4)],
            [("B-a-a", 5)],
            [("B-b-b", 6), ("B-b-b", 6)],
            [("null-b-b", 7)],
            [(None, 8), (None, 8)],
            [("C-null-null", 9)],
            [("C-c-c", 10), ("C-c-c", 10)],
            [("C-null-null", 11), ("C-null-null", 11)],
            [(None, 12)],
            None,
            [("null-d-d", 14), ("null-d-d", 14)],
            [("D-d-d", 15)],
            None,
            None,
        ],
    ),
}  # fmt: skip


def _table_multi_join(test: str) -> ChainCase:
    first, second, expected = TABLE_MULTI_JOINS[test]
    name = f"table_table_table_{_KIND[first]}_{_KIND[second]}"
    stage = {"shape": "table-table", "right": "right", "joiner": {"function": DASH}}
    return ChainCase(
        name=name,
        source=f"TableTableJoinIntegrationTest.{test} (cacheEnabled=false)",
        spec=_spec(
            name,
            _long_inputs("table", "left", "right"),
            [{**stage, "kind": _KIND[first], "left": "left"}, {**stage, "kind": _KIND[second]}],
        ),
        records=_records(INPUT_WITHOUT_OUT_OF_ORDER),
        expected=_expected(expected),
    )


def _table_multi_join_out_of_order(test: str) -> ChainCase:
    """The same test with the record cache on: the input with out-of-order records, only the last result checked
    (``expectedFinalMultiJoinResult``, F-f-f at 4)."""
    case = _table_multi_join(test)
    return ChainCase(
        name=f"{case.name}_out_of_order",
        source=case.source.replace("cacheEnabled=false", "cacheEnabled=true: the last result"),
        spec=case.spec,
        records=_records(INPUT),
        last=("F-f-f", 4),
    )


TABLE_TABLE_TABLE = [_table_multi_join(test) for test in TABLE_MULTI_JOINS] + [
    _table_multi_join_out_of_order(test) for test in TABLE_MULTI_JOINS
]


def hundredths(value: int) -> str:
    """A long of hundredths as Java prints the float it stands for (``133`` -> ``1.33``, ``-122`` -> ``-1.22``)."""
    return f"{'-' if value < 0 else ''}{abs(value) // 100}.{abs(value) % 100:02d}"


def fk_table2(key: Any, value: int) -> str:
    """``Integer.toString((int) value.floatValue())``: truncated toward zero."""
    return str(int(value / 100))


def join_table2(key: Any, left: int, right: int) -> str:
    return f"value1={hundredths(left)},value2={right}"


def fk_table3(key: Any, value: str) -> int:
    return 10 if "value2=10" in value else 0


def join_table3(key: Any, left: str, right: str) -> str:
    return f"{left},value3={right}"


_FK = "chained_cases:"
TABLE_FK_FK_INNER_INNER = ChainCase(
    name="table_fk_fk_inner_inner",
    source="KTableKTableForeignKeyInnerJoinMultiIntegrationTest.shouldInnerJoinMultiPartitionQueryable (float-free)",
    spec=_spec(
        "fk_chain",
        {
            "table1": {"topic": "table1", "role": "table", "key": {"format": "long"}, "value": {"format": "long"}},
            "table2": {"topic": "table2", "role": "table", "value": {"format": "long"}},
            "table3": {"topic": "table3", "role": "table", "key": {"format": "long"}},
        },
        [
            {
                "shape": "table-table-fk",
                "kind": "inner",
                "left": "table1",
                "right": "table2",
                "foreign_key": {"function": f"{_FK}fk_table2"},
                "joiner": {"function": f"{_FK}join_table2"},
            },
            {
                "shape": "table-table-fk",
                "kind": "inner",
                "right": "table3",
                "foreign_key": {"function": f"{_FK}fk_table3"},
                "joiner": {"function": f"{_FK}join_table3"},
            },
        ],
    ),
    records=_records(
        [("table1", k, v, 1) for k, v in ((1, 133), (2, 222), (3, -122), (4, -222))]
        + [("table2", str(k), k * 10, 2) for k in range(10)]
        + [("table3", 10, "waffle", 3)]
    ),
    final={1: "value1=1.33,value2=10,value3=waffle"},
)


def click_with_region(key: Any, click: dict[str, Any], region: str | None) -> dict[str, Any]:
    return {"product": click["product"], "amount": click["amount"], "region": region or "UNKNOWN"}


def product_of(key: Any, value: dict[str, Any]) -> str:
    return str(value["product"])


def with_category(key: Any, click: dict[str, Any], category: str | None) -> dict[str, Any]:
    return {**click, "category": category or "OTHER"}


def region_and_category(key: Any, value: dict[str, Any]) -> str:
    return f"{value['region']}/{value['category']}"


def amount(key: Any, value: dict[str, Any]) -> int:
    return int(value["amount"])


def _click(user: str | None, product: str, n: int, ts: int) -> tuple[str, Any, Any, int]:
    return ("clicks", user, {"product": product, "amount": n}, ts)


ENRICHMENT_SPEC = _spec(
    "clicks_enriched",
    {
        "clicks": {"topic": "clicks", "role": "stream", "value": {"format": "json",
                   "schema": {"product": "string", "amount": "long"}}},
        "regions": {"topic": "regions", "role": "table"},
        "products": {"topic": "products", "role": "global_table"},
    },
    [
        {"shape": "stream-table", "kind": "left", "left": "clicks", "right": "regions",
         "joiner": {"function": f"{_FK}click_with_region"}, "output": {"topic": "clicks-with-region"}},
        {"shape": "stream-globaltable", "kind": "left", "right": "products",
         "key_selector": {"function": f"{_FK}product_of"}, "joiner": {"function": f"{_FK}with_category"}},
    ],
    aggregate={"group_by": {"function": f"{_FK}region_and_category"}, "reduce": "sum",
               "value": {"function": f"{_FK}amount"}, "output": {"topic": "per-region-category",
                                                                  "value_format": "long"}},
)  # fmt: skip

CLICKS_REGIONS_PRODUCTS = ChainCase(
    name="clicks_regions_products_sum",
    source="streamjoin's own: clicks left-join user regions (table), left-join products (global table, by the "
    "click's product), summed per region and category",
    spec=ENRICHMENT_SPEC,
    records=_records(
        [
            ("products", "p1", "books", 0),
            ("products", "p2", "games", 0),
            ("regions", "alice", "eu", 1),
            _click("alice", "p1", 3, 2),
            _click("bob", "p2", 5, 3),
            ("regions", "bob", "us", 4),
            _click("bob", "p2", 7, 5),
            _click("alice", "p3", 1, 6),
            ("regions", "alice", "asia", 7),
            _click("alice", "p2", 2, 8),
            ("regions", "alice", None, 9),
            _click("alice", "p1", 4, 10),
            _click(None, "p1", 9, 11),
            ("products", "p1", None, 12),
            _click("bob", "p1", 6, 13),
            ("clicks", "bob", None, 14),
        ]
    ),
)

STAGE_CLOCKS = ChainCase(
    name="stream_table_stream_left_left_stage_clocks",
    source="streamjoin's own: each stage keeps its own stream time (Kafka: each join's time tracker), so a table "
    "record at 100 s does not close stage 2's windows: the click at 10 s waits there for its view",
    spec=_spec(
        "stage_clocks",
        {"clicks": {"topic": "clicks", "role": "stream"}, "regions": {"topic": "regions", "role": "table"},
         "views": {"topic": "views", "role": "stream"}},
        [{"shape": "stream-table", "kind": "left", "left": "clicks", "right": "regions",
          "joiner": {"function": "chained_cases:chain_joiner"}},
         {"shape": "stream-stream", "kind": "left", "right": "views", "window": {"before": "2ms", "after": "2ms"},
          "joiner": {"function": "chained_cases:chain_joiner"}}],
    ),
    records=_records([("regions", "A", "eu", 100), ("clicks", "A", "c", 10), ("views", "A", "v", 11)]),
    expected=((), (), (("c.eu.v", 11),)),
)  # fmt: skip


def letter_at(key: Any, left: str, right: str) -> str:
    """A joiner: the right value's letter at the index the left value's second character gives (``c1``, ``xy``:
    ``y``), so one right update moves each left key its own way at the next foreign-key stage."""
    return right[int(left[1])]


def _fanout_spec(name: str) -> PipelineSpec:
    """Three stages: ``l`` (values ``c<digit>``) by foreign key into ``r1`` (``letter_at``), the result by foreign
    key (its first letter) into ``r2``, then left-joined with ``r3``."""
    return _spec(
        name,
        {input_name: {"topic": input_name, "role": "table"} for input_name in ("l", "r1", "r2", "r3")},
        [{"shape": "table-table-fk", "kind": "inner", "left": "l", "right": "r1",
          "foreign_key": {"function": f"{_FK}points_at"}, "joiner": {"function": f"{_FK}letter_at"}},
         {"shape": "table-table-fk", "kind": "inner", "right": "r2", "foreign_key": {"function": f"{_FK}points_at"},
          "joiner": {"function": f"{_FK}chain_joiner"}},
         {"shape": "table-table", "kind": "left", "right": "r3", "joiner": {"function": f"{_FK}chain_joiner"}}],
    )  # fmt: skip


#: ``__chain_seq``'s guard: one trigger's derived records reach a task from several map tasks in an order that is not
#: their emission order. r1's ``c=py`` reaches A and B (one task) at stage 2, which joins A in its task 0 (foreign key
#: ``p``: no r2 row, A moved from ``x``: a tombstone) and B in its task 3 (``y``: a value). A function joiner's
#: results are its values' partitions, then its tombstones' (``engine.with_joined_value``): stage 3's task gets B
#: first. Only the kernel's ``__chain_seq`` tie-break (the results' task, then their index there) puts A first, as the
#: reference's depth-first order does (with it ignored, every mode, file order too, lists B's result first).
FK_FANOUT_ACROSS_TASKS = ChainCase(
    name="table_fk_fk_table_fanout_across_tasks",
    source="streamjoin's own: a foreign-key fan-out whose next foreign-key stage gives a tombstone and a value in two "
    "tasks; stage 3 gets them in the order stage 1 emitted them",
    spec=_fanout_spec("fk_fanout"),
    records=_records([("r2", "x", "u", 1), ("r2", "y", "v", 2), ("l", "A", "c0", 3), ("l", "B", "c1", 4),
                      ("r1", "c", "xy", 5), ("r1", "c", "py", 6)]),
    expected=((), (), (), (), (("x.u.n", 5), ("y.v.n", 5)), ((None, 6), ("y.v.n", 6))),
)  # fmt: skip

#: the known bug beside it: ``__chain_seq`` is the results' task, then their index there, not the order their
#: trigger's fan-out emitted them in. r1's ``c=yp`` reaches A, then B; stage 2 joins A in its task 3 (``y``) and B in
#: its task 0 (``p``): stage 3 lists B's result first over several tasks (file order, one task, is right)
FK_FANOUT_AGAINST_TASKS = ChainCase(
    name="table_fk_fk_table_fanout_against_tasks",
    source="streamjoin's own: a foreign-key fan-out whose next foreign-key stage joins the first key in a later task",
    spec=_fanout_spec("fk_fanout_against"),
    records=_records([("r2", "p", "u", 1), ("r2", "y", "v", 2), ("l", "A", "c0", 3), ("l", "B", "c1", 4),
                      ("r1", "c", "yp", 5)]),
    expected=((), (), (), (), (("y.v.n", 5), ("p.u.n", 5))),
)  # fmt: skip

#: every case the oracle runs (the self-join twice there: with and without topology optimization)
CASES = [STREAM_STREAM_STREAM_INNER_INNER, STREAM_STREAM_SELF_JOIN_INNER, *TABLE_TABLE_TABLE, TABLE_FK_FK_INNER_INNER,
         CLICKS_REGIONS_PRODUCTS, STAGE_CLOCKS, FK_FANOUT_ACROSS_TASKS,
         FK_FANOUT_AGAINST_TASKS]  # fmt: skip


# --- generated two-stage chains (the differential check of chaining itself) --------------------------------------
#: the stage pairs a chain can have: a stream result goes on with a stream-left shape, a table result with a table one
PAIRS = [
    (first, second)
    for first, first_traits in SHAPES.items()
    for second, second_traits in SHAPES.items()
    if second_traits.left is (Role.TABLE if first_traits.table_result else Role.STREAM)
]
GENERATED_PER_PAIR = 16


def chain_joiner(key: Any, left: Any, right: Any) -> str:
    """Every generated stage's joiner: ``left.right``, a missing side ``n`` (so a value's first letter still
    points somewhere, or nowhere for ``n``, at the next stage)."""
    return f"{'n' if left is None else left}.{'n' if right is None else right}"


def points_at(key: Any, value: Any) -> str | None:
    """The lookup or foreign key of a value: its first letter, none for ``n``."""
    return None if str(value)[:1] == "n" else str(value)[:1]


def last_side(key: Any, value: str) -> str:
    """A generated chain's aggregate group: the first letter of its last right side (``n``: none)."""
    return value.rsplit(".", 1)[-1][:1]


def length(key: Any, value: str) -> int:
    return len(value)


def _selects(shape: Shape) -> bool:
    return shape in (Shape.STREAM_GLOBALTABLE, Shape.TABLE_TABLE_FK)


def _follows(shape: Shape) -> list[Shape]:
    """The shapes a stage may have after a stage of ``shape``."""
    result = Role.TABLE if SHAPES[shape].table_result else Role.STREAM
    return [following for following, traits in SHAPES.items() if traits.left is result]


def _group(shapes: tuple[Shape, ...], versioned: bool) -> str:
    return "+".join(shape.value for shape in shapes) + ("~versioned" if versioned else "")


def generated(shapes: tuple[Shape, ...], seed: int, versioned: bool = False) -> ChainCase:
    """A reproducible chain of ``shapes`` with random kinds and records: several keys, matches and misses,
    tombstones, out-of-order timestamps beyond the windows, null keys and values on streams; ``versioned``: the
    tables keep 6 ms of history and a stream-table stage has a grace of 2 ms (where Kafka fails on a null key a left
    join keeps, ``grace-null-key-npe``). A stream-stream stage of any kind may hold results or drop null keys and
    values, so a case equals Kafka or differs as documented (``kafka_differences.classify``)."""
    rng = random.Random("/".join(shape.value for shape in shapes) + f"/{seed}" + ("/versioned" if versioned else ""))
    rights = ["r", "c", "d"][: len(shapes)]
    stages: list[dict[str, Any]] = []
    for index, shape in enumerate(shapes):
        kinds = sorted(k.value for k in SHAPES[shape].kinds)
        kind = rng.choice(kinds)
        stage: dict[str, Any] = {"shape": shape.value, "kind": kind, "right": rights[index],
                                 "joiner": {"function": f"{_FK}chain_joiner"}}  # fmt: skip
        if index == 0:
            stage["left"] = "l"
        if shape is Shape.STREAM_STREAM:
            stage |= {"window": {"before": "4ms", "after": "2ms"}, "grace": "1ms"}
        if shape is Shape.STREAM_TABLE and versioned:
            stage["grace"] = "2ms"
        if shape is Shape.STREAM_GLOBALTABLE:
            stage["key_selector"] = {"function": f"{_FK}points_at"}
        if shape is Shape.TABLE_TABLE_FK:
            stage["foreign_key"] = {"function": f"{_FK}points_at"}
        stages.append(stage)
    roles = {"l": SHAPES[shapes[0]].left} | {
        name: SHAPES[shape].right for name, shape in zip(rights, shapes, strict=True)
    }
    inputs: dict[str, Any] = {name: {"topic": name, "role": role.value} for name, role in roles.items()}
    if versioned:
        for entry in inputs.values():
            if entry["role"] == Role.TABLE.value:
                entry["versioned"] = {"history_retention": "6ms"}
    aggregate: dict[str, Any] = {}
    if rng.random() < 0.5:  # counted or summed per the last stage's right side (subtract-then-add after a table)
        reduce = rng.choice(["count", "sum"])
        aggregate = {"aggregate": {"group_by": {"function": f"{_FK}last_side"}, "reduce": reduce,
                                   "output": {"topic": "agg", "value_format": "long"}}}  # fmt: skip
        if reduce == "sum":
            aggregate["aggregate"]["value"] = {"function": f"{_FK}length"}
    spec = _spec(f"chain_{seed}", inputs, stages, **aggregate)
    selected = {name: _selects(shape) for name, shape in zip(rights, shapes, strict=True)}
    pool = "llrrc" if len(shapes) == 2 else "lllrrccdd"
    records: list[tuple[str, Any, Any, int]] = []
    clock = rng.randint(0, 3)
    dense = len(shapes) > 2  # more records on fewer keys: three windowed stages still match
    for _ in range(rng.randint(16, 30) if dense else rng.randint(8, 22)):
        draw = rng.random()
        if draw < 0.15 and clock > 0:
            ts = max(0, clock - rng.randint(1, 12))
        elif draw < (0.2 if dense else 0.25):
            clock += rng.randint(8, 14)
            ts = clock
        else:
            clock += rng.randint(0, 1 if dense else 3)
            ts = clock
        name = rng.choice(pool)
        stream = roles[name] is Role.STREAM
        key: Any = rng.choice("xxyyw") if selected.get(name) else rng.choice("AAB" if dense else "AABBC")
        if stream and rng.random() < (0.03 if versioned else 0.1):  # versioned: fewer, a kept one fails Kafka
            key = None  # KIP-962 on a kept side, else a null-key dead letter
        value: Any = rng.choice("xyzn") + rng.choice(["", "1"]) if name == "l" else rng.choice("pqxy") + str(ts)
        if rng.random() < (0.1 if stream else 0.2):
            value = None
        records.append((name, key, value, ts))
    group = _group(shapes, versioned)
    return ChainCase(name=f"{group}-{seed}", spec=spec, records=_records(records), source="generated", group=group)


#: (stage shapes, versioned, cases): every stage pair (plain and versioned) and every three-stage chain
CHAINS: list[tuple[tuple[Shape, ...], bool, int]] = (
    [(pair, False, GENERATED_PER_PAIR) for pair in PAIRS]
    + [(pair, True, 8) for pair in PAIRS if Role.TABLE in (SHAPES[pair[0]].right, SHAPES[pair[1]].right)]
    + [((*pair, third), False, 5) for pair in PAIRS for third in _follows(pair[1])]
)
GROUPS = [_group(shapes, versioned) for shapes, versioned, _ in CHAINS]
GENERATED = [generated(shapes, seed, versioned) for shapes, versioned, count in CHAINS for seed in range(count)] + [
    # two whose Kafka results reach values the reference reaches only replaying them by a documented rule (a held or
    # dropped-record result upstream): the oracle's tables of derived keys (here a lookup key) and aggregate entries
    # must hold those too (``kafka_differences.traced``)
    generated((Shape.STREAM_STREAM, Shape.STREAM_GLOBALTABLE), 100),
    generated((Shape.STREAM_TABLE, Shape.STREAM_STREAM), 115, versioned=True),
]


def _self_join_spec(kind: str, before: int, after: int, grace: int) -> PipelineSpec:
    return parse_spec({
        "name": "self_join", "inputs": {"s": {"topic": "s", "role": "stream"}}, "output": {"topic": "out"},
        "dead_letter_topic": "dlq",
        "join": {"shape": "stream-stream", "kind": kind, "left": "s", "right": "s", "grace": f"{grace}ms",
                 "window": {"before": f"{before}ms", "after": f"{after}ms"},
                 "joiner": {"function": f"{_FK}chain_joiner"}},
    })  # fmt: skip


def generated_self_join(kind: str, seed: int) -> ChainCase:
    """A reproducible stream-stream self-join of ``kind``: random windows, keys and out-of-order records, no null
    keys or values (``dropped-record-time``). Kafka's plain join of the stream with itself must equal it."""
    rng = random.Random(f"self/{kind}/{seed}")
    before, after = rng.choice([(4, 2), (3, 3), (0, 5), (5, 0)])
    spec = _self_join_spec(kind, before, after, rng.choice([0, 1, 3]))
    records: list[tuple[str, Any, Any, int]] = []
    clock = rng.randint(0, 3)
    for _ in range(rng.randint(6, 18)):
        draw = rng.random()
        if draw < 0.2 and clock > 0:
            ts = max(0, clock - rng.randint(1, 14))
        elif draw < 0.3:
            clock += rng.randint(6, 14)
            ts = clock
        else:
            clock += rng.randint(0, 3)
            ts = clock
        records.append(("s", rng.choice("AABBC"), rng.choice("xyz") + str(ts), ts))
    return ChainCase(name=f"self-join-{kind}-{seed}", spec=spec, records=_records(records), source="generated")


SELF_JOINS_GENERATED = [generated_self_join(kind, seed) for kind in ("inner", "left", "outer") for seed in range(20)]

#: a table-table stage after a table-table stage (``chained-table-getter-ts``, docs/SEMANTICS.md): ``c B="x"@1`` finds
#: stage 1's result ``n.y0``, here at the timestamp it was forwarded with (6, the left tombstone's), in Kafka Streams at
#: the one its value getter recomputes (0: ``r``'s; ``l`` has no value for B), so ``n.y0.x`` is at 6 here and 1 there
TABLE_TABLE_GETTER_TS = ChainCase(
    name="table_table_table_outer_left_getter_ts",
    source="KTableKTableJoinMerger.view: an unmaterialized join result is looked up through its join's value getter "
    "(KTableKTableOuterJoinValueGetter.get: the max of its sides' current timestamps)",
    spec=_spec(
        "getter_ts",
        {name: {"topic": name, "role": "table"} for name in ("l", "r", "c")},
        [{"shape": "table-table", "kind": "outer", "left": "l", "right": "r",
          "joiner": {"function": f"{_FK}chain_joiner"}},
         {"shape": "table-table", "kind": "left", "right": "c", "joiner": {"function": f"{_FK}chain_joiner"}}],
    ),
    records=_records([("r", "B", "y0", 0), ("l", "B", None, 6), ("c", "B", "x", 1)]),
)  # fmt: skip

#: KIP-862's one-store self-join (``topology.optimization=all``) against the plain join, on cases built for the two
#: documented differences (docs/SEMANTICS.md): (case, what the optimized Kafka Streams 4.1.1 emits instead)
SELF_JOIN_RETENTION_EDGE = ChainCase(
    name="self_join_retention_edge",
    source="KStreamKStreamSelfJoin: emitSelfRecord = ts > streamTime - retention + 1",
    spec=_self_join_spec("inner", 3, 3, 0),  # retention 6
    records=_records([("s", "B", "p", 5), ("s", "B", "q", 0)]),  # q at 5 - 6 + 1: in the window store, no self row
)
SELF_JOIN_LEFT_REWRITTEN = ChainCase(
    name="self_join_left_rewritten",
    source="InternalStreamsBuilder.rewriteSingleStoreSelfJoin does not check the join's kind",
    spec=_self_join_spec("left", 0, 5, 1),  # retention 6
    records=_records([("s", "B", "a", 6), ("s", "C", "z", 0)]),  # C z at 0: window closed, expired: (z, null)
)
