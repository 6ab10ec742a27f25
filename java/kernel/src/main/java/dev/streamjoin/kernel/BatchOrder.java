package dev.streamjoin.kernel;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The batch ordering rule of {@code core/ordering.py} for one task: each (topic, partition) queue in offset
 * order, a record's effective timestamp the running max of ts in its queue (continuing from the queue's
 * clock carried in the state), the queues merged by (effective ts * 4 + role rank, input, partition,
 * offset). As in Kafka Streams, a record that decodes moves its partition's time even when the join skips it
 * (null key, null value); an undecodable one does not.
 */
final class BatchOrder {
    static final long GLOBAL_EFF = -(1L << 60);
    /** How an undecodable record's dead-letter reason starts (the driver's plan must say the same). */
    static final String UNDECODABLE = "undecodable";

    private BatchOrder() {}

    /** The good records in processing order; updates {@code clocks} ((topic, partition) -> max ts). */
    static List<Event> order(List<InternalRow> rows, Layout layout, Clocks clocks) {
        Map<String, List<Event>> queues = new HashMap<>();
        List<Event> good = new ArrayList<>(rows.size());
        for (InternalRow row : rows) {
            Event event = new Event(row, layout);
            if (layout.derived(row)) {
                derived(event, layout, good);
                continue;
            }
            String queue = row.getUTF8String(layout.topic) + "\u0000" + event.partition;
            queues.computeIfAbsent(queue, q -> new ArrayList<>()).add(event);
        }
        for (Map.Entry<String, List<Event>> entry : queues.entrySet()) {
            List<Event> queue = entry.getValue();
            queue.sort(Comparator.comparingLong(e -> e.offset));
            Long running = clocks.get(entry.getKey());
            for (Event event : queue) {
                UTF8String reason = event.row.isNullAt(layout.reason) ? null : event.row.getUTF8String(layout.reason);
                if (reason == null || !reason.toString().startsWith(UNDECODABLE)) {
                    running = running == null ? event.ts : Math.max(running, event.ts);
                }
                if (reason != null) {
                    continue;
                }
                long eff = event.rank == 0 ? GLOBAL_EFF : running;
                event.pos = eff * 4 + event.rank;
                good.add(event);
            }
            if (running != null) {
                clocks.put(entry.getKey(), running);
            }
        }
        good.sort(Event.PROCESSING_ORDER);
        return good;
    }

    /** Replay's file order: one task, records in offset (line) order; no clocks. */
    static List<Event> fileOrder(List<InternalRow> rows, Layout layout) {
        List<Event> good = new ArrayList<>(rows.size());
        for (InternalRow row : rows) {
            if (!row.isNullAt(layout.reason)) {
                continue;
            }
            Event event = new Event(row, layout);
            if (layout.derived(row)) {
                derived(event, layout, good);
                continue;
            }
            event.pos = event.offset * 4 + event.rank;
            good.add(event);
        }
        good.sort(Event.PROCESSING_ORDER);
        return good;
    }

    /** A chained stage's derived record at its given place: it has no queue and moves no partition's time. */
    private static void derived(Event event, Layout layout, List<Event> good) {
        if (event.row.isNullAt(layout.reason)) {
            event.pos = event.row.getLong(layout.chainPos);
            event.seq = event.row.getLong(layout.chainSeq);
            good.add(event);
        }
    }

    /** Each queue's max timestamp so far, read from and written to the task's state. */
    interface Clocks {
        Long get(String queue);

        void put(String queue, long maxTs);
    }
}
