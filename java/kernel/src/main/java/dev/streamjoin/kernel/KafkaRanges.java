package dev.streamjoin.kernel;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * A batch's input read by the kernel's tasks: a frame whose partition t holds task t's records ({@link
 * KafkaRangesRDD}), so the join needs no shuffle before its rules ({@link Kernel#join} with {@code aligned}).
 */
public final class KafkaRanges {
    /** Python's {@code source.RAW_DDL} (every column nullable, as Spark's Kafka source has them). */
    static final StructType SCHEMA = new StructType()
            .add("key", DataTypes.BinaryType)
            .add("value", DataTypes.BinaryType)
            .add("topic", DataTypes.StringType)
            .add("partition", DataTypes.IntegerType)
            .add("offset", DataTypes.LongType)
            .add("ts", DataTypes.LongType);

    private KafkaRanges() {}

    /**
     * The batch's records as Kafka-shaped rows, partition t holding task t's.
     *
     * @param settings the consumer's settings: the connection's Java client settings (security included) and
     *     fetch sizes
     * @param ranges a line per Kafka partition to read, {@code topic \t partition \t from \t until \t G|C}: G a
     *     global table's (every task reads it), C a co-partitioned input's (task {@code partition} reads it);
     *     from -2: the partition's earliest offset
     * @param tasks the pipeline's partitions (the kernel's tasks)
     */
    public static Dataset<Row> frame(SparkSession session, Map<String, String> settings, String ranges, int tasks) {
        KafkaRangesRDD rdd = new KafkaRangesRDD(session.sparkContext(), new HashMap<>(settings), tasks(ranges, tasks));
        return session.internalCreateDataFrame(rdd, SCHEMA, false);
    }

    /** Each task's ranges ({@link #frame}'s {@code ranges}). */
    static List<List<KafkaRange>> tasks(String ranges, int tasks) {
        List<List<KafkaRange>> byTask = new ArrayList<>();
        for (int t = 0; t < tasks; t++) {
            byTask.add(new ArrayList<>());
        }
        for (String line : ranges.split("\n")) {
            if (line.isEmpty()) {
                continue;
            }
            String[] f = line.split("\t");
            KafkaRange range = new KafkaRange(f[0], Integer.parseInt(f[1]), Long.parseLong(f[2]), Long.parseLong(f[3]));
            if (f[4].equals("G")) {
                byTask.forEach(task -> task.add(range));
            } else {
                byTask.get(TaskPartitioner.task(range.partition(), tasks)).add(range);
            }
        }
        return byTask;
    }
}
