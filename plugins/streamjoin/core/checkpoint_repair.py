"""Work around a Spark 4.1.1 Kafka source bug on restart, in the checkpoint, before the query starts.

When a driver dies after writing the offsets of batch N but before committing it, Spark replays batch N
from its offset log on restart without asking the Kafka source for its latest offsets; reporting that
batch's progress then throws ``NullPointerException`` in ``KafkaMicroBatchStream.metrics``
(SPARK-55271 / SPARK-57438, fixed after 4.1.1) and the restarted query dies after every such replay.
Dropping the uncommitted offsets entry makes Spark plan batch N afresh from the committed offsets. That is
safe for our sinks: every sink of batch N is rewritten under the same batch id (files overwrite
``batch_id=N``, the state store overwrites version N) and the Kafka output is at-least-once anyway.
"""

from __future__ import annotations

from pathlib import Path


def _batches(folder: Path) -> set[int]:
    return {int(p.name) for p in folder.iterdir() if p.name.isdigit()} if folder.is_dir() else set()


def drop_uncommitted_batch(query_checkpoint: str | Path) -> int | None:
    """Remove the offsets entry of the last batch if it has no commit; returns its id (None: nothing to do).

    Only local checkpoints are repaired; a URI (``hdfs://``, ``s3a://``) is left to Spark as is.
    """
    path = str(query_checkpoint)
    if "://" in path and not path.startswith("file://"):
        return None
    root = Path(path.removeprefix("file://"))
    offsets = _batches(root / "offsets")
    if not offsets:
        return None
    last = max(offsets)
    if last in _batches(root / "commits"):
        return None
    for name in (str(last), f".{last}.crc"):
        (root / "offsets" / name).unlink(missing_ok=True)
    return last
