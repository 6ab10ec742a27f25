package dev.streamjoin.kernel;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;

import org.apache.spark.api.java.function.Function2;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

import scala.Tuple2;

/**
 * A foreign-key join's first stage, task t holding partition t of both inputs (as Kafka Streams' subscription
 * send processor): the batch in processing order, each left key's latest value and foreign key in the task's
 * store ({@link TaskState#LEFT_TABLE}; a versioned left keeps a delete's ts and ignores older updates). A
 * versioned side's store (the left's and the right's of this task's partition) refuses an update older than its
 * observed time - history retention ({@link ObservedTimes}): it goes no further. Each
 * applied left update sends its key's move away from its old foreign key and to its new one (the foreign key is
 * the decoded batch's {@code __lookup}); a right update goes on as it is; a result that needs no right row (a
 * left join's delete, or a value pointing nowhere) is decided here. Rules: {@code core/semantics/foreign_key.py}.
 */
final class ForeignKeySubscriptions implements
        Function2<Integer, Iterator<Tuple2<Integer, InternalRow>>, Iterator<Tuple2<Integer, ForeignKeyMessage>>> {
    private static final long serialVersionUID = 1L;
    /** The store's value fields: (unused, ts, left value, present, fk). */
    private static final int TS = 1;
    private static final int LEFT = 2;
    private static final int PRESENT = 3;
    private static final int FK = 4;

    private final Layout layout;
    private final TaskStores stores;
    private final long version;
    private final boolean fileOrder;
    private final int tasks;
    private final boolean inner;
    private final boolean versionedLeft;
    /** A versioned side's history retention (ms); null: a plain table. */
    private final Long leftHistory;
    private final Long rightHistory;

    ForeignKeySubscriptions(Layout layout, TaskStores stores, long version, boolean fileOrder, int tasks,
            boolean inner, Long leftHistory, Long rightHistory) {
        this.layout = layout;
        this.stores = stores;
        this.version = version;
        this.fileOrder = fileOrder;
        this.tasks = tasks;
        this.inner = inner;
        this.versionedLeft = leftHistory != null;
        this.leftHistory = leftHistory;
        this.rightHistory = rightHistory;
    }

    static StructType valueSchema(Layout layout) {
        return TaskState.valueSchema(layout.rightType).add("left", layout.leftType)
                .add("present", DataTypes.BooleanType, false).add("fk", DataTypes.StringType);
    }

    @Override
    public Iterator<Tuple2<Integer, ForeignKeyMessage>> call(Integer task, Iterator<Tuple2<Integer, InternalRow>> in) {
        List<InternalRow> rows = new ArrayList<>();
        in.forEachRemaining(record -> rows.add(record._2()));
        TaskState state = stores.open(task, version, valueSchema(layout));
        List<Event> ordered = fileOrder ? BatchOrder.fileOrder(rows, layout) : BatchOrder.order(rows, layout, state);
        List<Tuple2<Integer, ForeignKeyMessage>> out = new ArrayList<>();
        ObservedTimes observed = new ObservedTimes(state);
        for (Event event : ordered) {
            InternalRow row = event.row;
            UTF8String key = row.getUTF8String(layout.key);
            UTF8String topic = row.getUTF8String(layout.topic);
            boolean deleted = row.getBoolean(layout.tomb);
            boolean left = event.stream(layout);
            Long history = left ? leftHistory : rightHistory;
            if (observed.refuses(left ? "left" : "right", event.partition, event.ts, history)) {
                continue;  // older than the side's store time - history retention
            }
            if (!left) {
                Object value = deleted ? null : row.get(layout.rval, layout.rightType);
                send(out, new ForeignKeyMessage(ForeignKeyMessage.RIGHT, key, key, value, event.ts, deleted, task, 0,
                        event.pos, event.input, event.partition, event.offset, topic));
                continue;
            }
            String name = key.toString();
            UnsafeRow before = state.get(TaskState.LEFT_TABLE, name);
            if (versionedLeft && before != null && event.ts < before.getLong(TS)) {
                continue;  // older than the key's latest version
            }
            boolean existed = before != null && before.getBoolean(PRESENT);
            UTF8String oldFk = existed && !before.isNullAt(FK) ? before.getUTF8String(FK) : null;
            Object value = deleted ? null : row.get(layout.lval, layout.leftType);
            UTF8String newFk = deleted || row.isNullAt(layout.lookup) ? null : row.getUTF8String(layout.lookup);
            if (deleted && !versionedLeft) {
                state.remove(TaskState.LEFT_TABLE, name);
            } else {
                state.putFields(TaskState.LEFT_TABLE, name, null, event.ts, value, !deleted, newFk);
            }
            if (oldFk != null) {
                boolean tombstone = inner && newFk == null;
                send(out, message(ForeignKeyMessage.UNSUBSCRIBE, oldFk, key, null, event, tombstone, task, 0, topic));
            }
            if (newFk != null) {
                boolean moved = oldFk != null && !oldFk.equals(newFk);
                send(out, message(ForeignKeyMessage.SUBSCRIBE, newFk, key, value, event, moved, task, 1, topic));
            } else if (!inner && (!deleted || existed)) {
                // a left join's delete of a present key (a tombstone), or a value pointing nowhere: (value, null)
                send(out, message(ForeignKeyMessage.RESULT, null, key, value, event, deleted, task, 0, topic));
            }
        }
        observed.write();
        state.commit();
        return out.iterator();
    }

    private static ForeignKeyMessage message(int type, UTF8String fk, UTF8String key, Object value, Event event,
            boolean flag, int task, int step, UTF8String topic) {
        return new ForeignKeyMessage(type, fk, key, value, event.ts, flag, task, step, event.pos, event.input,
                event.partition, event.offset, topic);
    }

    private void send(List<Tuple2<Integer, ForeignKeyMessage>> out, ForeignKeyMessage message) {
        out.add(new Tuple2<>(message.route(tasks), message));
    }
}
