"""The api-server tests' traceback filter tells the plugin's failures from Airflow's own by the frames' files,
also when the project's clone (and so the venv holding Airflow) sits in a folder named ``streamjoin``."""

from __future__ import annotations

from pathlib import Path

from api_server import tracebacks


def test_a_traceback_is_ours_only_when_a_frame_is_in_the_projects_code(tmp_path: Path) -> None:
    home = tmp_path / "ci" / "streamjoin"
    airflow = f"{home}/.venv/lib/python3.12/site-packages/airflow"
    log = tmp_path / "api-server.log"
    log.write_text(
        "INFO request GET /streamjoin/jobs 200\n"
        "Traceback (most recent call last):\n"
        f'  File "{airflow}/utils/session.py", line 10, in wrapper\n'
        "    return func(*args, **kwargs)\n"
        "sqlalchemy.exc.OperationalError: (sqlite3.OperationalError) database is locked\n"
        "Traceback (most recent call last):\n"
        f'  File "{airflow}/api_fastapi/app.py", line 5, in call\n'
        "    return await app(scope)\n"
        f'  File "{home}/plugins/streamjoin/airflow/plugin.py", line 99, in job_page\n'
        "    rows = view.rows()\n"
        "KeyError: 'lag'\n"
    )
    ours, others = tracebacks(log, home)
    assert [t.splitlines()[-1] for t in ours] == ["KeyError: 'lag'"]
    assert [t.splitlines()[-1] for t in others] == [
        "sqlalchemy.exc.OperationalError: (sqlite3.OperationalError) database is locked"
    ]
