"""Plot the newest run of bench/results.jsonl: input records/s per variant next to the baseline of the
same run and Kafka Streams 4.1: measured in the same run when the line has them (``kafka_streams_rates``),
else the reference figures of this machine kind. A failed (content-checked) run plots as 0. Writes
bench/results.png."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

HERE = Path(__file__).resolve().parent
#: Kafka Streams 4.1 on this machine kind (2 cores, 4 partitions, 5M clicks, 100k users), from the guide
KAFKA_STREAMS = {"join": 160_000, "join+sum": 125_000, "stream-stream": 75_000, "baseline": 370_000}


def main() -> int:
    runs = [json.loads(line) for line in (HERE / "results.jsonl").read_text().splitlines() if line.strip()]
    run = runs[-1]
    variants = list(run["rates"])
    ours = [run["rates"][v] or 0 for v in variants]
    first = [run.get("first_rates", run["rates"])[v] or 0 for v in variants]
    measured = run.get("kafka_streams_rates") or {}
    if measured:
        theirs = [measured.get(v) or 0 for v in variants]
        label = "Kafka Streams 4.1.1, warm run, same run of the bench"
    else:
        theirs = [KAFKA_STREAMS.get(v.split("/")[0] if v != "join+sum/batch" else "join+sum", 0) for v in variants]
        label = "Kafka Streams 4.1 (reference, same machine kind)"
    fig, ax = plt.subplots(figsize=(10, 4.5))
    xs = range(len(variants))
    ax.bar([x - 0.27 for x in xs], first, width=0.27, label="streamjoin, first run (JVM warming up)")
    ax.bar(list(xs), ours, width=0.27, label="streamjoin, warm run")
    ax.bar([x + 0.27 for x in xs], theirs, width=0.27, label=label)
    for x, rate in zip(xs, ours, strict=True):
        ax.annotate(f"{rate / 1000:.1f}k", (x, rate), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(xs), variants)
    ax.set_ylabel("input records/s")
    ax.set_title(
        f"{run['clicks']:,} clicks, {run['users']:,} users, {run['partitions']} partitions, 2 cores ({run['when']})"
    )
    ax.legend()
    fig.tight_layout()
    fig.savefig(HERE / "results.png", dpi=110)
    print(f"wrote {HERE / 'results.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
