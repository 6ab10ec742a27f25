package dev.streamjoin.kernel;

import java.io.Serializable;
import java.util.HashMap;
import java.util.Iterator;

import org.apache.kafka.clients.producer.KafkaProducer;
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

    @Override
    public void call(Iterator<InternalRow> rows) {
        if (!rows.hasNext()) {
            return;
        }
        IdempotentProducers.Lease lease = IdempotentProducers.acquire(settings);
        KafkaProducer<byte[], byte[]> producer = lease.producer;
        KafkaSendFailures failures = new KafkaSendFailures();
        boolean failed = true;
        try {
            long count = failures.sendAll(producer, rows);
            producer.flush();
            failures.check();
            sent.add(count);
            failed = false;
        } catch (KernelException e) {
            throw e;
        } catch (RuntimeException e) {  // thrown by send or flush themselves (a closed or fenced producer, an interrupt)
            throw failures.typed(e);
        } finally {
            IdempotentProducers.release(lease, failed);
        }
    }
}
