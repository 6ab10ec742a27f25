package dev.streamjoin.kernel;

import java.util.Arrays;
import java.util.List;
import java.util.stream.IntStream;

import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.storage.StorageLevel;

import scala.Tuple2;

/**
 * The entry point the Python driver calls, once per micro-batch. A batch is one RDD: task t holds Kafka
 * partition t of every input (co-partitioned), processes its records in the batch ordering rule with its
 * shape's {@link Rules} against its state store (version {@code version} in, {@code version + 1} committed)
 * and returns join results.
 */
public final class Kernel {
    private Kernel() {}

    /**
     * A stream-table join (plain table) or a stream-globaltable join over one batch of decoded records.
     *
     * @param decoded the batch's decoded rows (Python's {@code events.decode_batch}), dead ones included
     *     (they move partition time)
     * @param checkpoint where the stores live (any Hadoop filesystem URI)
     * @param version the state version the batch starts from (the batch id; 0: empty)
     * @param partitions the pipeline's partition count (one task and one store each)
     * @param fileOrder replay's file order: one task, records in offset order
     * @param inner an inner join (else left)
     */
    public static KernelBatch streamTable(SparkSession session, Dataset<Row> decoded, String checkpoint,
            long version, int partitions, boolean fileOrder, boolean inner) {
        Dataset<Row> input = Layout.input(decoded);
        Layout layout = new Layout(input.schema());
        return run(session, input, layout, checkpoint, version, partitions, fileOrder,
                new StreamTableRules(layout, inner));
    }

    /**
     * A stream-table join with a versioned table over one batch of decoded records; parameters as
     * {@link #streamTable}, and:
     *
     * @param retention the table's history retention (ms)
     * @param grace the join's grace (ms; 0: none)
     * @param longKeys keys are longs: held records are released in the order of their 8 big-endian bytes
     */
    public static KernelBatch streamTableVersioned(SparkSession session, Dataset<Row> decoded, String checkpoint,
            long version, int partitions, boolean fileOrder, boolean inner, long retention, long grace,
            boolean longKeys) {
        Dataset<Row> input = Layout.input(decoded);
        Layout layout = new Layout(input.schema());
        return run(session, input, layout, checkpoint, version, partitions, fileOrder,
                new VersionedStreamTableRules(layout, inner, retention, grace, longKeys));
    }

    /**
     * A table-table join over one batch of decoded records; parameters as {@link #streamTable}, and:
     *
     * @param kind {@code inner}, {@code left} or {@code outer}
     * @param versionedLeft the left input is versioned (an update older than its key's latest is ignored)
     * @param versionedRight the same for the right input
     */
    public static KernelBatch tableTable(SparkSession session, Dataset<Row> decoded, String checkpoint,
            long version, int partitions, boolean fileOrder, String kind, boolean versionedLeft,
            boolean versionedRight) {
        Dataset<Row> input = Layout.input(decoded);
        Layout layout = new Layout(input.schema());
        TableTableRules.Kind rule = TableTableRules.Kind.valueOf(kind.toUpperCase(java.util.Locale.ROOT));
        return run(session, input, layout, checkpoint, version, partitions, fileOrder,
                new TableTableRules(layout, rule, versionedLeft, versionedRight));
    }

    /**
     * A windowed stream-stream join over one batch of decoded records; parameters as {@link #streamTable},
     * and:
     *
     * @param kind {@code inner}, {@code left} or {@code outer}
     * @param before how far a right record may precede a left one (ms)
     * @param after how far it may follow it (ms)
     * @param grace how long after a window's end a non-joined result waits (ms)
     * @param longKeys keys are longs: due non-joined results are emitted in the order of their 8 big-endian bytes
     */
    public static KernelBatch streamStream(SparkSession session, Dataset<Row> decoded, String checkpoint,
            long version, int partitions, boolean fileOrder, String kind, long before, long after, long grace,
            boolean longKeys) {
        Dataset<Row> input = Layout.input(decoded);
        Layout layout = new Layout(input.schema());
        StreamStreamRules.Kind rule = StreamStreamRules.Kind.valueOf(kind.toUpperCase(java.util.Locale.ROOT));
        return run(session, input, layout, checkpoint, version, partitions, fileOrder,
                new StreamStreamRules(layout, rule, before, after, grace, longKeys));
    }

