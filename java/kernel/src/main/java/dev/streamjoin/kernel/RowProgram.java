package dev.streamjoin.kernel;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedDeque;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.BasePredicate;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Predicate;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.execution.LogicalRDD;
import org.apache.spark.sql.types.StructType;

import scala.collection.immutable.Seq;

/**
 * A DataFrame program that is a chain of projections and filters over one placeholder leaf (an empty
 * {@link LogicalRDD} of the rows' schema), taken from its optimized plan once and run row by row inside a
 * task: each step a projection Spark generates code for ({@link UnsafeProjection}) or a predicate, bound to its
 * child's output. What Spark's whole-stage code would do for the same plan, without a plan per batch.
 */
final class RowProgram implements Serializable {
    private static final long serialVersionUID = 1L;
    /** compiled deterministic programs kept per executor JVM between tasks and batches, by program id */
    private static final Map<String, ConcurrentLinkedDeque<Run>> COMPILED = new ConcurrentHashMap<>();
    /** programs the pool keeps at most (a pipeline has three; a rebuilt one gets new ids) */
    private static final int MAX_PROGRAMS = 64;

    /** One step: a projection ({@code condition} null) or a filter ({@code exprs} null), bound to {@code input}. */
    private record Step(Seq<Expression> exprs, Expression condition, Seq<Attribute> input) implements Serializable {}

    private final List<Step> steps;
    private final StructType output;
    /** names this program in every JVM it is shipped to (the pool's key) */
    private final String id = UUID.randomUUID().toString();
    private final boolean deterministic;

    private RowProgram(List<Step> steps, StructType output) {
        this.steps = steps;
        this.output = output;
        this.deterministic = steps.stream().allMatch(step -> step.condition() == null
                ? step.exprs().forall(Expression::deterministic) : step.condition().deterministic());
    }

    /**
     * {@code program}'s optimized plan as steps over {@code placeholder}'s leaf; null when the plan holds anything
     * else (a Python UDF's evaluation, an aggregate, a sort, an exchange, a leaf other than the placeholder).
     */
    @SuppressWarnings("unchecked")
    static RowProgram of(Dataset<Row> program, Dataset<Row> placeholder) {
        LogicalPlan leaf = placeholder.queryExecution().analyzed();
        List<Step> steps = new ArrayList<>();
        LogicalPlan node = program.queryExecution().optimizedPlan();
        while (true) {
            if (node instanceof Project project) {
                steps.add(0, new Step((Seq<Expression>) (Seq<?>) project.projectList(), null, project.child().output()));
                node = project.child();
            } else if (node instanceof Filter filter) {
                steps.add(0, new Step(null, filter.condition(), filter.child().output()));
                node = filter.child();
            } else if (node instanceof LogicalRDD rdd && leaf instanceof LogicalRDD ours && rdd.rdd() == ours.rdd()) {
                break;
            } else {
                return null;
            }
        }
        return new RowProgram(steps, program.schema());
    }

    StructType output() {
        return output;
    }

    /** The steps, e.g. {@code project(15) > filter > project(4)} (expressions per projection). */
    @Override
    public String toString() {
        List<String> parts = new ArrayList<>();
        for (Step step : steps) {
            parts.add(step.condition() == null ? "project(" + step.exprs().size() + ")" : "filter");
        }
        return String.join(" > ", parts);
    }

    /**
     * The program for one task: a compiled one this JVM keeps when the program is deterministic (no generated
     * code per task), else compiled for {@code partition}; give it back with {@link #release} when the task is
     * done with it.
     */
    Run borrow(int partition) {
        if (!deterministic) {
            return compile(partition);
        }
        ConcurrentLinkedDeque<Run> free = COMPILED.get(id);
        Run run = free == null ? null : free.poll();
        return run != null ? run : compile(partition);
    }

    /** {@code run} (from {@link #borrow}) is free for the next task. */
    void release(Run run) {
        if (!deterministic) {
            return;
        }
        if (COMPILED.size() >= MAX_PROGRAMS && !COMPILED.containsKey(id)) {
            COMPILED.clear();
        }
        COMPILED.computeIfAbsent(id, key -> new ConcurrentLinkedDeque<>()).push(run);
    }

    /** The program compiled for one task (its generated classes come from Spark's code cache after the first). */
    private Run compile(int partition) {
        Object[] compiled = new Object[steps.size()];
        for (int i = 0; i < compiled.length; i++) {
            Step step = steps.get(i);
            if (step.condition() == null) {
                UnsafeProjection projection = UnsafeProjection.create(step.exprs(), step.input());
                projection.initialize(partition);
                compiled[i] = projection;
            } else {
                BasePredicate predicate = Predicate.create(step.condition(), step.input());
                predicate.initialize(partition);
                compiled[i] = predicate;
            }
        }
        return new Run(compiled);
    }

    /** A compiled program: {@link #apply} returns its row (valid until the next call) or null (filtered out). */
    static final class Run {
        private final Object[] steps;

        private Run(Object[] steps) {
            this.steps = steps;
        }

        InternalRow apply(InternalRow row) {
            for (Object step : steps) {
                if (step instanceof UnsafeProjection projection) {
                    row = projection.apply(row);
                } else if (!((BasePredicate) step).eval(row)) {
                    return null;
                }
            }
            return row;
        }
    }
}
