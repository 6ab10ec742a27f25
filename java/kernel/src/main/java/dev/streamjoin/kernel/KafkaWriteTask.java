package dev.streamjoin.kernel;

import java.io.Serializable;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.spark.api.java.function.VoidFunction;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.util.LongAccumulator;

/**
 * One task of {@link KafkaTaskWriter}: its rows, in their order, through this executor's pooled idempotent
 * producer ({@link IdempotentProducers}), then a flush. The first send error stops the sending; after the flush
 * it fails the task, typed ({@link KafkaSendFailures}), and the producer is dropped from the pool.
 */
final class KafkaWriteTask implements VoidFunction<Iterator<InternalRow>>, Serializable {
    private static final long serialVersionUID = 1L;

    private final HashMap<String, String> settings;
    private final LongAccumulator sent;

    KafkaWriteTask(HashMap<String, String> settings, LongAccumulator sent) {
        this.settings = settings;
        this.sent = sent;
    }

    /** The first failed send of a task, and its record's topic. */
    private record Failure(String topic, Exception error) {}

    @Override
    public void call(Iterator<InternalRow> rows) {
        if (!rows.hasNext()) {
            return;
        }
        IdempotentProducers.Lease lease = IdempotentProducers.acquire(settings);
        KafkaProducer<byte[], byte[]> producer = lease.producer;
        AtomicReference<Failure> failure = new AtomicReference<>();
        Map<String, Callback> callbacks = new HashMap<>();  // one per topic: the failure names its topic
        String topic = "?";
        boolean failed = true;
        try {
            long count = 0;
            while (rows.hasNext() && failure.get() == null) {
                ProducerRecord<byte[], byte[]> record = KafkaRecords.of(rows.next());
                topic = record.topic();
                producer.send(record, callbacks.computeIfAbsent(topic, t -> (metadata, error) -> {
                    if (error != null) {
                        failure.compareAndSet(null, new Failure(t, error));
                    }
                }));
                count++;
            }
            producer.flush();
            Failure first = failure.get();
            if (first != null) {
                throw KafkaSendFailures.typed(first.topic(), first.error());
            }
            sent.add(count);
            failed = false;
        } catch (KernelException e) {
            throw e;
        } catch (RuntimeException e) {  // thrown by send or flush themselves (a closed or fenced producer, an interrupt)
            Failure first = failure.get();
            throw first != null ? KafkaSendFailures.typed(first.topic(), first.error()) : KafkaSendFailures.typed(topic, e);
        } finally {
            IdempotentProducers.release(lease, failed);
        }
    }
}
