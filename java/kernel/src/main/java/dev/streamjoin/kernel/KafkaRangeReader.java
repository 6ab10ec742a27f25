package dev.streamjoin.kernel;

import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.InvalidOffsetException;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A consumer assigned to one Kafka partition (assign and seek, no group), kept per executor JVM between
 * batches by client settings and partition: the next batch of a partition starts where the last one ended,
 * so it goes on from the records the consumer already fetched. Read as Spark's {@code KafkaDataConsumer}
 * reads a range: offsets the consumer skips (transaction markers, aborted records when read committed,
 * compacted records) are not records; an offset Kafka no longer has is data loss, and fails the read.
 */
final class KafkaRangeReader {
    /** how long one poll waits for records */
    private static final Duration POLL = Duration.ofMillis(500);
    /** how long a range may give nothing new before the read fails (Spark's {@code spark.network.timeout}) */
    private static final long STALL_MS = 120_000;
    /** pooled readers unused this long are closed */
    private static final long IDLE_MS = 5 * 60_000;
    /** the consumer's settings besides the connection's: bytes as they are, positions only from seek */
    private static final Map<String, String> FIXED = Map.of(
            ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName(),
            ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName(),
            ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none",
            ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false",
            ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    /** numbers the consumers' client ids (one id per consumer: a JVM registers each client's metrics by id) */
    private static final AtomicLong CONSUMERS = new AtomicLong();

    /** Pool key: the settings (their secrets included, never printed) and the partition. */
    private record Key(Map<String, String> settings, TopicPartition partition) {
        @Override
        public String toString() {
            return partition.toString();
        }
    }

    private static final Map<Key, ConcurrentLinkedDeque<KafkaRangeReader>> POOL = new ConcurrentHashMap<>();

    private final Key key;
    private final KafkaConsumer<byte[], byte[]> consumer;
    /** records fetched and not yet handed out, from {@link #next} on */
    private Iterator<ConsumerRecord<byte[], byte[]>> fetched = Collections.emptyIterator();
    private ConsumerRecord<byte[], byte[]> pending;
    /** the offset the fetched records and the consumer's position go on from; -1: unknown (seek first) */
    private long next = -1;
    private long lastUsed;

    private KafkaRangeReader(Key key) {
        this.key = key;
        Map<String, Object> config = new HashMap<>(key.settings());
        config.putAll(FIXED);
        config.put(ConsumerConfig.CLIENT_ID_CONFIG,
                "streamjoin-reader-" + key.partition() + "-" + CONSUMERS.incrementAndGet());
        this.consumer = new KafkaConsumer<>(config);
        consumer.assign(List.of(key.partition()));
    }

    /**
     * A reader of {@code topic}-{@code partition} with {@code settings} (the connection's Java client settings and the
     * fetch sizes): a pooled one, or a new one when none is free or {@code fresh} (a retried task: Spark drops
     * its cached consumers then too).
     */
    static KafkaRangeReader borrow(Map<String, String> settings, String topic, int partition, boolean fresh) {
        Key key = new Key(settings, new TopicPartition(topic, partition));
        ConcurrentLinkedDeque<KafkaRangeReader> free = POOL.get(key);
        if (fresh && free != null) {
            for (KafkaRangeReader reader; (reader = free.poll()) != null; ) {
                reader.close();
            }
        }
        KafkaRangeReader reader = free == null ? null : free.poll();
        return reader != null ? reader : new KafkaRangeReader(key);
    }

    /** Give the reader back for the next range of its partition (closes the pool's long-idle readers). */
    void release() {
        long now = System.currentTimeMillis();
        lastUsed = now;
        POOL.computeIfAbsent(key, k -> new ConcurrentLinkedDeque<>()).push(this);
        for (ConcurrentLinkedDeque<KafkaRangeReader> free : POOL.values()) {
            for (KafkaRangeReader idle : free) {
                if (now - idle.lastUsed > IDLE_MS && free.remove(idle)) {
                    idle.close();
                }
            }
        }
    }

    void close() {
        try {
            consumer.close(Duration.ZERO);
        } catch (RuntimeException e) {
            // a consumer that cannot close cleanly is dropped all the same
        }
    }

    /**
     * The records of {@code range}, in offset order (the range's partition must be this reader's).
     *
     * @throws TerminalKernelException Kafka no longer has some of the range's offsets (data loss)
     * @throws TransientKernelException the range's end was not reached for {@link #STALL_MS}
     */
    Iterator<ConsumerRecord<byte[], byte[]>> read(KafkaRange range) {
        long from = range.from();
        if (from == KafkaRange.EARLIEST) {
            consumer.seekToBeginning(List.of(key.partition()));
            from = consumer.position(key.partition());
            reset(from);
        } else if (from != next) {
            consumer.seek(key.partition(), from);
            reset(from);
        }
        long until = range.until();
        return new Iterator<>() {
            private ConsumerRecord<byte[], byte[]> record;

            @Override
            public boolean hasNext() {
                if (record == null) {
                    record = advance(range, until);
                }
                return record != null;
            }

            @Override
            public ConsumerRecord<byte[], byte[]> next() {
                if (!hasNext()) {
                    throw new NoSuchElementException();
                }
                ConsumerRecord<byte[], byte[]> out = record;
                record = null;
                return out;
            }
        };
    }

    private void reset(long position) {
        fetched = Collections.emptyIterator();
        pending = null;
        next = position;
    }

    /** The next record of the range, null at its end: polls as needed, skipping offsets that are no records. */
    private ConsumerRecord<byte[], byte[]> advance(KafkaRange range, long until) {
        long stalledSince = -1;
        while (next < until) {
            if (pending == null && fetched.hasNext()) {
                pending = fetched.next();
            }
            if (pending != null) {
                if (pending.offset() < next) {  // fetched before a seek back: not this range's
                    pending = null;
                    continue;
                }
                if (pending.offset() >= until) {  // the offsets up to it are no records: the range ends here
                    next = until;
                    return null;
                }
                ConsumerRecord<byte[], byte[]> record = pending;
                pending = null;
                next = record.offset() + 1;
                return record;
            }
            long position = consumer.position(key.partition());
            if (position > next) {  // the consumer went past offsets that are no records
                next = Math.min(position, until);
                continue;
            }
            try {
                fetched = consumer.poll(POLL).records(key.partition()).iterator();
            } catch (InvalidOffsetException e) {
                throw lost(range, e);
            }
            if (fetched.hasNext() || consumer.position(key.partition()) > next) {
                stalledSince = -1;
            } else if (stalledSince < 0) {
                stalledSince = System.currentTimeMillis();
            } else if (System.currentTimeMillis() - stalledSince > STALL_MS) {
                throw new TransientKernelException("could not read " + range + " from Kafka: no record at offset "
                        + next + " for " + STALL_MS / 1000 + " s (" + ends() + "); the job restarts to read it again");
            }
        }
        return null;
    }

    /** Data loss: {@code range} needs offsets Kafka does not have (any more). */
    private TerminalKernelException lost(KafkaRange range, InvalidOffsetException cause) {
        long offset = next;
        next = -1;
        return new TerminalKernelException("Kafka no longer has offset " + offset + " of " + range + " ("
                + ends() + "): retention or a deleted and recreated topic removed records the batch must read, so "
                + "it cannot be processed exactly; a person must act: reprocess the pipeline from a new checkpoint "
                + "starting at the topic's earliest offsets", cause);
    }

    /** The partition's first and end offsets, for messages. */
    private String ends() {
        try {
            TopicPartition p = key.partition();
            return "the partition holds offsets " + consumer.beginningOffsets(List.of(p)).get(p) + " to "
                    + consumer.endOffsets(List.of(p)).get(p);
        } catch (RuntimeException e) {
            return "its offsets unknown: " + e.getClass().getSimpleName();
        }
    }
}
