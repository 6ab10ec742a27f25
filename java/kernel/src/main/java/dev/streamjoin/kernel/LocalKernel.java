package dev.streamjoin.kernel;

import java.io.File;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.HashMap;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

import scala.Tuple2;

/**
 * The kernel's stages without Spark: the same {@link KernelTask}, {@link Rules}, {@link BatchOrder}, foreign-key and
 * aggregate stages, routed by the same {@link Routing}, with each store in memory ({@link MemoryStores}). The rule
 * tests (Python's {@code tests/kernel_rules.py}) run every generated case through it in one JVM, beside Kafka
 * Streams: {@code java -cp <kernel jar>:<pyspark's jars> dev.streamjoin.kernel.LocalKernel cases.json results.json}.
 *
 * <p>A case is {@code {plan, lookup, batches, groups}}: the pipeline's {@link JoinPlan} JSON; whether the decoded
 * rows carry {@code __lookup}; the batches, each a list of decoded rows {@code [side, key, lval, rval, tomb, ts,
 * partition, offset, rank, input, topic, reason, lookup]} (values as JSON text: the rules never look inside them);
 * and, for an aggregate, {@code groups}: {@code [key, left, right, group, amount]} for every join result the case
 * can produce (the spec's projections run in Python). Its result is {@code {rows}} (or {@code {error}}): per batch,
 * join results {@code ["J", batch, key, left, right, ts, tomb, sub, pos, input, partition, offset, task]} and
 * aggregate updates {@code ["A", batch, group, total, ts, sub, pos, input, partition, offset]}.
 */
public final class LocalKernel {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final StructType DECODED = new StructType()
            .add("side", DataTypes.StringType).add("key", DataTypes.StringType)
            .add("lval", DataTypes.StringType).add("rval", DataTypes.StringType)
            .add("tomb", DataTypes.BooleanType).add("ts", DataTypes.LongType)
            .add("__partition", DataTypes.IntegerType).add("__offset", DataTypes.LongType)
            .add("__rank", DataTypes.IntegerType).add("__input", DataTypes.IntegerType)
            .add("topic", DataTypes.StringType).add("reason", DataTypes.StringType);

    private final JoinPlan plan;
    private final Layout layout;
    private final boolean fileOrder;
    private final int tasks;
    private final Map<String, MemoryStores> stores = new HashMap<>();
    /** (key, left, right) -> (group, amount) of the aggregate after the join */
    private final Map<List<String>, String[]> groups = new HashMap<>();

    private LocalKernel(JsonNode test) {
        plan = JoinPlan.parse(test.get("plan").toString());
        StructType schema = test.path("lookup").asBoolean() ? DECODED.add(Layout.LOOKUP, DataTypes.StringType)
                : DECODED;
        layout = new Layout(schema);
        fileOrder = test.path("file_order").asBoolean();
        tasks = fileOrder ? 1 : plan.partitions;
        for (String name : plan.stores()) {
            stores.put(name, new MemoryStores());
        }
        for (JsonNode entry : test.path("groups")) {
            groups.put(List.of(text(entry.get(0)), text(entry.get(1)), text(entry.get(2))),
                    new String[] {nullable(entry.get(3)), nullable(entry.get(4))});
        }
    }

    public static void main(String[] args) throws IOException {
        // interpreted projections: a case's few rows do not pay back a compiled projection per task and batch
        SQLConf.get().setConfString("spark.sql.codegen.factoryMode", "NO_CODEGEN");
        JsonNode cases = JSON.readTree(new File(args[0])).get("cases");
        ArrayNode results = JSON.createArrayNode();
        for (JsonNode test : cases) {
            ObjectNode result = results.addObject();
            try {
                LocalKernel kernel = new LocalKernel(test);
                ArrayNode rows = result.putArray("rows");
                int batch = 0;
                for (JsonNode rowsOfBatch : test.get("batches")) {
                    kernel.batch(batch++, rowsOfBatch, rows);
                }
            } catch (RuntimeException | AssertionError e) {
                StringWriter trace = new StringWriter();
                e.printStackTrace(new PrintWriter(trace));
                result.removeAll();
                result.put("error", trace.toString());
            }
        }
        ObjectNode out = JSON.createObjectNode();
        out.set("results", results);
        JSON.writeValue(new File(args[1]), out);
    }

