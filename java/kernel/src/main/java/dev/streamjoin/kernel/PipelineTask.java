package dev.streamjoin.kernel;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;

import org.apache.spark.TaskContext;
import org.apache.spark.api.java.function.Function2;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.util.LongAccumulator;
import org.apache.spark.util.TaskCompletionListener;

import scala.Tuple2;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Task t of a {@link TaskPipeline} batch: its Kafka-shaped rows decoded, each counted into the batch's summary
 * at its home task ({@link Routing#home}: a global table's record, which every task reads, once), a dead record
 * turned into its dead-letter row there, every record (dead ones move partition time) to the rules
 * ({@link KernelTask}), each result projected into its Kafka row. Its rows: the dead letters, then the results
 * in emission order (each key's in the order the rules made them).
 */
final class PipelineTask implements Function2<Integer, Iterator<InternalRow>, Iterator<InternalRow>> {
    private static final long serialVersionUID = 1L;
    private final TaskPipeline pipeline;
    private final Layout decoded;
    private final int[] columns;
    private final StructField[] fields;
    private final KernelTask kernel;
    private final int tasks;
    private final BatchSummary summary;
    private final LongAccumulator results;

    PipelineTask(TaskPipeline pipeline, Layout decoded, int[] columns, StructField[] fields, KernelTask kernel,
            int tasks, BatchSummary summary, LongAccumulator results) {
        this.pipeline = pipeline;
        this.decoded = decoded;
        this.columns = columns;
        this.fields = fields;
        this.kernel = kernel;
        this.tasks = tasks;
        this.summary = summary;
        this.results = results;
    }

    @Override
    public Iterator<InternalRow> call(Integer task, Iterator<InternalRow> raw) {
        RowProgram.Run decode = pipeline.decode.borrow(task);
        RowProgram.Run letters = pipeline.deadLetters.borrow(task);
        UnsafeProjection toInput = UnsafeProjection.create(CollectionConverters.asScala(inputColumns()).toList());
        List<Tuple2<Integer, InternalRow>> input = new ArrayList<>();
        List<InternalRow> dead = new ArrayList<>();
        while (raw.hasNext()) {
            InternalRow row = decode.apply(raw.next());
            if (row == null) {
                continue;
            }
            if (Routing.home(row, decoded, tasks) == task) {
                summary.add(row);
                if (!row.isNullAt(decoded.reason)) {
                    InternalRow letter = letters.apply(row);
                    if (letter != null) {
                        dead.add(letter.copy());
                    }
                }
            }
            input.add(new Tuple2<>(task, toInput.apply(row).copy()));
        }
        pipeline.decode.release(decode);
        pipeline.deadLetters.release(letters);
        Iterator<InternalRow> joined = kernel.call(task, input.iterator());
        RowProgram.Run project = pipeline.results.borrow(task);
        TaskContext.get().addTaskCompletionListener((TaskCompletionListener) done -> pipeline.results.release(project));
        Iterator<InternalRow> letterRows = dead.iterator();
        return new Iterator<>() {
            private InternalRow next;

            @Override
            public boolean hasNext() {
                if (next == null && letterRows.hasNext()) {
                    next = letterRows.next();
                }
                while (next == null && joined.hasNext()) {
                    results.add(1L);
                    next = project.apply(joined.next());
                }
                return next != null;
            }

            @Override
            public InternalRow next() {
                if (!hasNext()) {
                    throw new NoSuchElementException();
                }
                InternalRow out = next;
                next = null;
                return out;
            }
        };
    }

    /** The decoded row's columns the kernel reads, by position. */
    private List<Expression> inputColumns() {
        List<Expression> refs = new ArrayList<>();
        for (int column : columns) {
            refs.add(new BoundReference(column, fields[column].dataType(), fields[column].nullable()));
        }
        return refs;
    }
}
