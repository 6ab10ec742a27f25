package dev.streamjoin.kernel;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.functions;

import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * Where the columns of a decoded batch (Python's {@code spark/events.py}: side, key, lval, rval, tomb, ts,
 * __partition, __offset, __rank, __input, topic, reason; a global-table join with a key selector adds
 * __lookup) sit, and the kernel's output schema: one join
 * result per row (key, left, right, ts, matched, tomb_out, __sub, src_*, __task and the order columns).
 */
final class Layout implements Serializable {
    private static final long serialVersionUID = 1L;
    final int side, key, lval, rval, tomb, ts, partition, offset, rank, input, topic, reason;
    /** a global-table join's lookup key from its key selector ({@code __lookup}), or -1: the stream key */
    final int lookup;
    /**
     * A chained stage's derived records (the previous stage's results, Python's {@code spark/chain.py}): their place
     * in the processing order ({@code __chain_pos}, then {@code __chain_seq} after the triggering record's input,
     * partition and offset) and their task ({@code __chain_task}); -1 where the batch has no such columns. A row
     * with a null {@code __chain_pos} is a record of an input.
     */
    final int chainPos, chainSeq, chainTask;
    final DataType leftType, rightType;

    /** The decoded columns the kernel reads; {@code __lookup} too where the batch has it. */
    static final List<String> INPUT = List.of("side", "key", "lval", "rval", "tomb", "ts", "__partition", "__offset",
            "__rank", "__input", "topic", "reason");
    static final String LOOKUP = "__lookup";
    static final List<String> CHAIN = List.of("__chain_pos", "__chain_seq", "__chain_task");

    /** {@code decoded} cut to the columns the kernel reads (a decoded batch holds more). */
    static Dataset<Row> input(Dataset<Row> decoded) {
        List<String> names = new ArrayList<>(INPUT);
        if (Arrays.asList(decoded.columns()).contains(LOOKUP)) {
            names.add(LOOKUP);
        }
        if (Arrays.asList(decoded.columns()).contains(CHAIN.get(0))) {
            names.addAll(CHAIN);
        }
        return decoded.select(names.stream().map(functions::col).toArray(Column[]::new));
    }

    Layout(StructType in) {
        side = in.fieldIndex("side");
        key = in.fieldIndex("key");
        lval = in.fieldIndex("lval");
        rval = in.fieldIndex("rval");
        tomb = in.fieldIndex("tomb");
        ts = in.fieldIndex("ts");
        partition = in.fieldIndex("__partition");
        offset = in.fieldIndex("__offset");
        rank = in.fieldIndex("__rank");
        input = in.fieldIndex("__input");
        topic = in.fieldIndex("topic");
        reason = in.fieldIndex("reason");
        List<String> names = Arrays.asList(in.fieldNames());
        lookup = names.indexOf(LOOKUP);
        chainPos = names.indexOf(CHAIN.get(0));
        chainSeq = names.indexOf(CHAIN.get(1));
        chainTask = names.indexOf(CHAIN.get(2));
        leftType = in.fields()[lval].dataType();
        rightType = in.fields()[rval].dataType();
    }

    /** Whether {@code row} is a chained stage's derived record (its order and task given), not an input's. */
    boolean derived(InternalRow row) {
        return chainPos >= 0 && !row.isNullAt(chainPos);
    }

    /** The kernel's result columns, in order (the driver's plan must name the same). */
    static final List<String> OUTPUT = List.of(outputSchema(DataTypes.StringType, DataTypes.StringType).fieldNames());

    StructType output() {
        return outputSchema(leftType, rightType);
    }

    private static StructType outputSchema(DataType leftType, DataType rightType) {
        return new StructType()
                .add("key", DataTypes.StringType)
                .add("left", leftType)
                .add("right", rightType)
                .add("ts", DataTypes.LongType, false)
                .add("matched", DataTypes.BooleanType, false)
                .add("tomb_out", DataTypes.BooleanType, false)
                .add("__sub", DataTypes.IntegerType, false)
                .add("src_topic", DataTypes.StringType)
                .add("src_partition", DataTypes.IntegerType, false)
                .add("src_offset", DataTypes.LongType, false)
                .add("__task", DataTypes.IntegerType, false)
                .add("__pos", DataTypes.LongType, false)
                .add("__input", DataTypes.IntegerType, false)
                .add("__partition", DataTypes.IntegerType, false)
                .add("__offset", DataTypes.LongType, false);
    }
}
