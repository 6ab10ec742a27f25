package dev.streamjoin.kernel;

import java.util.ArrayList;
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
 * A versioned table's versions of one key ({@link TaskState#VERSIONS}, one value per key): ts ascending,
 * one per ts (the later processed replaces an equal ts), a null value a tombstone. Only versions a lookup
 * can still return are kept: one superseded at or before the history horizon ({@code table time -
 * history_retention}) is dropped, the latest always kept.
 */
final class Versions {
    /** Field of the versions in the task's value schema. */
    static final int FIELD = 2;

    private record Version(long ts, Object value) {}

    private final List<Version> list;

    private Versions(List<Version> list) {
        this.list = list;
    }

    static ArrayType type(DataType valueType) {
        return DataTypes.createArrayType(
                new StructType().add("ts", DataTypes.LongType, false).add("value", valueType), false);
    }

    static Versions read(TaskState state, String key, DataType valueType) {
        UnsafeRow row = state.get(TaskState.VERSIONS, key);
        List<Version> list = new ArrayList<>();
        if (row != null) {
            ArrayData versions = row.getArray(FIELD);
            for (int i = 0; i < versions.numElements(); i++) {
                InternalRow version = versions.getStruct(i, 2);
                list.add(new Version(version.getLong(0), version.isNullAt(1) ? null : version.get(1, valueType)));
            }
        }
        return new Versions(list);
    }

    void write(TaskState state, String key) {
        Object[] versions = new Object[list.size()];
        for (int i = 0; i < versions.length; i++) {
            versions[i] = new GenericInternalRow(new Object[] {list.get(i).ts(), list.get(i).value()});
        }
        state.putFields(TaskState.VERSIONS, key, null, 0L, new GenericArrayData(versions));
    }

    /** Add a version at {@code ts} ({@code value} null: a tombstone), then forget what {@code horizon} hides. */
    void add(long ts, Object value, long horizon) {
        int at = 0;
        while (at < list.size() && list.get(at).ts() < ts) {
            at++;
        }
        if (at < list.size() && list.get(at).ts() == ts) {
            list.set(at, new Version(ts, value));
        } else {
            list.add(at, new Version(ts, value));
        }
        List<Version> kept = new ArrayList<>(list.size());
        for (int i = 0; i < list.size(); i++) {
            if (i == list.size() - 1 || list.get(i + 1).ts() > horizon) {
                kept.add(list.get(i));
            }
        }
        list.clear();
        list.addAll(kept);
    }

    /**
     * The value as of {@code asOf} (null: none, or a tombstone): the version with the largest ts at or before
     * it; older than {@code horizon} (null: no table record yet) only the latest version counts.
     */
    Object asOf(long asOf, Long horizon) {
        if (list.isEmpty()) {
            return null;
        }
        if (horizon != null && asOf < horizon) {
            Version latest = list.get(list.size() - 1);
            return latest.ts() <= asOf ? latest.value() : null;
        }
        Object found = null;
        for (Version version : list) {
            if (version.ts() > asOf) {
                break;
            }
            found = version.value();
        }
        return found;
    }
}
