package dev.streamjoin.kernel;

import java.io.Serializable;
import java.util.HashMap;
import java.util.Map;

import org.apache.spark.SparkContext;
import org.apache.spark.SparkJobInfo;
import org.apache.spark.SparkStageInfo;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkStatusTracker;
import org.apache.spark.api.java.function.VoidFunction;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.execution.LogicalRDD;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.util.LongAccumulator;

/**
 * A streaming batch as one stage of one task per kernel partition ({@link PipelineTask}): each task reads its
 * Kafka ranges, decodes them, counts them, turns its dead records into dead-letter rows, runs the rules against
 * its store, projects each result into its Kafka row and sends the rows with its own producer. The three
 * programs (decode, results to Kafka rows, dead letters to Kafka rows) are the Python driver's DataFrame
 * programs over placeholders ({@link #placeholder}), taken once per pipeline ({@link #of}) as generated
 * projections ({@link RowProgram}).
 */
public final class TaskPipeline implements Serializable {
    private static final long serialVersionUID = 1L;
    /** SparkContext's job group property (its constant is private to Spark) */
    private static final String JOB_GROUP = "spark.jobGroup.id";
    final RowProgram decode;
    final RowProgram results;
    final RowProgram deadLetters;

    private TaskPipeline(RowProgram decode, RowProgram results, RowProgram deadLetters) {
        this.decode = decode;
        this.results = results;
        this.deadLetters = deadLetters;
    }

    /** An empty frame of {@code schema} whose leaf a program over it keeps through the optimizer. */
    public static Dataset<Row> placeholder(SparkSession session, StructType schema) {
        return session.internalCreateDataFrame(session.sparkContext().emptyRDD(
                scala.reflect.ClassTag$.MODULE$.apply(InternalRow.class)), schema, false);
    }

    /** The placeholder of a batch's Kafka-shaped rows ({@link KafkaRanges#SCHEMA}). */
    public static Dataset<Row> rawPlaceholder(SparkSession session) {
        return placeholder(session, KafkaRanges.SCHEMA);
    }

    /** The placeholder of the kernel's result rows for batches decoded by {@code decoded}. */
    public static Dataset<Row> resultPlaceholder(SparkSession session, Dataset<Row> decoded) {
        return placeholder(session, new Layout(inputSchema(decoded.schema())).output());
    }

    /**
     * The pipeline of three programs, each over its placeholder; null when one of them is not a chain of
     * projections and filters (the caller runs the batch as before).
     *
     * @param decode over {@link #rawPlaceholder}: the decoded rows ({@code events.decode_batch})
     * @param results over {@link #resultPlaceholder}: Kafka rows ({@code key, value, topic, headers})
     * @param deadLetters over a placeholder of {@code decode}'s rows: Kafka rows of the dead ones
     */
    public static TaskPipeline of(Dataset<Row> raw, Dataset<Row> decode, Dataset<Row> resultRows,
            Dataset<Row> results, Dataset<Row> decodedRows, Dataset<Row> deadLetters) {
        RowProgram d = RowProgram.of(decode, raw);
        RowProgram r = RowProgram.of(results, resultRows);
        RowProgram l = RowProgram.of(deadLetters, decodedRows);
        return d == null || r == null || l == null ? null : new TaskPipeline(d, r, l);
    }

    /** Its programs' steps, for the job's log. */
    @Override
    public String toString() {
        return "decode: " + decode + "; results: " + results + "; dead letters: " + deadLetters;
    }

    /** The decoded columns the kernel reads ({@link Layout#INPUT}, {@code __lookup} where there is one). */
    static StructType inputSchema(StructType decoded) {
        StructType input = new StructType();
        for (String name : Layout.INPUT) {
            input = input.add(decoded.apply(name));
        }
        if (java.util.Arrays.asList(decoded.fieldNames()).contains(Layout.LOOKUP)) {
            input = input.add(decoded.apply(Layout.LOOKUP));
        }
        return input;
    }

