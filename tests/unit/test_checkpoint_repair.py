"""Repairing a checkpoint whose last batch has offsets but no commit (Spark 4.1.1's replay NPE)."""

from __future__ import annotations

from pathlib import Path

from streamjoin.core.checkpoint_repair import drop_uncommitted_batch


def _checkpoint(root: Path, offsets: list[int], commits: list[int]) -> Path:
    for folder, batches in (("offsets", offsets), ("commits", commits)):
        (root / folder).mkdir(parents=True)
        for n in batches:
            (root / folder / str(n)).write_text("v1\n")
            (root / folder / f".{n}.crc").write_text("crc")
    return root


def test_an_uncommitted_last_batch_is_dropped_and_the_rest_kept(tmp_path: Path) -> None:
    root = _checkpoint(tmp_path / "query", offsets=[0, 1, 2], commits=[0, 1])
    assert drop_uncommitted_batch(root) == 2
    assert sorted(p.name for p in (root / "offsets").iterdir()) == [".0.crc", ".1.crc", "0", "1"]
    assert drop_uncommitted_batch(root) is None  # idempotent: now every batch is committed


def test_a_committed_or_new_checkpoint_is_left_alone(tmp_path: Path) -> None:
    root = _checkpoint(tmp_path / "query", offsets=[0, 1], commits=[0, 1])
    assert drop_uncommitted_batch(root) is None
    assert len(list((root / "offsets").iterdir())) == 4
    assert drop_uncommitted_batch(tmp_path / "missing") is None
    assert drop_uncommitted_batch("s3a://bucket/checkpoints/x/query") is None
