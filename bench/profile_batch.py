"""Where a tiny micro-batch's fixed cost goes: a conformance scenario replayed in micro-batches of a few
records (state carried through the state store, as the streaming job does), profiled after a warm-up run.

Prints seconds, Spark jobs and Py4J calls per batch, then the streamjoin functions with the most
cumulative time. The profiled run's output must equal the scenario replayed in one batch (as the tests
check it), else the profile fails. A profile, not a benchmark: there is no baseline and no ratio (see
bench_join.py).

    python bench/profile_batch.py stream_table_left_clicks_per_region --max-records 2
    python bench/profile_batch.py chain:clicks_regions_products_sum     # a case of tests/chained_cases.py
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

HOME = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(HOME / "plugins"), str(HOME / "tests"), str(HOME / "tests" / "spark")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenario", help="a tests/scenarios/*.yaml name, without .yaml; or chain:<a chained case>")
    parser.add_argument("--max-records", type=int, default=2, help="records per micro-batch")
    parser.add_argument("--top", type=int, default=15, help="streamjoin functions to list")
    args = parser.parse_args()

    from test_spark_scenarios import assert_same, spark_replay

    from scenario_loader import load_scenario
    from spark_session import local_session

    spark = local_session("streamjoin-profile")  # the tests' session: the profile is of what they pay
    if args.scenario.startswith("chain:"):  # a chained case: its functions are in chained_cases, for the workers too
        import chained_cases

        spark.sparkContext.addPyFile(chained_cases.__file__)
        case = next(c for c in chained_cases.CASES if c.name == args.scenario.removeprefix("chain:"))
        scenario: Any = SimpleNamespace(spec=case.spec, inputs=list(case.records))
    else:
        scenario = load_scenario(HOME / "tests" / "scenarios" / f"{args.scenario}.yaml")
    whole = spark_replay(spark, scenario.spec, scenario.inputs, batch=True)
    batches: list[int] = []
    cut: list[Any] = []

    def run() -> None:
        batches.clear()
        cut[:] = spark_replay(
            spark, scenario.spec, scenario.inputs, batch=True, max_records=args.max_records,
            on_batch=lambda batch_id, _plan: batches.append(batch_id),
        )  # fmt: skip

    run()  # warm-up: the JVM's first queries compile and load classes
    context = spark.sparkContext
    context.setJobGroup("profiled", "profiled")
    profile = cProfile.Profile()
    started = time.monotonic()
    profile.runcall(run)
    seconds = time.monotonic() - started
    jobs = len(context.statusTracker().getJobIdsForGroup("profiled"))
    stats: Any = pstats.Stats(profile)
    py4j_calls = sum(
        calls for (file, _line, name), (calls, *_rest) in stats.stats.items()
        if name == "send_command" and file.endswith("clientserver.py")
    )  # fmt: skip
    assert_same(whole, cut, scenario.spec.dead_letter_topic, f"{args.scenario} in batches of {args.max_records}")
    n = len(batches)
    print(
        f"{args.scenario}: {len(scenario.inputs)} records in {n} batches of <= {args.max_records}: "
        f"{seconds / n:.2f} s, {jobs / n:.1f} Spark jobs and {py4j_calls / n:.0f} Py4J calls per batch; "
        "output as in one batch"
    )
    stats.sort_stats("cumulative").print_stats(r"plugins/streamjoin", args.top)
    spark.stop()


if __name__ == "__main__":
    main()
