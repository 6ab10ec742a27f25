package dev.streamjoin.bench;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.UUID;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericRecord;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.StreamJoined;

/**
 * The Kafka Streams side of {@code bench/bench_join.py}: one workload, run on command from stdin, each run
 * with a fresh {@code application.id} (so from the beginning of the input topics) into fresh output topics.
 *
 * <pre>
 * java -jar kafka-streams-bench.jar --bootstrap B --workload join|join-avro|join-sum|join-sum-nocache|stream-stream|copy
 *                                                  |enrich2-sum|enrich2-sum-nocache
 *     --clicks T --regions T --views T [--products T] --expect-count N [--expect-totals region=n,...]
 *     [--expect-agg-count N]
 *     [--registry URL]
 *     [--threads 2] [--commit-interval-ms 1000] [--max-task-idle-ms MS] [--idle-seconds 60]
 * stdin:  run TAG OUTPUT_TOPIC [AGGREGATE_TOPIC]    (one line per run; "quit" or EOF ends)
 * stdout: KS_RESULT {"tag": ..., "seconds": ..., "done": true|false, ...}
 * </pre>
 *
 * <p>Workloads: {@code copy} (clicks to the output, bytes as they are); {@code join} (clicks leftJoin regions,
 * value {@code {"region": region or "UNKNOWN", "clicks": n}}); {@code join-avro} (the same join on Avro values in
 * Confluent's wire format through the registry at {@code --registry}, a Confluent API base URL: clicks
 * {@code {clicks: long}}, regions {@code {region: string}}, output {@code {region: string, clicks: long}}, with
 * {@link RegistryAvroSerde}); {@code join-sum} (the join to the output, and
 * its clicks summed per region to the aggregate topic, default record cache); {@code join-sum-nocache} (the
 * same with {@code statestore.cache.max.bytes=0}: one aggregate update per click); {@code stream-stream} (views
 * join clicks, {@code JoinWindows.ofTimeDifferenceWithNoGrace(10 s)}, inner); {@code enrich2-sum} (a chain of two
 * joins: clicks with JSON values {@code {"product": "p..", "clicks": n}} leftJoin regions (a KTable by user), then
 * leftJoin products (a GlobalKTable of categories by product id, looked up by the click's product), value
 * {@code {"region": region or "UNKNOWN", "category": category or "OTHER", "product": "p..", "clicks": n}} to the
 * output (as {@code include/pipelines/clicks_per_region_category.yaml}'s joiners), the clicks
 * summed per {@code region/category} to the aggregate topic, default record cache); {@code enrich2-sum-nocache}
 * (the same with no record cache).
 *
 * <p>A run ends when the output topic's end offsets reach {@code --expect-count} (and, for join-sum and enrich2-sum,
 * the latest value of every key on the aggregate topic equals {@code --expect-totals}; for the -nocache workloads the
 * aggregate topic's end offsets reach {@code --expect-agg-count}); its time is from {@code start()} to then. If
 * neither the outputs nor the records read grow for {@code --idle-seconds} first, the run ends with
 * {@code "done": false}.
 */
public final class KafkaStreamsBench {
    private final Map<String, String> opts;
    private final String bootstrap;
    private final String workload;
    private final long expectCount;
    private final long expectAggCount;
    private final Map<String, Long> expectTotals;
    private final Admin admin;

    private KafkaStreamsBench(Map<String, String> opts) {
        this.opts = opts;
        this.bootstrap = opts.getOrDefault("bootstrap", "127.0.0.1:19092");
        this.workload = required("workload");
        this.expectCount = Long.parseLong(opts.getOrDefault("expect-count", "-1"));
        this.expectAggCount = Long.parseLong(opts.getOrDefault("expect-agg-count", "-1"));
        this.expectTotals = new HashMap<>();
        String totals = opts.getOrDefault("expect-totals", "");
        for (String pair : totals.split(",")) {
            if (!pair.isEmpty()) {
                int eq = pair.lastIndexOf('=');
                expectTotals.put(pair.substring(0, eq), Long.parseLong(pair.substring(eq + 1)));
            }
        }
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        this.admin = Admin.create(props);
    }

    private String required(String name) {
        String value = opts.get(name);
        if (value == null) {
            throw new IllegalArgumentException("--" + name + " is required");
        }
        return value;
    }

