"""The columns of an output's files (the stream's ``stream/batch_id=N/`` and the published days), in one
place for the sinks that write them and the quality suites that check them."""

#: a join's output: the record, whether it matched, and the input record that produced it
JOINED_COLUMNS = ("key", "value", "ts", "matched", "src_topic", "src_partition", "src_offset")
#: an aggregate's output (a changelog table such as clicks per region)
AGGREGATE_COLUMNS = ("key", "value", "ts")
