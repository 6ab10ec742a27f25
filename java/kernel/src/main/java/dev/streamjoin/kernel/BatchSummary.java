package dev.streamjoin.kernel;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.unsafe.types.UTF8String;
import org.apache.spark.util.AccumulatorV2;

/**
 * A batch's counts and each (topic, partition, side)'s max timestamp (Python's {@code events.BatchSummary}),
 * gathered by the kernel's first stage as it reads the decoded rows: no Spark job of their own. A record
 * moves its partition's time unless it is undecodable ({@link BatchOrder}'s rule).
 *
 * <p>The value is text, one line per (topic, partition, side): {@code topic \t partition \t side \t rows \t
 * rejected \t maxTs} (maxTs empty when no record moved the time): one Py4J call hands it to the driver.
 */
final class BatchSummary extends AccumulatorV2<InternalRow, String> {
    private static final long serialVersionUID = 1L;
    /** A line's fields, in order (the driver's plan must name the same). */
    static final List<String> COLUMNS = List.of("topic", "partition", "side", "rows", "rejected", "max_ts");
    private static final UTF8String UNDECODABLE = UTF8String.fromString(BatchOrder.UNDECODABLE);
    private static final int ROWS = 0;
    private static final int REJECTED = 1;
    private static final int MAX_TS = 2;

    private final Layout layout;
    /** "topic \t partition \t side" -> {rows, rejected, max ts (Long.MIN_VALUE: none)} */
    private final HashMap<String, long[]> counts = new HashMap<>();
    /** the last row's queue and its counts: a task reads one Kafka partition's rows in a run */
    private transient UTF8String lastTopic;
    private transient UTF8String lastSide;
    private transient int lastPartition = -1;
    private transient long[] last;

    BatchSummary(Layout layout) {
        this.layout = layout;
    }

    @Override
    public boolean isZero() {
        return counts.isEmpty();
    }

    @Override
    public BatchSummary copy() {
        BatchSummary copy = new BatchSummary(layout);
        copy.merge(this);
        return copy;
    }

    @Override
    public void reset() {
        counts.clear();
        last = null;
    }

    @Override
    public void add(InternalRow row) {
        if (layout.derived(row)) {
            return; // a chained stage's result: counted by the stage that made it
        }
        UTF8String topic = row.getUTF8String(layout.topic);
        UTF8String side = row.getUTF8String(layout.side);
        int partition = row.getInt(layout.partition);
        if (last == null || partition != lastPartition || !topic.equals(lastTopic) || !side.equals(lastSide)) {
            last = counts.computeIfAbsent(topic + "\t" + partition + "\t" + side,
                    queue -> new long[] {0, 0, Long.MIN_VALUE});
            lastTopic = topic.clone();
            lastSide = side.clone();
            lastPartition = partition;
        }
        last[ROWS]++;
        boolean rejected = !row.isNullAt(layout.reason);
        if (rejected) {
            last[REJECTED]++;
        }
        boolean moves = !rejected || !row.getUTF8String(layout.reason).startsWith(UNDECODABLE);
        if (moves && !row.isNullAt(layout.ts)) {
            last[MAX_TS] = Math.max(last[MAX_TS], row.getLong(layout.ts));
        }
    }

    @Override
    public void merge(AccumulatorV2<InternalRow, String> other) {
        for (Map.Entry<String, long[]> entry : ((BatchSummary) other).counts.entrySet()) {
            long[] theirs = entry.getValue();
            long[] ours = counts.computeIfAbsent(entry.getKey(), queue -> new long[] {0, 0, Long.MIN_VALUE});
            ours[ROWS] += theirs[ROWS];
            ours[REJECTED] += theirs[REJECTED];
            ours[MAX_TS] = Math.max(ours[MAX_TS], theirs[MAX_TS]);
        }
        last = null;
    }

    @Override
    public String value() {
        StringBuilder text = new StringBuilder();
        for (Map.Entry<String, long[]> entry : counts.entrySet()) {
            long[] c = entry.getValue();
            text.append(entry.getKey()).append('\t').append(c[ROWS]).append('\t').append(c[REJECTED]).append('\t')
                    .append(c[MAX_TS] == Long.MIN_VALUE ? "" : Long.toString(c[MAX_TS])).append('\n');
        }
        return text.toString();
    }
}
