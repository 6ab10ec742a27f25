package dev.streamjoin.kernel;

import java.util.List;
import java.util.function.Consumer;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Stream-table join, plain (non-versioned) table: the per-record rules of
 * {@code core/semantics/stream_table.py}. A table record replaces its key's value (a null value deletes
 * it); a stream record is joined with the latest value of its key at its place in the processing order:
 * inner emits only matches, left emits (value, null) without one; a null-key stream record of a left join
 * is joined with null (KIP-962). Only stream records emit, at their own ts.
 */
final class StreamTableRules {
    private final Layout layout;
    private final boolean inner;
    private final int task;

    StreamTableRules(Layout layout, boolean inner, int task) {
        this.layout = layout;
        this.inner = inner;
        this.task = task;
    }

    void apply(List<Event> ordered, TaskState state, Consumer<InternalRow> emit) {
        for (Event event : ordered) {
            InternalRow row = event.row;
            boolean stream = row.getUTF8String(layout.side).toString().equals("L");
            String key = row.isNullAt(layout.key) ? null : row.getUTF8String(layout.key).toString();
            if (!stream) {
                if (row.getBoolean(layout.tomb)) {
                    state.remove(TaskState.TABLE, key);
                } else {
                    state.put(TaskState.TABLE, key, row.get(layout.rval, layout.rightType), event.ts);
                }
                continue;
            }
            UnsafeRow found = key == null ? null : state.get(TaskState.TABLE, key);
            Object right = found == null || found.isNullAt(0) ? null : found.get(0, layout.rightType);
            if (right == null && inner) {
                continue;
            }
            emit.accept(result(event, key, right));
        }
    }

    private InternalRow result(Event event, String key, Object right) {
        InternalRow row = event.row;
        return new GenericInternalRow(new Object[] {
            key == null ? null : UTF8String.fromString(key),
            row.get(layout.lval, layout.leftType),
            right,
            event.ts,
            right != null,
            false,
            0,
            row.getUTF8String(layout.topic),
            event.partition,
            event.offset,
            task,
            event.pos,
            event.input,
            event.partition,
            event.offset,
        });
    }
}
