package dev.streamjoin.kernel;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * This JVM's idempotent producers of {@link KafkaTaskWriter}, one per settings, shared by the tasks that run
 * here at the same time and kept across batches (a KafkaProducer is thread safe). A producer that failed is
 * dropped from the pool at once, so the next task opens a fresh one, and closed when its last task lets it go.
 */
final class IdempotentProducers {
    /** One pooled producer and the tasks using it. */
    static final class Lease {
        final KafkaProducer<byte[], byte[]> producer;
        private final Map<String, String> settings;
        private int users;
        private boolean dropped;

        private Lease(Map<String, String> settings, KafkaProducer<byte[], byte[]> producer) {
            this.settings = settings;
            this.producer = producer;
        }
    }

    private static final Map<Map<String, String>, Lease> POOL = new HashMap<>();

    private IdempotentProducers() {}

    /** The pooled producer of {@code settings} (bootstrap, security, batching), opened on first use. */
    static Lease acquire(Map<String, String> settings) {
        synchronized (POOL) {
            Lease lease = POOL.computeIfAbsent(Map.copyOf(settings), key -> new Lease(key, open(key)));
            lease.users++;
            return lease;
        }
    }

    /** A task is done with {@code lease}; {@code failed}: its producer is dropped (and closed once unused). */
    static void release(Lease lease, boolean failed) {
        boolean close;
        synchronized (POOL) {
            lease.users--;
            if (failed && !lease.dropped) {
                POOL.remove(lease.settings, lease);
                lease.dropped = true;
            }
            close = lease.dropped && lease.users == 0;
        }
        if (close) {
            lease.producer.close(Duration.ofSeconds(5));
        }
    }

    /** Drop every pooled producer (the job ends); those in use close when their tasks let them go. */
    static void closeAll() {
        List<Lease> idle = new ArrayList<>();
        synchronized (POOL) {
            for (Lease lease : POOL.values()) {
                lease.dropped = true;
                if (lease.users == 0) {
                    idle.add(lease);
                }
            }
            POOL.clear();
        }
        for (Lease lease : idle) {
            lease.producer.close(Duration.ofSeconds(5));
        }
    }

    private static KafkaProducer<byte[], byte[]> open(Map<String, String> settings) {
        Map<String, Object> config = new HashMap<>(settings);
        config.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        config.put(ProducerConfig.ACKS_CONFIG, "all");
        config.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        config.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return new KafkaProducer<>(config);
    }
}
