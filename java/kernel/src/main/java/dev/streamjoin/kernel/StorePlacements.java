package dev.streamjoin.kernel;

import java.io.Serializable;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.execution.streaming.state.StateStore$;
import org.apache.spark.sql.execution.streaming.state.StateStoreProviderId;
import org.apache.spark.util.CollectionAccumulator;
import org.apache.spark.util.TaskCompletionListener;

/**
 * Where a batch's stateful tasks ran ({@link StoreLocatedRDD}): for each store and partition, the executor
 * of the task that succeeded, and whether that executor had to load the store from the checkpoint's files.
 * An executor counts a store as kept when it has it loaded ({@code StateStore.isLoaded}) and a task of this
 * JVM committed the version the batch starts from: RocksDB then reuses its open instance; anything else is a
 * load (the files of the last snapshot and the changelogs after it), except a store's first version (0),
 * which has nothing to load.
 *
 * <p>The driver keeps the latest batch's of each checkpoint: {@link #report} hands them to the job as text,
 * one line per task, {@code store \t partition \t executor \t loaded (0|1)}.
 */
public final class StorePlacements implements Serializable {
    private static final long serialVersionUID = 1L;
    /** This executor's committed version of each store it has opened (its tasks' view of RocksDB's). */
    private static final Map<StateStoreProviderId, Long> COMMITTED = new ConcurrentHashMap<>();
    /** The driver's latest batch of each checkpoint (a few: temporary checkpoints come and go). */
    private static final Map<String, StorePlacements> LATEST = new LinkedHashMap<>() {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, StorePlacements> eldest) {
            return size() > 16;
        }
    };

    private final long version;
    private final CollectionAccumulator<String> tasks = new CollectionAccumulator<>();

    private StorePlacements(long version) {
        this.version = version;
    }

    /** The placements of batch {@code version} of {@code checkpoint} (its join's and aggregate's stages share them). */
    static StorePlacements of(SparkSession session, String checkpoint, long version) {
        synchronized (LATEST) {
            StorePlacements latest = LATEST.get(checkpoint);
            if (latest == null || latest.version != version) {
                latest = new StorePlacements(version);
                session.sparkContext().register(latest.tasks, "streamjoin store placements");
                LATEST.put(checkpoint, latest);
            }
            return latest;
        }
    }

    /** The latest batch's tasks of {@code checkpoint} (see the class); empty when none ran. */
    public static String report(String checkpoint) {
        StorePlacements latest;
        synchronized (LATEST) {
            latest = LATEST.get(checkpoint);
        }
        return latest == null ? "" : String.join("\n", latest.tasks.value());
    }

    /** Forget what this JVM committed to {@code id} (its store was closed: a temporary checkpoint's). */
    static void forget(StateStoreProviderId id) {
        COMMITTED.remove(id);
    }

    /** Record the running task of {@code partition}, which opens its store of {@code stores} at the batch's version. */
    void ran(StoreAdapter stores, int partition, TaskContext context) {
        StateStoreProviderId id = stores.providerId(partition);
        boolean kept = StateStore$.MODULE$.isLoaded(id) && Long.valueOf(version).equals(COMMITTED.get(id));
        boolean loaded = !kept && version > 0;
        tasks.add(stores.name() + "\t" + partition + "\t" + SparkEnv.get().executorId() + "\t" + (loaded ? 1 : 0));
        context.addTaskCompletionListener((TaskCompletionListener) done -> {
            if (done.isFailed()) {
                COMMITTED.remove(id); // its store was aborted: RocksDB reloads it next time
            } else {
                COMMITTED.put(id, version + 1);
            }
        });
    }
}
