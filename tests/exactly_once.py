"""Exactly once checked as identity, and rows compared as bags: every input record's (topic, partition,
offset) appears once in an output that claims exactly once (the enriched files carry them as ``src_topic``,
``src_partition``, ``src_offset``), and a duplicated row is a difference, not invisible in a set."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

Coordinates = tuple[str, int, int]
SOURCE_COLUMNS = ("src_topic", "src_partition", "src_offset")


def input_coordinates(bootstrap: str, topic: str, expected: int) -> list[Coordinates]:
    """(topic, partition, offset) of every record on ``topic``, a fresh topic written without transactions
    (so each partition's offsets run from 0 to its end offset with no gap); exactly ``expected`` of them."""
    from streamjoin.kafka.clients import end_offsets

    coordinates = [(topic, p, o) for p, end in end_offsets(bootstrap, topic, timeout=30).items() for o in range(end)]
    assert len(coordinates) == expected, f"{len(coordinates)} records on {topic}, expected {expected}"
    return coordinates


def file_coordinates(spark: Any, path: str) -> list[Coordinates]:
    """The source coordinates of every row of the Parquet output under ``path`` (duplicates kept)."""
    rows = spark.read.parquet(path).select(*SOURCE_COLUMNS).collect()
    return [(str(t), int(p), int(o)) for t, p, o in rows]


def assert_each_once(outputs: Iterable[Coordinates], inputs: Iterable[Coordinates], where: str) -> None:
    """Each input coordinate exactly once in ``outputs``, and nothing else."""
    got, wanted = Counter(outputs), Counter(inputs)
    duplicated = sorted(c for c, n in got.items() if n > 1)
    missing = sorted(set(wanted) - set(got))
    foreign = sorted(set(got) - set(wanted))
    assert not (duplicated or missing or foreign), (
        f"{where}: {len(duplicated)} input records written more than once (first {duplicated[:3]}), "
        f"{len(missing)} never written (first {missing[:3]}), {len(foreign)} rows from no input record "
        f"(first {foreign[:3]}); {sum(got.values())} rows for {len(wanted)} inputs"
    )


def bag(rows: Iterable[Any]) -> Counter[tuple[Any, ...]]:
    """Rows as a multiset of tuples: two copies of a row count twice."""
    return Counter(tuple(row) for row in rows)


def bag_difference(left: Counter[Any], right: Counter[Any], names: tuple[str, str] = ("left", "right")) -> str:
    """What differs between two bags, a few rows each way, for an assertion message."""
    only_left, only_right = sorted((left - right).elements(), key=repr), sorted((right - left).elements(), key=repr)
    return (
        f"{len(only_left)} rows only (or more often) in {names[0]}: {only_left[:5]}; "
        f"{len(only_right)} only (or more often) in {names[1]}: {only_right[:5]}"
    )
