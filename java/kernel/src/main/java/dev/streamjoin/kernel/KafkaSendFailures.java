package dev.streamjoin.kernel;

import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.InvalidRecordException;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.InvalidTopicException;
import org.apache.kafka.common.errors.RecordBatchTooLargeException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.spark.sql.catalyst.InternalRow;

/**
 * A producer's send or flush error as the kernel's kind of failure, decided by Kafka's own class of it.
 * Terminal, what a person must fix first (a restart fails the same way): credentials refused, the user not
 * allowed to write the topic, a record larger than the topic takes, a topic name or a record the broker
 * refuses. Anything else is transient, a restart from the checkpoint may help: Kafka's
 * {@code RetriableException}s (timeouts, a lost connection, a leader not known yet; a topic missing from the
 * metadata too, as Kafka counts {@code UnknownTopicOrPartitionException} and the metadata wait's timeout: the
 * restarted job's topic check then says whether it is gone), and every error not known to be permanent.
 *
 * <p>An instance follows one task's sends: a callback per topic keeps the first failed send and its topic.
 */
final class KafkaSendFailures {
    private static final int MAX_DEPTH = 8;

    /** A failed send and its record's topic. */
    private record Failure(String topic, Exception error) {}

    private final AtomicReference<Failure> first = new AtomicReference<>();
    private final Map<String, Callback> callbacks = new HashMap<>();

    /** The topic of the last record sent (or about to be): a send's, a flush's or a commit's own error names it. */
    private String topic;

    KafkaSendFailures() {
        this("?");
    }

    /** @param topic what an error before the first send names (a transaction's marker topic) */
    KafkaSendFailures(String topic) {
        this.topic = topic;
    }

    /**
     * Send {@code rows} (Kafka rows, {@link KafkaRecords}) in their order, each with its topic's callback, until
     * they end or a send has failed; returns how many were sent.
     */
    long sendAll(Producer<byte[], byte[]> producer, Iterator<InternalRow> rows) {
        long count = 0;
        while (rows.hasNext() && !failed()) {
            send(producer, KafkaRecords.of(rows.next()));
            count++;
        }
        return count;
    }

    /** Send {@code record} with its topic's callback. */
    void send(Producer<byte[], byte[]> producer, ProducerRecord<byte[], byte[]> record) {
        topic = record.topic();
        producer.send(record, callback(topic));
    }

    /** The callback of a send to {@code topic} (called by the task's thread only). */
    Callback callback(String topic) {
        return callbacks.computeIfAbsent(topic, t -> (metadata, error) -> {
            if (error != null) {
                first.compareAndSet(null, new Failure(t, error));
            }
        });
    }

    /** Whether a send has failed. */
    boolean failed() {
        return first.get() != null;
    }

    /** The task's failure, typed: its first failed send's error, else {@code thrown} (by a send, a flush, a commit)
     * writing to the last record's topic. */
    KernelException typed(RuntimeException thrown) {
        Failure failure = first.get();
        return failure != null ? classify(failure.topic(), failure.error()) : classify(topic, thrown);
    }

    /** Fail with the first failed send's error, typed, if a send failed. */
    void check() {
        Failure failure = first.get();
        if (failure != null) {
            throw classify(failure.topic(), failure.error());
        }
    }

    /** {@code error} (a send's, a flush's) writing to {@code topic}, typed; its message names the topic, the error
     * and what to do. */
    static KernelException classify(String topic, Throwable error) {
        String what = "writing to Kafka topic '" + topic + "' failed: " + error.getClass().getName() + ": "
                + error.getMessage();
        String action = action(topic, error);
        if (action != null) {
            return new TerminalKernelException(what + " (a person must act: " + action + "; then restart the job)",
                    error);
        }
        return new TransientKernelException(what + " (a restart from the checkpoint may help)", error);
    }

    /** What a person must do about {@code error} or one of its causes, or null when a restart may help. */
    private static String action(String topic, Throwable error) {
        Throwable t = error;
        for (int depth = 0; t != null && depth < MAX_DEPTH; depth++, t = t.getCause()) {
            if (t instanceof AuthenticationException) {
                return "check the Kafka connection's credentials";
            }
            if (t instanceof AuthorizationException) {
                return "grant the Kafka connection's user WRITE and DESCRIBE on topic '" + topic + "' (and the "
                        + "cluster access named)";
            }
            if (t instanceof RecordTooLargeException || t instanceof RecordBatchTooLargeException) {
                return "raise max.message.bytes of topic '" + topic + "' (and the broker's message.max.bytes, "
                        + "the producer's max.request.size, when the record is larger than those) above the "
                        + "record's size, or make the pipeline's records smaller";
            }
            if (t instanceof InvalidTopicException) {
                return "give the pipeline an output topic with a valid name instead of '" + topic + "'";
            }
            if (t instanceof InvalidRecordException) {
                return "make topic '" + topic + "' accept the pipeline's records (e.g. a compacted topic takes no "
                        + "record without a key)";
            }
        }
        return null;
    }
}
