package dev.streamjoin.kernel;

import java.util.Arrays;
import java.util.List;

import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.storage.StorageLevel;
import org.apache.spark.util.LongAccumulator;

import scala.Tuple2;

/**
 * The entry point the Python driver calls: {@link #plan} once per pipeline, then {@link #join} (and
 * {@link #aggregate} after it) once per micro-batch. A batch is one RDD: task t holds Kafka partition t of every
 * input (co-partitioned) and processes its records in the batch ordering rule with its shape's {@link Rules}
 * against its state store (version {@code version} in, {@code version + 1} committed), returning join results.
 */
public final class Kernel {
    private Kernel() {}

    /** The pipeline's join plan (Python's {@code core/join_plan.py} JSON), checked: see {@link JoinPlan#parse}. */
    public static JoinPlan plan(String json) {
        return JoinPlan.parse(json);
    }

    /**
     * One batch of decoded records through the plan's join.
     *
     * @param decoded the batch's decoded rows (Python's {@code events.decode_batch}), dead ones included
     *     (they move partition time)
     * @param checkpoint where the stores live (any Hadoop filesystem URI)
     * @param version the state version the batch starts from (the batch id; 0: empty)
     * @param fileOrder replay's file order: one task, records in offset order
     * @param aligned partition t of {@code decoded} holds task t's records already (its input read by {@link
     *     KafkaRanges}: a global table's in every task), so they go to the rules without a shuffle
     * @param readOnce the caller reads the results once, in one action (one write): they are not cached, each
     *     task's rows go straight on (a second action would run the rules again on stores already committed)
     */
    public static KernelBatch join(SparkSession session, Dataset<Row> decoded, JoinPlan plan, String checkpoint,
            long version, boolean fileOrder, boolean aligned, boolean readOnce) {
        Dataset<Row> input = Layout.input(decoded);
        Layout layout = new Layout(input.schema());
        int tasks = fileOrder ? 1 : plan.partitions;
        BatchSummary summary = new BatchSummary(layout);
        session.sparkContext().register(summary, "streamjoin batch summary");
        JavaPairRDD<Integer, InternalRow> byTask = aligned && !fileOrder
                ? atTasks(input, layout, tasks, summary)
                : byTask(input, layout, tasks, fileOrder, summary);
        StoreAdapter joinStores = new StoreAdapter(session, checkpoint, StoreAdapter.JOIN);
        StorePlacements placements = StorePlacements.of(session, checkpoint, version);
        JavaRDD<InternalRow> rows;
        if (plan.join instanceof Shapes.OneStage stage) {
            rows = StoreLocatedRDD.of(session, byTask.mapPartitionsWithIndex(
                    new KernelTask(layout, joinStores, version, fileOrder, stage.rules().apply(plan, layout)), true),
                    joinStores, placements);
        } else {
            StoreAdapter foreign = new StoreAdapter(session, checkpoint, StoreAdapter.FOREIGN);
            rows = StoreLocatedRDD.of(session, StoreLocatedRDD.of(session, byTask
                    .mapPartitionsWithIndex(new ForeignKeySubscriptions(layout, joinStores, version, fileOrder, tasks,
                            plan.inner(), plan.leftHistory, plan.rightHistory), true), joinStores, placements)
                    .mapToPair(message -> message)
                    .partitionBy(new TaskPartitioner(tasks))
                    .mapPartitionsWithIndex(new ForeignKeyJoin(layout, foreign, version, plan.inner(),
                            plan.rightHistory != null, plan.longKeys), true), foreign, placements);
        }
        return batch(session, rows, readOnce, layout.output(), summary);
    }

    /**
     * The aggregate after the plan's join, over one batch's staged join results: after a stream-producing join
     * (Python's {@code aggregate.staged_results}: the columns of {@link StreamAggregate#INPUT} among others; a null
     * group is a dead letter, which the caller writes) reducer tasks keyed by group keep the totals; after a
     * table-producing join ({@code table_aggregate.kernel_staged_table_results}: {@link TableAggregateChanges#INPUT};
     * a tombstone or dead-lettered result has a null group) a stage keyed by the join's task ({@code __task}) first
     * turns each result into a subtraction from its key's previous group and an addition to its new one (one change,
     * the difference, when the group stays the same: KIP-904). Its rows
     * are the aggregate's updates, each group's in one partition in emission order; parameters as {@link #join}.
     */
    public static KernelBatch aggregate(SparkSession session, Dataset<Row> staged, JoinPlan plan, String checkpoint,
            long version, boolean fileOrder) {
        int tasks = fileOrder ? 1 : plan.partitions;
        StoreAdapter totals = new StoreAdapter(session, checkpoint, StoreAdapter.AGGREGATE);
        StorePlacements placements = StorePlacements.of(session, checkpoint, version);
        JavaPairRDD<Integer, InternalRow> changes;
        if (plan.join.tableResult()) {
            StoreAdapter previous = new StoreAdapter(session, checkpoint, StoreAdapter.PREVIOUS);
            changes = StoreLocatedRDD.of(session, rows(staged, TableAggregateChanges.INPUT)
                    .mapToPair(row -> new Tuple2<>(Routing.resultTask(row, fileOrder), row.copy()))
                    .partitionBy(new TaskPartitioner(tasks))
                    .mapPartitionsWithIndex(new TableAggregateChanges(previous, version), true), previous, placements)
                    .mapToPair(row -> new Tuple2<>(Routing.groupTask(row.getUTF8String(0), tasks), row));
        } else {
            Dataset<Row> accepted = staged.filter(functions.col("group").isNotNull());
            changes = rows(accepted, StreamAggregate.INPUT)
                    .mapToPair(row -> new Tuple2<>(Routing.groupTask(row.getUTF8String(0), tasks), row.copy()));
        }
        JavaRDD<InternalRow> rows = StoreLocatedRDD.of(session, changes.partitionBy(new TaskPartitioner(tasks))
                .mapPartitionsWithIndex(new StreamAggregate(totals, version, plan.aggregate == JoinPlan.Emit.PER_BATCH),
                        true), totals, placements);
        return batch(session, rows, false, StreamAggregate.OUTPUT, null);
    }

