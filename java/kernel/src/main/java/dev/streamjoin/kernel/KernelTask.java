package dev.streamjoin.kernel;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;

import org.apache.spark.api.java.function.Function2;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.types.StructType;

import scala.Tuple2;

/**
 * Task t of a batch: its partition's records of every input, merged in processing order and run through the
 * shape's {@link Rules} against its store, opened at the batch's version and committed at the next once
 * every record is processed. A failed task aborts its store: a retry starts from the same version.
 */
final class KernelTask implements Function2<Integer, Iterator<Tuple2<Integer, InternalRow>>, Iterator<InternalRow>> {
    private static final long serialVersionUID = 1L;
    private final Layout layout;
    private final StructType output;
    private final TaskStores stores;
    private final long version;
    private final boolean fileOrder;
    private final Rules rules;

    KernelTask(Layout layout, TaskStores stores, long version, boolean fileOrder, Rules rules) {
        this.layout = layout;
        this.output = layout.output();
        this.stores = stores;
        this.version = version;
        this.fileOrder = fileOrder;
        this.rules = rules;
    }

    @Override
    public Iterator<InternalRow> call(Integer task, Iterator<Tuple2<Integer, InternalRow>> records) {
        List<InternalRow> rows = new ArrayList<>();
        records.forEachRemaining(record -> rows.add(record._2()));
        TaskState state = stores.open(task, version, rules.valueSchema());
        List<Event> ordered = fileOrder ? BatchOrder.fileOrder(rows, layout) : BatchOrder.order(rows, layout, state);
        UnsafeProjection project = UnsafeProjection.create(output);
        List<InternalRow> results = new ArrayList<>();
        rules.apply(task, ordered, state, row -> results.add(project.apply(row).copy()));
        state.commit();
        return results.iterator();
    }
}