    /**
     * A foreign-key join over one batch of decoded records (their {@code __lookup}: a left value's foreign key);
     * parameters as {@link #streamTable}, and:
     *
     * @param versionedLeft the left input is versioned (an update older than its key's latest is ignored)
     * @param versionedRight the same for the right input
     * @param longKeys left keys are longs: a right update's results come in the order of their 8 big-endian bytes
     */
    public static KernelBatch foreignKey(SparkSession session, Dataset<Row> decoded, String checkpoint,
            long version, int partitions, boolean fileOrder, boolean inner, boolean versionedLeft,
            boolean versionedRight, boolean longKeys) {
        Dataset<Row> input = Layout.input(decoded);
        Layout layout = new Layout(input.schema());
        int tasks = fileOrder ? 1 : partitions;
        StoreAdapter subscriptions = new StoreAdapter(session, checkpoint, StoreAdapter.JOIN, TaskState.keySchema(),
                ForeignKeySubscriptions.valueSchema(layout));
        StoreAdapter foreign = new StoreAdapter(session, checkpoint, StoreAdapter.FOREIGN, TaskState.keySchema(),
                ForeignKeyJoin.valueSchema(layout));
        BatchSummary summary = new BatchSummary(layout);
        session.sparkContext().register(summary, "streamjoin batch summary");
        JavaRDD<InternalRow> rows = byTask(input, layout, tasks, fileOrder, summary)
                .mapPartitionsWithIndex(new ForeignKeySubscriptions(layout, subscriptions, version, fileOrder, tasks,
                        inner, versionedLeft), true)
                .mapToPair(message -> message)
                .partitionBy(new TaskPartitioner(tasks))
                .mapPartitionsWithIndex(new ForeignKeyJoin(layout, foreign, version, inner, versionedRight, longKeys),
                        true)
                .persist(StorageLevel.MEMORY_AND_DISK());
        return new KernelBatch(rows, session.internalCreateDataFrame(rows.rdd(), layout.output(), false),
                summary);
    }

    private static KernelBatch run(SparkSession session, Dataset<Row> decoded, Layout layout, String checkpoint,
            long version, int partitions, boolean fileOrder, Rules rules) {
        StoreAdapter stores = new StoreAdapter(session, checkpoint, StoreAdapter.JOIN, TaskState.keySchema(),
                rules.valueSchema());
        int tasks = fileOrder ? 1 : partitions;
        BatchSummary summary = new BatchSummary(layout);
        session.sparkContext().register(summary, "streamjoin batch summary");
        JavaRDD<InternalRow> rows = byTask(decoded, layout, tasks, fileOrder, summary)
                .mapPartitionsWithIndex(new KernelTask(layout, stores, version, fileOrder, rules), true)
                .persist(StorageLevel.MEMORY_AND_DISK());
        return new KernelBatch(rows, session.internalCreateDataFrame(rows.rdd(), layout.output(), false),
                summary);
    }

    /**
     * The batch's rows at their tasks, counted into {@code summary} as they are read: task t gets Kafka partition
     * t of every input (co-partitioned), every task a global table's records; one task in replay's file order.
     */
    private static JavaPairRDD<Integer, InternalRow> byTask(Dataset<Row> decoded, Layout layout, int tasks,
            boolean fileOrder, BatchSummary summary) {
        int partitionColumn = layout.partition;
        int rankColumn = layout.rank;
        return decoded.queryExecution().toRdd().toJavaRDD()
                .flatMapToPair(row -> {
                    summary.add(row);
                    InternalRow copy = row.copy();
                    if (fileOrder) {
                        return List.of(new Tuple2<>(0, copy)).iterator();
                    }
                    if (row.getInt(rankColumn) == 0) { // a global table's record: every task keeps a replica
                        return IntStream.range(0, tasks).mapToObj(t -> new Tuple2<>(t, copy)).iterator();
                    }
                    return List.of(new Tuple2<>(row.getInt(partitionColumn), copy)).iterator();
                })
                .partitionBy(new TaskPartitioner(tasks));
    }

