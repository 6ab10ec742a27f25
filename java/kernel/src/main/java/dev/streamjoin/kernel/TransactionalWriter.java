package dev.streamjoin.kernel;

import java.util.HashMap;
import java.util.Map;

import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.util.LongAccumulator;

/**
 * Exactly-once Kafka output ({@code output.delivery: exactly_once}): each task of the write stage sends its
 * rows in one Kafka transaction, with a marker "task t of T wrote batch N" on the pipeline's marker topic in
 * the same transaction ({@link TransactionalTask}). A rerun of batch N (the driver died before
 * {@code commits/N}, or Spark retried a task) finds the committed marker and sends nothing again; the rows
 * are still read, so the batch's state is rebuilt as before.
 *
 * <p>The rows are {@code key binary, value binary, topic string, headers array<struct<key string,
 * value binary>>}, in that order (Spark's Kafka sink's columns). The task index names the producer's
 * transactional id, so the write's partitioning must be the same when a batch runs again: it is, for the
 * same offsets and the same plan (the driver logs a batch's offsets before it runs), and a marker records T
 * so that a change is an error, not a silent duplicate.
 */
public final class TransactionalWriter {
    private TransactionalWriter() {}

    /**
     * Write one batch's Kafka rows exactly once; returns {@code "tasks=T sent=S skipped=K"} (K: tasks whose
     * batch was already committed).
     *
     * @param producer the producer's settings (bootstrap and security), without serializers or ids
     * @param pipeline the pipeline's name, part of every transactional id ({@code streamjoin-<pipeline>-<t>})
     * @param markerTopic the pipeline's marker topic (one partition)
     * @param query the checkpoint's query id: markers of another checkpoint's batches are not this one's
     * @param checkMarkers whether every task looks for its marker first (a driver's first batch, which may be
     *     a rerun); a retried task attempt always does
     */
    public static String write(SparkSession session, Dataset<Row> rows, Map<String, String> producer,
                               String pipeline, String markerTopic, String query, long batchId,
                               boolean checkMarkers) {
        JavaRDD<InternalRow> rdd = rows.queryExecution().toRdd().toJavaRDD();
        int tasks = rdd.getNumPartitions();
        LongAccumulator sent = session.sparkContext().longAccumulator("streamjoin transactional records");
        LongAccumulator skipped = session.sparkContext().longAccumulator("streamjoin transactional tasks skipped");
        TransactionalTask task = new TransactionalTask(new HashMap<>(producer), pipeline, markerTopic, query, batchId,
                tasks, checkMarkers, sent, skipped);
        rdd.foreachPartition(task);
        return "tasks=" + tasks + " sent=" + sent.value() + " skipped=" + skipped.value();
    }

    /** Close the producers of {@code pipeline} that this JVM keeps (in local mode: every task's). */
    public static void close(String pipeline) {
        TransactionalTask.closeAll(pipeline);
    }
}
