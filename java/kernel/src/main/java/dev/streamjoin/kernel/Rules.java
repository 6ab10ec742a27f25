package dev.streamjoin.kernel;

import java.io.Serializable;
import java.util.List;
import java.util.function.Consumer;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.StructType;

/** A shape's per-record rules: what one task does with its batch's records in processing order. */
interface Rules extends Serializable {
    /** The schema of the values the shape keeps in its task's store ({@link TaskState}). */
    StructType valueSchema();

    /** Process {@code ordered} against {@code state}, emitting join results in the kernel's output layout. */
    void apply(int task, List<Event> ordered, TaskState state, Consumer<InternalRow> emit);
}
