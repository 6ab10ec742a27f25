package dev.streamjoin.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.KeyValueMapper;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.ValueJoiner;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * A chained case (a streamjoin spec with {@code joins:}): the DSL topology of its stages, each joining the previous
 * stage's result with an input, as one would write it in Kafka Streams ({@code a.join(b, ...).join(c, ...)}).
 *
 * <p>JSON: {@code inputs} name -> {@code {role, key, history}} (role {@code stream|table|global_table}, key
 * {@code long|string}, history a versioned table's retention in ms or null); {@code stages}, each {@code {shape, kind,
 * left, right, before, after, grace, selector, derived}}: {@code left} an input name (stage 0) or null (the previous
 * stage), {@code right} an input name; {@code derived} maps a left value text to the key Python derived from it (the
 * foreign key, or the global table's lookup key when {@code selector}); {@code optimize}: build with
 * {@code topology.optimization=all} (a stream-stream self-join then runs as KIP-862's one-store self-join); records
 * {@code [input, key, value, ts]}. Every input is one source node, whatever the number of stages reading it, so an input
 * read twice feeds its stages in the order they were built (Kafka's children order), as streamjoin's reference does.
 * A stage's value is the pair {@code [left, right]} of its sides' texts (a later stage's left text is the pair of the
 * stage before); intermediate table-table results are not materialized (as in Kafka's multi-join tests), the last
 * stage's, a foreign-key join's and one a foreign-key join reads are.
 */
final class Chain {
    record Input(String role, KafkaStreamsOracle.KeySerde keys, Long history) {}

    record Stage(String shape, String kind, String left, String right, long before, long after, long grace,
                 boolean selector, Map<String, Object> derived) {
        Object derivedOf(String valueText) {
            if (valueText == null) {
                return null;
            }
            if (!derived.containsKey(valueText)) {
                throw new IllegalStateException("no derived key for the value " + valueText + " (stage " + shape + ")");
            }
            return derived.get(valueText);
        }
    }

    record Rec(String input, Object key, String value, long ts) {}

    final Map<String, Input> inputs = new LinkedHashMap<>();
    final List<Stage> stages = new ArrayList<>();
    final List<Rec> records = new ArrayList<>();
    final boolean optimize;

    Chain(JsonNode node) {
        node.get("inputs").fields().forEachRemaining(entry -> {
            JsonNode in = entry.getValue();
            inputs.put(entry.getKey(), new Input(in.get("role").asText(), new KafkaStreamsOracle.KeySerde(in.get("key").asText()),
                    in.path("history").isNumber() ? in.get("history").asLong() : null));
        });
        for (JsonNode s : node.get("stages")) {
            Input right = inputs.get(s.get("right").asText());
            Map<String, Object> derived = new HashMap<>();
            for (JsonNode pair : s.get("derived")) {
                derived.put(KafkaStreamsOracle.text(pair.get(0)), right.keys().fromJson(pair.get(1)));
            }
            stages.add(new Stage(s.get("shape").asText(), s.get("kind").asText(), s.path("left").isTextual() ? s.get("left").asText() : null,
                    s.get("right").asText(), s.path("before").asLong(0), s.path("after").asLong(0), s.path("grace").asLong(0),
                    s.path("selector").asBoolean(false), derived));
        }
        optimize = node.path("optimize").asBoolean(false);
        for (JsonNode r : node.get("records")) {
            Input input = inputs.get(r.get(0).asText());
            if (input == null) {
                throw new IllegalArgumentException("record on an unknown input: " + r);
            }
            records.add(new Rec(r.get(0).asText(), input.keys().fromJson(r.get(1)), KafkaStreamsOracle.text(r.get(2)), r.get(3).asLong()));
        }
    }

    /** The root input's key serde: every stage's result is keyed as the first stage's left input. */
    KafkaStreamsOracle.KeySerde resultKey() {
        return inputs.get(stages.get(0).left()).keys();
    }

    String lastShape() {
        return stages.get(stages.size() - 1).shape();
    }

    String lastKind() {
        return stages.get(stages.size() - 1).kind();
    }

    /** The case's sources, one per input, built on first use. */
    private static final class Sources {
        final StreamsBuilder builder;
        final KafkaStreamsOracle.Case c;
        final Map<String, Object> built = new HashMap<>();

        Sources(StreamsBuilder builder, KafkaStreamsOracle.Case c) {
            this.builder = builder;
            this.c = c;
        }

        @SuppressWarnings("unchecked")
        KStream<Object, String> stream(String name) {
            Input in = c.chain.inputs.get(name);
            return (KStream<Object, String>) built.computeIfAbsent(name,
                    n -> builder.stream(c.topic(n), Consumed.with(in.keys(), KafkaStreamsOracle.TEXT)));
        }

        @SuppressWarnings("unchecked")
        KTable<Object, String> table(String name) {
            Input in = c.chain.inputs.get(name);
            return (KTable<Object, String>) built.computeIfAbsent(name,
                    n -> KafkaStreamsOracle.table(builder, c.topic(n), in.keys(), in.history()));
        }

        @SuppressWarnings("unchecked")
        GlobalKTable<Object, String> global(String name) {
            Input in = c.chain.inputs.get(name);
            return (GlobalKTable<Object, String>) built.computeIfAbsent(name,
                    n -> builder.globalTable(c.topic(n), Consumed.with(in.keys(), KafkaStreamsOracle.TEXT)));
        }
    }

    /** Builds the chain's topology; the results go to the case's output topic, then the aggregate, if any. */
    static void topology(StreamsBuilder builder, KafkaStreamsOracle.Case c) {
        Chain chain = c.chain;
        Sources sources = new Sources(builder, c);
        KafkaStreamsOracle.KeySerde keys = chain.resultKey();
        ValueJoiner<String, String, String> joiner = KafkaStreamsOracle::pair;
        KStream<Object, String> stream = null;
        KTable<Object, String> table = null;
        Stage first = chain.stages.get(0);
        if (chain.inputs.get(first.left()).role().equals("stream")) {
            stream = sources.stream(first.left());
        } else {
            table = sources.table(first.left());
        }
        for (int i = 0; i < chain.stages.size(); i++) {
            Stage s = chain.stages.get(i);
            boolean last = i == chain.stages.size() - 1;
            boolean inner = s.kind().equals("inner");
            boolean left = s.kind().equals("left");
            Materialized<Object, String, KeyValueStore<Bytes, byte[]>> results = Materialized.with(keys, KafkaStreamsOracle.TEXT);
            switch (s.shape()) {
                case "stream-stream" -> {
                    KStream<Object, String> r = sources.stream(s.right());
                    JoinWindows windows = JoinWindows.ofTimeDifferenceAndGrace(Duration.ZERO, Duration.ofMillis(s.grace()))
                            .before(Duration.ofMillis(s.before()))
                            .after(Duration.ofMillis(s.after()));
                    StreamJoined<Object, String, String> joined = StreamJoined.with(keys, KafkaStreamsOracle.TEXT, KafkaStreamsOracle.TEXT);
                    stream = inner ? stream.join(r, joiner, windows, joined)
                            : left ? stream.leftJoin(r, joiner, windows, joined)
                            : stream.outerJoin(r, joiner, windows, joined);
                }
                case "stream-table" -> {
                    KTable<Object, String> r = sources.table(s.right());
                    Joined<Object, String, String> joined = Joined.with(keys, KafkaStreamsOracle.TEXT, KafkaStreamsOracle.TEXT);
                    if (s.grace() > 0) {
                        joined = joined.withGracePeriod(Duration.ofMillis(s.grace()));
                    }
                    stream = inner ? stream.join(r, joiner, joined) : stream.leftJoin(r, joiner, joined);
                }
                case "stream-globaltable" -> {
                    GlobalKTable<Object, String> r = sources.global(s.right());
                    KeyValueMapper<Object, String, Object> lookup = s.selector() ? (k, v) -> s.derivedOf(v) : (k, v) -> k;
                    stream = inner ? stream.join(r, lookup, joiner) : stream.leftJoin(r, lookup, joiner);
                }
                case "table-table" -> {
                    KTable<Object, String> r = sources.table(s.right());
                    // a foreign-key join needs its left table's value serde (it unbinds old values): materialize
                    if (last || chain.stages.get(i + 1).shape().equals("table-table-fk")) {
                        table = inner ? table.join(r, joiner, results)
                                : left ? table.leftJoin(r, joiner, results)
                                : table.outerJoin(r, joiner, results);
                    } else {
                        table = inner ? table.join(r, joiner) : left ? table.leftJoin(r, joiner) : table.outerJoin(r, joiner);
                    }
                }
                case "table-table-fk" -> {
                    KTable<Object, String> r = sources.table(s.right());
                    java.util.function.Function<String, Object> foreignKey = s::derivedOf;
                    table = inner ? table.join(r, foreignKey, joiner, results) : table.leftJoin(r, foreignKey, joiner, results);
                }
                default -> throw new IllegalArgumentException("unknown shape " + s.shape());
            }
            if (s.shape().startsWith("stream-")) {
                table = null;
            } else {
                stream = null;
            }
        }
        KStream<Object, String> out = stream != null ? stream : table.toStream();
        out.to(c.topic("out"), org.apache.kafka.streams.kstream.Produced.with(keys, KafkaStreamsOracle.TEXT));
        if (c.reduce != null) {
            KafkaStreamsOracle.aggregate(c, stream, table);
        }
    }
}
