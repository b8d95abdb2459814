"""The ledger's database on a fresh server: find it through Airflow, create it when missing.

``docker-compose.yaml``'s ``airflow-init`` service runs, after loading ``airflow_settings.yaml``::

    ledger_uri="$(python -m conveyor.deploy.ledger_db)"
    AIRFLOW_CONN_CONVEYOR_LEDGER="$ledger_uri" conveyor db upgrade

The command reads the ``conveyor_ledger`` connection the way Airflow resolves it (environment, then
the metadata DB), creates its database when the server does not have it yet (idempotent, safe on
every start), and prints the connection's URI for the ``conveyor`` command, which does not import
Airflow itself.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from conveyor.deploy.streams import stdout_to_stderr
from conveyor.ledger.connection import CONN_ID, airflow_uri_to_dsn, describe


def ledger_uri_from_airflow(conn_id: str = CONN_ID) -> str:
    """The connection's Airflow URI, as Airflow resolves it (environment first, then the metadata DB).

    :param conn_id: the Airflow connection id of the ledger.
    :raises LookupError: Airflow has no such connection.
    """
    from airflow.exceptions import AirflowNotFoundException
    from airflow.models import Connection

    try:
        conn = Connection.get_connection_from_secrets(conn_id)
    except AirflowNotFoundException:
        raise LookupError(
            f"Airflow has no connection {conn_id!r}: load airflow_settings.yaml first "
            "(python -m conveyor.deploy.settings airflow_settings.yaml)"
        ) from None
    return conn.get_uri()


def ensure_database(dsn: str, maintenance_db: str = "postgres") -> bool:
    """Create the database named in ``dsn`` on its server unless it exists.

    :param dsn: a libpq URI or Airflow postgres URI of the ledger database.
    :param maintenance_db: the database to connect to while creating it.
    :return: True when the database was created, False when it already existed.
    """
    import psycopg
    from psycopg import errors, sql
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    if dsn.startswith("postgres://") or "__extra__" in dsn:
        dsn = airflow_uri_to_dsn(dsn)
    params = conninfo_to_dict(dsn)
    dbname = str(params.get("dbname") or "")
    if not dbname:
        raise ValueError(f"the ledger connection names no database ({describe(dsn)})")
    admin = make_conninfo(dsn, dbname=maintenance_db)
    with psycopg.connect(admin, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone():
            return False
        try:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
        except errors.DuplicateDatabase:
            # Another init container won the race: the database is there, which is all we need.
            return False
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m conveyor.deploy.ledger_db [--conn-id ID]``: ensure the database, print the URI.

    :param argv: the arguments (default: ``sys.argv[1:]``).
    :return: 0 on success, 1 when the connection is missing or the server unreachable.
    """
    parser = argparse.ArgumentParser(
        prog="python -m conveyor.deploy.ledger_db", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--conn-id", default=CONN_ID, help=f"Airflow connection of the ledger (default {CONN_ID})"
    )
    args = parser.parse_args(argv)
    try:
        with stdout_to_stderr():
            uri = ledger_uri_from_airflow(args.conn_id)
            dsn = airflow_uri_to_dsn(uri)
            created = ensure_database(dsn)
    except Exception as exc:  # noqa: BLE001 - one clear line for the init log, whatever failed
        print(f"conveyor ledger db: {exc}", file=sys.stderr)
        return 1
    # Progress goes to stderr: stdout carries only the URI, for the caller's $(...).
    print(f"ledger database {'created' if created else 'exists'}: {describe(dsn)}", file=sys.stderr)
    print(uri)
    return 0


if __name__ == "__main__":
    sys.exit(main())
