package dev.streamjoin.kernel;

import java.io.Serializable;
import java.util.Comparator;

import org.apache.spark.unsafe.types.UTF8String;

/**
 * What a foreign-key join's first stage ({@link ForeignKeySubscriptions}, by the left key's partition) sends to
 * its second ({@link ForeignKeyJoin}, by foreign key), in the batch's processing order ({@code pos, input,
 * partition, offset}, then {@code step}): a right-table update of {@code fk}, a left key leaving {@code fk}
 * ({@link #UNSUBSCRIBE}) or pointing at it ({@link #SUBSCRIBE}), or a result the first stage decided alone
 * ({@link #RESULT}, routed to the left key's task).
 *
 * @param type {@link #RIGHT}, {@link #UNSUBSCRIBE}, {@link #SUBSCRIBE} or {@link #RESULT}
 * @param fk the foreign key (the right key for {@link #RIGHT}; null for {@link #RESULT})
 * @param key the left key (the right key for {@link #RIGHT})
 * @param value the left value (the right value for {@link #RIGHT}; null for a delete)
 * @param flag {@link #RIGHT}: a delete; {@link #UNSUBSCRIBE}: emit the key's tombstone (inner: its value is
 *     gone or points nowhere); {@link #SUBSCRIBE}: it moved from another foreign key (inner: a tombstone when
 *     the new one has no right row); {@link #RESULT}: a tombstone
 * @param task the left key's task (a result's {@code __task}: a table aggregate keys its contributions by it)
 */
record ForeignKeyMessage(int type, UTF8String fk, UTF8String key, Object value, long ts, boolean flag, int task,
        int step, long pos, int input, int partition, long offset, UTF8String topic) implements Serializable {
    static final int RIGHT = 0;
    static final int UNSUBSCRIBE = 1;
    static final int SUBSCRIBE = 2;
    static final int RESULT = 3;

    /** The second stage's order: the triggering record's place, then leaving an fk before pointing at one. */
    static final Comparator<ForeignKeyMessage> ORDER = Comparator
            .comparingLong(ForeignKeyMessage::pos)
            .thenComparingInt(ForeignKeyMessage::input)
            .thenComparingInt(ForeignKeyMessage::partition)
            .thenComparingLong(ForeignKeyMessage::offset)
            .thenComparingInt(ForeignKeyMessage::step);

    /** The second-stage task of this message. */
    int route(int tasks) {
        return fk == null ? task : Math.floorMod(fk.hashCode(), tasks);
    }
}
