package dev.streamjoin.kernel;

import java.util.ArrayList;
import java.util.List;

import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;

/**
 * A Kafka-shaped row ({@code key binary, value binary, topic string, headers array<struct<key string, value
 * binary>>}, in that order: Spark's Kafka sink's columns) as the record Spark's Kafka sink sends for it: no
 * partition (the producer's default partitioner: murmur2 of the key bytes), no timestamp (the producer's
 * send time), the headers in their order. The writers of the kernel ({@link KafkaWriteTask},
 * {@link TransactionalTask}) send exactly these records, so their output is byte for byte the sink's.
 */
final class KafkaRecords {
    private KafkaRecords() {}

    static ProducerRecord<byte[], byte[]> of(InternalRow row) {
        if (row.isNullAt(2)) {
            throw new TerminalKernelException("a Kafka output row without a topic: the rows the driver built for Kafka "
                    + "are wrong (a defect of streamjoin: report it with the pipeline's spec)");
        }
        byte[] key = row.isNullAt(0) ? null : row.getBinary(0);
        byte[] value = row.isNullAt(1) ? null : row.getBinary(1);
        String topic = row.getUTF8String(2).toString();
        List<Header> headers = new ArrayList<>();
        if (!row.isNullAt(3)) {
            ArrayData array = row.getArray(3);
            for (int i = 0; i < array.numElements(); i++) {
                InternalRow header = array.getStruct(i, 2);
                headers.add(new RecordHeader(header.getUTF8String(0).toString(),
                        header.isNullAt(1) ? null : header.getBinary(1)));
            }
        }
        return new ProducerRecord<>(topic, null, null, key, value, headers);
    }
}
