package dev.streamjoin.kernel;

import java.util.ArrayList;
import java.util.Comparator;

import org.apache.spark.Partition;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.rdd.RDD;
import org.apache.spark.scheduler.ExecutorCacheTaskLocation;
import org.apache.spark.scheduler.TaskLocation;
import org.apache.spark.scheduler.TaskLocation$;
import org.apache.spark.scheduler.TaskScheduler;
import org.apache.spark.scheduler.TaskSchedulerImpl;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.execution.streaming.state.StateStoreCoordinatorRef;
import org.apache.spark.storage.BlockManager;
import org.apache.spark.storage.BlockManagerId;

import scala.Option;
import scala.collection.Iterator;
import scala.collection.immutable.List$;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A stateful stage's RDD, one to one, placed where its stores are: partition t prefers the executor that has
 * store t loaded, as Spark's state store coordinator knows it (each executor reports the stores it opens), the
 * rule of Spark's {@code StateStoreRDD}. A location on an executor the scheduler no longer has is dropped, so that
 * no task waits {@code spark.locality.wait.process} for an executor that will not come back. A partition whose
 * store is nowhere (the first batch, or its executor died) prefers the (t mod n)-th of the n executors, sorted
 * (Spark's Kafka source places its consumers so): the stores spread evenly instead of going to whichever
 * executor is free first, and stay there. Each task is recorded into the batch's {@link StorePlacements}.
 */
final class StoreLocatedRDD<T> extends RDD<T> {
    private static final long serialVersionUID = 1L;
    private final StoreAdapter stores;
    private final StorePlacements placements;
    private final transient StateStoreCoordinatorRef coordinator;
    /** The driver's sorted executor locations, looked up once per stage (null: not yet). */
    private transient java.util.List<String> executors;

    private StoreLocatedRDD(RDD<T> stage, StoreAdapter stores, StorePlacements placements,
            StateStoreCoordinatorRef coordinator) {
        super(stage, stage.elementClassTag());
        this.stores = stores;
        this.placements = placements;
        this.coordinator = coordinator;
    }

    /** {@code stage}, whose task t opens store t of {@code stores}, placed by its stores. */
    static <T> JavaRDD<T> of(SparkSession session, JavaRDD<T> stage, StoreAdapter stores,
            StorePlacements placements) {
        RDD<T> located = new StoreLocatedRDD<>(stage.rdd(), stores, placements,
                session.streams().stateStoreCoordinator());
        return new JavaRDD<>(located, stage.classTag());
    }

    @Override
    public Partition[] getPartitions() {
        return firstParent(elementClassTag()).partitions();
    }

    @Override
    public Iterator<T> compute(Partition split, TaskContext context) {
        placements.ran(stores, split.index(), context);
        return firstParent(elementClassTag()).iterator(split, context);
    }

    @Override
    public Seq<String> getPreferredLocations(Partition split) {
        Option<String> location = coordinator.getLocation(stores.providerId(split.index()));
        if (location.isDefined() && alive(location.get())) {
            return location.toList();
        }
        java.util.List<String> all = executors();
        if (all.isEmpty()) {
            return List$.MODULE$.<String>empty();  // local mode: the driver's executor is the only one
        }
        return Option.apply(all.get(split.index() % all.size())).toList();
    }

    /** The live executors other than the driver's, as locations, sorted by host and executor id. */
    private java.util.List<String> executors() {
        if (executors == null) {
            BlockManager blocks = SparkEnv.get().blockManager();
            java.util.List<BlockManagerId> peers = new ArrayList<>(
                    CollectionConverters.asJava(blocks.master().getPeers(blocks.blockManagerId())));
            peers.sort(Comparator.comparing(BlockManagerId::host).thenComparing(BlockManagerId::executorId));
            executors = peers.stream()
                    .map(peer -> new ExecutorCacheTaskLocation(peer.host(), peer.executorId()).toString())
                    .filter(this::alive)
                    .toList();
        }
        return executors;
    }

    /** Whether the scheduler still has the executor of {@code location} (a host location: kept). */
    private boolean alive(String location) {
        TaskLocation parsed = TaskLocation$.MODULE$.apply(location);
        TaskScheduler scheduler = context().taskScheduler();
        if (parsed instanceof ExecutorCacheTaskLocation executor && scheduler instanceof TaskSchedulerImpl tasks) {
            return tasks.isExecutorAlive(executor.executorId());
        }
        return true;
    }
}
