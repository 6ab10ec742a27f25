"""Kafka Streams itself as the oracle of the reference engine: cases replayed through ``TopologyTestDriver``.

``kafka_streams_replay(cases)`` runs every case in one JVM (``java/ks-oracle``, built by ``make setup``
through ``scripts/build-ks-oracle.sh``; built here too when missing) and returns, per case, what Kafka
Streams 4.1.1 emits, shaped as ``ReferenceEngine(spec, functions).replay(records)`` returns it: join results
on ``spec.output.topic`` (or ``"<join>"``), aggregate updates on the aggregate topic, per input record the
join results first, then the aggregate updates (the tests compare each topic's order, as Kafka consumers see
it). A case is ``(spec, records, functions)``; the records are processed in the given order, one task
(partition 0 only).

Java cannot run the spec's projections, so they run here, with the callables ``ReferenceEngine`` resolves:

* per input record, the derived keys: the foreign key (``table-table-fk`` left records) and the lookup key
  (``stream-globaltable`` stream records) travel with the record;
* the Kafka join emits the raw pair ``(left, right)``; the joiner and ``codec.output_value`` are applied here;
* for an aggregate, every (key, left, right) a join result of the case can carry is mapped here to its
  (group, amount) with the joiner, ``group_by`` and ``value``; Kafka's ``groupBy``/``reduce`` (or ``count``)
  use that table, with the record cache off (one update per change).

**Dead letters are streamjoin's own.** Kafka Streams is given every record, including those the reference
dead-letters, and drops them by its own rules (counting most in its ``dropped-records`` metric, not all: a
null group is filtered before the aggregate's repartition topic without a count), so the outputs returned
here never hold dead letters: compare them with the reference's outputs without its dead-letter topic
(:func:`without_dead_letters`). Where Kafka's drop still changes what it does next (a dropped stream-stream
record advances the join's clocks), ``tests/oracle/kafka_differences.py`` recognises it by its rule.
:func:`kafka_streams_runs` also returns the metric's count per case.

A run of ~2,000 small cases costs ~17 s of CPU in the JVM (one ``TopologyTestDriver`` per case; RocksDB
only for versioned tables and grace buffers, on ``/dev/shm`` when there is one), ~10 s on two idle cores.
"""

from __future__ import annotations

import functools
import json
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jvm_cases import run_cases
from streamjoin.core.codec import output_value
from streamjoin.core.plans import PROJECT_HOME
from streamjoin.core.records import Emitted, Record
from streamjoin.core.reference import ReferenceEngine
from streamjoin.core.semantics.common import Result, hashable
from streamjoin.core.spec import Format, Kind, PipelineSpec, Shape

Case = tuple[PipelineSpec, Sequence[Record], Mapping[str, Callable[..., Any]] | None]
#: per stage, its results in order with their joined values (``ReferenceEngine.traced``)
Traced = list[list[tuple[Result, Any]]]

BUILD_SCRIPT = PROJECT_HOME / "scripts" / "build-ks-oracle.sh"
CLASSES = PROJECT_HOME / ".local" / "ks-oracle" / "classes"
JARS = PROJECT_HOME / ".local" / "jars" / "ks-oracle"
MAIN_CLASS = "dev.streamjoin.oracle.KafkaStreamsOracle"
#: the whole run (one JVM for every case): ~2,000 small cases take seconds; this bounds a wedged JVM
RUN_TIMEOUT_S = 600


class OracleError(RuntimeError):
    """The Kafka Streams runner failed (build, JVM, or one case): says which case and why."""


@dataclass(frozen=True)
class OracleRun:
    """One case's outcome: what Kafka Streams emitted (as :class:`Emitted`) and its dropped-records count,
    or the exception Kafka Streams raised while processing the case (``error``; ``emitted`` then empty)."""

    emitted: list[Emitted]
    dropped: int
    error: str | None = None


def kafka_streams_replay(cases: Sequence[Case]) -> list[list[Emitted]]:
    """Per case, what Kafka Streams emits for ``(spec, records, functions)``; see the module docstring.

    :raises OracleError: Kafka Streams raised on a case (the first such case, its index and the exception).
    """
    runs = kafka_streams_runs(cases)
    for index, ((spec, _, _), run) in enumerate(zip(cases, runs, strict=True)):
        if run.error is not None:
            raise OracleError(f"Kafka Streams failed on case {index} ({spec.name}):\n{run.error}")
    return [run.emitted for run in runs]