    /**
     * The aggregate after a stream-producing join, over one batch's staged join results (Python's
     * {@code aggregate.staged_results}: the columns of {@link StreamAggregate#INPUT} among others; a null
     * group is a dead letter, which the caller writes): the second stage of the batch's job, its
     * reducer tasks keyed by group; its rows are the aggregate's updates, each group's in one partition in
     * emission order.
     *
     * @param perBatch one update per group per batch (else one per join result)
     */
    public static KernelBatch aggregate(SparkSession session, Dataset<Row> staged, String checkpoint, long version,
            int partitions, boolean fileOrder, boolean perBatch) {
        Column[] columns = Arrays.stream(StreamAggregate.INPUT.fields())
                .map(field -> functions.col(field.name()).cast(field.dataType()).as(field.name()))
                .toArray(Column[]::new);
        Dataset<Row> accepted = staged.filter(functions.col("group").isNotNull()).select(columns);
        int tasks = fileOrder ? 1 : partitions;
        StoreAdapter stores = new StoreAdapter(session, checkpoint, StoreAdapter.AGGREGATE, TaskState.keySchema(),
                StreamAggregate.valueSchema());
        JavaRDD<InternalRow> rows = accepted.queryExecution().toRdd().toJavaRDD()
                .mapToPair(row -> new Tuple2<>(Math.floorMod(row.getUTF8String(0).hashCode(), tasks), row.copy()))
                .partitionBy(new TaskPartitioner(tasks))
                .mapPartitionsWithIndex(new StreamAggregate(stores, version, perBatch), true)
                .persist(StorageLevel.MEMORY_AND_DISK());
        return new KernelBatch(rows, session.internalCreateDataFrame(rows.rdd(), StreamAggregate.OUTPUT, false),
                null);
    }

    /**
     * The aggregate after a table-producing join (with subtraction) over one batch's staged join results
     * (the columns of {@link TableAggregateChanges#INPUT} among others; a tombstone or a dead-lettered result
     * has a null group): a stage keyed by the join's task ({@code __task}) turns each result into a
     * subtraction from its key's previous group and an addition to its new one, then reducer tasks keyed by
     * group keep the totals, as {@link #aggregate} does; parameters as there.
     */
    public static KernelBatch tableAggregate(SparkSession session, Dataset<Row> staged, String checkpoint,
            long version, int partitions, boolean fileOrder) {
        Column[] columns = Arrays.stream(TableAggregateChanges.INPUT.fields())
                .map(field -> functions.col(field.name()).cast(field.dataType()).as(field.name()))
                .toArray(Column[]::new);
        int tasks = fileOrder ? 1 : partitions;
        StoreAdapter previous = new StoreAdapter(session, checkpoint, StoreAdapter.PREVIOUS, TaskState.keySchema(),
                TableAggregateChanges.valueSchema());
        StoreAdapter totals = new StoreAdapter(session, checkpoint, StoreAdapter.AGGREGATE, TaskState.keySchema(),
                StreamAggregate.valueSchema());
        int task = TableAggregateChanges.TASK;
        JavaRDD<InternalRow> rows = staged.select(columns).queryExecution().toRdd().toJavaRDD()
                .mapToPair(row -> new Tuple2<>(fileOrder ? 0 : row.getInt(task), row.copy()))
                .partitionBy(new TaskPartitioner(tasks))
                .mapPartitionsWithIndex(new TableAggregateChanges(previous, version), true)
                .mapToPair(row -> new Tuple2<>(Math.floorMod(row.getUTF8String(0).hashCode(), tasks), row))
                .partitionBy(new TaskPartitioner(tasks))
                .mapPartitionsWithIndex(new StreamAggregate(totals, version, false), true)
                .persist(StorageLevel.MEMORY_AND_DISK());
        return new KernelBatch(rows, session.internalCreateDataFrame(rows.rdd(), StreamAggregate.OUTPUT, false),
                null);
    }

    /** Close the stores of {@code checkpoint} loaded in this JVM (local mode: the tasks run in the driver). */
    public static void unload(SparkSession session, String checkpoint, int partitions) {
        for (String name : List.of(StoreAdapter.JOIN, StoreAdapter.AGGREGATE, StoreAdapter.PREVIOUS,
                StoreAdapter.FOREIGN)) {
            new StoreAdapter(session, checkpoint, name, TaskState.keySchema(), TaskState.keySchema())
                    .unload(partitions);
        }
    }
}
