package dev.streamjoin.kernel;

import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A task's state in its store: rows keyed by (kind, key). Kind {@link #TABLE}: the table's latest value per
 * key and its ts; kind {@link #CLOCK}: a (topic, partition) queue's max timestamp so far (the batch order's
 * carry-over), in {@code ts}. Table and clocks are committed together, as one version.
 */
final class TaskState implements BatchOrder.Clocks {
    static final int TABLE = 0;
    static final int CLOCK = 1;

    private final StateStore store;
    private final UnsafeProjection keys;
    private final UnsafeProjection values;

    TaskState(StateStore store, StructType keySchema, StructType valueSchema) {
        this.store = store;
        this.keys = UnsafeProjection.create(keySchema);
        this.values = UnsafeProjection.create(valueSchema);
    }

    static StructType keySchema() {
        return new StructType().add("kind", DataTypes.IntegerType, false).add("key", DataTypes.StringType, false);
    }

    static StructType valueSchema(DataType valueType) {
        return new StructType().add("value", valueType).add("ts", DataTypes.LongType, false);
    }

    private UnsafeRow key(int kind, String key) {
        return keys.apply(new GenericInternalRow(new Object[] {kind, UTF8String.fromString(key)})).copy();
    }

    /** (value, ts) of {@code key}, or null; {@code value} is a Spark internal value of the value type. */
    UnsafeRow get(int kind, String key) {
        UnsafeRow row = store.get(key(kind, key), StateStore.DEFAULT_COL_FAMILY_NAME());
        return row == null ? null : row.copy();
    }

    void put(int kind, String key, Object value, long ts) {
        UnsafeRow row = values.apply(new GenericInternalRow(new Object[] {value, ts})).copy();
        store.put(key(kind, key), row, StateStore.DEFAULT_COL_FAMILY_NAME());
    }

    void remove(int kind, String key) {
        store.remove(key(kind, key), StateStore.DEFAULT_COL_FAMILY_NAME());
    }

    @Override
    public Long get(String queue) {
        UnsafeRow row = get(CLOCK, queue);
        return row == null ? null : row.getLong(1);
    }

    @Override
    public void put(String queue, long maxTs) {
        put(CLOCK, queue, null, maxTs);
    }
}
