"""Data-quality checks of pipeline outputs (Great Expectations 1.x adapter).

``suites`` (typed suite files, check plans) and ``results`` (check results, quarantine markers) are plain
Python; ``validate`` imports GX and pyspark and is only imported where a validation runs.
"""

from streamjoin.quality.quiet import quiet_gx

quiet_gx()  # before ``validate`` imports GX: GX logs some 230 lines of its own per check otherwise
