package dev.streamjoin.kernel;

import java.util.HashMap;
import java.util.Map;

/**
 * The observed stream times of a task's versioned table stores, as Kafka's {@code RocksDBVersionedStore} keeps
 * one per store (one store per side and task): the max ts of the updates the store took. A store refuses an
 * update older than {@code observed - history retention} (a delete too): it is not stored and a table source
 * forwards nothing, so the join neither applies it nor emits; a refused update does not move the time. Kept
 * per side and input partition (the task's partition; in file order one task holds them all), in
 * {@link TaskState#TIME} rows {@code observed:<side>:<partition>}, read once and written once per batch.
 */
final class ObservedTimes {
    private final TaskState state;
    private final Map<String, Long> times = new HashMap<>();

    ObservedTimes(TaskState state) {
        this.state = state;
    }

    /**
     * Whether the store of {@code side} in {@code partition} refuses an update at {@code ts} ({@code history}
     * null: a plain table, which refuses nothing); an update it takes advances its observed time.
     */
    boolean refuses(String side, int partition, long ts, Long history) {
        if (history == null) {
            return false;
        }
        String name = "observed:" + side + ":" + partition;
        Long observed = times.containsKey(name) ? times.get(name) : state.time(name);
        if (observed != null && ts < observed - history) {
            return true;
        }
        times.put(name, observed == null ? ts : Math.max(observed, ts));
        return false;
    }

    /**
     * Store the times this batch moved. The row's other fields: the left value null and {@code present} false,
     * the non-nullable field of both value schemas that keep these times ({@link TableTableRules},
     * {@link ForeignKeySubscriptions}).
     */
    void write() {
        times.forEach((name, ts) -> state.putFields(TaskState.TIME, name, null, ts, null, false));
    }
}
