package dev.streamjoin.oracle;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.File;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.stream.Stream;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.LongSerializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KGroupedTable;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.KeyValueMapper;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.ValueJoiner;
import org.apache.kafka.streams.state.BuiltInDslStoreSuppliers;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.test.TestRecord;

/**
 * Kafka Streams as the oracle of streamjoin's reference engine: replays many small cases through
 * {@link TopologyTestDriver}, one fresh driver per case, and writes what each emits.
 *
 * <pre>
 * java -cp '.local/ks-oracle/classes:.local/jars/ks-oracle/*' dev.streamjoin.oracle.KafkaStreamsOracle CASES RESULTS
 * </pre>
 *
 * <p>CASES is {@code {"cases": [case, ...]}}; a case is
 * {@code {shape, kind, left_key, right_key, before, after, grace, left_history, right_history, aggregate, records}}:
 * shape and kind as in a streamjoin spec; {@code *_key} the key format of each input, {@code "long"}
 * (LongSerializer) or {@code "string"} (UTF-8 text); {@code before/after/grace} in ms; {@code *_history} a
 * versioned table's history retention in ms, or null for a plain table; {@code records} in processing order,
 * each {@code [side "L"|"R", key, value, ts, derived]}: value is JSON text (opaque here) or null, derived the
 * foreign key (table-table-fk left) or the lookup key (stream-globaltable stream) Python computed from it.
 * {@code aggregate} is null or {@code {reduce: "sum"|"count", entries: [[key, left, right, group, amount], ...]}}:
 * for every (key, left, right) a join result can carry, the group (JSON text, null: dropped) and the amount
 * (JSON number, null: dropped) that the spec's projections give.
 *
 * <p>The join emits the raw pair: its output value is the JSON array {@code [left, right]} of the two value
 * texts (null for a missing side); Python applies the spec's joiner. The aggregate re-keys every join result by
 * the table's group and reduces (sum: numbers added as longs, else doubles; count: {@code count()}), with the
 * record cache off, so every update is emitted. RESULTS is {@code {"results": [result, ...]}}, per case
 * {@code {"rows": [[input index, "J"|"A", key, value, ts], ...], "dropped": n}} (J: the join's output topic,
 * value the pair or null for a tombstone; A: the aggregate topic, value the total as JSON text; dropped: the
 * sum of the driver's {@code dropped-records-total} metrics), or {@code {"error": "..."}}.
 */
public final class KafkaStreamsOracle {
    static final ObjectMapper JSON = new ObjectMapper();
    static final Serde<String> TEXT = Serdes.String();

    private KafkaStreamsOracle() {}

    /** A key serde for one input's key format: Java's LongSerializer, or UTF-8 text. */
    static final class KeySerde implements Serde<Object>, Serializer<Object>, Deserializer<Object> {
        final boolean isLong;
        private final LongSerializer longs = new LongSerializer();
        private final LongDeserializer longsBack = new LongDeserializer();

        KeySerde(String format) {
            switch (format) {
                case "long" -> isLong = true;
                case "string" -> isLong = false;
                default -> throw new IllegalArgumentException("key format: expected long or string, got " + format);
            }
        }

        Object fromJson(JsonNode node) {
            if (node == null || node.isNull()) {
                return null;
            }
            if (isLong) {
                if (!node.canConvertToExactIntegral()) {
                    throw new IllegalArgumentException("a long key must be an integer, got " + node);
                }
                return node.longValue();
            }
            if (!node.isTextual()) {
                throw new IllegalArgumentException("a string key must be JSON text, got " + node);
            }
            return node.textValue();
        }

        @Override
        public byte[] serialize(String topic, Object key) {
            if (key == null) {
                return null;
            }
            return isLong ? longs.serialize(topic, (Long) key) : ((String) key).getBytes(StandardCharsets.UTF_8);
        }

        @Override
        public Object deserialize(String topic, byte[] data) {
            if (data == null) {
                return null;
            }
            return isLong ? longsBack.deserialize(topic, data) : new String(data, StandardCharsets.UTF_8);
        }

