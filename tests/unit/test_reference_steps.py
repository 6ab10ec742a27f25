"""Targeted tests of the per-shape step functions (streamjoin.core.semantics)."""

from __future__ import annotations

from typing import Any

from streamjoin.core.records import Record
from streamjoin.core.semantics import aggregate, foreign_key, stream_stream, stream_table, table_table
from streamjoin.core.semantics.common import Result, Side, Step, hashable, key_order
from streamjoin.core.spec import Kind


def rec(key: Any, value: Any, ts: int, topic: str = "t") -> Record:
    return Record(topic, key, value, ts)


# --- stream-stream ----------------------------------------------------------------------------------
class StreamStreamDriver:
    def __init__(self, kind: Kind, before: int = 10, after: int = 10, grace: int = 0) -> None:
        self.state = stream_stream.StreamStreamState(before, after, grace, kind)
        self.stream_time: int | None = None
        self.late = 0

    def __call__(self, side: Side, key: Any, value: Any, ts: int) -> list[Result]:
        self.stream_time = ts if self.stream_time is None else max(self.stream_time, ts)
        step = stream_stream.step(self.state, rec(key, value, ts), self.stream_time, side)
        self.late += step.late
        return step.results


L, R = Side.LEFT, Side.RIGHT


def test_window_bounds_are_inclusive_and_asymmetric() -> None:
    join = StreamStreamDriver(Kind.INNER, before=2, after=5, grace=100)
    join(L, "k", "l", 10)
    assert join(R, "k", "r8", 8) == [Result("k", "l", "r8", 10)]  # 10 - 2 = 8: inclusive
    assert join(R, "k", "r7", 7) == []  # before the window
    assert join(R, "k", "r15", 15) == [Result("k", "l", "r15", 15)]  # 10 + 5 = 15: inclusive
    assert join(R, "k", "r16", 16) == []


def test_a_right_record_joins_stored_left_records_in_ts_then_arrival_order() -> None:
    join = StreamStreamDriver(Kind.INNER, grace=100)
    join(L, "k", "b", 5)
    join(L, "k", "a", 3)
    join(L, "k", "c", 5)
    assert [r.left for r in join(R, "k", "r", 6)] == ["a", "b", "c"]


def test_out_of_order_record_is_not_dropped_and_joins_what_the_other_side_still_stores() -> None:
    join = StreamStreamDriver(Kind.OUTER, before=5, after=5, grace=2)
    join(R, "k", "r", 16)
    join(L, "x", "x", 20)
    # window end 12 + 5 = 17 < 20, but click r (16) is in its window and in the clicks store: joined
    assert join(L, "k", "old", 12) == [Result("k", "old", "r", 16)] and join.late == 0
    # no match and window end 10 + 5 < 20: (v, null) at once, not held
    assert join(L, "j", "older", 10) == [Result("j", "older", None, 10)]
    assert join(R, "j", "rj", 14) == [Result("j", "older", "rj", 14)]  # it can still be joined later
    assert join.late == 0


def test_a_record_stays_joinable_until_its_own_side_time_passes_the_retention() -> None:
    join = StreamStreamDriver(Kind.INNER, before=5, after=5, grace=2)  # retention 12
    join(L, "k", "l", 10)
    join(R, "x", "far", 100)  # stream time 100; the left side's time is still 10
    assert join(R, "k", "r", 12) == [Result("k", "l", "r", 12)]
    join(L, "y", "y", 22)  # the left side's time 22: l (10 <= 22 - 12) leaves the left store
    assert join(R, "k", "r2", 13) == []


def test_a_kept_side_null_key_record_is_joined_with_null_at_once() -> None:
    state = stream_stream.StreamStreamState(5, 5, 0, Kind.OUTER)
    assert stream_stream.step_null_key(state, rec(None, "v", 3), R).results == [Result(None, None, "v", 3)]
    assert state.stored() == 0