    private void batch(int batch, JsonNode decoded, ArrayNode out) {
        Map<Integer, List<Tuple2<Integer, InternalRow>>> byTask = new TreeMap<>();
        for (JsonNode row : decoded) {
            InternalRow internal = row(row);
            for (int task : Routing.joinTasks(internal, layout, tasks, fileOrder)) {
                byTask.computeIfAbsent(task, t -> new ArrayList<>()).add(new Tuple2<>(task, internal));
            }
        }
        List<InternalRow> results = new ArrayList<>();
        long version = batch;
        if (plan.join instanceof Shapes.OneStage stage) {
            KernelTask task = new KernelTask(layout, stores.get(StoreAdapter.JOIN), version, fileOrder,
                    stage.rules().apply(plan, layout));
            runTasks(byTask, task::call, results);
        } else {
            ForeignKeySubscriptions subscriptions = new ForeignKeySubscriptions(layout, stores.get(StoreAdapter.JOIN),
                    version, fileOrder, tasks, plan.inner(), plan.leftHistory, plan.rightHistory);
            List<Tuple2<Integer, ForeignKeyMessage>> messages = new ArrayList<>();
            runTasks(byTask, subscriptions::call, messages);
            ForeignKeyJoin join = new ForeignKeyJoin(layout, stores.get(StoreAdapter.FOREIGN), version, plan.inner(),
                    plan.rightHistory != null, plan.longKeys);
            runTasks(byKey(messages), join::call, results);
        }
        for (InternalRow r : results) {
            out.addArray().add("J").add(batch).add(str(r, 0)).add(str(r, 1)).add(str(r, 2)).add(r.getLong(3))
                    .add(r.getBoolean(5)).add(r.getInt(6)).add(r.getLong(11)).add(r.getInt(12)).add(r.getInt(13))
                    .add(r.getLong(14)).add(r.getInt(10));
        }
        if (plan.aggregate != JoinPlan.Emit.NONE) {
            aggregate(batch, results, out);
        }
    }

    /** The aggregate's stages over the batch's join results, staged as Python's {@code aggregate} modules do. */
    private void aggregate(int batch, List<InternalRow> results, ArrayNode out) {
        List<Tuple2<Integer, InternalRow>> changes = new ArrayList<>();
        if (plan.join.tableResult()) {
            List<Tuple2<Integer, InternalRow>> staged = new ArrayList<>();
            for (InternalRow r : results) {
                String[] group = r.getBoolean(5) ? new String[] {null, null} : group(r);
                boolean counts = group[0] != null && group[1] != null;
                InternalRow row = new GenericInternalRow(new Object[] {
                    r.getUTF8String(0), counts ? UTF8String.fromString(group[0]) : null,
                    counts ? Long.parseLong(group[1]) : null, r.getLong(3), r.getInt(6), r.getLong(11), r.getInt(12),
                    r.getInt(13), r.getLong(14), r.getInt(10),
                });
                staged.add(new Tuple2<>(Routing.resultTask(row, fileOrder), row));
            }
            List<InternalRow> contributions = new ArrayList<>();
            runTasks(byKey(staged), new TableAggregateChanges(stores.get(StoreAdapter.PREVIOUS), batch)::call,
                    contributions);
            for (InternalRow row : contributions) {
                changes.add(new Tuple2<>(Routing.groupTask(row.getUTF8String(0), tasks), row));
            }
        } else {
            for (InternalRow r : results) {
                String[] group = r.getBoolean(5) ? new String[] {null, null} : group(r);
                if (group[0] == null || group[1] == null) {
                    continue;  // a dead letter of the driver's (null-group, null-amount); a tombstone adds nothing
                }
                UTF8String name = UTF8String.fromString(group[0]);
                changes.add(new Tuple2<>(Routing.groupTask(name, tasks), new GenericInternalRow(new Object[] {
                    name, Long.parseLong(group[1]), r.getLong(3), r.getInt(6), r.getLong(11), r.getInt(12),
                    r.getInt(13), r.getLong(14),
                })));
            }
        }
        List<InternalRow> updates = new ArrayList<>();
        runTasks(byKey(changes), new StreamAggregate(stores.get(StoreAdapter.AGGREGATE), batch,
                plan.aggregate == JoinPlan.Emit.PER_BATCH)::call, updates);
        for (InternalRow u : updates) {
            out.addArray().add("A").add(batch).add(str(u, 0)).add(u.getLong(1)).add(u.getLong(2)).add(u.getInt(3))
                    .add(u.getLong(4)).add(u.getInt(5)).add(u.getInt(6)).add(u.getLong(7));
        }
    }

