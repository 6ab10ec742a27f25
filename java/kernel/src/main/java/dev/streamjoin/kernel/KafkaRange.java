package dev.streamjoin.kernel;

import java.io.Serializable;

/**
 * The records of one Kafka partition a batch reads: offsets {@code [from, until)} ({@link #EARLIEST} for
 * {@code from}: the partition's first offset). Read committed, the records may be fewer than the offsets
 * (transaction markers, aborted records, compacted ones). No Kafka type in its members: a driver serializes
 * it without kafka-clients.
 */
record KafkaRange(String topic, int partition, long from, long until) implements Serializable {
    /** {@code from}: the partition's earliest offset (Python's {@code -2}, as Spark's Kafka source has it). */
    static final long EARLIEST = -2;

    @Override
    public String toString() {
        return topic + "-" + partition + " [" + (from == EARLIEST ? "earliest" : Long.toString(from)) + ", " + until
                + ")";
    }
}
