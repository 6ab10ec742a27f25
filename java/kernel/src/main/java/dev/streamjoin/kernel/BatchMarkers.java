package dev.streamjoin.kernel;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The marker topic of an exactly-once pipeline: one partition, one record per task and batch, written in the
 * task's transaction. Key {@code task-<t>}; value {@code <query> <batch> <tasks>} as text, the query being the
 * checkpoint's id: a pipeline started again from a new checkpoint does not take an older one's markers for its
 * own. Only the newest marker of a task matters (the topic may be compacted).
 */
final class BatchMarkers {
    /** How long reading a task's marker may take before the task fails (a restart can help). */
    private static final Duration READ_TIMEOUT = Duration.ofSeconds(60);
    private static final long FIRST_WINDOW = 64;

    /** A task's newest committed marker; batch -1 when it has none. */
    record Marker(String query, long batch, int tasks) {
        static final Marker NONE = new Marker("", -1, 0);
    }

    private BatchMarkers() {}

    static ProducerRecord<byte[], byte[]> record(String topic, int task, Marker marker) {
        String value = marker.query() + " " + marker.batch() + " " + marker.tasks();
        return new ProducerRecord<>(topic, 0, key(task), value.getBytes(StandardCharsets.UTF_8));
    }

    private static byte[] key(int task) {
        return ("task-" + task).getBytes(StandardCharsets.UTF_8);
    }

    /**
     * The newest marker of {@code task} that a read-committed consumer sees, if it is {@code query}'s (else
     * {@link Marker#NONE}): read backwards from the end in growing windows (every task with rows writes one
     * per batch, so the newest is near the end).
     */
    static Marker read(Map<String, Object> settings, String topic, int task, String query) {
        Map<String, Object> config = new HashMap<>(settings);
        config.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        byte[] wanted = key(task);
        TopicPartition partition = new TopicPartition(topic, 0);
        long deadline = System.nanoTime() + READ_TIMEOUT.toNanos();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(config)) {
            consumer.assign(List.of(partition));
            long begin;
            long upTo;
            try {
                begin = consumer.beginningOffsets(List.of(partition), READ_TIMEOUT).get(partition);
                upTo = consumer.endOffsets(List.of(partition), READ_TIMEOUT).get(partition);  // the stable end
            } catch (TimeoutException e) {
                throw new TransientKernelException("the offsets of " + topic + " (the pipeline's marker topic) for "
                        + "task " + task + " did not come within " + READ_TIMEOUT.toSeconds() + " s: " + e.getMessage()
                        + " (a restart can help once the broker answers)", e);
            }
            for (long window = FIRST_WINDOW; upTo > begin; window *= 4) {
                long from = Math.max(begin, upTo - window);
                Marker found = Marker.NONE;
                consumer.seek(partition, from);
                while (consumer.position(partition) < upTo) {
                    if (System.nanoTime() > deadline) {
                        throw new TransientKernelException("reading the markers of task " + task + " on " + topic
                                + " took over " + READ_TIMEOUT.toSeconds() + " s (a restart can help)");
                    }
                    for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                        if (r.offset() < upTo && Arrays.equals(r.key(), wanted)) {
                            found = parse(r.value());  // a record not in this format is no marker of ours
                        }
                    }
                }
                if (found.batch() >= 0) {
                    return found.query().equals(query) ? found : Marker.NONE;
                }
                upTo = from;
            }
            return Marker.NONE;
        }
    }

    private static Marker parse(byte[] value) {
        String[] parts = value == null ? new String[0] : new String(value, StandardCharsets.UTF_8).split(" ");
        try {
            return parts.length == 3 ? new Marker(parts[0], Long.parseLong(parts[1]), Integer.parseInt(parts[2]))
                    : new Marker("", 0, 0);
        } catch (NumberFormatException e) {
            return new Marker("", 0, 0);
        }
    }
}
