package dev.streamjoin.kernel;

import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.util.LongAccumulator;

/**
 * One batch through the kernel: its join results as a DataFrame (the kernel's RDD, cached so that the
 * stores commit once however many actions read the results, unless the caller reads them once). The first
 * action runs the batch: the kernel's tasks and the projections over their rows are one Spark job.
 */
public final class KernelBatch {
    private final JavaRDD<InternalRow> rows;
    private final Dataset<Row> results;
    private final BatchSummary summary;
    private final LongAccumulator count;

    KernelBatch(JavaRDD<InternalRow> rows, Dataset<Row> results, BatchSummary summary, LongAccumulator count) {
        this.rows = rows;
        this.results = results;
        this.summary = summary;
        this.count = count;
    }

    public Dataset<Row> results() {
        return results;
    }

    /**
     * The batch's counts and partition times ({@link BatchSummary}'s text), gathered as the first action ran
     * the batch; empty before it ran (and for an aggregate's batch, which has no summary of its own).
     */
    public String summary() {
        return summary == null ? "" : summary.value();
    }

    /** The result rows the batch's tasks emitted, counted as the first action read them (0 before it ran). */
    public long resultCount() {
        return count.value();
    }

    /** Free the cached result rows (after the batch's outputs are written). */
    public void release() {
        rows.unpersist(false);
    }
}
