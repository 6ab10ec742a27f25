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
 * At-least-once Kafka output written by the tasks themselves ({@code output.delivery: at_least_once}, the
 * default): each task of the write stage sends its rows in their order through its executor's pooled idempotent
 * producer ({@link KafkaWriteTask}) and flushes it; a send error fails the task, typed terminal or transient
 * ({@link KafkaSendFailures}). The records are the ones Spark's Kafka sink would send for the same rows
 * ({@link KafkaRecords}).
 *
 * <p>The rows are {@code key binary, value binary, topic string, headers array<struct<key string, value
 * binary>>}, in that order.
 */
public final class KafkaTaskWriter {
    private KafkaTaskWriter() {}

    /**
     * Write the rows; returns {@code "tasks=T sent=S"}.
     *
     * @param producer the producer's settings (bootstrap, security, batching), without serializers, acks or
     *     idempotence (set here)
     */
    public static String write(SparkSession session, Dataset<Row> rows, Map<String, String> producer) {
        JavaRDD<InternalRow> rdd = rows.queryExecution().toRdd().toJavaRDD();
        LongAccumulator sent = session.sparkContext().longAccumulator("streamjoin Kafka records");
        rdd.foreachPartition(new KafkaWriteTask(new HashMap<>(producer), sent));
        return "tasks=" + rdd.getNumPartitions() + " sent=" + sent.value();
    }

    /** Close the producers this JVM keeps (in local mode: every task's); the job ends. */
    public static void close() {
        IdempotentProducers.closeAll();
    }
}
