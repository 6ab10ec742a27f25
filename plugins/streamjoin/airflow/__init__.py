"""Airflow adapter: hooks, operators, triggers, notifiers, DAG factory and the UI plugin."""

import warnings

# Airflow 3.3 matches .airflowignore files (the plugins folder has one) with pathspec's GitWildMatchPattern,
# deprecated since pathspec 1.0: every task process warned about it when it loaded the plugins, as the first
# line of every task log. Airflow's own call, nothing a reader of the log can act on. The DAG files import this
# package before a task loads the plugins, so the filter is in place by then.
warnings.filterwarnings(
    "ignore", message=r"GitWildMatchPattern \('gitwildmatch'\) is deprecated", category=DeprecationWarning
)