def test_left_pending_is_emitted_only_after_close_and_only_by_a_record_at_stream_time() -> None:
    join = StreamStreamDriver(Kind.LEFT, grace=0)
    join(L, "a", "view", 0)  # closes at 10
    assert join(R, "z", "c", 10) == []  # 10 is not > 10
    assert join(R, "z", "c", 9) == []  # older record: no flush
    assert join(R, "z", "c", 11) == [Result("a", "view", None, 0)]
    assert join(R, "z", "c", 12) == []  # emitted once


def test_a_pending_record_matched_before_close_is_never_emitted_alone() -> None:
    join = StreamStreamDriver(Kind.OUTER, grace=5)
    join(L, "a", "view", 0)
    join(R, "x", "other", 12)  # stream time 12; view closes at 15: still pending
    assert join(R, "a", "click", 8) == [Result("a", "view", "click", 8)]
    flushed = join(R, "x", "tick", 100)
    assert Result("a", "view", None, 0) not in flushed
    assert Result("a", None, "click", 8) not in flushed
    assert Result("x", None, "other", 12) in flushed


def test_flush_order_is_ts_then_right_before_left_then_key() -> None:
    join = StreamStreamDriver(Kind.OUTER, grace=0)
    join(R, "b", "rb", 5)
    join(L, "c", "lc", 5)
    join(L, "a", "la", 5)
    join(R, "a", "ra2", 4)  # joins la (5): no pending for a
    join(L, "d", "ld", 1)
    flushed = join(L, "z", "tick", 100)
    assert [(r.key, r.left, r.right, r.ts) for r in flushed] == [
        ("d", "ld", None, 1),
        ("b", None, "rb", 5),  # Kafka's TimestampedKeyAndJoinSide: right (0) before left (1)
        ("c", "lc", None, 5),
    ]


def test_flush_orders_long_keys_as_serialized_negative_last() -> None:
    """Kafka's outer-join store orders keys by their bytes (found by the Kafka Streams oracle)."""
    join = StreamStreamDriver(Kind.LEFT, grace=0)
    for key in (-(2**40), 2**40, -1, 0, 7):
        join(L, key, f"l{key}", 5)
    flushed = join(L, 99, "tick", 100)
    assert [r.key for r in flushed] == [0, 7, 2**40, -(2**40), -1]


def test_right_window_close_uses_before() -> None:
    state = stream_stream.StreamStreamState(before=3, after=10, grace=1, kind=Kind.OUTER)
    assert state.close(Side.LEFT, 100) == 111
    assert state.close(Side.RIGHT, 100) == 104


def test_expired_records_are_forgotten_but_pending_ones_are_kept_until_emitted() -> None:
    join = StreamStreamDriver(Kind.INNER, before=1, after=1, grace=0)
    join(L, "a", "x", 0)
    join(L, "b", "y", 10)
    assert join.state.stored() == 1  # 0 < 10 - 2: expired


# --- stream-table -----------------------------------------------------------------------------------
def test_plain_table_lookup_sees_latest_value_in_processing_order() -> None:
    state = stream_table.StreamTableState(Kind.LEFT, stream_table.TableState())
    stream_table.step_table(state, rec("u", "new", 10), 10)
    stream_table.step_table(state, rec("u", "old", 1), 10)  # processed later: wins in a plain table
    assert stream_table.step_stream(state, rec("u", "v", 5), 10).results == [Result("u", "v", "old", 5)]
    stream_table.step_table(state, rec("u", None, 11), 11)
    stream_table.step_table(state, rec("nobody", None, 11), 11)  # tombstone of an absent key: no-op
    assert stream_table.step_stream(state, rec("u", "v", 12), 12).results == [Result("u", "v", None, 12)]


def test_inner_stream_table_without_a_value_emits_nothing() -> None:
    state = stream_table.StreamTableState(Kind.INNER, stream_table.TableState())
    assert stream_table.step_stream(state, rec("u", "v", 5), 5).results == []


