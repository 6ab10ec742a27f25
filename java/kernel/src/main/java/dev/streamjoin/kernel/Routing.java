package dev.streamjoin.kernel;

import java.util.stream.IntStream;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.unsafe.types.UTF8String;

/** Which task a row goes to, at each stage of a batch (the same on Spark and in {@link LocalKernel}). */
final class Routing {
    private Routing() {}

    /**
     * The join tasks of a decoded row: task t gets Kafka partition t of every input (co-partitioned), every task
     * a global table's records (each keeps a replica), a chained stage's derived record its result's task; one task
     * in replay's file order.
     */
    static int[] joinTasks(InternalRow row, Layout layout, int tasks, boolean fileOrder) {
        if (fileOrder) {
            return new int[] {0};
        }
        if (layout.derived(row)) {
            return new int[] {row.getInt(layout.chainTask)};
        }
        if (row.getInt(layout.rank) == 0) {
            return IntStream.range(0, tasks).toArray();
        }
        return new int[] {row.getInt(layout.partition)};
    }

    /**
     * The task that counts a decoded row when every task reads its own records ({@link Kernel#join}'s aligned
     * batch): its partition's, and for a global table's record, which every task reads, partition mod tasks.
     */
    static int home(InternalRow row, Layout layout, int tasks) {
        return Math.floorMod(row.getInt(layout.partition), tasks);
    }

    /** The reducer task of an aggregate's group. */
    static int groupTask(UTF8String group, int tasks) {
        return Math.floorMod(group.hashCode(), tasks);
    }

    /** The join task a table aggregate's result belongs to (its key's: it keeps the key's last contribution). */
    static int resultTask(InternalRow staged, boolean fileOrder) {
        return fileOrder ? 0 : staged.getInt(TableAggregateChanges.TASK);
    }
}
