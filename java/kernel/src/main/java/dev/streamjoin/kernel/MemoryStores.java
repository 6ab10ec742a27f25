package dev.streamjoin.kernel;

import java.util.HashMap;
import java.util.Map;

import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.types.StructType;

/**
 * One store's task states in this JVM's memory, for running the kernel's stages without Spark
 * ({@link LocalKernel}): the latest rows of each task, whatever the version asked for (a local run never
 * runs a batch again).
 */
final class MemoryStores implements TaskStores {
    private static final long serialVersionUID = 1L;
    private final Map<Integer, Map<UnsafeRow, UnsafeRow>> tasks = new HashMap<>();

    @Override
    public TaskState open(int task, long version, StructType valueSchema) {
        Map<UnsafeRow, UnsafeRow> rows = tasks.computeIfAbsent(task, t -> new HashMap<>());
        return new TaskState(new TaskState.Rows() {
            @Override
            public UnsafeRow get(UnsafeRow key) {
                return rows.get(key);
            }

            @Override
            public void put(UnsafeRow key, UnsafeRow value) {
                rows.put(key, value);
            }

            @Override
            public void remove(UnsafeRow key) {
                rows.remove(key);
            }

            @Override
            public void commit() {}
        }, valueSchema);
    }
}
