package dev.streamjoin.kernel;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * A task's grace buffer of stream records ({@link TaskState#BUFFER}, one row): held in Kafka Streams'
 * order, (ts, serialized key bytes, arrival), so the records due at a stream time are its head. Read once
 * per batch, written once at its end.
 */
final class GraceBuffer {
    /** Field of the buffer in the task's value schema. */
    static final int FIELD = 3;
    private static final String KEY = "";

    private final List<Results.Source> held;
    private final Comparator<Results.Source> order;

    private GraceBuffer(List<Results.Source> held, boolean longKeys) {
        this.held = held;
        this.order = Comparator.comparingLong(Results.Source::ts).thenComparing(Results.Source::key,
                KeyOrder.of(longKeys));
    }

    static ArrayType type(DataType leftType) {
        return DataTypes.createArrayType(new StructType()
                .add("ts", DataTypes.LongType, false)
                .add("key", DataTypes.StringType, false)
                .add("left", leftType)
                .add("topic", DataTypes.StringType)
                .add("partition", DataTypes.IntegerType, false)
                .add("offset", DataTypes.LongType, false), false);
    }

    /** The buffer as the task's store holds it; {@code longKeys}: keys are longs (8 big-endian bytes). */
    static GraceBuffer read(TaskState state, DataType leftType, boolean longKeys) {
        UnsafeRow row = state.get(TaskState.BUFFER, KEY);
        List<Results.Source> held = new ArrayList<>();
        if (row != null) {
            ArrayData records = row.getArray(FIELD);
            for (int i = 0; i < records.numElements(); i++) {
                InternalRow r = records.getStruct(i, 6);
                held.add(new Results.Source(r.getUTF8String(1), r.isNullAt(2) ? null : r.get(2, leftType),
                        r.getLong(0), r.isNullAt(3) ? null : r.getUTF8String(3), r.getInt(4), r.getLong(5)));
            }
        }
        return new GraceBuffer(held, longKeys);
    }

    void write(TaskState state) {
        if (held.isEmpty()) {
            state.remove(TaskState.BUFFER, KEY);
            return;
        }
        Object[] records = new Object[held.size()];
        for (int i = 0; i < records.length; i++) {
            Results.Source s = held.get(i);
            records[i] = new GenericInternalRow(new Object[] {s.ts(), s.key(), s.left(), s.topic(), s.partition(),
                s.offset()});
        }
        state.putFields(TaskState.BUFFER, KEY, null, 0L, null, new GenericArrayData(records));
    }

    /** Hold {@code record} after every held one it does not precede (arrival order among equals). */
    void hold(Results.Source record) {
        int at = held.size();
        while (at > 0 && order.compare(held.get(at - 1), record) > 0) {
            at--;
        }
        held.add(at, record);
    }

    /** Remove and return, in order, the held records with {@code ts <= horizon}. */
    List<Results.Source> release(long horizon) {
        int due = 0;
        while (due < held.size() && held.get(due).ts() <= horizon) {
            due++;
        }
        List<Results.Source> released = new ArrayList<>(held.subList(0, due));
        held.subList(0, due).clear();
        return released;
    }
}