def test_versioned_lookup_is_as_of_with_ties_going_to_the_later_processed() -> None:
    table = stream_table.TableState(history_retention=1000)
    table.apply("u", "a", 10)
    table.apply("u", "b", 20)
    table.apply("u", "b2", 20)
    table.apply("u", None, 30)
    assert table.lookup("u", 9) == (False, None, 0)
    assert table.lookup("u", 10) == (True, "a", 10)
    assert table.lookup("u", 25) == (True, "b2", 20)
    assert table.lookup("u", 30) == (False, None, 0)


def test_versioned_lookup_outside_history_sees_only_an_old_enough_latest_version() -> None:
    table = stream_table.TableState(history_retention=10)
    table.apply("u", "a", 0)
    table.apply("u", "b", 50)
    table.apply("other", "x", 100)  # table time 100: history starts at 90
    assert table.lookup("u", 40) == (False, None, 0)  # would be "a" within history
    assert table.lookup("u", 60) == (True, "b", 50)  # the latest version never expires
    assert table.lookup("u", 95) == (True, "b", 50)
    assert [v.value for v in table.versions[hashable("u")]] == ["a", "b"]  # only "u"'s own updates prune
    table.apply("u", "c", 95)
    assert [v.value for v in table.versions[hashable("u")]] == ["b", "c"]  # "a" ended at 50 <= 85


def test_versioned_table_refuses_an_update_older_than_its_time_minus_the_history() -> None:
    """As Kafka's RocksDBVersionedStore.put/delete: refused, not stored, counted late; the edge is kept."""
    state = stream_table.StreamTableState(Kind.LEFT, stream_table.TableState(history_retention=10))
    assert not stream_table.step_table(state, rec("u", "a", 100), 100).late
    assert stream_table.step_table(state, rec("new", "x", 89), 100).late  # 89 < 100 - 10
    assert stream_table.step_table(state, rec("u", None, 89), 100).late  # a tombstone too
    assert not stream_table.step_table(state, rec("edge", "e", 90), 100).late  # 90 = 100 - 10: stored
    assert state.table.table_time == 100
    assert stream_table.step_stream(state, rec("new", "s", 95), 100).results == [Result("new", "s", None, 95)]
    assert stream_table.step_stream(state, rec("u", "s", 101), 101).results == [Result("u", "s", "a", 101)]
    assert stream_table.step_stream(state, rec("edge", "s", 95), 101).results == [Result("edge", "s", "e", 95)]


def test_grace_buffers_and_releases_in_ts_order() -> None:
    state = stream_table.StreamTableState(Kind.LEFT, stream_table.TableState(history_retention=100), grace=5)
    stream_table.step_table(state, rec("u", "r0", 0), 0)
    assert stream_table.step_stream(state, rec("u", "s10", 10), 10).results == []
    assert stream_table.step_stream(state, rec("u", "s8", 8), 10).results == []  # 8 >= 10 - 5: buffered
    stream_table.step_table(state, rec("u", "r9", 9), 10)  # arrives late, valid from 9
    released = stream_table.step_stream(state, rec("x", "tick", 15), 15).results  # due: ts <= 10
    assert released == [Result("u", "s8", "r0", 8), Result("u", "s10", "r9", 10)]
    too_late = stream_table.step_stream(state, rec("u", "s3", 3), 15).results  # 3 < 15 - 5: joined at once
    assert too_late == [Result("u", "s3", "r0", 3)]
    assert [entry[2].value for entry in state.buffer] == ["tick"]


def test_grace_releases_records_of_one_ts_in_serialized_key_order_then_arrival() -> None:
    """As Kafka's grace buffer (ts, key bytes, sequence number): found by the Kafka Streams oracle."""
    state = stream_table.StreamTableState(Kind.LEFT, stream_table.TableState(history_retention=100), grace=5)
    for key, value in ((-1, "neg"), (2, "two.1"), (1, "one"), (2, "two.2")):
        assert stream_table.step_stream(state, rec(key, value, 10), 10).results == []
    released = stream_table.step_stream(state, rec(0, "tick", 15), 15).results
    # long keys as 8 bytes big-endian: non-negative ascending, then negative; one key's records by arrival
    assert [r.left for r in released] == ["one", "two.1", "two.2", "neg"]


