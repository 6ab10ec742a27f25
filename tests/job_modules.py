"""The PySpark applications under ``jobs/`` loaded as modules, as spark-submit runs their files."""

from __future__ import annotations

import importlib.util
from functools import cache
from types import ModuleType

from streamjoin.core.plans import PROJECT_HOME


@cache
def job_module(name: str) -> ModuleType:
    """``jobs/<name>.py`` as a module (loaded once per test session)."""
    found = importlib.util.spec_from_file_location(f"{name}_job", PROJECT_HOME / "jobs" / f"{name}.py")
    assert found is not None and found.loader is not None
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    return module
