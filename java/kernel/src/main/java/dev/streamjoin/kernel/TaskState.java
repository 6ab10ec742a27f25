package dev.streamjoin.kernel;

import java.util.Arrays;

import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A task's state in its store: rows keyed by (kind, key), valued by the shape's value schema, whose first
 * two fields are (value, ts). Kinds: {@link #TABLE}, a plain table's latest value per key and its ts (a
 * foreign-key join's second stage: per foreign key, the right row and its subscribers, {@link ForeignKeyJoin});
 * {@link #CLOCK}, a (topic, partition) queue's max timestamp so far (the batch order's carry-over), in
 * {@code ts}; {@link #VERSIONS}, a versioned table's versions of a key; {@link #BUFFER}, the grace buffer
 * (one row, key ""); {@link #TIME}, the task's named stream times, in {@code ts}; {@link #AGGREGATE}, a
 * group's running total and max ts (an aggregate's store); {@link #LEFT_TABLE}, a table-table join's left
 * side ({@link TableTableRules}; a foreign-key join's left values and foreign keys, {@link ForeignKeySubscriptions}); {@link #PREVIOUS}, a table aggregate's last counted contribution of a result
 * key ({@link TableAggregateChanges}); {@link #WINDOWS}, {@link #WINDOW_INDEX}, {@link #PENDING} and
 * {@link #BUCKETS}, a stream-stream join's window stores ({@link WindowStore}). All of a task's rows are
 * committed together, as one version. The rows live in Spark's state store ({@link StoreAdapter}) or, for the
 * rule tests without Spark, in memory ({@link MemoryStores}): the rules are the same code either way.
 */
final class TaskState implements BatchOrder.Clocks {
    static final int TABLE = 0;
    static final int CLOCK = 1;
    static final int VERSIONS = 2;
    static final int BUFFER = 3;
    static final int TIME = 4;
    static final int AGGREGATE = 5;
    static final int LEFT_TABLE = 6;
    static final int PREVIOUS = 7;
    static final int WINDOWS = 8;
    static final int WINDOW_INDEX = 9;
    static final int PENDING = 10;
    static final int BUCKETS = 11;

    /** A task's rows of one store, keyed and valued by {@link #keySchema()} and the shape's value schema. */
    interface Rows {
        UnsafeRow get(UnsafeRow key);

        void put(UnsafeRow key, UnsafeRow value);

        void remove(UnsafeRow key);

        /** Make the rows written so far the store's next version. */
        void commit();
    }

    private final Rows store;
    private final UnsafeProjection keys;
    private final UnsafeProjection values;
    private final int width;

    TaskState(Rows store, StructType valueSchema) {
        this.store = store;
        this.keys = UnsafeProjection.create(keySchema());
        this.values = UnsafeProjection.create(valueSchema);
        this.width = valueSchema.length();
    }

    /** Commit the task's rows (a task commits once, after its last record). */
    void commit() {
        store.commit();
    }

    static StructType keySchema() {
        return new StructType().add("kind", DataTypes.IntegerType, false).add("key", DataTypes.StringType, false);
    }

    /** The plain table's values: (value, ts). Other shapes add fields after these two. */
    static StructType valueSchema(DataType valueType) {
        return new StructType().add("value", valueType).add("ts", DataTypes.LongType, false);
    }

    private UnsafeRow key(int kind, String key) {
        return keys.apply(new GenericInternalRow(new Object[] {kind, UTF8String.fromString(key)})).copy();
    }

    /** The row of {@code key}, or null; its fields are Spark internal values of the value schema. */
    UnsafeRow get(int kind, String key) {
        UnsafeRow row = store.get(key(kind, key));
        return row == null ? null : row.copy();
    }

    /** Store (value, ts) at {@code key}; any further fields null. */
    void put(int kind, String key, Object value, long ts) {
        putFields(kind, key, value, ts);
    }

    /** Store a row of the value schema's leading {@code fields} (the rest null) at {@code key}. */
    void putFields(int kind, String key, Object... fields) {
        Object[] row = Arrays.copyOf(fields, width);
        store.put(key(kind, key), values.apply(new GenericInternalRow(row)).copy());
    }

    void remove(int kind, String key) {
        store.remove(key(kind, key));
    }

    /** The task's stream time {@code name}, or null before its first record. */
    Long time(String name) {
        UnsafeRow row = get(TIME, name);
        return row == null ? null : row.getLong(1);
    }

    void putTime(String name, Long ts) {
        if (ts != null) {
            put(TIME, name, null, ts);
        }
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
