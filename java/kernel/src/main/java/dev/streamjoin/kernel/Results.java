package dev.streamjoin.kernel;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.unsafe.types.UTF8String;

/** Join result rows in the kernel's output layout ({@link Layout#output()}). */
final class Results {
    private Results() {}

    /** The result of stream record {@code source} (key, left value, ts, coordinates) emitted at {@code at}. */
    static InternalRow of(int task, Event at, int sub, Source source, Object right) {
        return new GenericInternalRow(new Object[] {
            source.key(),
            source.left(),
            right,
            source.ts(),
            right != null,
            false,
            sub,
            source.topic(),
            source.partition(),
            source.offset(),
            task,
            at.pos,
            at.input,
            at.partition,
            at.offset,
        });
    }

    /** The result of table update {@code at} (a table-table join): its coordinates are the update's. */
    static InternalRow update(int task, Event at, Layout layout, UTF8String key, Object left, Object right, long ts,
                              boolean tombstone) {
        return new GenericInternalRow(new Object[] {
            key,
            left,
            right,
            ts,
            left != null && right != null && !tombstone,
            tombstone,
            0,
            at.row.getUTF8String(layout.topic),
            at.partition,
            at.offset,
            task,
            at.pos,
            at.input,
            at.partition,
            at.offset,
        });
    }

    /**
     * A windowed stream-stream join's result emitted at {@code at}: a pair ({@code matched}) or one side joined
     * with null; its coordinates are the record that produced it (the later one of a pair).
     */
    static InternalRow windowed(int task, Event at, int sub, UTF8String key, Object left, Object right, long ts,
                                boolean matched, UTF8String topic, int partition, long offset) {
        return new GenericInternalRow(new Object[] {
            key, left, right, ts, matched, false, sub, topic, partition, offset, task, at.pos, at.input,
            at.partition, at.offset,
        });
    }

    /** A stream record as a join result needs it: its key, value, ts and Kafka coordinates. */
    record Source(UTF8String key, Object left, long ts, UTF8String topic, int partition, long offset) {
        static Source of(Event event, Layout layout) {
            InternalRow row = event.row;
            UTF8String key = row.isNullAt(layout.key) ? null : row.getUTF8String(layout.key);
            return new Source(key, row.get(layout.lval, layout.leftType), event.ts, row.getUTF8String(layout.topic),
                    event.partition, event.offset);
        }
    }
}