        @Override
        public Serializer<Object> serializer() {
            return this;
        }

        @Override
        public Deserializer<Object> deserializer() {
            return this;
        }

        @Override
        public void configure(Map<String, ?> configs, boolean isKey) {}

        @Override
        public void close() {}
    }

    /** A value with the key Python derived from it (foreign key, lookup key): {@code <derived JSON>\n<text>}. */
    record Env(Object derived, String derivedJson, String text) {}

    static final class EnvSerde implements Serde<Env>, Serializer<Env>, Deserializer<Env> {
        private final KeySerde derivedFormat;

        EnvSerde(KeySerde derivedFormat) {
            this.derivedFormat = derivedFormat;
        }

        @Override
        public byte[] serialize(String topic, Env env) {
            return env == null ? null : (env.derivedJson() + "\n" + env.text()).getBytes(StandardCharsets.UTF_8);
        }

        @Override
        public Env deserialize(String topic, byte[] data) {
            if (data == null) {
                return null;
            }
            String both = new String(data, StandardCharsets.UTF_8);
            int cut = both.indexOf('\n');  // JSON text escapes newlines: the first one is the separator
            String derivedJson = both.substring(0, cut);
            try {
                return new Env(derivedFormat.fromJson(JSON.readTree(derivedJson)), derivedJson, both.substring(cut + 1));
            } catch (IOException e) {
                throw new IllegalStateException(e);
            }
        }

        @Override
        public Serializer<Env> serializer() {
            return this;
        }

        @Override
        public Deserializer<Env> deserializer() {
            return this;
        }

        @Override
        public void configure(Map<String, ?> configs, boolean isKey) {}

        @Override
        public void close() {}
    }

    record Rec(boolean left, Object key, Object value, long ts) {}

    record Entry(String group, String amount) {}

    /** One case, parsed. */
    static final class Case {
        final String shape;
        final String kind;
        final KeySerde leftKey;
        final KeySerde rightKey;
        final long before;
        final long after;
        final long grace;
        final Long leftHistory;
        final Long rightHistory;
        final String reduce;  // null: no aggregate
        final Map<List<Object>, Entry> entries = new HashMap<>();
        final List<Rec> records = new ArrayList<>();
        final String prefix;
        final Chain chain;  // null: one join of two inputs

        Case(int index, JsonNode node) {
            prefix = "c" + index + "-";
            shape = node.get("shape").asText();
            kind = node.get("kind").asText();
            leftKey = new KeySerde(node.get("left_key").asText());
            rightKey = new KeySerde(node.get("right_key").asText());
            before = node.path("before").asLong(0);
            after = node.path("after").asLong(0);
            grace = node.path("grace").asLong(0);
            leftHistory = node.path("left_history").isNumber() ? node.get("left_history").asLong() : null;
            rightHistory = node.path("right_history").isNumber() ? node.get("right_history").asLong() : null;
            JsonNode aggregate = node.get("aggregate");
            reduce = aggregate == null || aggregate.isNull() ? null : aggregate.get("reduce").asText();
            if (reduce != null) {
                for (JsonNode e : aggregate.get("entries")) {
                    entries.put(
                            Arrays.asList(resultKey().fromJson(e.get(0)), text(e.get(1)), text(e.get(2))),
                            new Entry(text(e.get(3)), text(e.get(4))));
                }
            }
            boolean envLeft = shape.equals("stream-globaltable") || shape.equals("table-table-fk");
            for (JsonNode r : node.get("records")) {
                boolean isLeft = r.get(0).asText().equals("L");
                KeySerde keys = isLeft ? leftKey : rightKey;
                String value = text(r.get(2));
                Object stored = value;
                if (isLeft && envLeft && value != null) {
                    JsonNode derived = r.get(4);
                    stored = new Env(rightKey.fromJson(derived), derived.toString(), value);
                }
                records.add(new Rec(isLeft, keys.fromJson(r.get(1)), stored, r.get(3).asLong()));
            }
            chain = node.hasNonNull("chain") ? new Chain(node.get("chain")) : null;
        }

