package dev.streamjoin.kernel;

import java.io.Serializable;
import java.time.Duration;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.function.VoidFunction;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.util.LongAccumulator;

/**
 * One task of {@link TransactionalWriter}: its rows and its marker in one transaction of the producer
 * {@code streamjoin-<pipeline>-<task>}. The producer is kept per executor between batches (one
 * {@code initTransactions} per producer, which fences an earlier attempt's producer of the same id and
 * aborts its open transaction); a failed task's producer is dropped, so its retry starts a fresh one.
 */
final class TransactionalTask implements VoidFunction<Iterator<InternalRow>>, Serializable {
    private static final long serialVersionUID = 1L;
    /**
     * A crash point for tests, {@code <mid_transaction|after_commit|halt_after_commit>:<batch>:<task>} (a system
     * property): the task fails with its transaction open or committed, or the JVM halts after the commit, as
     * a killed driver does.
     */
    static final String FAULT = "streamjoin.kernel.fault";
    private static final Map<String, KafkaProducer<byte[], byte[]>> PRODUCERS = new ConcurrentHashMap<>();

    private final HashMap<String, String> settings;
    private final String pipeline;
    private final String markerTopic;
    private final String query;
    private final long batch;
    private final int tasks;
    private final boolean checkMarkers;
    private final LongAccumulator sent;
    private final LongAccumulator skipped;

    TransactionalTask(HashMap<String, String> settings, String pipeline, String markerTopic, String query, long batch,
                      int tasks, boolean checkMarkers, LongAccumulator sent, LongAccumulator skipped) {
        this.settings = settings;
        this.pipeline = pipeline;
        this.markerTopic = markerTopic;
        this.query = query;
        this.batch = batch;
        this.tasks = tasks;
        this.checkMarkers = checkMarkers;
        this.sent = sent;
        this.skipped = skipped;
    }

    @Override
    public void call(Iterator<InternalRow> rows) {
        if (!rows.hasNext()) {
            return;  // nothing to send, now or in any attempt: no transaction, no marker
        }
        TaskContext context = TaskContext.get();
        int task = context.partitionId();
        boolean retried = context.attemptNumber() > 0 || context.stageAttemptNumber() > 0;
        String id = "streamjoin-" + pipeline + "-" + task;
        // settings changed (a rotated password): another producer; the key does not hold the settings' secrets
        String cacheKey = id + " " + settings.get("bootstrap.servers") + " " + Integer.toHexString(settings.hashCode());
        if (retried) {
            drop(cacheKey);
        }
        if ((checkMarkers || retried) && committedBefore(task)) {
            rows.forEachRemaining(row -> { });  // the batch's state is still built by reading its rows
            skipped.add(1);
            return;
        }
        KafkaProducer<byte[], byte[]> producer = PRODUCERS.computeIfAbsent(cacheKey, key -> open(id));
        String fault = System.getProperty(FAULT, "");
        KafkaSendFailures failures = new KafkaSendFailures(markerTopic);
        try {
            producer.beginTransaction();
            long count = failures.sendAll(producer, rows);
            if (fault.equals("mid_transaction:" + batch + ":" + task)) {
                producer.flush();  // the task's records on the broker, in its open transaction
                PRODUCERS.remove(cacheKey);
                producer.close(Duration.ZERO);  // as a killed process leaves it: no abort
                throw new TransientKernelException("test fault " + fault + ": the task died mid-transaction");
            }
            failures.check();  // the transaction is aborted below: nothing of it is read committed
            failures.send(producer,
                    BatchMarkers.record(markerTopic, task, new BatchMarkers.Marker(query, batch, tasks)));
            producer.commitTransaction();
            sent.add(count);
            if (fault.equals("halt_after_commit:" + batch + ":" + task)) {
                Runtime.getRuntime().halt(137);
            }
            if (fault.equals("after_commit:" + batch + ":" + task)) {
                throw new TransientKernelException("test fault " + fault + ": the task died after its commit");
            }
        } catch (KernelException e) {
            drop(cacheKey);  // a graceful close aborts an open transaction; a retry starts a fresh producer
            throw e;
        } catch (RuntimeException e) {  // a send's error (the commit fails with it), a fenced producer, an interrupt
            drop(cacheKey);
            throw failures.typed(e);
        }
    }

    /** Whether this task's marker says batch {@link #batch} (or a later one) is committed. */
    private boolean committedBefore(int task) {
        BatchMarkers.Marker marker = BatchMarkers.read(new HashMap<String, Object>(settings), markerTopic, task, query);
        if (marker.batch() == batch && marker.tasks() != tasks) {
            throw new TerminalKernelException("pipeline " + pipeline + ": batch " + batch + " was written by "
                    + marker.tasks() + " tasks and runs again in " + tasks + ": its Kafka output cannot be kept "
                    + "exactly once (a person must act: reprocess the affected days)");
        }
        return marker.batch() >= batch;
    }

    private KafkaProducer<byte[], byte[]> open(String id) {
        Map<String, Object> config = new HashMap<>(settings);
        config.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, id);
        config.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        config.put(ProducerConfig.ACKS_CONFIG, "all");
        config.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        config.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(config);
        producer.initTransactions();
        return producer;
    }

    /** Close this JVM's producers of {@code pipeline} (its job ends). */
    static void closeAll(String pipeline) {
        String prefix = "streamjoin-" + pipeline + "-";
        for (String cacheKey : PRODUCERS.keySet()) {
            if (cacheKey.startsWith(prefix)) {
                drop(cacheKey);
            }
        }
    }

    private static void drop(String cacheKey) {
        KafkaProducer<byte[], byte[]> producer = PRODUCERS.remove(cacheKey);
        if (producer != null) {
            producer.close(Duration.ofSeconds(5));
        }
    }
}
