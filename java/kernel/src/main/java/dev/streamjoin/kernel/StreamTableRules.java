package dev.streamjoin.kernel;

import java.util.List;
import java.util.function.Consumer;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.types.StructType;

/**
 * Stream-table and stream-globaltable joins, plain (non-versioned) table: the per-record rules of
 * {@code core/semantics/stream_table.py}. A global table's records reach every task (each keeps a replica)
 * and come first in its processing order; a stream record looks up its key selector's key when the join
 * has one. A table record replaces its key's value (a null value deletes
 * it); a stream record is joined with the latest value of its key at its place in the processing order:
 * inner emits only matches, left emits (value, null) without one; a null-key stream record of a left join
 * is joined with null (KIP-962). Only stream records emit, at their own ts.
 */
final class StreamTableRules implements Rules {
    private static final long serialVersionUID = 1L;
    private final Layout layout;
    private final boolean inner;

    StreamTableRules(Layout layout, boolean inner) {
        this.layout = layout;
        this.inner = inner;
    }

    @Override
    public StructType valueSchema() {
        return TaskState.valueSchema(layout.rightType);
    }

    @Override
    public void apply(int task, List<Event> ordered, TaskState state, Consumer<InternalRow> emit) {
        for (Event event : ordered) {
            InternalRow row = event.row;
            String key = row.isNullAt(layout.key) ? null : row.getUTF8String(layout.key).toString();
            if (!event.stream(layout)) {
                if (row.getBoolean(layout.tomb)) {
                    state.remove(TaskState.TABLE, key);
                } else {
                    state.put(TaskState.TABLE, key, row.get(layout.rval, layout.rightType), event.ts);
                }
                continue;
            }
            String lookup = layout.lookup < 0 ? key
                    : row.isNullAt(layout.lookup) ? null : row.getUTF8String(layout.lookup).toString();
            UnsafeRow found = lookup == null ? null : state.get(TaskState.TABLE, lookup);
            Object right = found == null || found.isNullAt(0) ? null : found.get(0, layout.rightType);
            if (right == null && inner) {
                continue;
            }
            emit.accept(Results.of(task, event, 0, Results.Source.of(event, layout), right));
        }
    }
}
