"""The airflow-init script of docker-compose.yaml, run as written on this machine (no Docker here).

The script is taken from the compose file with Compose's interpolation applied; only the stack's
addresses are replaced by this machine's (the session's metadata DB, a fresh ledger database).
Its settings step is exactly the native quickstart's command, from the project's root. Each step's
idempotency is tested on its own (test_settings_load, test_ledger_db, test_admin_user).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.deploy.airflow_items import stored_connection, stored_pool, stored_variable
from tests.support import postgres


@pytest.fixture
def ledger_db_name() -> Iterator[str]:
    name = f"conveyor_init_{os.getpid()}"
    postgres.drop_database(name)
    yield name
    postgres.drop_database(name)


@pytest.mark.slow  # three fresh processes import Airflow: ~30 s on an idle machine
def test_init_script_sets_up_a_fresh_stack(compose, metadata, ledger_db_name, tmp_path):
    from airflow.configuration import conf

    script = compose["services"]["airflow-init"]["command"][2]
    init_env = compose["services"]["airflow-init"]["environment"]
    passwords = tmp_path / "auth" / "passwords.json"
    env = {
        key: value
        for key, value in os.environ.items()
        # The ledger must come from the loaded connection, as in the stack.
        if key not in {"AIRFLOW_CONN_CONVEYOR_LEDGER", "CONVEYOR_LEDGER_DSN"}
    }
    env.update(
        {
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}",
            # A home of its own: the airflow CLI writes an airflow.cfg (with a new fernet key) into
            # a home that has none, which would change the key for the session's later subprocesses.
            "AIRFLOW_HOME": str(tmp_path / "airflow-home"),
            # The key of this test process, so what the script stores reads back here.
            "AIRFLOW__CORE__FERNET_KEY": conf.get("core", "fernet_key"),
            "_AIRFLOW_WWW_USER_USERNAME": init_env["_AIRFLOW_WWW_USER_USERNAME"],
            "_AIRFLOW_WWW_USER_PASSWORD": init_env["_AIRFLOW_WWW_USER_PASSWORD"],
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
            "CONVEYOR_LEDGER_HOST": "127.0.0.1",
            "CONVEYOR_LEDGER_PORT": "5432",
            "CONVEYOR_LEDGER_DB": ledger_db_name,
            "CONVEYOR_LEDGER_USER": "postgres",
            "CONVEYOR_LEDGER_PASSWORD": "",
            # The stack's conveyor-files volume, empty as on a fresh deployment.
            "AIRFLOW__CONVEYOR__STORAGE_BASE": (tmp_path / "conveyor-files").as_uri(),
        }
    )
    env.pop("AIRFLOW__CONVEYOR__STORAGE_CONN_ID", None)
    env.pop("CONVEYOR_INVOICE_INBOX", None)

    # From the project's root: the settings step is the native quickstart's command, verbatim.
    result = subprocess.run(
        ["bash", "-c", script], cwd=postgres.REPO, env=env, capture_output=True, text=True, timeout=300
    )

    assert result.returncode == 0, result.stderr[-3000:]
    assert f"admin user 'airflow' created in {passwords}" in result.stdout
    assert (
        "airflow_settings.yaml: connections 4 (4 created), variables 5 (5 created), pools 1 (1 created)"
        in result.stdout
    )
    assert f"ledger database created: host=127.0.0.1 port=5432 dbname={ledger_db_name}" in result.stderr
    assert "applied " in result.stdout
    ledger = stored_connection("conveyor_ledger")
    assert ledger is not None and (ledger["host"], ledger["schema"]) == ("127.0.0.1", ledger_db_name)
    assert stored_variable("conveyor_invoice_approval_threshold") == "5000"
    assert stored_pool("conveyor_llm")[0] == 4
    with psycopg.connect(postgres.dsn_for(ledger_db_name)) as conn:
        assert conn.execute("SELECT to_regclass('conveyor.items') IS NOT NULL").fetchone() == (True,)
    # The hourly invoice runs find their inbox on the fresh volume (they failed until someone made it).
    inbox = tmp_path / "conveyor-files" / "inbox" / "invoice_processing"
    assert inbox.is_dir() and not any(inbox.iterdir())
    assert f"inbox ready: file://{inbox} (Variable conveyor_invoice_inbox)" in result.stdout