    static String enriched(String region, Long clicks) {
        return "{\"region\":\"" + (region == null ? "UNKNOWN" : region) + "\",\"clicks\":" + clicks + "}";
    }

    private record Enriched(String region, Long clicks) {}

    /** A click of the enrich2 workloads: its JSON value's fields. */
    private record Click(String product, long clicks) {}

    private record ClickWithRegion(String product, long clicks, String region) {}

    private record Enriched2(String region, String category, String product, long clicks) {}

    private static final ObjectMapper JSON = new ObjectMapper();

    /** Reads a click's JSON value {@code {"product": "p..", "clicks": n}} (read only: no serializer). */
    static final Serde<Click> CLICK_JSON = Serdes.serdeFrom(
            (topic, click) -> {
                throw new UnsupportedOperationException("the bench only reads clicks");
            },
            (Deserializer<Click>) (topic, data) -> {
                if (data == null) {
                    return null;
                }
                try {
                    JsonNode node = JSON.readTree(data);
                    JsonNode product = node.get("product");
                    return new Click(product == null || product.isNull() ? null : product.asText(), node.get("clicks").asLong());
                } catch (IOException e) {
                    throw new org.apache.kafka.common.errors.SerializationException("a click is not JSON: " + e.getMessage(), e);
                }
            });

    static String enriched2(Enriched2 e) {
        return "{\"region\":\"" + e.region() + "\",\"category\":\"" + e.category() + "\",\"product\":\"" + e.product()
                + "\",\"clicks\":" + e.clicks() + "}";
    }

    /** The join-avro workload's output record. */
    static final Schema ENRICHED_AVRO = new Schema.Parser().parse("""
            {"type": "record", "name": "EnrichedClick", "namespace": "bench", "fields": [
              {"name": "region", "type": "string"}, {"name": "clicks", "type": "long"}]}""");

    static GenericRecord enrichedAvro(GenericRecord click, GenericRecord region) {
        GenericData.Record out = new GenericData.Record(ENRICHED_AVRO);
        out.put("region", region == null ? "UNKNOWN" : region.get("region").toString());
        out.put("clicks", click.get("clicks"));
        return out;
    }