    /** Close the stores of {@code checkpoint} loaded in this JVM (local mode: the tasks run in the driver). */
    public static void unload(SparkSession session, String checkpoint, int partitions) {
        for (String name : List.of(StoreAdapter.JOIN, StoreAdapter.AGGREGATE, StoreAdapter.PREVIOUS,
                StoreAdapter.FOREIGN)) {
            new StoreAdapter(session, checkpoint, name).unload(partitions);
        }
    }

    /** The batch of {@code rows}, counted as they are computed, and cached unless {@code readOnce}. */
    private static KernelBatch batch(SparkSession session, JavaRDD<InternalRow> rows, boolean readOnce,
            StructType schema, BatchSummary summary) {
        LongAccumulator count = session.sparkContext().longAccumulator("streamjoin kernel results");
        JavaRDD<InternalRow> counted = rows.mapPartitions(iterator -> new java.util.Iterator<InternalRow>() {
            @Override
            public boolean hasNext() {
                return iterator.hasNext();
            }

            @Override
            public InternalRow next() {
                count.add(1L);
                return iterator.next();
            }
        }, true);
        if (!readOnce) {
            counted = counted.persist(StorageLevel.MEMORY_AND_DISK());
        }
        return new KernelBatch(counted, session.internalCreateDataFrame(counted.rdd(), schema, false), summary, count);
    }

    /** {@code frame}'s rows cast to {@code schema}'s columns, as Spark's internal rows. */
    private static JavaRDD<InternalRow> rows(Dataset<Row> frame, StructType schema) {
        Column[] columns = Arrays.stream(schema.fields())
                .map(field -> functions.col(field.name()).cast(field.dataType()).as(field.name()))
                .toArray(Column[]::new);
        return frame.select(columns).queryExecution().toRdd().toJavaRDD();
    }

    /**
     * The rows of a batch whose partition t holds task t's records ({@link Routing#joinTasks}), as they are:
     * counted into {@code summary} as they are read, a global table's record once (at {@link Routing#home}).
     */
    private static JavaPairRDD<Integer, InternalRow> atTasks(Dataset<Row> decoded, Layout layout, int tasks,
            BatchSummary summary) {
        JavaRDD<InternalRow> rows = decoded.queryExecution().toRdd().toJavaRDD();
        if (rows.getNumPartitions() != tasks) {
            throw new IllegalArgumentException("an aligned batch has " + rows.getNumPartitions()
                    + " partitions, the plan " + tasks + ": read it with KafkaRanges.frame");
        }
        return rows.mapPartitionsWithIndex((task, iterator) -> new java.util.Iterator<Tuple2<Integer, InternalRow>>() {
            @Override
            public boolean hasNext() {
                return iterator.hasNext();
            }

            @Override
            public Tuple2<Integer, InternalRow> next() {
                InternalRow row = iterator.next();
                if (Routing.home(row, layout, tasks) == task) {
                    summary.add(row);
                }
                return new Tuple2<>(task, row.copy());
            }
        }, true).mapToPair(pair -> pair);
    }

    /** The batch's rows at their tasks ({@link Routing#joinTasks}), counted into {@code summary} as they are read. */
    private static JavaPairRDD<Integer, InternalRow> byTask(Dataset<Row> decoded, Layout layout, int tasks,
            boolean fileOrder, BatchSummary summary) {
        return decoded.queryExecution().toRdd().toJavaRDD()
                .flatMapToPair(row -> {
                    summary.add(row);
                    InternalRow copy = row.copy();
                    return Arrays.stream(Routing.joinTasks(row, layout, tasks, fileOrder))
                            .mapToObj(t -> new Tuple2<>(t, copy)).iterator();
                })
                .partitionBy(new TaskPartitioner(tasks));
    }
}