def without_dead_letters(spec: PipelineSpec, emitted: Sequence[Emitted]) -> list[Emitted]:
    """The reference engine's outputs that Kafka Streams also has: all but the dead-letter topic."""
    return [row for row in emitted if row.topic != spec.dead_letter_topic]


def kafka_streams_runs(
    cases: Sequence[Case], *, optimize: bool = True, traced: Sequence[Sequence[Traced]] | None = None
) -> list[OracleRun]:
    """As :func:`kafka_streams_replay`, with each case's ``dropped-records-total``, and an exception Kafka
    Streams raised on a case returned as that case's ``error`` instead of raised.

    :param optimize: a stream-stream self-join is built with ``topology.optimization=all`` (KIP-862's one-store
        self-join, as Kafka Streams 3.4+ runs it); False: the plain join of a stream with itself.
    :param traced: per case, more traces of its chain's stages (the reference replaying it by a documented
        difference's rule, ``kafka_differences.traced``) whose values the runner's tables must hold too.
    """
    more = traced if traced is not None else [()] * len(cases)
    adapters: list[_Adapter | _ChainAdapter] = [
        _ChainAdapter(spec, records, functions, optimize, extra)
        if spec.chained or spec.join.left == spec.join.right
        else _Adapter(spec, records, functions)
        for (spec, records, functions), extra in zip(cases, more, strict=True)
    ]
    results = _run_jvm([adapter.encode(index) for index, adapter in enumerate(adapters)])
    runs = []
    for adapter, result in zip(adapters, results, strict=True):
        if "error" in result:
            runs.append(OracleRun([], 0, str(result["error"])))
        else:
            runs.append(OracleRun(adapter.decode(result["rows"]), int(result["dropped"])))
    return runs


# --- the JVM ---------------------------------------------------------------------------------------------
@functools.cache
def _built() -> None:
    """Builds the runner when it is missing or older than its sources (a no-op after ``make setup``)."""
    done = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise OracleError(f"{BUILD_SCRIPT} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")