    /** The (group, amount) of join result {@code r} (either null: a dead letter), as the spec's projections gave it. */
    private String[] group(InternalRow r) {
        String[] found = groups.get(List.of(text(r, 0), text(r, 1), text(r, 2)));
        if (found == null) {
            throw new IllegalStateException("no group given for the join result (" + text(r, 0) + ", " + text(r, 1)
                    + ", " + text(r, 2) + ")");
        }
        return found;
    }

    private interface Stage<I, O> {
        Iterator<O> call(Integer task, Iterator<I> in) throws Exception;
    }

    /** Run {@code stage} on each task's rows, tasks in order (every task runs, as Spark's do, rows or none). */
    private <I, O> void runTasks(Map<Integer, List<I>> byTask, Stage<I, O> stage, List<O> out) {
        for (int task = 0; task < tasks; task++) {
            try {
                stage.call(task, byTask.getOrDefault(task, List.of()).iterator()).forEachRemaining(out::add);
            } catch (RuntimeException e) {
                throw e;
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }
    }

    private static <V> Map<Integer, List<Tuple2<Integer, V>>> byKey(List<Tuple2<Integer, V>> routed) {
        Map<Integer, List<Tuple2<Integer, V>>> byTask = new TreeMap<>();
        for (Tuple2<Integer, V> item : routed) {
            byTask.computeIfAbsent(item._1(), t -> new ArrayList<>()).add(item);
        }
        return byTask;
    }

    private InternalRow row(JsonNode row) {
        Object[] fields = new Object[layout.lookup < 0 ? 12 : 13];
        fields[0] = utf8(row.get(0));
        fields[1] = utf8(row.get(1));
        fields[2] = utf8(row.get(2));
        fields[3] = utf8(row.get(3));
        fields[4] = row.get(4).asBoolean();
        fields[5] = row.get(5).asLong();
        fields[6] = row.get(6).asInt();
        fields[7] = row.get(7).asLong();
        fields[8] = row.get(8).asInt();
        fields[9] = row.get(9).asInt();
        fields[10] = utf8(row.get(10));
        fields[11] = utf8(row.get(11));
        if (layout.lookup >= 0) {
            fields[12] = utf8(row.get(12));
        }
        return new GenericInternalRow(fields);
    }

    private static UTF8String utf8(JsonNode node) {
        return node == null || node.isNull() ? null : UTF8String.fromString(node.asText());
    }

    private static String nullable(JsonNode node) {
        return node == null || node.isNull() ? null : node.asText();
    }

    private static String text(JsonNode node) {
        return node == null || node.isNull() ? "\u0000null" : node.asText();
    }

    private static String text(InternalRow row, int field) {
        return row.isNullAt(field) ? "\u0000null" : row.getUTF8String(field).toString();
    }

    private static String str(InternalRow row, int field) {
        return row.isNullAt(field) ? null : row.getUTF8String(field).toString();
    }
}
