package dev.streamjoin.kernel;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * A pipeline's join as the kernel runs it: the one object that crosses the Python/JVM border, built once from
 * the spec by Python's {@code core/join_plan.py} and read here from its JSON. It carries the shape and kind, the
 * windows and grace, the versioned sides' history retention, the key encoding, the aggregate after the join,
 * the stores a batch commits, and the facts both sides must agree on: the column layouts, the summary format, how
 * an undecodable record's dead-letter reason starts and the registry of shapes; {@link #parse}
 * refuses a plan this kernel does not run the same way, naming what differs.
 */
public final class JoinPlan implements Serializable {
    private static final long serialVersionUID = 1L;
    private static final ObjectMapper JSON = new ObjectMapper();

    /** How the aggregate after the join emits: none, one update per join result, one per group per batch. */
    enum Emit { NONE, EVERY_CHANGE, PER_BATCH }

    final String pipeline;
    final String shape;
    final String kind;
    final int partitions;
    final long before;
    final long after;
    final long grace;
    /** a versioned side's history retention (ms), or null: a plain table (or a stream) */
    final Long leftHistory;
    final Long rightHistory;
    /** the left key is a long: held results come in the order of its 8 big-endian bytes, as Kafka's store keeps them */
    final boolean longKeys;
    final Emit aggregate;
    final transient Shapes.Join join;

    private JoinPlan(JsonNode plan) {
        pipeline = text(plan, "pipeline");
        shape = text(plan, "shape");
        kind = text(plan, "kind").toUpperCase(Locale.ROOT);
        partitions = plan.path("partitions").asInt(0);
        JsonNode window = plan.path("window");
        before = window.path("before").asLong(0);
        after = window.path("after").asLong(0);
        grace = plan.path("grace").asLong(0);
        leftHistory = plan.path("left_history").isNumber() ? plan.get("left_history").asLong() : null;
        rightHistory = plan.path("right_history").isNumber() ? plan.get("right_history").asLong() : null;
        longKeys = "long".equals(plan.path("key_format").asText());
        aggregate = Emit.valueOf(plan.path("aggregate").asText("none").replace('-', '_').toUpperCase(Locale.ROOT));
        join = Shapes.of(this);
    }

    /**
     * The plan of {@code json}, checked against this kernel: a shape it does not have, a kind the shape does not
     * take, stores, columns or a summary format other than the kernel's fail here, before the first batch.
     */
    public static JoinPlan parse(String json) {
        JsonNode plan;
        try {
            plan = JSON.readTree(json);
        } catch (JsonProcessingException e) {
            throw new TerminalKernelException("the join plan is not JSON (the driver and the kernel jar come from "
                    + "different builds: run `make setup`): " + e.getOriginalMessage());
        }
        JoinPlan parsed = new JoinPlan(plan);
        if (parsed.partitions < 1) {
            throw parsed.refused("partitions " + parsed.partitions + " (kafka.partitions of the spec must be >= 1)");
        }
        parsed.agree("stores", strings(plan.path("stores")), parsed.stores());
        parsed.agree("decoded columns", strings(plan.path("decoded_columns")), Layout.INPUT);
        parsed.agree("result columns", strings(plan.path("result_columns")), Layout.OUTPUT);
        parsed.agree("summary columns", strings(plan.path("summary_columns")), BatchSummary.COLUMNS);
        parsed.agree("undecodable dead-letter reason prefix", List.of(plan.path("undecodable_prefix").asText()),
                List.of(BatchOrder.UNDECODABLE));
        parsed.agree("join shapes", strings(plan.path("shapes")), Shapes.names().stream().sorted().toList());
        return parsed;
    }

    /** The stores a batch of this plan commits, by name ({@link StoreAdapter}'s), in the manifest's order. */
    List<String> stores() {
        List<String> stores = new ArrayList<>(join.stores());
        if (aggregate != Emit.NONE) {
            stores.add(StoreAdapter.AGGREGATE);
            if (join.tableResult()) {
                stores.add(StoreAdapter.PREVIOUS);
            }
        }
        return stores;
    }

    boolean inner() {
        return kind.equals("INNER");
    }

    /** This plan refused for {@code why}, naming the pipeline: a person must change the spec or the build. */
    TerminalKernelException refused(String why) {
        return new TerminalKernelException("pipeline " + pipeline + ": the kernel cannot run its join plan: " + why);
    }

    private void agree(String what, List<String> python, List<String> kernel) {
        if (!python.equals(kernel)) {
            throw refused("the driver's " + what + " " + python + " are not the kernel's " + kernel
                    + ": the kernel jar and the Python package come from different builds (run `make setup`)");
        }
    }

    private static String text(JsonNode plan, String field) {
        JsonNode node = plan.path(field);
        if (!node.isTextual()) {
            throw new TerminalKernelException("the join plan has no " + field + " (the driver and the kernel jar come "
                    + "from different builds: run `make setup`): " + plan);
        }
        return node.asText();
    }

    private static List<String> strings(JsonNode array) {
        List<String> out = new ArrayList<>();
        array.forEach(node -> out.add(node.asText()));
        return out;
    }
}
