package dev.streamjoin.kernel;

import java.util.List;
import java.util.function.Consumer;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.StructType;

/**
 * Stream-table join, versioned table, optional grace: the per-record rules of
 * {@code core/semantics/stream_table.py}. A table record (a tombstone too) older than {@code table time -
 * retention} is refused, as Kafka's {@code RocksDBVersionedStore} refuses it; every other one is a version at
 * its ts; table time is the max ts of the table records taken. A stream record is joined as of its own ts
 * ({@link Versions}).
 * With a grace, buffer time is the max ts of stream records: a record older than {@code buffer time -
 * grace} is joined at once, else held ({@link GraceBuffer}); then every held record at or before that is
 * released in (ts, key bytes, arrival) order and joined as of its ts against the table as it is now, its
 * result at the releasing record's place ({@code __sub} 0, 1, ...). A null-key stream record of a left join
 * is joined with null at once and moves no time (KIP-962).
 */
final class VersionedStreamTableRules implements Rules {
    private static final long serialVersionUID = 1L;
    private static final String TABLE_TIME = "table";
    private static final String BUFFER_TIME = "buffer";

    private final Layout layout;
    private final boolean inner;
    private final long retention;
    private final long grace;
    private final boolean longKeys;

    VersionedStreamTableRules(Layout layout, boolean inner, long retention, long grace, boolean longKeys) {
        this.layout = layout;
        this.inner = inner;
        this.retention = retention;
        this.grace = grace;
        this.longKeys = longKeys;
    }

    @Override
    public StructType valueSchema() {
        return TaskState.valueSchema(layout.rightType)
                .add("versions", Versions.type(layout.rightType))
                .add("buffer", GraceBuffer.type(layout.leftType));
    }

    @Override
    public void apply(int task, List<Event> ordered, TaskState state, Consumer<InternalRow> emit) {
        Long tableTime = state.time(TABLE_TIME);
        Long bufferTime = state.time(BUFFER_TIME);
        GraceBuffer buffer = grace > 0 ? GraceBuffer.read(state, layout.leftType, longKeys) : null;
        for (Event event : ordered) {
            InternalRow row = event.row;
            if (!event.stream(layout)) {
                if (tableTime != null && event.ts < tableTime - retention) {
                    continue;  // refused: not stored
                }
                tableTime = tableTime == null ? event.ts : Math.max(tableTime, event.ts);
                String key = row.getUTF8String(layout.key).toString();
                Versions versions = Versions.read(state, key, layout.rightType);
                Object value = row.getBoolean(layout.tomb) ? null : row.get(layout.rval, layout.rightType);
                versions.add(event.ts, value, tableTime - retention);
                versions.write(state, key);
                continue;
            }
            Results.Source source = Results.Source.of(event, layout);
            if (source.key() == null) {
                if (!inner) {
                    emit.accept(Results.of(task, event, 0, source, null));
                }
                continue;
            }
            if (buffer == null) {
                join(task, event, 0, source, state, tableTime, emit);
                continue;
            }
            bufferTime = bufferTime == null ? event.ts : Math.max(bufferTime, event.ts);
            long horizon = bufferTime - grace;
            if (event.ts < horizon) {
                join(task, event, 0, source, state, tableTime, emit);
                continue;
            }
            buffer.hold(source);
            int sub = 0;
            for (Results.Source due : buffer.release(horizon)) {
                join(task, event, sub++, due, state, tableTime, emit);
            }
        }
        state.putTime(TABLE_TIME, tableTime);
        state.putTime(BUFFER_TIME, bufferTime);
        if (buffer != null) {
            buffer.write(state);
        }
    }

    /** Join {@code source} as of its ts; emitted at {@code at}'s place in the order. */
    private void join(int task, Event at, int sub, Results.Source source, TaskState state, Long tableTime,
            Consumer<InternalRow> emit) {
        Versions versions = Versions.read(state, source.key().toString(), layout.rightType);
        Object right = versions.asOf(source.ts(), tableTime == null ? null : tableTime - retention);
        if (right != null || !inner) {
            emit.accept(Results.of(task, at, sub, source, right));
        }
    }
}
