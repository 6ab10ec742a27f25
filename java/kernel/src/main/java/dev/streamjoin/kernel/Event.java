package dev.streamjoin.kernel;

import java.util.Comparator;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.unsafe.types.UTF8String;

/** One record of a task's batch with its place in the processing order. */
final class Event {
    /**
     * (__pos, __input, __partition, __offset): docs/SEMANTICS.md, "Batch ordering rule"; then a chained stage's
     * derived records in the order their stage emitted them, before the triggering record itself (an input read by
     * two stages reaches the later one after what the earlier one made of it: depth first); a self-join's record as
     * its left side's, then as its right's (KIP-862: the left side's processor first).
     */
    static final Comparator<Event> PROCESSING_ORDER = Comparator.<Event>comparingLong(e -> e.pos)
            .thenComparingInt(e -> e.input)
            .thenComparingInt(e -> e.partition)
            .thenComparingLong(e -> e.offset)
            .thenComparingLong(e -> e.seq)
            .thenComparingInt(e -> e.side);

    private static final UTF8String STREAM_SIDE = UTF8String.fromString("L");

    final InternalRow row;
    final int partition;
    final long offset;
    final int input;
    final int rank;
    final long ts;
    /** 0 the left side, 1 the right */
    final int side;
    /** the effective timestamp * 4 + the role rank (Python's {@code __pos}) */
    long pos;
    /** a derived record's emission order in its stage; an input's record comes after them */
    long seq = Long.MAX_VALUE;

    Event(InternalRow row, Layout layout) {
        this.row = row;
        this.partition = row.getInt(layout.partition);
        this.offset = row.getLong(layout.offset);
        this.input = row.getInt(layout.input);
        this.rank = row.getInt(layout.rank);
        this.ts = row.getLong(layout.ts);
        this.side = row.getUTF8String(layout.side).equals(STREAM_SIDE) ? 0 : 1;
    }

    /** A stream-side record (side L), not a table update. */
    boolean stream(Layout layout) {
        return side == 0;
    }
}