def test_global_lookup_with_a_null_key_finds_nothing() -> None:
    table = stream_table.TableState()
    table.apply("u", "r", 0)
    assert stream_table.step_global_stream(Kind.LEFT, table, rec("k", "v", 1), None).results == [
        Result("k", "v", None, 1)
    ]
    assert stream_table.step_global_stream(Kind.INNER, table, rec("k", "v", 1), None).results == []
    assert stream_table.step_global_stream(Kind.INNER, table, rec(None, "v", 1), "u").results == [
        Result(None, "v", "r", 1)
    ]


# --- table-table ------------------------------------------------------------------------------------
def tt(kind: Kind, *updates: tuple[Side, Any, Any, int], history: int | None = None) -> list[list[tuple[Any, ...]]]:
    """Each update's results (``history``: both sides versioned, with that history retention)."""
    state = table_table.TableTableState(kind, table_table.SideTable(history), table_table.SideTable(history))
    out = []
    for side, key, value, ts in updates:
        results = table_table.step(state, rec(key, value, ts), ts, side).results
        out.append([("tomb", r.ts) if r.tombstone else (r.left, r.right, r.ts) for r in results])
    return out


def test_table_table_inner_rules() -> None:
    assert tt(Kind.INNER, (L, "k", "l", 1), (R, "k", "r", 5), (L, "k", "l2", 3), (R, "k", None, 4)) == [
        [],
        [("l", "r", 5)],
        [("l2", "r", 5)],  # ts = max(3, the right value's 5)
        [("tomb", 4)],  # the left value (ts 3) is there: max(4, 3)
    ]
    assert tt(Kind.INNER, (R, "k", "r", 5), (L, "k", None, 1)) == [[], [("tomb", 5)]]  # redundant tombstone
    assert tt(Kind.INNER, (L, "k", None, 1)) == [[]]


def test_table_table_left_rules() -> None:
    assert tt(Kind.LEFT, (L, "k", None, 1), (R, "k", "r", 2), (L, "k", "l", 3), (R, "k", None, 4)) == [
        [],  # delete of an absent key, right absent
        [],  # right update, left absent
        [("l", "r", 3)],
        [("l", None, 4)],  # right delete: the left row stays
    ]
    assert tt(Kind.LEFT, (L, "k", "l", 1), (L, "k", None, 2), (L, "k", None, 3)) == [
        [("l", None, 1)],
        [("tomb", 2)],
        [],
    ]
    assert tt(Kind.LEFT, (R, "k", "r", 1), (L, "k", None, 2)) == [[], [("tomb", 2)]]


def test_table_table_outer_rules() -> None:
    assert tt(Kind.OUTER, (R, "k", "r", 1), (L, "k", "l", 2), (R, "k", None, 3), (L, "k", None, 4)) == [
        [(None, "r", 1)],
        [("l", "r", 2)],
        [("l", None, 3)],
        [("tomb", 4)],
    ]
    assert tt(Kind.OUTER, (L, "k", None, 1), (R, "k", None, 2)) == [[], []]


def test_versioned_side_ignores_updates_older_than_the_latest_version() -> None:
    assert tt(
        Kind.OUTER, (L, "k", "l5", 5), (L, "k", "l3", 3), (L, "k", None, 6), (L, "k", "l4", 4), history=100
    ) == [
        [("l5", None, 5)],
        [],
        [("tomb", 6)],
        [],
    ]
    assert tt(Kind.OUTER, (L, "k", "l5", 5), (L, "k", "l3", 3)) == [[("l5", None, 5)], [("l3", None, 3)]]


