"""Kafka's default key partitioner, bit for bit as the Java client computes it.

Java producers, Kafka Streams and Spark's Kafka sink put a keyed record on partition
``toPositive(murmur2(key)) % partitions`` (``org.apache.kafka.common.utils.Utils``). A join is only
correct when both sides put the same key on the same partition number, so anything in this project
that predicts or checks a record's partition uses these functions.
"""

from __future__ import annotations

_MASK32 = 0xFFFFFFFF
_SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24


def _to_signed32(value: int) -> int:
    value &= _MASK32
    return value - 0x1_0000_0000 if value & 0x8000_0000 else value


def murmur2(data: bytes) -> int:
    """32-bit murmur2 of ``data`` as a signed Java ``int``, as ``Utils.murmur2(byte[])`` returns it.

    Arithmetic is done on unsigned 32-bit values (``& 0xFFFFFFFF`` after each multiplication stands for
    Java's int overflow; a logical shift of the unsigned value is Java's ``>>>``).

    :param data: the serialized key
    :return: the hash in ``[-2**31, 2**31)``
    """
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    full = length - length % 4
    for i in range(0, full, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK32
        k ^= k >> _R
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    tail = length % 4
    # Java's switch falls through: case 3 -> 2 -> 1, and only then multiplies.
    if tail == 3:
        h ^= data[full + 2] << 16
    if tail >= 2:
        h ^= data[full + 1] << 8
    if tail >= 1:
        h ^= data[full]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return _to_signed32(h)


def to_positive(number: int) -> int:
    """Java's ``Utils.toPositive``: clears the sign bit (not ``abs``, which overflows on ``MIN_VALUE``)."""
    return number & 0x7FFFFFFF


def partition_for(key_bytes: bytes, num_partitions: int) -> int:
    """The partition Java's default partitioner (and Spark's Kafka sink) picks for a non-null key.

    :param key_bytes: the serialized key
    :param num_partitions: the topic's partition count
    """
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be >= 1, got {num_partitions}")
    return to_positive(murmur2(key_bytes)) % num_partitions
