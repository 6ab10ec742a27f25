"""Data-quality checks of pipeline outputs (Great Expectations 1.x adapter).

``suites`` (typed suite files, check plans) and ``results`` (check results, quarantine markers) are plain
Python; ``validate`` imports GX and pyspark and is only imported where a validation runs.
"""
