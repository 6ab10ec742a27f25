package dev.streamjoin.kernel;

import org.apache.spark.Partitioner;

/** Kafka partition t of every input goes to task t (a Kafka Streams task): keys are partition numbers. */
final class TaskPartitioner extends Partitioner {
    private static final long serialVersionUID = 1L;
    private final int partitions;

    TaskPartitioner(int partitions) {
        this.partitions = partitions;
    }

    @Override
    public int numPartitions() {
        return partitions;
    }

    @Override
    public int getPartition(Object key) {
        return task((Integer) key, partitions);
    }

    /** The task of Kafka partition {@code partition} (its number) of a pipeline with {@code partitions}. */
    static int task(int partition, int partitions) {
        if (partition < 0 || partition >= partitions) {
            throw new TerminalKernelException("a record of Kafka partition " + partition + " but the pipeline has "
                    + partitions + " partitions (kafka.partitions in the spec): an input topic has more partitions "
                    + "than the spec says; a person must act: set kafka.partitions to the topics' count and "
                    + "reprocess from a new checkpoint, or give the topic the spec's count");
        }
        return partition;
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof TaskPartitioner p && p.partitions == partitions;
    }

    @Override
    public int hashCode() {
        return partitions;
    }
}
