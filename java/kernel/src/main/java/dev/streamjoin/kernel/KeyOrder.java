package dev.streamjoin.kernel;

import java.util.Arrays;
import java.util.Comparator;

import org.apache.spark.unsafe.types.UTF8String;

/**
 * Kafka Streams' order of serialized keys, which its time-ordered buffers and stores use among records of one
 * timestamp: the key bytes compared unsigned; a long key's bytes are its 8 big-endian ones, so non-negative keys
 * ascending come before negative ones.
 */
final class KeyOrder {
    private KeyOrder() {}

    /** The order of the keys' serialized bytes; {@code longKeys}: keys are longs as decimal text. */
    static Comparator<UTF8String> of(boolean longKeys) {
        return longKeys
                ? Comparator.comparing(key -> Long.parseLong(key.toString()), Long::compareUnsigned)
                : (a, b) -> Arrays.compareUnsigned(a.getBytes(), b.getBytes());
    }
}
