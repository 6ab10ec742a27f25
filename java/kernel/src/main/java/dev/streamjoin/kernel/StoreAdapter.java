package dev.streamjoin.kernel;

import java.nio.charset.StandardCharsets;
import java.util.UUID;

import org.apache.hadoop.conf.Configuration;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.execution.streaming.state.NoPrefixKeyStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.apache.spark.sql.execution.streaming.state.StateStore$;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.execution.streaming.state.StateStoreProviderId;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.util.SerializableConfiguration;
import org.apache.spark.util.TaskCompletionListener;

import scala.Option;

/**
 * The one class that touches Spark's state store internals (pinned to Spark 4.1.x): a task's store of one
 * pipeline partition, opened at the version its batch starts from, committed at the next. Spark's stateful
 * operators open theirs the same way ({@code StateStoreRDD}); the provider is RocksDB with changelog
 * checkpointing whatever the session's default provider is.
 */
final class StoreAdapter implements TaskStores {
    private static final long serialVersionUID = 1L;
    static final String PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider";
    /** The join's store of each task; an aggregate's is {@link #AGGREGATE}. */
    static final String JOIN = "default";
    static final String AGGREGATE = "aggregate";
    /** A table aggregate's store of each join task: its result keys' last counted contributions. */
    static final String PREVIOUS = "previous";
    /** A foreign-key join's second-stage store of each task: right rows and subscriptions by foreign key. */
    static final String FOREIGN = "foreign";
    private static final long OPERATOR_ID = 0L;

    private final String checkpointRoot;
    private final String storeName;
    private final StateStoreConf storeConf;
    private final SerializableConfiguration hadoopConf;
    /** Fixed per checkpoint: executors keep the loaded stores of a pipeline between its batches. */
    private final UUID runId;

    StoreAdapter(SparkSession session, String checkpointRoot, String storeName) {
        this.checkpointRoot = checkpointRoot;
        this.storeName = storeName;
        SQLConf conf = session.sessionState().conf().clone();
        conf.setConfString("spark.sql.streaming.stateStore.providerClass", PROVIDER);
        conf.setConfString("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true");
        // the batch's manifest keeps each store file's size and checksum (spark/state.py): no checksum files too
        conf.setConfString("spark.sql.streaming.checkpoint.fileChecksum.enabled", "false");
        this.storeConf = StateStoreConf.apply(conf);
        Configuration hadoop = session.sessionState().newHadoopConf();
        if (LocalCheckpointFiles.applies(checkpointRoot)) {
            hadoop.set(LocalCheckpointFiles.CONF, LocalCheckpointFiles.class.getName());
        }
        this.hadoopConf = new SerializableConfiguration(hadoop);
        this.runId = UUID.nameUUIDFromBytes(checkpointRoot.getBytes(StandardCharsets.UTF_8));
        session.streams().stateStoreCoordinator(); // started on the driver before any task reports to it
    }

    /** This store's name: {@link #JOIN}, {@link #AGGREGATE}, {@link #PREVIOUS} or {@link #FOREIGN}. */
    String name() {
        return storeName;
    }

    /** The state store provider of {@code partition}'s store: what executors report to the coordinator. */
    StateStoreProviderId providerId(int partition) {
        return new StateStoreProviderId(new StateStoreId(checkpointRoot, OPERATOR_ID, partition, storeName), runId);
    }

    /**
     * The store of {@code partition} as of {@code version} (0: empty), for the running task: its writes become
     * version + 1 at its commit; a store the task has not committed when it ends (it failed) is aborted, so that
     * a retry starts from the same version.
     */
    @Override
    public TaskState open(int partition, long version, StructType valueSchema) {
        StructType keySchema = TaskState.keySchema();
        StateStore store = StateStore$.MODULE$.get(
                providerId(partition), keySchema, valueSchema, NoPrefixKeyStateEncoderSpec.apply(keySchema),
                version, Option.empty(), Option.empty(), false, storeConf, hadoopConf.value(), false);
        TaskContext.get().addTaskCompletionListener((TaskCompletionListener) context -> {
            if (!store.hasCommitted()) {
                store.abort();
            }
        });
        String family = StateStore.DEFAULT_COL_FAMILY_NAME();
        return new TaskState(new TaskState.Rows() {
            @Override
            public UnsafeRow get(UnsafeRow key) {
                return store.get(key, family);
            }

            @Override
            public void put(UnsafeRow key, UnsafeRow value) {
                store.put(key, value, family);
            }

            @Override
            public void remove(UnsafeRow key) {
                store.remove(key, family);
            }

            @Override
            public void commit() {
                store.commit();
            }
        }, valueSchema);
    }

    /** Close this checkpoint's stores of this name loaded in this JVM (the driver's, in local mode). */
    void unload(int partitions) {
        for (int p = 0; p < partitions; p++) {
            StateStore$.MODULE$.removeFromLoadedProvidersAndClose(providerId(p), Option.empty());
            StorePlacements.forget(providerId(p));
        }
    }
}
