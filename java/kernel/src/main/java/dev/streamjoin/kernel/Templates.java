package dev.streamjoin.kernel;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeSet;
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
        List<NamedExpression> renamed = new ArrayList<>();
        for (Attribute wanted : CollectionConverters.asJava(leaf.output())) {
            Attribute found = source.output().find(a -> a.name().equals(wanted.name()))
                    .getOrElse(() -> {
                        throw new IllegalArgumentException("the batch's rows have no column " + wanted.name());
                    });
            renamed.add(new Alias(found, wanted.name(), wanted.exprId(), wanted.qualifier(), Option.empty(),
                    emptySeq()));
        }
        LogicalPlan replacement = new Project(CollectionConverters.asScala(renamed).toList(), source);
        AttributeSet marker = leaf.outputSet();
        LogicalPlan plan = program.queryExecution().analyzed().transformUp(
                new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
                    @Override
                    public boolean isDefinedAt(LogicalPlan node) {
                        return node.children().isEmpty() && node.outputSet().equals(marker);
                    }

                    @Override
                    public LogicalPlan apply(LogicalPlan node) {
                        return isDefinedAt(node) ? replacement : node;
                    }
                });
        return Dataset$.MODULE$.ofRows(session, plan);
    }

    private static Seq<String> emptySeq() {
        return CollectionConverters.asScala(new ArrayList<String>()).toList();
    }
}
