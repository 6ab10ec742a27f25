package dev.streamjoin.kernel;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.NavigableSet;
import java.util.TreeSet;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A stream-stream join task's window stores in its {@link TaskState}, read and written by the keys and times a
 * batch touches:
 *
 * <ul>
 *   <li>{@link TaskState#WINDOWS}, per join key: both sides' stored records (ts, arrival, value), each side in
 *       (ts, arrival) order: a record's window is one read;
 *   <li>{@link TaskState#WINDOW_INDEX}, per side and time bucket: the keys with records of that side stored in
 *       the bucket, so that a side's expired records are found without a scan;
 *   <li>{@link TaskState#PENDING}, per bucket of close time: the records waiting for their window to close
 *       (left/outer), so that the due ones are the first buckets;
 *   <li>{@link TaskState#BUCKETS}: the live bucket ids of each index, and {@link TaskState#TIME} each side's
 *       time (max ts of its keyed records).
 * </ul>
 *
 * Rows are cached for the batch and written once at its end. Dropping expired records is only storage: a
 * record behind its side's retention is never joined (visibility is checked at every join).
 */
final class WindowStore {
    private static final int LEFT_RECORDS = 2;
    private static final int RIGHT_RECORDS = 3;
    private static final int KEYS = 4;
    private static final int IDS = 5;
    private static final int PENDING = 6;
    private static final String PENDING_IDS = "P";

    /** A record in a side's window store. */
    record Stored(long ts, long seq, Object value) {}

    /** A record waiting for its window to close, with what its non-joined result needs. */
    record Pending(boolean left, UTF8String key, long ts, long seq, Object value, UTF8String topic, int partition,
            long offset, long close) {}

    /** One close-time bucket's pending records, by arrival and by (close, arrival). */
    private static final class PendingBucket {
        private final Map<Long, Pending> bySeq = new HashMap<>();
        private final NavigableSet<Pending> byClose =
                new TreeSet<>(Comparator.comparingLong(Pending::close).thenComparingLong(Pending::seq));

        void add(Pending p) {
            bySeq.put(p.seq(), p);
            byClose.add(p);
        }

        void remove(long seq) {
            Pending p = bySeq.remove(seq);
            if (p != null) {
                byClose.remove(p);
            }
        }
    }

    /** Both sides' stored records of one key. */
    static final class Windows {
        private final List<Stored> left;
        private final List<Stored> right;

        private Windows(List<Stored> left, List<Stored> right) {
            this.left = left;
            this.right = right;
        }

        List<Stored> side(boolean isLeft) {
            return isLeft ? left : right;
        }
    }

    private static final Comparator<Stored> TIME_ORDER =
            Comparator.comparingLong(Stored::ts).thenComparingLong(Stored::seq);

    private final TaskState state;
    private final DataType leftType;
    private final DataType rightType;
    private final long before;
    private final long after;
    private final long grace;
    private final long retention;
    private final long bucket;
    private final Comparator<Pending> dueOrder;
    private final Map<String, Windows> windows = new HashMap<>();
    private final Map<String, Windows> dirtyWindows = new HashMap<>();
    private final Map<String, LinkedHashSet<String>> index = new HashMap<>();
    private final Map<Long, PendingBucket> pending = new HashMap<>();
    private final Map<String, NavigableSet<Long>> ids = new HashMap<>();
    private final Map<Boolean, Long> sideTime = new HashMap<>();

    /** A task's window stores for windows of {@code before} and {@code after} (ms) and a {@code grace}. */
    WindowStore(TaskState state, Layout layout, long before, long after, long grace, boolean longKeys) {
        this.state = state;
        this.leftType = layout.leftType;
        this.rightType = layout.rightType;
        this.before = before;
        this.after = after;
        this.grace = grace;
        this.retention = before + after + grace;
        this.bucket = Math.max(1, retention / 8);
        this.dueOrder = Comparator.comparingLong(Pending::ts)
                .thenComparing(Pending::left)
                .thenComparing(Pending::key, KeyOrder.of(longKeys))
                .thenComparingLong(Pending::seq);
        sideTime.put(true, state.time(sideName(true)));
        sideTime.put(false, state.time(sideName(false)));
    }

    static StructType valueSchema(DataType leftType, DataType rightType) {
        StructType pending = new StructType()
                .add("left", DataTypes.BooleanType, false)
                .add("key", DataTypes.StringType, false)
                .add("ts", DataTypes.LongType, false)
                .add("seq", DataTypes.LongType, false)
                .add("lval", leftType)
                .add("rval", rightType)
                .add("topic", DataTypes.StringType)
                .add("partition", DataTypes.IntegerType, false)
                .add("offset", DataTypes.LongType, false);
        return TaskState.valueSchema(rightType)
                .add("left_records", records(leftType))
                .add("right_records", records(rightType))
                .add("keys", DataTypes.createArrayType(DataTypes.StringType, false))
                .add("ids", DataTypes.createArrayType(DataTypes.LongType, false))
                .add("pending", DataTypes.createArrayType(pending, false));
    }

    private static ArrayType records(DataType valueType) {
        return DataTypes.createArrayType(new StructType()
                .add("ts", DataTypes.LongType, false)
                .add("seq", DataTypes.LongType, false)
                .add("value", valueType), false);
    }

    private static String sideName(boolean left) {
        return left ? "L" : "R";
    }

    /** The end of a record's join window (Kafka's {@code timeTo}). */
    long end(boolean left, long ts) {
        return ts + (left ? after : before);
    }

    /** When a record's window closes: after this stream time, its pending non-joined result is due. */
    long close(boolean left, long ts) {
        return end(left, ts) + grace;
    }

    /** Whether a record of {@code left}'s side at {@code ts} is still in its side's store. */
    boolean visible(boolean left, long ts) {
        Long time = sideTime.get(left);
        return time == null || ts > time - retention;
    }

    /** The stored records of {@code key}. */
    Windows windows(UTF8String key) {
        String name = key.toString();
        Windows found = windows.get(name);
        if (found == null) {
            UnsafeRow row = state.get(TaskState.WINDOWS, name);
            found = new Windows(readStored(row, LEFT_RECORDS, leftType), readStored(row, RIGHT_RECORDS, rightType));
            windows.put(name, found);
        }
        return found;
    }

    private static List<Stored> readStored(UnsafeRow row, int field, DataType type) {
        List<Stored> out = new ArrayList<>();
        if (row != null && !row.isNullAt(field)) {
            ArrayData array = row.getArray(field);
            for (int i = 0; i < array.numElements(); i++) {
                InternalRow r = array.getStruct(i, 3);
                out.add(new Stored(r.getLong(0), r.getLong(1), r.isNullAt(2) ? null : r.get(2, type)));
            }
        }
        return out;
    }

    /** Record {@code ts} of a side: its side's time moves to it, and it is stored if still visible then. */
    void add(UTF8String key, Windows into, boolean left, long ts, long seq, Object value) {
        Long time = sideTime.get(left);
        sideTime.put(left, time == null ? ts : Math.max(time, ts));
        if (!visible(left, ts)) {
            return;
        }
        List<Stored> side = into.side(left);
        Stored stored = new Stored(ts, seq, value);
        int at = side.size();
        while (at > 0 && TIME_ORDER.compare(side.get(at - 1), stored) > 0) {
            at--;
        }
        side.add(at, stored);
        dirtyWindows.put(key.toString(), into);
        long id = Math.floorDiv(ts, bucket);
        if (indexKeys(sideName(left), id).add(key.toString())) {
            ids(sideName(left)).add(id);
        }
    }

    private LinkedHashSet<String> indexKeys(String side, long id) {
        return index.computeIfAbsent(side + id, name -> {
            LinkedHashSet<String> keys = new LinkedHashSet<>();
            UnsafeRow row = state.get(TaskState.WINDOW_INDEX, name);
            if (row != null) {
                ArrayData array = row.getArray(KEYS);
                for (int i = 0; i < array.numElements(); i++) {
                    keys.add(array.getUTF8String(i).toString());
                }
            }
            return keys;
        });
    }

    private NavigableSet<Long> ids(String name) {
        return ids.computeIfAbsent(name, n -> {
            NavigableSet<Long> set = new TreeSet<>();
            UnsafeRow row = state.get(TaskState.BUCKETS, n);
            if (row != null) {
                ArrayData array = row.getArray(IDS);
                for (int i = 0; i < array.numElements(); i++) {
                    set.add(array.getLong(i));
                }
            }
            return set;
        });
    }

    private PendingBucket pendingBucket(long id) {
        return pending.computeIfAbsent(id, b -> {
            PendingBucket records = new PendingBucket();
            UnsafeRow row = state.get(TaskState.PENDING, Long.toString(b));
            if (row != null) {
                ArrayData array = row.getArray(PENDING);
                for (int i = 0; i < array.numElements(); i++) {
                    InternalRow r = array.getStruct(i, 9);
                    boolean left = r.getBoolean(0);
                    int field = left ? 4 : 5;
                    Object value = r.isNullAt(field) ? null : r.get(field, left ? leftType : rightType);
                    long ts = r.getLong(2);
                    records.add(new Pending(left, r.getUTF8String(1).clone(), ts, r.getLong(3), value,
                            r.isNullAt(6) ? null : r.getUTF8String(6).clone(), r.getInt(7), r.getLong(8),
                            close(left, ts)));
                }
            }
            return records;
        });
    }

    /** Hold {@code record} until its window closes ({@link Pending#close}). */
    void pend(Pending record) {
        long id = Math.floorDiv(record.close(), bucket);
        pendingBucket(id).add(record);
        ids(PENDING_IDS).add(id);
    }

    /** Stored record {@code other} of a side joined: it is pending no more. */
    void joined(boolean left, Stored other) {
        long id = Math.floorDiv(close(left, other.ts()), bucket);
        if (ids(PENDING_IDS).contains(id)) {
            pendingBucket(id).remove(other.seq());
        }
    }

    /** Remove and return the pending records whose close is below {@code streamTime}, in Kafka's order. */
    List<Pending> due(long streamTime) {
        List<Pending> due = new ArrayList<>();
        for (long id : ids(PENDING_IDS)) {
            if (id * bucket >= streamTime) {
                break;  // every close in this bucket and the later ones is at or after stream time
            }
            PendingBucket records = pendingBucket(id);
            while (!records.byClose.isEmpty() && records.byClose.first().close() < streamTime) {
                Pending p = records.byClose.pollFirst();
                records.bySeq.remove(p.seq());
                due.add(p);
            }
        }
        due.sort(dueOrder);
        return due;
    }

    /** Drop each side's records that left its retention, by the index buckets wholly behind it. */
    void expire() {
        for (boolean left : new boolean[] {true, false}) {
            Long time = sideTime.get(left);
            if (time == null) {
                continue;
            }
            long horizon = time - retention;
            NavigableSet<Long> live = ids(sideName(left));
            while (!live.isEmpty() && (live.first() + 1) * bucket - 1 <= horizon) {
                long id = live.pollFirst();
                LinkedHashSet<String> keys = indexKeys(sideName(left), id);
                for (String key : keys) {
                    Windows w = windows(UTF8String.fromString(key));
                    if (w.side(left).removeIf(s -> s.ts() <= horizon)) {
                        dirtyWindows.put(key, w);
                    }
                }
                keys.clear();
            }
        }
    }

    /** Write what the batch changed. */
    void write() {
        for (Map.Entry<String, Windows> entry : dirtyWindows.entrySet()) {
            Windows w = entry.getValue();
            if (w.left.isEmpty() && w.right.isEmpty()) {
                state.remove(TaskState.WINDOWS, entry.getKey());
            } else {
                state.putFields(TaskState.WINDOWS, entry.getKey(), null, 0L, storedArray(w.left),
                        storedArray(w.right));
            }
        }
        for (Map.Entry<String, LinkedHashSet<String>> entry : index.entrySet()) {
            if (entry.getValue().isEmpty()) {
                state.remove(TaskState.WINDOW_INDEX, entry.getKey());
            } else {
                Object[] keys = entry.getValue().stream().map(UTF8String::fromString).toArray();
                state.putFields(TaskState.WINDOW_INDEX, entry.getKey(), null, 0L, null, null,
                        new GenericArrayData(keys));
            }
        }
        NavigableSet<Long> pendingIds = ids(PENDING_IDS);
        for (Map.Entry<Long, PendingBucket> entry : pending.entrySet()) {
            String name = Long.toString(entry.getKey());
            if (entry.getValue().bySeq.isEmpty()) {
                state.remove(TaskState.PENDING, name);
                pendingIds.remove(entry.getKey());
            } else {
                Object[] rows = entry.getValue().bySeq.values().stream().map(this::pendingRow).toArray();
                state.putFields(TaskState.PENDING, name, null, 0L, null, null, null, null,
                        new GenericArrayData(rows));
            }
        }
        for (Map.Entry<String, NavigableSet<Long>> entry : ids.entrySet()) {
            state.putFields(TaskState.BUCKETS, entry.getKey(), null, 0L, null, null, null,
                    new GenericArrayData(entry.getValue().toArray()));
        }
        state.putTime(sideName(true), sideTime.get(true));
        state.putTime(sideName(false), sideTime.get(false));
    }

    private static GenericArrayData storedArray(List<Stored> records) {
        Object[] rows = new Object[records.size()];
        for (int i = 0; i < rows.length; i++) {
            Stored s = records.get(i);
            rows[i] = new GenericInternalRow(new Object[] {s.ts(), s.seq(), s.value()});
        }
        return new GenericArrayData(rows);
    }

    private InternalRow pendingRow(Pending p) {
        return new GenericInternalRow(new Object[] {p.left(), p.key(), p.ts(), p.seq(), p.left() ? p.value() : null,
            p.left() ? null : p.value(), p.topic(), p.partition(), p.offset()});
    }
}
