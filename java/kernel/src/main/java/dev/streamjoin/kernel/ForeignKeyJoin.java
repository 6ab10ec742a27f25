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
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

import scala.Tuple2;

/**
 * A foreign-key join's second stage, task f holding the foreign keys that hash to f (as Kafka Streams'
 * subscription and response processors): the right table's latest value per key and, per foreign key, the left
 * keys pointing at it with their values ({@link TaskState#TABLE}, one row per foreign key). It applies
 * {@link ForeignKeySubscriptions}' messages in the batch's processing order: a right update re-joins every left
 * key pointing at it, in serialized key order, at its ts (inner: a delete gives tombstones); a subscription joins
 * its left value with the right row at the later ts (inner: no right row gives nothing, or a tombstone when the
 * key moved from another foreign key); an unsubscription may carry the key's tombstone (at the later of its ts
 * and the old right row's). Rows are read once and written once per batch.
 */
final class ForeignKeyJoin implements
        Function2<Integer, Iterator<Tuple2<Integer, ForeignKeyMessage>>, Iterator<InternalRow>> {
    private static final long serialVersionUID = 1L;
    /** The store's value fields: (right value, ts, present, pointing). */
    private static final int RIGHT = 0;
    private static final int TS = 1;
    private static final int PRESENT = 2;
    private static final int POINTING = 3;
    /** The ts of a foreign key no right row has set (the field is not nullable). */
    private static final long NO_TS = Long.MIN_VALUE;

    private final Layout layout;
    private final TaskStores stores;
    private final long version;
    private final boolean inner;
    private final boolean versionedRight;
    private final boolean longKeys;

    ForeignKeyJoin(Layout layout, TaskStores stores, long version, boolean inner, boolean versionedRight,
            boolean longKeys) {
        this.layout = layout;
        this.stores = stores;
        this.version = version;
        this.inner = inner;
        this.versionedRight = versionedRight;
        this.longKeys = longKeys;
    }

    static StructType valueSchema(Layout layout) {
        StructType pointing = new StructType().add("key", DataTypes.StringType, false).add("left", layout.leftType)
                .add("task", DataTypes.IntegerType, false);
        return TaskState.valueSchema(layout.rightType).add("present", DataTypes.BooleanType, false)
                .add("pointing", DataTypes.createArrayType(pointing, false));
    }

    /** One foreign key's right row and the left keys pointing at it (by key text). */
    private static final class Foreign {
        Object right;
        Long ts;
        boolean present;
        final Map<String, Object[]> pointing = new HashMap<>();
    }

    @Override
    public Iterator<InternalRow> call(Integer task, Iterator<Tuple2<Integer, ForeignKeyMessage>> in) {
        List<ForeignKeyMessage> messages = new ArrayList<>();
        in.forEachRemaining(m -> messages.add(m._2()));
        messages.sort(ForeignKeyMessage.ORDER);
        TaskState state = stores.open(task, version, valueSchema(layout));
        Map<String, Foreign> foreign = new HashMap<>();
        UnsafeProjection project = UnsafeProjection.create(layout.output());
        List<InternalRow> results = new ArrayList<>();
        Comparator<UTF8String> keyOrder = KeyOrder.of(longKeys);
        for (ForeignKeyMessage m : messages) {
            if (m.type() == ForeignKeyMessage.RESULT) {
                results.add(project.apply(result(m, m.key(), m.value(), null, m.ts(), m.flag(), m.task(), 0)).copy());
                continue;
            }
            Foreign f = foreign.computeIfAbsent(m.fk().toString(), name -> read(state, name));
            switch (m.type()) {
                case ForeignKeyMessage.RIGHT -> {
                    if (versionedRight && f.ts != null && m.ts() < f.ts) {
                        continue;  // older than the key's latest version
                    }
                    f.right = m.value();
                    f.ts = m.flag() && !versionedRight ? null : m.ts();
                    f.present = !m.flag();
                    List<Object[]> keys = new ArrayList<>(f.pointing.values());
                    keys.sort((a, b) -> keyOrder.compare((UTF8String) a[0], (UTF8String) b[0]));
                    int sub = 0;
                    for (Object[] left : keys) {
                        boolean tombstone = m.flag() && inner;
                        results.add(project.apply(result(m, (UTF8String) left[0], left[1], m.value(), m.ts(),
                                tombstone, (Integer) left[2], sub++)).copy());
                    }
                }
                case ForeignKeyMessage.UNSUBSCRIBE -> {
                    f.pointing.remove(m.key().toString());
                    if (m.flag()) {
                        long ts = f.present ? Math.max(m.ts(), f.ts) : m.ts();
                        results.add(project.apply(result(m, m.key(), null, null, ts, true, m.task(), 0)).copy());
                    }
                }
                default -> {
                    f.pointing.put(m.key().toString(), new Object[] {m.key(), m.value(), m.task()});
                    if (f.present) {
                        results.add(project.apply(result(m, m.key(), m.value(), f.right, Math.max(m.ts(), f.ts),
                                false, m.task(), 0)).copy());
                    } else if (!inner || m.flag()) {
                        results.add(project.apply(result(m, m.key(), inner ? null : m.value(), null, m.ts(), inner,
                                m.task(), 0)).copy());
                    }
                }
            }
        }
        for (Map.Entry<String, Foreign> entry : foreign.entrySet()) {
            write(state, entry.getKey(), entry.getValue());
        }
        state.commit();
        return results.iterator();
    }

    private Foreign read(TaskState state, String fk) {
        Foreign f = new Foreign();
        UnsafeRow row = state.get(TaskState.TABLE, fk);
        if (row == null) {
            return f;
        }
        f.present = row.getBoolean(PRESENT);
        f.ts = row.getLong(TS) == NO_TS ? null : row.getLong(TS);
        f.right = row.isNullAt(RIGHT) ? null : row.get(RIGHT, layout.rightType);
        ArrayData pointing = row.getArray(POINTING);
        DataType leftType = layout.leftType;
        for (int i = 0; i < pointing.numElements(); i++) {
            InternalRow p = pointing.getStruct(i, 3);
            UTF8String key = p.getUTF8String(0).clone();
            f.pointing.put(key.toString(), new Object[] {key, p.isNullAt(1) ? null : p.get(1, leftType), p.getInt(2)});
        }
        return f;
    }

    private static void write(TaskState state, String fk, Foreign f) {
        if (f.pointing.isEmpty() && f.ts == null) {
            state.remove(TaskState.TABLE, fk);
            return;
        }
        Object[] pointing = f.pointing.values().stream().map(GenericInternalRow::new).toArray();
        state.putFields(TaskState.TABLE, fk, f.present ? f.right : null, f.ts == null ? NO_TS : f.ts,
                f.present, new GenericArrayData(pointing));
    }

    /** A result row of left key {@code key}, at the triggering record {@code m}'s place. */
    private static InternalRow result(ForeignKeyMessage m, UTF8String key, Object left, Object right, long ts,
            boolean tombstone, int task, int sub) {
        return new GenericInternalRow(new Object[] {
            key, tombstone ? null : left, tombstone ? null : right, ts, !tombstone && left != null && right != null,
            tombstone, sub, m.topic(), m.partition(), m.offset(), task, m.pos(), m.input(), m.partition(), m.offset(),
        });
    }
}
