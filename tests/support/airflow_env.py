"""An Airflow environment for tests: its own AIRFLOW_HOME and a migrated Postgres metadata DB.

``airflow db migrate`` takes a while, so it runs once per machine into a template database;
every test session then clones the template (``CREATE DATABASE ... TEMPLATE``), which is quick.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support import postgres

AIRFLOW_VERSION_TAG = "332"
TEMPLATE = f"conveyor_airflow_tmpl_{AIRFLOW_VERSION_TAG}"
_LOCK_KEY = 0x61697266  # 'airf'


def ensure_template() -> None:
    """Create the migrated template database once (under a lock; concurrent sessions wait)."""
    with postgres.admin() as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK_KEY,))
        try:
            if postgres.database_exists(TEMPLATE):
                return
            building = TEMPLATE + "_building"
            postgres.create_database(building)
            env = dict(os.environ, AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=postgres.sqlalchemy_url_for(building))
            subprocess.run(
                [str(Path(sys.executable).with_name("airflow")), "db", "migrate"],
                env=env, check=True, capture_output=True, text=True, timeout=600,
            )
            conn.execute(f'ALTER DATABASE "{building}" RENAME TO "{TEMPLATE}"')
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_KEY,))


def create_metadata_db(dbname: str) -> None:
    ensure_template()
    # PostgreSQL refuses a clone while another session is connected to the template, and a clone
    # connects to it: parallel test workers (pytest-xdist) take turns.
    with postgres.admin() as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK_KEY,))
        try:
            postgres.create_database(dbname, template=TEMPLATE)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_KEY,))


def dag_test_keeps_declared_params() -> None:
    """Make ``DAG.test()`` leave the DAG's params as declared.

    Airflow merges a run's conf into the DAG's own ``Param`` objects (``ParamsDict.update`` shares
    them, ``__setitem__`` resolves the conf value into them), so in one process a
    ``dag.test(run_conf={"suite": "x"})`` leaves ``suite = "x"`` for every later ``dag.test()`` of
    that DAG. A deployment parses the DAG afresh for each task, so only in-process tests see it; with
    the suite in a random order, one test's conf would decide another's run.
    """
    import copy
    import functools

    from airflow.sdk.definitions.dag import DAG

    if getattr(DAG.test, "_keeps_declared_params", False):
        return
    declared_test = DAG.test

    @functools.wraps(declared_test)
    def test(self: DAG, *args: object, **kwargs: object) -> object:
        params = [self.params, *(task.params for task in self.tasks)]
        saved = [(param, copy.deepcopy(param.value)) for group in params for param in group.values()]
        try:
            return declared_test(self, *args, **kwargs)
        finally:
            for param, value in saved:
                param.value = value

    test._keeps_declared_params = True  # type: ignore[attr-defined]
    DAG.test = test  # type: ignore[method-assign]