    /**
     * Run one batch: {@code raw}'s partition t (Python's {@code read_task_ranges}) through task t, its Kafka rows
     * sent at least once ({@code markerTopic} null: {@link KafkaWriteTask}) or exactly once ({@link
     * TransactionalTask}, T = the plan's partitions). The first call per batch; returns its counts.
     *
     * @param version the state version the batch starts from
     * @param batchId the batch (its transactions' markers)
     * @param producer the producer's settings (bootstrap, security, batching)
     * @param pipeline the pipeline's name (transactional ids, the job's group)
     */
    public PipelineBatch run(SparkSession session, Dataset<Row> raw, JoinPlan plan, String checkpoint, long version,
            long batchId, Map<String, String> producer, String pipeline, String markerTopic, String query,
            boolean checkMarkers) {
        if (!(plan.join instanceof Shapes.OneStage stage)) {
            throw new IllegalArgumentException("the in-task pipeline runs one-stage joins, not " + plan.join);
        }
        int tasks = plan.partitions;
        JavaRDD<InternalRow> rows = records(raw);
        if (rows.getNumPartitions() != tasks) {
            throw new IllegalArgumentException("an aligned batch has " + rows.getNumPartitions()
                    + " partitions, the plan " + tasks + ": read it with KafkaRanges.frame");
        }
        StructType decoded = decode.output();
        StructType input = inputSchema(decoded);
        Layout layout = new Layout(input);
        SparkContext context = session.sparkContext();
        BatchSummary summary = new BatchSummary(new Layout(decoded));
        context.register(summary, "streamjoin batch summary");
        LongAccumulator resultCount = context.longAccumulator("streamjoin kernel results");
        StoreAdapter joinStores = new StoreAdapter(session, checkpoint, StoreAdapter.JOIN);
        StorePlacements placements = StorePlacements.of(session, checkpoint, version);
        KernelTask kernel = new KernelTask(layout, joinStores, version, false, stage.rules().apply(plan, layout));
        int[] columns = new int[input.size()];
        for (int i = 0; i < columns.length; i++) {
            columns[i] = decoded.fieldIndex(input.fields()[i].name());
        }
        StructField[] fields = decoded.fields();
        JavaRDD<InternalRow> kafka = StoreLocatedRDD.of(session, rows.mapPartitionsWithIndex(
                new PipelineTask(this, new Layout(decoded), columns, fields, kernel, tasks, summary, resultCount),
                true), joinStores, placements);
        LongAccumulator sent = context.longAccumulator("streamjoin Kafka records");
        LongAccumulator skipped = context.longAccumulator("streamjoin transactional tasks skipped");
        VoidFunction<java.util.Iterator<InternalRow>> writer = markerTopic == null
                ? new KafkaWriteTask(new HashMap<>(producer), sent)
                : new TransactionalTask(new HashMap<>(producer), pipeline, markerTopic, query, batchId, tasks,
                        checkMarkers, sent, skipped);
        String group = "streamjoin-" + pipeline + "-batch-" + batchId + "-" + System.nanoTime();
        String previous = context.getLocalProperty(JOB_GROUP);
        context.setLocalProperty(JOB_GROUP, group);
        try {
            kafka.foreachPartition(writer);
        } finally {
            context.setLocalProperty(JOB_GROUP, previous);
        }
        return new PipelineBatch(summary.value(), resultCount.value(), sent.value(), skipped.value(),
                jobShape(context, group));
    }

    /**
     * {@code raw}'s rows: {@link KafkaRangesRDD}'s own when {@code raw} is its frame (the decoder reads them as they
     * are, without Spark's conversion of each to an UnsafeRow), else the frame's.
     */
    private static JavaRDD<InternalRow> records(Dataset<Row> raw) {
        if (raw.queryExecution().analyzed() instanceof LogicalRDD scan && scan.rdd() instanceof KafkaRangesRDD read) {
            return read.toJavaRDD();
        }
        return raw.queryExecution().toRdd().toJavaRDD();
    }

    /** {@code jobs=J stages=S tasks=T} of the Spark jobs of {@code group} (what the batch took). */
    private static String jobShape(SparkContext context, String group) {
        JavaSparkStatusTracker tracker = new JavaSparkStatusTracker(context);
        int[] jobs = tracker.getJobIdsForGroup(group);
        int stages = 0;
        int tasks = 0;
        for (int job : jobs) {
            SparkJobInfo info = tracker.getJobInfo(job);
            if (info == null) {
                continue;
            }
            for (int id : info.stageIds()) {
                stages++;
                SparkStageInfo stage = tracker.getStageInfo(id);
                tasks += stage == null ? 0 : stage.numTasks();
            }
        }
        return "jobs=" + jobs.length + " stages=" + stages + " tasks=" + tasks;
    }

    /** What one batch of the pipeline did. */
    public record PipelineBatch(String summary, long resultCount, long sent, long skipped, String job) {}
}
