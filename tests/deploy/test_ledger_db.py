"""The ledger's database for a fresh stack: found through Airflow, created once, migrated by the CLI."""

from __future__ import annotations

import os
from collections.abc import Iterator

import psycopg
import pytest

from conveyor.deploy.ledger_db import ensure_database, ledger_uri_from_airflow, main
from conveyor.ledger.connection import airflow_uri_to_dsn
from tests.support import postgres

CONN_ID = "deploytest_ledger"


@pytest.fixture
def new_db_name(request: pytest.FixtureRequest) -> Iterator[str]:
    name = f"conveyor_deploy_{os.getpid()}_{abs(hash(request.node.nodeid)) % 10**6}"
    postgres.drop_database(name)
    yield name
    postgres.drop_database(name)


@pytest.fixture
def ledger_connection(airflow_db: str, new_db_name: str) -> Iterator[str]:
    """A connection only in the metadata DB (no AIRFLOW_CONN_* for it), to a database not created yet."""
    from airflow.models import Connection
    from airflow.utils.session import create_session
    from sqlalchemy import delete

    uri = postgres.airflow_conn_uri_for(new_db_name)
    with create_session() as session:
        session.execute(delete(Connection).where(Connection.conn_id == CONN_ID))
        session.add(Connection(conn_id=CONN_ID, uri=uri))
    yield uri
    with create_session() as session:
        session.execute(delete(Connection).where(Connection.conn_id == CONN_ID))


def test_ensure_database_creates_once(new_db_name):
    dsn = postgres.dsn_for(new_db_name)

    assert ensure_database(dsn) is True
    assert postgres.database_exists(new_db_name)
    assert ensure_database(dsn) is False
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT current_database()").fetchone() == (new_db_name,)


def test_ensure_database_accepts_an_airflow_uri_and_needs_a_database_name(new_db_name):
    assert ensure_database(postgres.airflow_conn_uri_for(new_db_name)) is True
    assert postgres.database_exists(new_db_name)
    with pytest.raises(ValueError, match="names no database"):
        ensure_database(postgres.dsn_for("").rstrip("/"))


def test_uri_comes_from_the_metadata_db(ledger_connection):
    uri = ledger_uri_from_airflow(CONN_ID)

    assert airflow_uri_to_dsn(uri) == airflow_uri_to_dsn(ledger_connection)


def test_environment_wins_as_in_airflow(airflow_db):
    # conftest sets AIRFLOW_CONN_CONVEYOR_LEDGER: Airflow reads the environment first, so do we.
    from_env = airflow_uri_to_dsn(os.environ["AIRFLOW_CONN_CONVEYOR_LEDGER"])

    assert airflow_uri_to_dsn(ledger_uri_from_airflow("conveyor_ledger")) == from_env


def test_missing_connection_names_the_fix(airflow_db):
    with pytest.raises(LookupError, match="python -m conveyor.deploy.settings airflow_settings.yaml"):
        ledger_uri_from_airflow("deploytest_absent")


def test_command_creates_the_database_and_prints_only_the_uri(ledger_connection, new_db_name, capfd):
    from conveyor.cli.main import main as conveyor_main

    assert main(["--conn-id", CONN_ID]) == 0

    out, err = capfd.readouterr()
    assert out.splitlines() == [ledger_uri_from_airflow(CONN_ID)]
    assert "ledger database created: host=" in err and f"dbname={new_db_name}" in err
    assert "@" not in err.split("ledger database created")[1].splitlines()[0]  # no credentials in the log
    # What init does next: the conveyor CLI migrates the new database from that URI.
    assert conveyor_main(["--dsn", airflow_uri_to_dsn(out.strip()), "db", "upgrade"]) == 0
    with psycopg.connect(postgres.dsn_for(new_db_name)) as conn:
        assert conn.execute("SELECT to_regclass('conveyor.items') IS NOT NULL").fetchone() == (True,)


def test_command_fails_clearly_without_the_connection(airflow_db, capfd):
    assert main(["--conn-id", "deploytest_absent"]) == 1

    out, err = capfd.readouterr()
    assert out == ""
    assert "no connection 'deploytest_absent'" in err
