"""Keep a quality check's task log to what a person reads: which partition, which checks failed with what
they observed, the verdict and the Data Docs link (the operator logs those).

Left alone, GX 1.x logs about 26 INFO lines per data source it creates ("Skipping registering function ...
because it is a closure", from its docs decorators) and 100 more when first imported, and warns that it
imports modules deprecated in Python 3.11: some 230 lines per check, none of them about the data.
"""

from __future__ import annotations

import logging
import warnings

#: GX's loggers: warnings and errors still go through
GX_LOGGER = "great_expectations"


def quiet_gx() -> None:
    """GX logs warnings and errors only, and its own DeprecationWarnings are not shown. Idempotent; call it
    before importing GX (some of the lines come from the import)."""
    logging.getLogger(GX_LOGGER).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"great_expectations(\.|$)")
