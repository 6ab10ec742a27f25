package dev.streamjoin.kernel;

import java.util.List;
import java.util.function.Consumer;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Table-table joins (inner, left, outer): the per-record rules of {@code core/semantics/table_table.py}. Each
 * side keeps its latest value per key in the task's store ({@link TaskState#TABLE} the right's,
 * {@link TaskState#LEFT_TABLE} the left's); a versioned side refuses an update older than its store's observed
 * time - history retention ({@link ObservedTimes}), keeps a deleted key's last ts too, and ignores an update
 * older than it. Every applied update of key k emits at most one result for k, at the max of its ts and the
 * other side's value's ts (its own ts when the other side has none):
 *
 * <ul>
 *   <li>inner: nothing while the other side is absent; else the pair, or a tombstone for a delete;
 *   <li>left: a left update emits the pair (right or null), a tombstone for a delete, nothing for the delete
 *       of an absent key while the right is absent; a right update emits the pair while the left is present;
 *   <li>outer: nothing for the delete of an absent key while the other side is absent; a tombstone once both
 *       sides are absent; else the pair, either side null.
 * </ul>
 */
final class TableTableRules implements Rules {
    private static final long serialVersionUID = 1L;
    /** The value schema's fields: the right value, the ts, the left value, present (false: a kept delete). */
    private static final int RIGHT = 0;
    private static final int TS = 1;
    private static final int LEFT = 2;
    private static final int PRESENT = 3;

    enum Kind { INNER, LEFT, OUTER }

    private final Layout layout;
    private final Kind kind;
    private final boolean versionedLeft;
    private final boolean versionedRight;
    /** A versioned side's history retention (ms); null: a plain table. */
    private final Long leftHistory;
    private final Long rightHistory;

    TableTableRules(Layout layout, Kind kind, Long leftHistory, Long rightHistory) {
        this.layout = layout;
        this.kind = kind;
        this.versionedLeft = leftHistory != null;
        this.versionedRight = rightHistory != null;
        this.leftHistory = leftHistory;
        this.rightHistory = rightHistory;
    }

    @Override
    public StructType valueSchema() {
        return TaskState.valueSchema(layout.rightType).add("left", layout.leftType).add("present",
                DataTypes.BooleanType, false);
    }

    @Override
    public void apply(int task, List<Event> ordered, TaskState state, Consumer<InternalRow> emit) {
        ObservedTimes observed = new ObservedTimes(state);
        for (Event event : ordered) {
            InternalRow row = event.row;
            UTF8String key = row.getUTF8String(layout.key);
            String name = key.toString();
            boolean isLeft = event.stream(layout);
            int thisSide = isLeft ? TaskState.LEFT_TABLE : TaskState.TABLE;
            boolean versioned = isLeft ? versionedLeft : versionedRight;
            Long history = isLeft ? leftHistory : rightHistory;
            if (observed.refuses(isLeft ? "left" : "right", event.partition, event.ts, history)) {
                continue;  // older than the side's store time - history retention
            }
            UnsafeRow before = state.get(thisSide, name);
            if (versioned && before != null && event.ts < before.getLong(TS)) {
                continue;  // history only: older than the key's latest version on this side
            }
            boolean existed = before != null && before.getBoolean(PRESENT);
            boolean deleted = row.getBoolean(layout.tomb);
            Object value = deleted ? null : isLeft ? row.get(layout.lval, layout.leftType)
                    : row.get(layout.rval, layout.rightType);
            if (deleted && !versioned) {
                state.remove(thisSide, name);
            } else if (isLeft) {
                state.putFields(thisSide, name, null, event.ts, value, !deleted);
            } else {
                state.putFields(thisSide, name, value, event.ts, null, !deleted);
            }
            UnsafeRow other = state.get(isLeft ? TaskState.TABLE : TaskState.LEFT_TABLE, name);
            boolean otherHas = other != null && other.getBoolean(PRESENT);
            long ts = otherHas ? Math.max(event.ts, other.getLong(TS)) : event.ts;
            Object left = isLeft ? value : otherHas ? other.get(LEFT, layout.leftType) : null;
            Object right = isLeft ? otherHas ? other.get(RIGHT, layout.rightType) : null : value;
            boolean noopDelete = deleted && !existed && !otherHas;
            boolean tombstone;
            switch (kind) {
                case INNER -> {
                    if (!otherHas) {
                        continue;
                    }
                    tombstone = deleted;
                }
                case LEFT -> {
                    if (isLeft ? noopDelete : !otherHas) {
                        continue;
                    }
                    tombstone = isLeft && deleted;
                }
                default -> {
                    if (noopDelete) {
                        continue;
                    }
                    tombstone = left == null && right == null;
                }
            }
            emit.accept(Results.update(task, event, layout, key, tombstone ? null : left, tombstone ? null : right,
                    ts, tombstone));
        }
        observed.write();
    }
}
