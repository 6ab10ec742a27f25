package dev.streamjoin.kernel;

import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.BiFunction;

/**
 * The kernel's registry of join shapes (Python's twin: {@code core/join_plan.py}'s): per shape, the kinds it
 * takes and how a batch runs it. A one-stage shape is its {@link Rules} in one task per partition; the
 * foreign-key join is two stages (by the left key's partition, then by foreign key). A shape or kind that is
 * not here fails the plan at start, naming it.
 */
final class Shapes {
    private Shapes() {}

    /** How a batch of a plan runs: {@link OneStage} or {@link ForeignKey}. */
    sealed interface Join permits OneStage, ForeignKey {
        /** The join's stores (an aggregate's come after them). */
        List<String> stores();

        /** The join's results form a table (tombstones, a key's result replacing its last): a table aggregate. */
        boolean tableResult();
    }

    /** A shape whose rules run in the task of the records' partition, against one store. */
    record OneStage(BiFunction<JoinPlan, Layout, Rules> rules, boolean tableResult) implements Join {
        @Override
        public List<String> stores() {
            return List.of(StoreAdapter.JOIN);
        }
    }

    /** The foreign-key join: subscriptions by the left key's partition, then the join by foreign key. */
    record ForeignKey() implements Join {
        @Override
        public List<String> stores() {
            return List.of(StoreAdapter.JOIN, StoreAdapter.FOREIGN);
        }

        @Override
        public boolean tableResult() {
            return true;
        }
    }

    private static final Set<String> INNER_LEFT = Set.of("INNER", "LEFT");
    private static final Set<String> ALL_KINDS = Set.of("INNER", "LEFT", "OUTER");

    private record Entry(Set<String> kinds, Join join) {}

    private static final Map<String, Entry> SHAPES = Map.of(
            "stream-table", new Entry(INNER_LEFT, new OneStage(Shapes::streamTable, false)),
            "stream-globaltable", new Entry(INNER_LEFT,
                    new OneStage((plan, layout) -> new StreamTableRules(layout, plan.inner()), false)),
            "table-table", new Entry(ALL_KINDS, new OneStage((plan, layout) -> new TableTableRules(layout,
                    TableTableRules.Kind.valueOf(plan.kind), plan.leftHistory, plan.rightHistory),
                    true)),
            "stream-stream", new Entry(ALL_KINDS, new OneStage((plan, layout) -> new StreamStreamRules(layout,
                    StreamStreamRules.Kind.valueOf(plan.kind), plan.before, plan.after, plan.grace, plan.longKeys),
                    false)),
            "table-table-fk", new Entry(INNER_LEFT, new ForeignKey()));

    private static Rules streamTable(JoinPlan plan, Layout layout) {
        if (plan.rightHistory == null) {
            return new StreamTableRules(layout, plan.inner());
        }
        return new VersionedStreamTableRules(layout, plan.inner(), plan.rightHistory, plan.grace, plan.longKeys);
    }

    /** The names this kernel runs (the driver's registry must name the same). */
    static Set<String> names() {
        return SHAPES.keySet();
    }

    static Join of(JoinPlan plan) {
        Entry entry = SHAPES.get(plan.shape);
        if (entry == null) {
            throw plan.refused("this kernel has no shape " + plan.shape + " (it has " + names() + ")");
        }
        if (!entry.kinds().contains(plan.kind)) {
            throw plan.refused("a " + plan.shape + " join cannot be " + plan.kind.toLowerCase(java.util.Locale.ROOT)
                    + " (it can be " + entry.kinds() + ")");
        }
        return entry.join();
    }
}
