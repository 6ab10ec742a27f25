package dev.streamjoin.kernel;

import org.apache.spark.Partition;
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

import scala.Option;
import scala.collection.Iterator;
import scala.collection.immutable.List$;
import scala.collection.immutable.Seq;

/**
 * A stateful stage's RDD, one to one, placed where its stores are: partition t prefers the executor that has
 * store t loaded, as Spark's state store coordinator knows it (each executor reports the stores it opens), the
 * rule of Spark's {@code StateStoreRDD}. A location on an executor the scheduler no longer has is dropped: the
 * task then has no preference of its own and starts at once, wherever a core is free, instead of waiting
 * {@code spark.locality.wait.process} for an executor that will not come back. Each task is recorded into
 * the batch's {@link StorePlacements}.
 */
final class StoreLocatedRDD<T> extends RDD<T> {
    private static final long serialVersionUID = 1L;
    private final StoreAdapter stores;
    private final StorePlacements placements;
    private final transient StateStoreCoordinatorRef coordinator;

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
        return List$.MODULE$.<String>empty();
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
