package dev.streamjoin.kernel;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.Dataset$;
import org.apache.spark.sql.classic.SparkSession;

import scala.Option;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractPartialFunction;

/**
 * A DataFrame program built and analysed once, over a placeholder leaf, and run on each batch's rows: the
 * batch's plan takes the placeholder's place under a projection that gives its columns the placeholder's
 * attribute ids, so the program's resolved expressions apply as they are. Building the program from Python
 * every batch costs hundreds of Py4J calls and an analysis per step; this is one call.
 */
public final class Templates {
    private Templates() {}

    /**
     * {@code program} with {@code placeholder}'s leaf replaced by {@code rows}, whose columns must be the
     * placeholder's (by name, same types).
     */
    public static Dataset<Row> substitute(SparkSession session, Dataset<Row> program, Dataset<Row> placeholder,
            Dataset<Row> rows) {
        LogicalPlan leaf = placeholder.queryExecution().analyzed();
        LogicalPlan source = rows.queryExecution().analyzed();
        LogicalPlan plan = program.queryExecution().analyzed().transformUp(
                new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
                    @Override
                    public boolean isDefinedAt(LogicalPlan node) {
                        // the placeholder, or a copy of it with new attribute ids: the analyser gives each branch
                        // of a program that reads its input twice (a self-union) an instance of its own
                        return node.children().isEmpty() && node.schema().equals(leaf.schema())
                                && node.sameResult(leaf);
                    }

                    @Override
                    public LogicalPlan apply(LogicalPlan node) {
                        return isDefinedAt(node) ? renamed(source, node) : node;
                    }
                });
        return Dataset$.MODULE$.ofRows(session, plan);
    }

    /** {@code source} under a projection that gives its columns {@code leaf}'s attribute ids (by name). */
    private static LogicalPlan renamed(LogicalPlan source, LogicalPlan leaf) {
        List<NamedExpression> renamed = new ArrayList<>();
        for (Attribute wanted : CollectionConverters.asJava(leaf.output())) {
            Attribute found = source.output().find(a -> a.name().equals(wanted.name()))
                    .getOrElse(() -> {
                        throw new TerminalKernelException("the batch's rows have no column " + wanted.name()
                                + " (they have " + source.schema().simpleString() + "): the program was built for "
                                + "other rows; a person must act: this is a streamjoin defect, report it");
                    });
            renamed.add(new Alias(found, wanted.name(), wanted.exprId(), wanted.qualifier(), Option.empty(),
                    emptySeq()));
        }
        return new Project(CollectionConverters.asScala(renamed).toList(), source);
    }

    private static Seq<String> emptySeq() {
        return CollectionConverters.asScala(new ArrayList<String>()).toList();
    }
}