def test_versioned_side_refuses_updates_older_than_its_store_time_minus_the_history() -> None:
    """Each side's store has its own observed time (the max ts it took); a refused update of a new key emits
    nothing and does not move that time; one at the edge is taken."""
    assert tt(
        Kind.OUTER,
        (L, "a", "l", 20),
        (L, "b", "lb", 9),  # 9 < 20 - 10: refused
        (R, "b", "rb", 9),  # the right store's time is its own: taken
        (L, "b", None, 9),  # a delete: refused too
        (L, "c", "lc", 10),  # 10 = 20 - 10: taken
        history=10,
    ) == [[("l", None, 20)], [], [(None, "rb", 9)], [], [("lc", None, 10)]]
    refused = table_table.TableTableState(Kind.OUTER, table_table.SideTable(10), table_table.SideTable(10))
    assert table_table.step(refused, rec("k", "v", 20), 20, L).late is False
    assert table_table.step(refused, rec("k2", "v", 1), 20, L).late is True


# --- foreign key ------------------------------------------------------------------------------------
def fk_run(kind: Kind, *updates: tuple[Side, Any, Any, int]) -> list[list[tuple[Any, ...]]]:
    state = foreign_key.ForeignKeyState(kind)
    out = []
    for side, key, value, ts in updates:
        if side is Side.LEFT:
            fk = None if value is None else value[0]
            step = foreign_key.step_left(state, rec(key, value, ts), ts, fk)
        else:
            step = foreign_key.step_right(state, rec(key, value, ts), ts)
        out.append([(r.key, "tomb") if r.tombstone else (r.key, r.left, r.right) for r in step.results])
    return out


def test_fk_right_update_rejoins_pointing_left_rows_in_key_order() -> None:
    got = fk_run(Kind.INNER, (L, 10, ("p",), 1), (L, 2, ("p",), 2), (R, "p", "P", 3))
    assert got == [[], [], [(2, ("p",), "P"), (10, ("p",), "P")]]


def test_fk_inner_follows_kafkas_subscription_instructions() -> None:
    got = fk_run(
        Kind.INNER,
        (L, "a", ("p",), 1),  # a new key, no product: nothing
        (R, "p", "P", 2),
        (L, "a", (None,), 3),  # points nowhere now: retract (DELETE_KEY_AND_PROPAGATE to the old fk)
        (L, "a", ("q",), 4),  # the old value pointed nowhere: an insert, no product: nothing
        (L, "a", ("q", "again"), 5),  # same fk, still no product: the old value did not join either
        (L, "a", ("r",), 6),  # fk changed, no product r: a (redundant) tombstone, a never joined
        (L, "a", None, 7),  # delete of a value with an fk: a (redundant) tombstone
        (L, "a", None, 8),  # delete of an absent key: nothing
        (L, "b", ("zz",), 9),  # a new key, no product zz: nothing
        (R, "zz", None, 10),  # delete of an absent fk: b still subscribes to zz -> tombstone
    )
    assert got == [
        [],
        [("a", ("p",), "P")],
        [("a", "tomb")],
        [],
        [],
        [("a", "tomb")],
        [("a", "tomb")],
        [],
        [],
        [("b", "tomb")],
    ]


def test_fk_left_triggered_results_take_the_later_of_both_timestamps() -> None:
    state = foreign_key.ForeignKeyState(Kind.INNER)
    times = []
    for side, key, value, ts in [(R, "p", "P", 10), (L, "a", ("p",), 5), (L, "a", None, 7), (L, "b", ("q",), 3)]:
        if side is Side.LEFT:
            step = foreign_key.step_left(state, rec(key, value, ts), ts, None if value is None else value[0])
        else:
            step = foreign_key.step_right(state, rec(key, value, ts), ts)
        times.append([r.ts for r in step.results])
    right = foreign_key.step_right(state, rec("q", "Q", 4), 4)
    assert times == [[], [10], [10], []]  # a joins P of 10 s at 10 s; its delete looks up p too
    assert [(r.key, r.ts) for r in right.results] == [("b", 4)]  # a right-triggered result: the right ts


