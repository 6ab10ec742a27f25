package dev.streamjoin.kernel;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

import org.apache.spark.api.java.function.Function2;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

import scala.Tuple2;

/**
 * The aggregate after a stream-producing join (Python's {@code spark/aggregate.py}, the reference's
 * {@code core/semantics/aggregate.py}): reducer task r holds the groups that hash to r, their running
 * (total, max ts) in its store ({@link StoreAdapter#AGGREGATE}), opened at the batch's version and committed
 * at the next. Its join results are applied in processing order ({@code __pos, __input, __partition,
 * __offset, __sub}); per change, every result emits its group's new total at the largest ts seen in the
 * group; per batch, each group emits once, its last result's place in the order.
 */
final class StreamAggregate
        implements Function2<Integer, Iterator<Tuple2<Integer, InternalRow>>, Iterator<InternalRow>> {
    private static final long serialVersionUID = 1L;
    /** The staged join results the stage reads: accepted ones only (a null group is dead-lettered before). */
    static final StructType INPUT = withOrder(new StructType()
            .add("group", DataTypes.StringType, false)
            .add("amount", DataTypes.LongType, false));
    /** Its updates: the group, its total, the update's ts, and the order columns of the result it counts. */
    static final StructType OUTPUT = withOrder(new StructType()
            .add("key", DataTypes.StringType, false)
            .add("value", DataTypes.LongType, false));
    private static final int GROUP = 0, AMOUNT = 1, TS = 2, SUB = 3, POS = 4, INPUT_ID = 5, PARTITION = 6,
            OFFSET = 7;
    private static final Comparator<InternalRow> ORDER = emissionOrder(SUB);

    private final TaskStores stores;
    private final long version;
    private final boolean perBatch;

    StreamAggregate(TaskStores stores, long version, boolean perBatch) {
        this.stores = stores;
        this.version = version;
        this.perBatch = perBatch;
    }

    /** {@code head}, then the ts, {@code __sub} and the order columns (an input row's, or the one it updates). */
    private static StructType withOrder(StructType head) {
        return head.add("ts", DataTypes.LongType, false)
                .add("__sub", DataTypes.IntegerType, false)
                .add("__pos", DataTypes.LongType, false)
                .add("__input", DataTypes.IntegerType, false)
                .add("__partition", DataTypes.IntegerType, false)
                .add("__offset", DataTypes.LongType, false);
    }

    /**
     * Rows in processing order ({@code __pos, __input, __partition, __offset}, then {@code __sub}), for rows
     * whose {@code __sub} at index {@code sub} is followed by those four columns.
     */
    static Comparator<InternalRow> emissionOrder(int sub) {
        return Comparator.<InternalRow>comparingLong(r -> r.getLong(sub + 1))
                .thenComparingInt(r -> r.getInt(sub + 2))
                .thenComparingInt(r -> r.getInt(sub + 3))
                .thenComparingLong(r -> r.getLong(sub + 4))
                .thenComparingInt(r -> r.getInt(sub));
    }

    static StructType valueSchema() {
        return TaskState.valueSchema(DataTypes.LongType);
    }

    @Override
    public Iterator<InternalRow> call(Integer task, Iterator<Tuple2<Integer, InternalRow>> records) {
        List<InternalRow> rows = new ArrayList<>();
        records.forEachRemaining(record -> rows.add(record._2()));
        rows.sort(ORDER);
        TaskState state = stores.open(task, version, valueSchema());
        Map<String, long[]> totals = new HashMap<>(); // group -> (total, max ts), this batch's groups
        Map<String, InternalRow> lastOf = new HashMap<>();
        UnsafeProjection project = UnsafeProjection.create(OUTPUT);
        List<InternalRow> out = new ArrayList<>();
        for (InternalRow row : rows) {
            String group = row.getUTF8String(GROUP).toString();
            long[] total = totals.computeIfAbsent(group, g -> {
                UnsafeRow kept = state.get(TaskState.AGGREGATE, g);
                return kept == null ? new long[] {0L, Long.MIN_VALUE} : new long[] {kept.getLong(0), kept.getLong(1)};
            });
            total[0] += row.getLong(AMOUNT);
            total[1] = Math.max(total[1], row.getLong(TS));
            if (perBatch) {
                lastOf.put(group, row);
            } else {
                out.add(project.apply(update(row, total, row.getInt(SUB))).copy());
            }
        }
        for (Map.Entry<String, long[]> entry : totals.entrySet()) {
            long[] total = entry.getValue();
            state.put(TaskState.AGGREGATE, entry.getKey(), total[0], total[1]);
            if (perBatch) {
                out.add(project.apply(update(lastOf.get(entry.getKey()), total, 0)).copy());
            }
        }
        state.commit();
        return out.iterator();
    }

    private static InternalRow update(InternalRow result, long[] total, int sub) {
        return new GenericInternalRow(new Object[] {
            result.getUTF8String(GROUP), total[0], total[1], sub,
            result.getLong(POS), result.getInt(INPUT_ID), result.getInt(PARTITION), result.getLong(OFFSET),
        });
    }
}
