package dev.streamjoin.kernel;

import java.io.Serializable;

import org.apache.spark.sql.types.StructType;

/**
 * Where one store of a pipeline keeps its tasks' state: Spark's state store on a checkpoint ({@link StoreAdapter})
 * or this JVM's memory ({@link MemoryStores}, the rule tests without Spark).
 */
interface TaskStores extends Serializable {
    /**
     * Task {@code task}'s state as of {@code version} (0: empty), its values shaped by {@code valueSchema}; its
     * {@link TaskState#commit()} makes the writes version {@code version + 1}.
     */
    TaskState open(int task, long version, StructType valueSchema);
}