        /** The case's name for a topic or store (unique across cases: their drivers share a state folder). */
        String topic(String name) {
            return prefix + name;
        }

        /** The key format of the join's results: the left input's (the stream's, the left table's). */
        KeySerde resultKey() {
            return leftKey;
        }

        boolean streamResult() {
            return shape.startsWith("stream-");
        }
    }

    static String text(JsonNode node) {
        return node == null || node.isNull() ? null : node.textValue();
    }

    /** The join's output value: the JSON array of both sides' value texts. */
    static String pair(String left, String right) {
        try {
            return JSON.writeValueAsString(new String[] {left, right});
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Adds two JSON numbers: as longs when both are integers, else as doubles (Python's int/float rules). */
    static String add(String a, String b, int sign) {
        Number x = number(a);
        Number y = number(b);
        if (x instanceof Long lx && y instanceof Long ly) {
            return Long.toString(lx + sign * ly);
        }
        return Double.toString(x.doubleValue() + sign * y.doubleValue());
    }

    static Number number(String text) {
        switch (text) {
            case "true":
                return 1L;
            case "false":
                return 0L;
            default:
                break;
        }
        if (text.contains(".") || text.contains("e") || text.contains("E")) {
            return Double.parseDouble(text);
        }
        return Long.parseLong(text);
    }

    static KTable<Object, String> table(StreamsBuilder builder, String topic, KeySerde keys, Long history) {
        if (history == null) {
            return builder.table(topic, Consumed.with(keys, TEXT));
        }
        return builder.table(
                topic,
                Consumed.with(keys, TEXT),
                Materialized.<Object, String>as(Stores.persistentVersionedKeyValueStore(topic + "-versioned", Duration.ofMillis(history)))
                        .withKeySerde(keys)
                        .withValueSerde(TEXT));
    }

    static void topology(StreamsBuilder builder, Case c) {
        if (c.chain != null) {
            Chain.topology(builder, c);
            return;
        }
        KStream<Object, String> stream = null;
        KTable<Object, String> table = null;
        ValueJoiner<String, String, String> joiner = KafkaStreamsOracle::pair;
        boolean inner = c.kind.equals("inner");
        boolean left = c.kind.equals("left");
        switch (c.shape) {
            case "stream-stream" -> {
                KStream<Object, String> l = builder.stream(c.topic("left"), Consumed.with(c.leftKey, TEXT));
                KStream<Object, String> r = builder.stream(c.topic("right"), Consumed.with(c.rightKey, TEXT));
                JoinWindows windows = JoinWindows.ofTimeDifferenceAndGrace(Duration.ZERO, Duration.ofMillis(c.grace))
                        .before(Duration.ofMillis(c.before))
                        .after(Duration.ofMillis(c.after));
                StreamJoined<Object, String, String> joined = StreamJoined.with(c.leftKey, TEXT, TEXT);
                stream = inner ? l.join(r, joiner, windows, joined)
                        : left ? l.leftJoin(r, joiner, windows, joined)
                        : l.outerJoin(r, joiner, windows, joined);
            }
            case "stream-table" -> {
                KStream<Object, String> l = builder.stream(c.topic("left"), Consumed.with(c.leftKey, TEXT));
                KTable<Object, String> r = table(builder, c.topic("right"), c.rightKey, c.rightHistory);
                Joined<Object, String, String> joined = Joined.with(c.leftKey, TEXT, TEXT);
                if (c.grace > 0) {
                    joined = joined.withGracePeriod(Duration.ofMillis(c.grace));
                }
                stream = inner ? l.join(r, joiner, joined) : l.leftJoin(r, joiner, joined);
            }
            case "stream-globaltable" -> {
                KStream<Object, Env> l = builder.stream(c.topic("left"), Consumed.with(c.leftKey, new EnvSerde(c.rightKey)));
                GlobalKTable<Object, String> r = builder.globalTable(c.topic("right"), Consumed.with(c.rightKey, TEXT));
                KeyValueMapper<Object, Env, Object> lookup = (k, env) -> env == null ? k : env.derived();
                ValueJoiner<Env, String, String> envJoiner = (env, rv) -> pair(env.text(), rv);
                stream = inner ? l.join(r, lookup, envJoiner) : l.leftJoin(r, lookup, envJoiner);
            }
            case "table-table" -> {
                KTable<Object, String> l = table(builder, c.topic("left"), c.leftKey, c.leftHistory);
                KTable<Object, String> r = table(builder, c.topic("right"), c.rightKey, c.rightHistory);
                Materialized<Object, String, KeyValueStore<Bytes, byte[]>> results = Materialized.with(c.leftKey, TEXT);
                table = inner ? l.join(r, joiner, results)
                        : left ? l.leftJoin(r, joiner, results)
                        : l.outerJoin(r, joiner, results);
            }
            case "table-table-fk" -> {
                EnvSerde envs = new EnvSerde(c.rightKey);
                KTable<Object, Env> l = c.leftHistory == null
                        ? builder.table(c.topic("left"), Consumed.with(c.leftKey, envs))
                        : builder.table(
                                c.topic("left"),
                                Consumed.with(c.leftKey, envs),
                                Materialized.<Object, Env>as(
                                                Stores.persistentVersionedKeyValueStore(c.topic("left-versioned"), Duration.ofMillis(c.leftHistory)))
                                        .withKeySerde(c.leftKey)
                                        .withValueSerde(envs));
                KTable<Object, String> r = table(builder, c.topic("right"), c.rightKey, c.rightHistory);
                ValueJoiner<Env, String, String> envJoiner = (env, rv) -> pair(env.text(), rv);
                java.util.function.Function<Env, Object> foreignKey = Env::derived;
                // materialized with its serdes: the aggregate's groupBy reads old results from it
                Materialized<Object, String, KeyValueStore<Bytes, byte[]>> results = Materialized.with(c.leftKey, TEXT);
                table = inner ? l.join(r, foreignKey, envJoiner, results) : l.leftJoin(r, foreignKey, envJoiner, results);
            }
            default -> throw new IllegalArgumentException("unknown shape " + c.shape);
        }
        KStream<Object, String> results = stream != null ? stream : table.toStream();
        results.to(c.topic("out"), Produced.with(c.resultKey(), TEXT));
        if (c.reduce != null) {
            aggregate(c, stream, table);
        }
    }

    static KeyValue<String, String> group(Case c, Object key, String pairText) {
        try {
            JsonNode both = JSON.readTree(pairText);
            List<Object> lookup = Arrays.asList(key, text(both.get(0)), text(both.get(1)));
            Entry entry = c.entries.get(lookup);
            if (entry == null) {
                throw new IllegalStateException("no aggregate entry for (key, left, right) = " + lookup);
            }
            return KeyValue.pair(entry.group(), c.reduce.equals("count") ? "1" : entry.amount());
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    static void aggregate(Case c, KStream<Object, String> stream, KTable<Object, String> table) {
        boolean count = c.reduce.equals("count");
        Grouped<String, String> grouped = Grouped.with(TEXT, TEXT);
        KTable<String, String> totals;
        if (stream != null) {
            KGroupedStream<String, String> groups = stream.map((k, v) -> group(c, k, v)).groupByKey(grouped);
            totals = count
                    ? groups.count(Materialized.with(TEXT, Serdes.Long())).mapValues(n -> Long.toString(n))
                    : groups.reduce((a, b) -> add(a, b, 1), Materialized.with(TEXT, TEXT));
        } else {
            KGroupedTable<String, String> groups = table.groupBy((k, v) -> group(c, k, v), grouped);
            totals = count
                    ? groups.count(Materialized.with(TEXT, Serdes.Long())).mapValues(n -> Long.toString(n))
                    : groups.reduce((a, b) -> add(a, b, 1), (a, b) -> add(a, b, -1), Materialized.with(TEXT, TEXT));
        }
        totals.toStream().to(c.topic("agg"), Produced.with(TEXT, TEXT));
    }

    static Properties config(int index, Path stateDir) {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "ks-oracle-" + index);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "unused:9092");
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.resolve(Integer.toString(index)).toString());
        // no record cache: every update is forwarded (streamjoin emits every change)
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0L);
        // in-memory DSL stores: a RocksDB per store per case would dominate the run (versioned stores stay RocksDB)
        props.put(StreamsConfig.DSL_STORE_SUPPLIERS_CLASS_CONFIG, BuiltInDslStoreSuppliers.InMemoryDslStoreSuppliers.class);
        // stream-stream left/outer: held non-joined results are checked at every record, not once per
        // wall-clock second (the driver's clock does not move): streamjoin's documented rule (SEMANTICS.md §3)
        props.put(StreamsConfig.InternalConfig.EMIT_INTERVAL_MS_KSTREAMS_OUTER_JOIN_SPURIOUS_RESULTS_FIX, 0L);
        return props;
    }

    static void writeKey(JsonGenerator out, Object key) throws IOException {
        if (key == null) {
            out.writeNull();
        } else if (key instanceof Long number) {
            out.writeNumber(number);
        } else {
            out.writeString((String) key);
        }
    }

    static double dropped(TopologyTestDriver driver) {
        double dropped = 0;
        for (var metric : driver.metrics().entrySet()) {
            if (metric.getKey().name().equals("dropped-records-total")
                    && metric.getValue().metricValue() instanceof Number number) {
                dropped += number.doubleValue();
            }
        }
        return dropped;
    }

    /** Pipes one case's records through its part of the driver's topology; returns its result JSON. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static String replay(TopologyTestDriver driver, Case c) throws IOException {
        boolean envLeft = c.shape.equals("stream-globaltable") || c.shape.equals("table-table-fk");
        Serializer leftValues = envLeft ? new EnvSerde(c.rightKey) : TEXT.serializer();
        TestInputTopic leftTopic = driver.createInputTopic(c.topic("left"), c.leftKey, leftValues);
        TestInputTopic rightTopic = driver.createInputTopic(c.topic("right"), c.rightKey, TEXT.serializer());
        TestOutputTopic<Object, String> joined = driver.createOutputTopic(c.topic("out"), c.resultKey(), TEXT.deserializer());
        TestOutputTopic<String, String> totals =
                c.reduce == null ? null : driver.createOutputTopic(c.topic("agg"), TEXT.deserializer(), TEXT.deserializer());
        Map<String, TestInputTopic> chainTopics = new HashMap<>();
        if (c.chain != null) {
            for (var input : c.chain.inputs.entrySet()) {
                chainTopics.put(input.getKey(), driver.createInputTopic(c.topic(input.getKey()), input.getValue().keys(), TEXT.serializer()));
            }
        }
        int count = c.chain != null ? c.chain.records.size() : c.records.size();
        double droppedBefore = dropped(driver);
        StringWriter buffer = new StringWriter();
        try (JsonGenerator out = JSON.getFactory().createGenerator(buffer)) {
            out.writeStartObject();
            out.writeArrayFieldStart("rows");
            for (int i = 0; i < count; i++) {
                if (c.chain != null) {
                    Chain.Rec r = c.chain.records.get(i);
                    chainTopics.get(r.input()).pipeInput(r.key(), r.value(), r.ts());
                } else {
                    Rec r = c.records.get(i);
                    (r.left() ? leftTopic : rightTopic).pipeInput(r.key(), r.value(), r.ts());
                }
                for (TestRecord<Object, String> row : joined.readRecordsToList()) {
                    out.writeStartArray();
                    out.writeNumber(i);
                    out.writeString("J");
                    writeKey(out, row.key());
                    if (row.value() == null) {
                        out.writeNull();
                    } else {
                        out.writeTree(JSON.readTree(row.value()));
                    }
                    out.writeNumber(row.timestamp());
                    out.writeEndArray();
                }
                if (totals != null) {
                    for (TestRecord<String, String> row : totals.readRecordsToList()) {
                        out.writeStartArray();
                        out.writeNumber(i);
                        out.writeString("A");
                        out.writeString(row.key());
                        out.writeString(row.value());
                        out.writeNumber(row.timestamp());
                        out.writeEndArray();
                    }
                }
            }
            out.writeEndArray();
            out.writeNumberField("dropped", (long) (dropped(driver) - droppedBefore));
            out.writeEndObject();
        }
        return buffer.toString();
    }

    /** Replays one case in a fresh driver into {@code results[index]}: its outputs, or the error Kafka raised. */
    static void runCase(List<Case> cases, int index, String[] results, Path stateDir) {
        Case c = cases.get(index);
        try {
            StreamsBuilder builder = new StreamsBuilder();
            topology(builder, c);
            Properties props = config(index, stateDir);
            if (c.chain != null && c.chain.optimize) {  // KIP-862: a stream-stream self-join runs on one store
                props.put(StreamsConfig.TOPOLOGY_OPTIMIZATION_CONFIG, StreamsConfig.OPTIMIZE);
            }
            try (TopologyTestDriver driver = new TopologyTestDriver(builder.build(props), props, Instant.EPOCH)) {
                results[index] = replay(driver, c);
            }
        } catch (Throwable error) {
            results[index] = failure(error);
        }
        deleteRecursively(stateDir.resolve(Integer.toString(index)));
    }

    static void deleteRecursively(Path root) {
        if (!Files.exists(root)) {
            return;
        }
        try (Stream<Path> paths = Files.walk(root)) {
            paths.sorted(Comparator.reverseOrder()).map(Path::toFile).forEach(File::delete);
        } catch (IOException e) {
            throw new IllegalStateException("cannot delete " + root, e);
        }
    }

    static String failure(Throwable error) {
        StringWriter trace = new StringWriter();
        error.printStackTrace(new PrintWriter(trace));
        try {
            return JSON.writeValueAsString(Map.of("error", trace.toString()));
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: KafkaStreamsOracle CASES.json RESULTS.json");
            System.exit(2);
        }
        JsonNode nodes = JSON.readTree(new File(args[0])).get("cases");
        List<Case> cases = new ArrayList<>();
        String[] results = new String[nodes.size()];
        for (int i = 0; i < nodes.size(); i++) {
            try {
                cases.add(new Case(i, nodes.get(i)));
            } catch (RuntimeException error) {
                cases.add(null);
                results[i] = failure(error);
            }
        }
        // RocksDB (versioned tables, the grace buffer) flushes at every commit, which the driver does after every
        // record: on a memory filesystem, when there is one, that costs no disk syncs
        String stateRoot = System.getProperty("oracle.state.dir", Files.isDirectory(Path.of("/dev/shm")) ? "/dev/shm" : null);
        Path stateDir = stateRoot == null ? Files.createTempDirectory("ks-oracle-") : Files.createTempDirectory(Path.of(stateRoot), "ks-oracle-");
        int threads = Math.max(1, Integer.getInteger("oracle.threads", Runtime.getRuntime().availableProcessors()));
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            List<Future<?>> running = new ArrayList<>();
            for (int i = 0; i < cases.size(); i++) {
                if (cases.get(i) != null) {  // else it did not parse: its result is that error
                    int index = i;
                    running.add(pool.submit(() -> runCase(cases, index, results, stateDir)));
                }
            }
            for (Future<?> done : running) {
                done.get();
            }
            try (var out = Files.newBufferedWriter(Path.of(args[1]), StandardCharsets.UTF_8)) {
                out.write("{\"results\": [\n");
                for (int i = 0; i < results.length; i++) {
                    out.write(results[i]);
                    out.write(i + 1 < results.length ? ",\n" : "\n");
                }
                out.write("]}\n");
            }
        } finally {
            pool.shutdownNow();
            deleteRecursively(stateDir);
        }
    }
}
