"""Project files outside the package (``jobs/``, ``dags/``) loaded as modules, as spark-submit and Airflow run
them."""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path
from types import ModuleType

from streamjoin.core.plans import PROJECT_HOME


def module_from_file(path: Path, name: str) -> ModuleType:
    """The file at ``path`` run as a new module named ``name``."""
    found = importlib.util.spec_from_file_location(name, path)
    assert found is not None and found.loader is not None
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    return module


@cache
def job_module(name: str) -> ModuleType:
    """``jobs/<name>.py`` as a module (loaded once per test session)."""
    return module_from_file(PROJECT_HOME / "jobs" / f"{name}.py", f"{name}_job")
