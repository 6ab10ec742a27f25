package dev.streamjoin.kernel;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.Iterator;
import java.util.List;

import org.apache.spark.api.java.function.Function2;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

import scala.Tuple2;

/**
 * The first half of the aggregate after a table-producing join (Python's {@code spark/table_aggregate.py},
 * the reference's {@code step_table}): join task t keeps each of its result keys' last counted (group,
 * amount) in its store ({@link StoreAdapter#PREVIOUS}); in emission order, a result first subtracts its key's
 * previous amount from the previous group, then, unless it is a tombstone or dead-lettered (no group), adds
 * its amount to its group; when both are the same group, one change adds the difference (KIP-904: Kafka
 * Streams 3.5+ sends old and new value in one record when the group is unchanged, and its reducer emits once).
 * Its rows are {@link StreamAggregate}'s input, {@code __sub} doubled (+1 for the addition) so that a
 * result's subtraction comes before its addition in the group's order.
 */
final class TableAggregateChanges
        implements Function2<Integer, Iterator<Tuple2<Integer, InternalRow>>, Iterator<InternalRow>> {
    private static final long serialVersionUID = 1L;
    /** The staged join results: every result, a tombstone or a dead-lettered one with a null group. */
    static final StructType INPUT = new StructType()
            .add("key", DataTypes.StringType, false)
            .add("group", DataTypes.StringType)
            .add("amount", DataTypes.LongType)
            .add("ts", DataTypes.LongType, false)
            .add("__sub", DataTypes.IntegerType, false)
            .add("__pos", DataTypes.LongType, false)
            .add("__input", DataTypes.IntegerType, false)
            .add("__partition", DataTypes.IntegerType, false)
            .add("__offset", DataTypes.LongType, false)
            .add("__task", DataTypes.IntegerType, false);
    static final int TASK = 9;
    private static final int KEY = 0, GROUP = 1, AMOUNT = 2, TS = 3, SUB = 4, POS = 5, INPUT_ID = 6, PARTITION = 7,
            OFFSET = 8;
    private static final Comparator<InternalRow> ORDER = StreamAggregate.emissionOrder(SUB);

    private final TaskStores stores;
    private final long version;

    TableAggregateChanges(TaskStores stores, long version) {
        this.stores = stores;
        this.version = version;
    }

    /** A result key's last counted contribution: (amount, ts, group). */
    static StructType valueSchema() {
        return TaskState.valueSchema(DataTypes.LongType).add("group", DataTypes.StringType);
    }

    @Override
    public Iterator<InternalRow> call(Integer task, Iterator<Tuple2<Integer, InternalRow>> records) {
        List<InternalRow> rows = new ArrayList<>();
        records.forEachRemaining(record -> rows.add(record._2()));
        rows.sort(ORDER);
        TaskState state = stores.open(task, version, valueSchema());
        UnsafeProjection project = UnsafeProjection.create(StreamAggregate.INPUT);
        List<InternalRow> out = new ArrayList<>();
        for (InternalRow row : rows) {
            String key = row.getUTF8String(KEY).toString();
            UnsafeRow previous = state.get(TaskState.PREVIOUS, key);
            int sub = row.getInt(SUB) * 2;
            UTF8String group = row.isNullAt(GROUP) ? null : row.getUTF8String(GROUP);
            boolean sameGroup = previous != null && group != null && group.equals(previous.getUTF8String(2));
            if (previous != null && !sameGroup) {
                out.add(project.apply(change(previous.getUTF8String(2), -previous.getLong(0), row, sub)).copy());
            }
            if (group == null) {
                state.remove(TaskState.PREVIOUS, key);
            } else {
                long amount = row.getLong(AMOUNT);
                long change = sameGroup ? amount - previous.getLong(0) : amount;
                state.putFields(TaskState.PREVIOUS, key, amount, row.getLong(TS), group.clone());
                out.add(project.apply(change(group, change, row, sub + 1)).copy());
            }
        }
        state.commit();
        return out.iterator();
    }

    private static InternalRow change(UTF8String group, long amount, InternalRow result, int sub) {
        return new GenericInternalRow(new Object[] {
            group, amount, result.getLong(TS), sub,
            result.getLong(POS), result.getInt(INPUT_ID), result.getInt(PARTITION), result.getLong(OFFSET),
        });
    }
}
