package dev.streamjoin.kernel;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.spark.Dependency;
import org.apache.spark.Partition;
import org.apache.spark.SparkContext;
import org.apache.spark.TaskContext;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.unsafe.types.UTF8String;
import org.apache.spark.util.TaskCompletionListener;

import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag$;

/**
 * A batch's Kafka records, read by the kernel's tasks themselves: partition t reads its ranges ({@link
 * KafkaRanges#tasks}: partition t of every co-partitioned input, every partition of a global table) with
 * consumers kept per executor ({@link KafkaRangeReader}), each range in offset order. Its rows are Spark's
 * Kafka source's as Python's {@code source.RAW_DDL} has them: {@code key, value, topic, partition, offset, ts}
 * (ts: the record's timestamp, epoch ms).
 */
final class KafkaRangesRDD extends RDD<InternalRow> {
    private static final long serialVersionUID = 1L;
    private final HashMap<String, String> settings;
    private final List<List<KafkaRange>> tasks;

    /** A task's ranges. */
    private record TaskRanges(int index, List<KafkaRange> ranges) implements Partition {
        @Override
        public int hashCode() {
            return index;
        }

        @Override
        public boolean equals(Object other) {
            return other instanceof TaskRanges t && t.index == index && t.ranges.equals(ranges);
        }
    }

    /**
     * @param settings the consumer's settings: the connection's Java client settings (security included) and
     *     fetch sizes
     * @param tasks task t's ranges at t
     */
    KafkaRangesRDD(SparkContext context, HashMap<String, String> settings, List<List<KafkaRange>> tasks) {
        super(context, scala.collection.immutable.List$.MODULE$.<Dependency<?>>empty(),
                ClassTag$.MODULE$.apply(InternalRow.class));
        this.settings = settings;
        this.tasks = tasks;
    }

    @Override
    public Partition[] getPartitions() {
        Partition[] partitions = new Partition[tasks.size()];
        for (int t = 0; t < partitions.length; t++) {
            partitions[t] = new TaskRanges(t, tasks.get(t));
        }
        return partitions;
    }

    @Override
    public scala.collection.Iterator<InternalRow> compute(Partition split, TaskContext context) {
        Rows rows = new Rows(((TaskRanges) split).ranges(), context.attemptNumber() > 0);
        context.addTaskCompletionListener((TaskCompletionListener) done -> rows.close());
        return CollectionConverters.asScala(rows);
    }

    /** A task's records, range after range; each range's reader goes back to the pool once it is read. */
    private final class Rows implements Iterator<InternalRow> {
        private final Iterator<KafkaRange> ranges;
        private final boolean retried;
        private KafkaRange range;
        private UTF8String topic;
        private KafkaRangeReader reader;
        private Iterator<ConsumerRecord<byte[], byte[]>> records;

        Rows(List<KafkaRange> ranges, boolean retried) {
            this.ranges = new ArrayList<>(ranges).iterator();
            this.retried = retried;
        }

        @Override
        public boolean hasNext() {
            while (records == null || !records.hasNext()) {
                if (reader != null) {
                    reader.release();
                    reader = null;
                }
                if (!ranges.hasNext()) {
                    return false;
                }
                range = ranges.next();
                topic = UTF8String.fromString(range.topic());
                reader = KafkaRangeReader.borrow(settings, range.topic(), range.partition(), retried);
                try {
                    records = reader.read(range);
                } catch (RuntimeException e) {
                    close();
                    throw e;
                }
            }
            return true;
        }

        @Override
        public InternalRow next() {
            if (!hasNext()) {
                throw new NoSuchElementException();
            }
            ConsumerRecord<byte[], byte[]> record;
            try {
                record = records.next();
            } catch (RuntimeException e) {
                close();  // a failed read's consumer is not reused
                throw e;
            }
            return new GenericInternalRow(new Object[] {record.key(), record.value(), topic, range.partition(),
                record.offset(), record.timestamp()});
        }

        /** Close the reader still out (the task ended before its range did, or the read failed). */
        void close() {
            if (reader != null) {
                reader.close();
                reader = null;
            }
            records = null;
        }
    }
}