def test_fk_left_delete_of_the_right_row_keeps_left_rows_with_null() -> None:
    got = fk_run(
        Kind.LEFT, (R, "p", "P", 1), (L, "a", ("p",), 2), (R, "p", None, 3), (R, "p", None, 4), (L, "a", None, 5)
    )
    # the second delete (of an fk the right table no longer holds) still reaches a, as in Kafka Streams
    assert got == [[], [("a", ("p",), "P")], [("a", ("p",), None)], [("a", ("p",), None)], [("a", "tomb")]]


def test_fk_change_moves_the_row() -> None:
    got = fk_run(Kind.LEFT, (L, "a", ("p",), 1), (L, "a", ("q",), 2), (R, "p", "P", 3), (R, "q", "Q", 4))
    assert got == [[("a", ("p",), None)], [("a", ("q",), None)], [], [("a", ("q",), "Q")]]


def test_fk_versioned_sides_refuse_updates_older_than_their_store_time_per_partition() -> None:
    """Each versioned side's store is per task (the record's partition): its observed time is its own."""
    state = foreign_key.ForeignKeyState(Kind.LEFT)
    state.left_versions.history_retention = state.right_versions.history_retention = 10

    def left(key: str, value: tuple[str] | None, ts: int, partition: int = 0) -> Step:
        fk = None if value is None else value[0]
        return foreign_key.step_left(state, Record("l", key, value, ts, partition), ts, fk)

    def right(key: str, value: str, ts: int) -> Step:
        return foreign_key.step_right(state, Record("r", key, value, ts), ts)

    assert right("p", "P", 20).results == []
    assert right("q", "Q", 5).late  # 5 < 20 - 10: refused, q stays absent
    assert left("a", ("q",), 5).results == [Result("a", ("q",), None, 5)]  # the left store's own time
    assert left("b", ("p",), 30).results == [Result("b", ("p",), "P", 30)]
    assert left("a", None, 19).late and left("a", None, 19).results == []  # a's delete refused
    assert left("c", ("p",), 19, partition=1).results == [Result("c", ("p",), "P", 20)]  # another task's store


# --- aggregate --------------------------------------------------------------------------------------
def test_stream_aggregate_adds_and_stamps_the_groups_max_ts() -> None:
    state = aggregate.StreamAggregateState()
    assert aggregate.step_stream(state, "g", 3, 10) == [aggregate.Update("g", 3, 10)]
    assert aggregate.step_stream(state, "g", 4, 5) == [aggregate.Update("g", 7, 10)]
    assert aggregate.step_stream(state, "h", 1, 1) == [aggregate.Update("h", 1, 1)]


def test_table_aggregate_subtracts_then_adds_and_emits_once_within_a_group() -> None:
    state = aggregate.TableAggregateState()
    assert aggregate.step_table(state, "k", "g", 3, 1) == [aggregate.Update("g", 3, 1)]
    assert aggregate.step_table(state, "k", "h", 5, 2) == [aggregate.Update("g", 0, 2), aggregate.Update("h", 5, 2)]
    assert aggregate.step_table(state, "k", "h", 6, 3) == [aggregate.Update("h", 6, 3)]  # KIP-904
    assert aggregate.step_table(state, "j", "h", 1, 0) == [aggregate.Update("h", 7, 3)]  # the group's max ts
    assert aggregate.step_table(state, "k", None, 0, 4) == [aggregate.Update("h", 1, 4)]
    assert aggregate.step_table(state, "k", None, 0, 5) == []


# --- common -----------------------------------------------------------------------------------------
def test_keys_of_any_json_type_are_hashable_and_ordered() -> None:
    assert hashable({"b": 1, "a": [1]}) == hashable({"a": [1], "b": 1})
    keys = ["b", 2, None, {"x": 1}, 1.5, "a"]
    assert sorted(keys, key=key_order) == [None, 1.5, 2, "a", "b", {"x": 1}]
