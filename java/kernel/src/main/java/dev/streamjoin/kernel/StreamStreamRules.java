package dev.streamjoin.kernel;

import java.util.List;
import java.util.function.Consumer;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Windowed stream-stream joins (inner, left, outer): the per-record rules of
 * {@code core/semantics/stream_stream.py}. For a keyed record r of side s at stream time t (the task's max ts
 * over both inputs, r's included; {@code end} = ts + after on the left, ts + before on the right, {@code close}
 * = end + grace, {@code retention} = before + after + grace):
 *
 * <ol>
 *   <li>if r.ts == t: every pending record whose close is below t is emitted, joined with null, in Kafka's
 *       outer-join store order (ts, right before left, serialized key, arrival);
 *   <li>r is joined with every record of the other side of its key within the window and still in that
 *       side's store ({@code ts > side time - retention}), in (ts, arrival) order, at the later ts; a joined
 *       record stops being pending;
 *   <li>unmatched on a side the kind keeps: joined with null at once if its end is below t, else pending;
 *   <li>its side's time moves to its ts; it is stored if still within retention of it.
 * </ol>
 *
 * A null-key record (of a kept side: decoding dead-letters the others) is joined with null at once and moves
 * stream time only (KIP-962). The store is {@link WindowStore}: a batch reads and writes the keys it touches,
 * the pending records due, and the records it expires.
 */
final class StreamStreamRules implements Rules {
    private static final long serialVersionUID = 1L;
    private static final String STREAM_TIME = "stream";
    private static final String SEQ = "seq";

    enum Kind { INNER, LEFT, OUTER }

    private final Layout layout;
    private final Kind kind;
    private final long before;
    private final long after;
    private final long grace;
    private final boolean longKeys;

    StreamStreamRules(Layout layout, Kind kind, long before, long after, long grace, boolean longKeys) {
        this.layout = layout;
        this.kind = kind;
        this.before = before;
        this.after = after;
        this.grace = grace;
        this.longKeys = longKeys;
    }

    @Override
    public StructType valueSchema() {
        return WindowStore.valueSchema(layout.leftType, layout.rightType);
    }

    private boolean keeps(boolean left) {
        return left ? kind != Kind.INNER : kind == Kind.OUTER;
    }

    @Override
    public void apply(int task, List<Event> ordered, TaskState state, Consumer<InternalRow> emit) {
        WindowStore store = new WindowStore(state, layout, before, after, grace, longKeys);
        Long streamTime = state.time(STREAM_TIME);
        Long seqSoFar = state.time(SEQ);
        long seq = seqSoFar == null ? 0 : seqSoFar;
        for (Event event : ordered) {
            InternalRow row = event.row;
            boolean isLeft = event.stream(layout);
            Object value = isLeft ? row.get(layout.lval, layout.leftType) : row.get(layout.rval, layout.rightType);
            streamTime = streamTime == null ? event.ts : Math.max(streamTime, event.ts);
            int sub = 0;
            if (row.isNullAt(layout.key)) {
                emit.accept(alone(task, event, sub, null, isLeft, value));
                continue;
            }
            UTF8String key = row.getUTF8String(layout.key);
            if (event.ts == streamTime) {
                for (WindowStore.Pending due : store.due(streamTime)) {
                    emit.accept(Results.windowed(task, event, sub++, due.key(), due.left() ? due.value() : null,
                            due.left() ? null : due.value(), due.ts(), false, due.topic(), due.partition(),
                            due.offset()));
                }
            }
            WindowStore.Windows windows = store.windows(key);
            boolean matched = false;
            for (WindowStore.Stored other : windows.side(!isLeft)) {
                long leftTs = isLeft ? event.ts : other.ts();
                long rightTs = isLeft ? other.ts() : event.ts;
                if (rightTs < leftTs - before || rightTs > leftTs + after || !store.visible(!isLeft, other.ts())) {
                    continue;
                }
                matched = true;
                emit.accept(Results.windowed(task, event, sub++, key, isLeft ? value : other.value(),
                        isLeft ? other.value() : value, Math.max(leftTs, rightTs), true, row.getUTF8String(layout.topic),
                        event.partition, event.offset));
                if (keeps(!isLeft)) {
                    store.joined(!isLeft, other);
                }
            }
            boolean emitNow = !matched && keeps(isLeft) && store.end(isLeft, event.ts) < streamTime;
            if (emitNow) {
                emit.accept(alone(task, event, sub, key, isLeft, value));
            }
            seq++;
            store.add(key, windows, isLeft, event.ts, seq, value);
            if (!matched && !emitNow && keeps(isLeft)) {
                store.pend(new WindowStore.Pending(isLeft, key, event.ts, seq, value, row.getUTF8String(layout.topic),
                        event.partition, event.offset, store.close(isLeft, event.ts)));
            }
        }
        store.expire();
        store.write();
        state.putTime(STREAM_TIME, streamTime);
        state.putTime(SEQ, seq);
    }

    /** Event {@code at}'s own record joined with null, at its place in the order. */
    private InternalRow alone(int task, Event at, int sub, UTF8String key, boolean left, Object value) {
        return Results.windowed(task, at, sub, key, left ? value : null, left ? null : value, at.ts, false,
                at.row.getUTF8String(layout.topic), at.partition, at.offset);
    }
}