    Topology topology(String output, String aggregate) {
        StreamsBuilder builder = new StreamsBuilder();
        switch (workload) {
            case "copy" -> builder.stream(required("clicks"), Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()))
                    .to(output, Produced.with(Serdes.ByteArray(), Serdes.ByteArray()));
            case "join" -> {
                KStream<String, Long> clicks = builder.stream(required("clicks"), Consumed.with(Serdes.String(), Serdes.Long()));
                KTable<String, String> regions = builder.table(required("regions"), Consumed.with(Serdes.String(), Serdes.String()));
                clicks.leftJoin(regions, (n, region) -> enriched(region, n))
                        .to(output, Produced.with(Serdes.String(), Serdes.String()));
            }
            case "join-avro" -> {
                RegistryAvroSerde avro = new RegistryAvroSerde(required("registry"));
                KStream<String, GenericRecord> clicks = builder.stream(required("clicks"), Consumed.with(Serdes.String(), avro));
                KTable<String, GenericRecord> regions = builder.table(required("regions"), Consumed.with(Serdes.String(), avro));
                clicks.leftJoin(regions, KafkaStreamsBench::enrichedAvro)
                        .to(output, Produced.with(Serdes.String(), avro));
            }
            case "join-sum", "join-sum-nocache" -> {
                KStream<String, Long> clicks = builder.stream(required("clicks"), Consumed.with(Serdes.String(), Serdes.Long()));
                KTable<String, String> regions = builder.table(required("regions"), Consumed.with(Serdes.String(), Serdes.String()));
                KStream<String, Enriched> joined =
                        clicks.leftJoin(regions, (n, region) -> new Enriched(region == null ? "UNKNOWN" : region, n));
                joined.mapValues(e -> enriched(e.region(), e.clicks()))
                        .to(output, Produced.with(Serdes.String(), Serdes.String()));
                joined.map((user, e) -> KeyValue.pair(e.region(), e.clicks()))
                        .groupByKey(Grouped.with(Serdes.String(), Serdes.Long()))
                        .reduce(Long::sum, Materialized.with(Serdes.String(), Serdes.Long()))
                        .toStream()
                        .to(aggregate, Produced.with(Serdes.String(), Serdes.Long()));
            }
            case "enrich2-sum", "enrich2-sum-nocache" -> {  // clicks join regions, then products by the click's product
                KStream<String, Click> clicks = builder.stream(required("clicks"), Consumed.with(Serdes.String(), CLICK_JSON));
                KTable<String, String> regions = builder.table(required("regions"), Consumed.with(Serdes.String(), Serdes.String()));
                GlobalKTable<String, String> products =
                        builder.globalTable(required("products"), Consumed.with(Serdes.String(), Serdes.String()));
                KStream<String, Enriched2> joined = clicks
                        .leftJoin(regions, (c, region) -> new ClickWithRegion(c.product(), c.clicks(), region == null ? "UNKNOWN" : region))
                        .leftJoin(products, (user, c) -> c.product(),
                                (c, category) -> new Enriched2(c.region(), category == null ? "OTHER" : category, c.product(), c.clicks()));
                joined.mapValues(KafkaStreamsBench::enriched2)
                        .to(output, Produced.with(Serdes.String(), Serdes.String()));
                joined.map((user, e) -> KeyValue.pair(e.region() + "/" + e.category(), e.clicks()))
                        .groupByKey(Grouped.with(Serdes.String(), Serdes.Long()))
                        .reduce(Long::sum, Materialized.with(Serdes.String(), Serdes.Long()))
                        .toStream()
                        .to(aggregate, Produced.with(Serdes.String(), Serdes.Long()));
            }
            case "table-table" -> {  // the clicks read as a table (each user's latest count) joined with the regions
                KTable<String, Long> clicks = builder.table(required("clicks"), Consumed.with(Serdes.String(), Serdes.Long()));
                KTable<String, String> regions = builder.table(required("regions"), Consumed.with(Serdes.String(), Serdes.String()));
                clicks.leftJoin(regions, (n, region) -> enriched(region, n))
                        .toStream()
                        .to(output, Produced.with(Serdes.String(), Serdes.String()));
            }
            case "fk" -> {  // the same tables, joined by a foreign key taken from the clicks' key (KIP-1104)
                KTable<String, Long> clicks = builder.table(required("clicks"), Consumed.with(Serdes.String(), Serdes.Long()));
                KTable<String, String> regions = builder.table(required("regions"), Consumed.with(Serdes.String(), Serdes.String()));
                clicks.leftJoin(regions, (user, n) -> user, (n, region) -> enriched(region, n))
                        .toStream()
                        .to(output, Produced.with(Serdes.String(), Serdes.String()));
            }
            case "stream-stream" -> {
                KStream<String, String> views = builder.stream(required("views"), Consumed.with(Serdes.String(), Serdes.String()));
                KStream<String, Long> clicks = builder.stream(required("clicks"), Consumed.with(Serdes.String(), Serdes.Long()));
                views.join(
                                clicks,
                                (view, n) -> "{\"view\":\"" + view + "\",\"clicks\":" + n + "}",
                                JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofSeconds(10)),
                                StreamJoined.with(Serdes.String(), Serdes.String(), Serdes.Long()))
                        .to(output, Produced.with(Serdes.String(), Serdes.String()));
            }
            default -> throw new IllegalArgumentException("unknown workload " + workload);
        }
        Properties props = streamsConfig("unused", Path.of("unused"));
        return builder.build(props);
    }

    Properties streamsConfig(String appId, Path stateDir) {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        // --guarantee exactly_once_v2: transactions, as the bench's join/eos variant compares
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, opts.getOrDefault("guarantee", StreamsConfig.AT_LEAST_ONCE));
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, Integer.parseInt(opts.getOrDefault("threads", "2")));
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        // the table's source topic is its changelog (no copy of the regions topic), as usually deployed
        props.put(StreamsConfig.TOPOLOGY_OPTIMIZATION_CONFIG, StreamsConfig.OPTIMIZE);
        // at_least_once commits every 30 s by default, and the record cache flushes the aggregate on commit:
        // at the end of a backlog the last totals would wait up to 30 s. The bench commits every second.
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, Integer.parseInt(opts.getOrDefault("commit-interval-ms", "1000")));
        if (workload.endsWith("-nocache") || workload.equals("table-table") || workload.equals("fk")) {
            // every update, as ours
            props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0L);
        }
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        if (opts.containsKey("max-task-idle-ms")) {  // default 0: a task does not wait for its other inputs
            props.put(StreamsConfig.MAX_TASK_IDLE_MS_CONFIG, Long.parseLong(opts.get("max-task-idle-ms")));
        }
        return props;
    }

    long endOffsets(String topic) throws Exception {
        Map<TopicPartition, OffsetSpec> request = new HashMap<>();
        for (var partition : admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions()) {
            request.put(new TopicPartition(topic, partition.partition()), OffsetSpec.latest());
        }
        long sum = 0;
        for (var info : admin.listOffsets(request).all().get().values()) {
            sum += info.offset();
        }
        return sum;
    }

    /** Whether consumer group {@code group}'s committed offsets of {@code topic} are at its end offsets. */
    boolean inputCommitted(String group, String topic) throws Exception {
        Map<TopicPartition, OffsetSpec> request = new HashMap<>();
        for (var partition : admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions()) {
            request.put(new TopicPartition(topic, partition.partition()), OffsetSpec.latest());
        }
        var committed = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
        for (var end : admin.listOffsets(request).all().get().entrySet()) {
            var at = committed.get(end.getKey());
            if (end.getValue().offset() > 0 && (at == null || at.offset() < end.getValue().offset())) {
                return false;
            }
        }
        Thread.sleep(50);
        return true;
    }

    /** Whether the app's FK subscription topics, then its response topics, are committed to their ends. */
    boolean internalCommitted(String appId) throws Exception {
        Set<String> names = admin.listTopics().names().get();
        for (String kind : List.of("SUBSCRIPTION-REGISTRATION", "SUBSCRIPTION-RESPONSE")) {
            for (String name : names) {
                if (name.startsWith(appId + "-") && name.contains(kind) && name.endsWith("-topic")
                        && !inputCommitted(appId, name)) {
                    return false;
                }
            }
        }
        return true;
    }

    /** Records the app's consumers have read so far (inputs and repartition topics). */
    static double consumed(KafkaStreams streams) {
        double total = 0;
        for (var entry : streams.metrics().entrySet()) {
            var name = entry.getKey();
            if (name.name().equals("records-consumed-total")
                    && name.group().equals("consumer-fetch-manager-metrics")
                    && !name.tags().containsKey("topic")) {
                Object value = entry.getValue().metricValue();
                if (value instanceof Number number) {
                    total += number.doubleValue();
                }
            }
        }
        return total;
    }

    KafkaConsumer<String, Long> aggregateReader(String topic) throws Exception {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, LongDeserializer.class.getName());
        KafkaConsumer<String, Long> consumer = new KafkaConsumer<>(props);
        List<TopicPartition> partitions = new ArrayList<>();
        for (var partition : admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions()) {
            partitions.add(new TopicPartition(topic, partition.partition()));
        }
        consumer.assign(partitions);
        consumer.seekToBeginning(partitions);
        return consumer;
    }

    String run(String tag, String output, String aggregate) throws Exception {
        String appId = "ks-bench-" + workload + "-" + tag + "-" + UUID.randomUUID().toString().substring(0, 8);
        Path stateDir = Files.createTempDirectory("ks-bench-state-");
        boolean totals = workload.equals("join-sum") || workload.equals("enrich2-sum");
        boolean aggCount = workload.equals("join-sum-nocache") || workload.equals("enrich2-sum-nocache");
        KafkaConsumer<String, Long> reader = totals ? aggregateReader(aggregate) : null;
        Map<String, Long> latest = new HashMap<>();
        KafkaStreams streams = new KafkaStreams(topology(output, aggregate), streamsConfig(appId, stateDir));
        long[] running = {0};
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING && running[0] == 0) {
                running[0] = System.nanoTime();
            }
        });
        double idleSeconds = Double.parseDouble(opts.getOrDefault("idle-seconds", "60"));
        long started = System.nanoTime();
        streams.start();
        boolean done = false;
        long count = 0;
        long aggRecords = 0;
        long lastProgress = System.nanoTime();
        long lastSeen = -1;
        double lastConsumed = -1;
        boolean transactions = !opts.getOrDefault("guarantee", StreamsConfig.AT_LEAST_ONCE).equals(StreamsConfig.AT_LEAST_ONCE);
        boolean tables = workload.equals("table-table") || workload.equals("fk");
        while (true) {
            count = endOffsets(output);
            // under exactly once the output's offsets count the transactions' markers too: done when the app's
            // committed input offsets (committed with its output, in one transaction) reach the clicks' end
            // a table-table join's output count depends on the order the two tables are read in (a region read
            // after its user's click emits too): done, as under exactly once, when the inputs are committed
            // a foreign-key join is done when its subscription and response topics are committed too
            boolean ok = transactions || tables
                    ? inputCommitted(appId, required("clicks")) && (!tables || inputCommitted(appId, required("regions")))
                            && (!workload.equals("fk") || internalCommitted(appId))
                    : count >= expectCount;
            if (totals) {
                var records = reader.poll(Duration.ofMillis(50));
                for (ConsumerRecord<String, Long> record : records) {
                    latest.put(record.key(), record.value());
                    aggRecords++;
                }
                ok = ok && latest.equals(expectTotals);
            } else if (aggCount) {
                aggRecords = endOffsets(aggregate);
                ok = ok && aggRecords >= expectAggCount;
            } else {
                Thread.sleep(50);
            }
            if (ok) {
                done = true;
                break;
            }
            if (count + aggRecords != lastSeen) {
                lastSeen = count + aggRecords;
                lastProgress = System.nanoTime();
            } else if ((System.nanoTime() - lastProgress) / 1e9 > idleSeconds) {
                // no new output for a while: still reading input (a large table first)?
                double read = consumed(streams);
                if (read == lastConsumed) {
                    break;
                }
                lastConsumed = read;
                lastProgress = System.nanoTime();
            }
            if (streams.state() == KafkaStreams.State.ERROR || streams.state() == KafkaStreams.State.NOT_RUNNING) {
                break;
            }
        }
        double seconds = ((done ? System.nanoTime() : lastProgress) - started) / 1e9;  // not done: to the last output
        double startup = running[0] == 0 ? -1 : (running[0] - started) / 1e9;
        streams.close(Duration.ofSeconds(60));
        if (reader != null) {
            reader.close();
        }
        deleteRecursively(stateDir);
        // the run's internal topics (repartition, changelogs) are not needed any more
        Set<String> internal = admin.listTopics().names().get().stream()
                .filter(name -> name.startsWith(appId + "-"))
                .collect(Collectors.toSet());
        if (!internal.isEmpty()) {
            admin.deleteTopics(internal).all().get();
        }
        return String.format(Locale.ROOT,
                "{\"tag\": \"%s\", \"workload\": \"%s\", \"seconds\": %.3f, \"startup_seconds\": %.3f, \"done\": %s, "
                        + "\"output_records\": %d, \"aggregate_records\": %d, \"application_id\": \"%s\"}",
                tag, workload, seconds, startup, done, count, aggRecords, appId);
    }

    static void deleteRecursively(Path root) throws IOException {
        if (!Files.exists(root)) {
            return;
        }
        try (Stream<Path> paths = Files.walk(root)) {
            paths.sorted(Comparator.reverseOrder()).map(Path::toFile).forEach(File::delete);
        }
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i < args.length; i++) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("expected --name value pairs, got " + args[i]);
            }
            opts.put(args[i].substring(2), args[++i]);
        }
        KafkaStreamsBench bench = new KafkaStreamsBench(opts);
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        System.out.println("KS_READY");
        System.out.flush();
        String line;
        while ((line = stdin.readLine()) != null) {
            String[] words = line.trim().split("\\s+");
            if (words.length == 0 || words[0].isEmpty()) {
                continue;
            }
            if (words[0].equals("quit")) {
                break;
            }
            if (!words[0].equals("run") || words.length < 3) {
                throw new IllegalArgumentException("expected: run TAG OUTPUT_TOPIC [AGGREGATE_TOPIC], got " + line);
            }
            String result = bench.run(words[1], words[2], words.length > 3 ? words[3] : null);
            System.out.println("KS_RESULT " + result);
            System.out.flush();
        }
        bench.admin.close(Duration.ofSeconds(10));
        System.exit(0);
    }
}