def _run_jvm(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    _built()
    return run_cases("the Kafka Streams runner", [str(CLASSES), f"{JARS}/*"], MAIN_CLASS, cases,
                     timeout_s=RUN_TIMEOUT_S, error=OracleError, jvm_options=("-Xss4m",))  # fmt: skip


# --- one case --------------------------------------------------------------------------------------------
def _json_text(value: Any) -> str | None:
    """A value as the runner carries it (opaque JSON text; equal values, equal text, as codec.encode writes)."""
    return None if value is None else json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class _Adapter:
    """Encodes one case for the runner and decodes its rows back into the reference engine's outputs."""

    def __init__(self, spec: PipelineSpec, records: Sequence[Record], functions: Mapping[str, Any] | None) -> None:
        self.spec = spec
        self.engine = ReferenceEngine(spec, functions)  # the spec's projections, resolved as the reference does
        self.records = list(records)
        self.shape, self.kind = spec.join.shape, spec.join.kind
        self.left_format, self.right_format = spec.left.key.format, spec.right.key.format

    # keys: long -> a JSON integer; string -> text; json -> its JSON text (a string key to the runner)
    @staticmethod
    def _key_out(key: Any, fmt: Format) -> Any:
        if key is None:
            return None
        if fmt is Format.LONG:
            return int(key)
        return _json_text(key) if fmt is Format.JSON else str(key)

    @staticmethod
    def _key_in(key: Any, fmt: Format) -> Any:
        return json.loads(key) if fmt is Format.JSON and key is not None else key

    def _derived(self, record: Record) -> Any:
        """The key the runner cannot compute: the FK of a left row, the lookup key of a global-table join."""
        if record.value is None or record.topic != self.spec.left.topic:
            return None
        if self.shape is Shape.TABLE_TABLE_FK:
            assert self.engine.foreign_key is not None
            return self.engine.foreign_key(record.key, record.value)
        if self.shape is Shape.STREAM_GLOBALTABLE:
            selector = self.engine.key_selector
            return record.key if selector is None else selector(record.key, record.value)
        return None

    def encode(self, index: int) -> dict[str, Any]:
        spec, join = self.spec, self.spec.join
        rows = []
        derived: list[Any] = []
        for position, record in enumerate(self.records):
            if record.partition != 0:
                raise ValueError(
                    f"case {index} ({spec.name}), record {position}: partition {record.partition}: the Kafka Streams "
                    "oracle replays one task (partition 0 only)"
                )
            if record.topic == spec.left.topic:
                side, fmt = "L", self.left_format
            elif record.topic == spec.right.topic:
                side, fmt = "R", self.right_format
            else:
                raise ValueError(f"case {index} ({spec.name}), record {position}: topic {record.topic!r} is no input")
            key_of = self._derived(record)
            derived.append(key_of)
            rows.append(
                [
                    side,
                    self._key_out(record.key, fmt),
                    _json_text(record.value),
                    record.ts,
                    self._key_out(key_of, self.right_format),
                ]
            )
        window = join.window
        return {
            "shape": join.shape.value,
            "kind": join.kind.value,
            "left_key": "long" if self.left_format is Format.LONG else "string",
            "right_key": "long" if self.right_format is Format.LONG else "string",
            "before": window.before if window else 0,
            "after": window.after if window else 0,
            "grace": join.grace,
            "left_history": spec.left.versioned.history_retention if spec.left.versioned else None,
            "right_history": spec.right.versioned.history_retention if spec.right.versioned else None,
            "aggregate": self._aggregate_table(derived) if spec.aggregate is not None else None,
            "records": rows,
        }

    def _value(self, key: Any, left: Any, right: Any) -> Any:
        value = self.engine.joiner(key, left, right)
        return output_value(value, self.spec.output.value_format)

    def _combinations(self, derived: list[Any]) -> list[tuple[Any, Any, Any]]:
        """Every (key, left, right) a join result of this case can carry (over-approximated per key)."""
        left_topic = self.spec.left.topic
        lefts: dict[Any, tuple[Any, list[Any]]] = {}
        rights: dict[Any, list[Any]] = {}
        for record in self.records:
            if record.value is None:
                continue
            bucket = lefts.setdefault(hashable(record.key), (record.key, [])) if record.topic == left_topic else None
            if bucket is not None:
                bucket[1].append(record.value)
            else:
                rights.setdefault(hashable(record.key), []).append(record.value)
        keeps_right_only = self.kind is Kind.OUTER  # stream-stream and table-table outer: (null, r)
        keeps_left_only = self.kind is not Kind.INNER
        combos: list[tuple[Any, Any, Any]] = []
        if self.shape in (Shape.STREAM_GLOBALTABLE, Shape.TABLE_TABLE_FK):
            for record, key_of in zip(self.records, derived, strict=True):
                if record.topic != left_topic or record.value is None:
                    continue
                found = [] if key_of is None else rights.get(hashable(key_of), [])
                combos += [(record.key, record.value, right) for right in found]
                if keeps_left_only:
                    combos.append((record.key, record.value, None))
            return combos
        keys = {h: key for h, (key, _) in lefts.items()}
        for record in self.records:
            if record.topic != left_topic:
                keys.setdefault(hashable(record.key), record.key)
        for hkey, key in keys.items():
            left_values = lefts.get(hkey, (key, []))[1]
            right_values = rights.get(hkey, [])
            combos += [(key, left, right) for left in left_values for right in right_values]
            if keeps_left_only:
                combos += [(key, left, None) for left in left_values]
            if keeps_right_only:
                combos += [(key, None, right) for right in right_values]
        return combos

    def _aggregate_table(self, derived: list[Any]) -> dict[str, Any]:
        engine = self.engine
        assert engine.group_by is not None
        entries: dict[tuple[Any, ...], list[Any]] = {}
        for key, left, right in self._combinations(derived):
            row_key = (hashable(key), _json_text(left), _json_text(right))
            if row_key in entries:
                continue
            value = self._value(key, left, right)
            group = engine.group_by(key, value)
            amount: Any = 1 if engine.counting else None
            if group is not None and not engine.counting:
                assert engine.value_of is not None
                amount = engine.value_of(key, value)
            entries[row_key] = [
                self._key_out(key, self.left_format),
                _json_text(left),
                _json_text(right),
                _json_text(group),
                _json_text(amount),
            ]
        assert self.spec.aggregate is not None
        return {"reduce": self.spec.aggregate.reduce.value, "entries": list(entries.values())}

    def decode(self, rows: list[list[Any]]) -> list[Emitted]:
        engine = self.engine
        out: list[Emitted] = []
        for _, topic, key, value, ts in rows:
            if topic == "J":
                key = self._key_in(key, self.left_format)
                if value is not None:
                    left, right = (None if text is None else json.loads(text) for text in value)
                    value = self._value(key, left, right)
                out.append(Emitted(engine.output_topic, key, value, ts))
            else:
                assert engine.aggregate_topic is not None
                out.append(Emitted(engine.aggregate_topic, json.loads(key), json.loads(value), ts))
        return out


def _pair_text(left: str | None, right: str | None) -> str:
    """A join's value as the runner's joiner writes it (Jackson's ``writeValueAsString(String[])``)."""
    return json.dumps([left, right], separators=(",", ":"), ensure_ascii=False)


class _ChainAdapter:
    """A chained spec (``joins:``) or a self-join: the runner builds the DSL topology of its stages
    (``java/ks-oracle/.../Chain.java``). Each stage's Kafka value is the pair of its sides' texts, a later stage's
    left text being the pair of the stage before; Python applies every stage's joiner to the nested pairs.

    The keys Java cannot derive (a foreign key, a global table's lookup key) and the aggregate's (group, amount)
    are tabled for the values the reference engine saw at each stage (it runs the case first, tracing its
    stages), and those of the ``extra`` traces (the reference replaying the case by a documented difference's
    rule: where the rule explains Kafka, Kafka reaches no other values): a value Kafka Streams reaches and none
    of them did has no entry, and the runner fails the case naming it, which is a difference the tests report.
    """

    def __init__(
        self,
        spec: PipelineSpec,
        records: Sequence[Record],
        functions: Mapping[str, Any] | None,
        optimize: bool,
        extra: Sequence[Traced] = (),
    ) -> None:
        self.spec, self.records, self.optimize = spec, list(records), optimize
        self.engine = ReferenceEngine(spec, functions)
        traced = ReferenceEngine(spec, functions, trace=True)
        traced.replay(self.records)
        self.traced = [[*stage, *(row for more in extra for row in more[index])]
                       for index, stage in enumerate(traced.traced)]  # fmt: skip
        self.result_format = spec.left.key.format
        #: per stage: hashable(joined value) -> the Kafka texts of the results that carried it
        self.texts: list[dict[Any, set[str]]] = []
        for index in range(len(spec.stages)):
            texts: dict[Any, set[str]] = {}
            for result, value in self.traced[index]:
                if value is not None:
                    for text in self._result_texts(index, result):
                        texts.setdefault(hashable(value), set()).add(text)
            self.texts.append(texts)

    def _left_texts(self, index: int, left: Any) -> Sequence[str | None]:
        if left is None:
            return [None]
        if index == 0:
            return [_json_text(left)]
        return list(sorted(self.texts[index - 1].get(hashable(left), set())))

    def _result_texts(self, index: int, result: Any) -> list[str]:
        return [_pair_text(left, _json_text(result.right)) for left in self._left_texts(index, result.left)]

    def _derived(self, index: int) -> list[list[Any]]:
        """Stage ``index``'s left value text -> the key derived from it (foreign key, lookup key)."""
        stage = self.engine.stages[index]
        derive = stage.foreign_key if stage.shape is Shape.TABLE_TABLE_FK else stage.key_selector
        if derive is None:
            return []
        if index == 0:
            topic = stage.left_input.topic if stage.left_input is not None else ""
            lefts = [(r.key, r.value, [_json_text(r.value) or ""]) for r in self.records if r.topic == topic]
        else:
            lefts = [(res.key, value, self._result_texts(index - 1, res)) for res, value in self.traced[index - 1]]
        table: dict[str, Any] = {}
        for key, value, texts in lefts:
            if value is None:
                continue
            derived = _Adapter._key_out(derive(key, value), stage.right_input.key.format)
            for text in texts:
                if table.setdefault(text, derived) != derived:
                    raise ValueError(f"{self.spec.name}: stage {index}: the value {text} derives two keys; the oracle "
                                     "tables derived keys by value only")  # fmt: skip
        return [[text, derived] for text, derived in table.items()]

    def encode(self, index: int) -> dict[str, Any]:
        spec = self.spec
        names = {name for stage in spec.stages for name in (stage.left, stage.right) if name in spec.inputs}
        inputs = {}
        for name in sorted(names):
            inp = spec.inputs[name]
            inputs[name] = {
                "role": inp.role.value,
                "key": "long" if inp.key.format is Format.LONG else "string",
                "history": None if inp.versioned is None else inp.versioned.history_retention,
            }
        stages = []
        for position, stage in enumerate(spec.stages):
            window = stage.window
            stages.append({
                "shape": stage.shape.value, "kind": stage.kind.value,
                "left": stage.left if position == 0 else None, "right": stage.right,
                "before": window.before if window else 0, "after": window.after if window else 0,
                "grace": stage.grace, "selector": stage.key_selector is not None, "derived": self._derived(position),
            })  # fmt: skip
        records = []
        for position, record in enumerate(self.records):
            if record.partition != 0:
                raise ValueError(f"case {index} ({spec.name}), record {position}: partition {record.partition}: the "
                                 "Kafka Streams oracle replays one task (partition 0 only)")  # fmt: skip
            name, inp = spec.input_by_topic(record.topic)
            records.append([name, _Adapter._key_out(record.key, inp.key.format), _json_text(record.value), record.ts])
        key = "long" if self.result_format is Format.LONG else "string"
        last_right = spec.right.key.format
        return {
            "shape": spec.join.shape.value,
            "kind": spec.join.kind.value,
            "left_key": key,
            "right_key": "long" if last_right is Format.LONG else "string",
            "aggregate": self._aggregate_table() if spec.aggregate is not None else None,
            "records": [],
            "chain": {"inputs": inputs, "stages": stages, "records": records, "optimize": self.optimize},
        }

    def _aggregate_table(self) -> dict[str, Any]:
        engine, last = self.engine, len(self.spec.stages) - 1
        assert engine.group_by is not None and self.spec.aggregate is not None
        entries: dict[tuple[Any, ...], list[Any]] = {}
        for result, value in self.traced[last]:
            if value is None:
                continue
            out = output_value(value, self.spec.output.value_format)
            group = engine.group_by(result.key, out)
            amount: Any = 1 if engine.counting else None
            if group is not None and not engine.counting:
                assert engine.value_of is not None
                amount = engine.value_of(result.key, out)
            for left in self._left_texts(last, result.left):
                row_key = (hashable(result.key), left, _json_text(result.right))
                entries[row_key] = [_Adapter._key_out(result.key, self.result_format), left,
                                    _json_text(result.right), _json_text(group), _json_text(amount)]  # fmt: skip
        return {"reduce": self.spec.aggregate.reduce.value, "entries": list(entries.values())}

    def _value(self, index: int, key: Any, pair: list[Any]) -> Any:
        """Stage ``index``'s joined value of a Kafka pair (its left text the pair of stage ``index - 1``)."""
        left_text, right_text = pair
        if left_text is None:
            left = None
        elif index == 0:
            left = json.loads(left_text)
        else:
            left = self._value(index - 1, key, json.loads(left_text))
        right = None if right_text is None else json.loads(right_text)
        return self.engine.stages[index].joiner(key, left, right)

    def decode(self, rows: list[list[Any]]) -> list[Emitted]:
        engine, last = self.engine, len(self.spec.stages) - 1
        out: list[Emitted] = []
        for _, topic, key, value, ts in rows:
            if topic == "J":
                key = _Adapter._key_in(key, self.result_format)
                if value is not None:
                    value = output_value(self._value(last, key, value), self.spec.output.value_format)
                out.append(Emitted(engine.output_topic, key, value, ts))
            else:
                assert engine.aggregate_topic is not None
                out.append(Emitted(engine.aggregate_topic, json.loads(key), json.loads(value), ts))
        return out
