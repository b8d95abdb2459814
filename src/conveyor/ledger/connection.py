"""Where the ledger lives: the Airflow connection ``conveyor_ledger``, resolved cheaply.

Order: an explicit DSN, ``CONVEYOR_LEDGER_DSN``, ``AIRFLOW_CONN_CONVEYOR_LEDGER`` (URI or JSON
form, as Airflow reads it), the embedded server the quickstart started
(``$CONVEYOR_HOME/ledger.dsn``), and last the connection through Airflow's own secrets backends.
Airflow is imported only on that last path, so the CLI answers without paying for it whenever
the connection is in the environment.

The CLI runs from any directory: :func:`locate_home` finds the quickstart's home when
``CONVEYOR_HOME`` is not set, in the nearest ``.conveyor/`` holding a ``ledger.dsn`` up from the
working directory, else in the one the last quickstart recorded in ``~/.config/conveyor/home``
(:func:`user_home_file`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from conveyor.ledger.errors import LedgerUnavailable

CONN_ID = "conveyor_ledger"
_ENV_DSN = "CONVEYOR_LEDGER_DSN"

# Airflow URIs carry Airflow-only query keys that libpq would reject.
_AIRFLOW_ONLY_KEYS = {"__extra__", "cursor", "iam", "redshift", "aws_conn_id", "enable_log_db_messages"}


def conveyor_home() -> Path:
    """The folder holding the embedded database and run outputs (``$CONVEYOR_HOME`` or ``./.conveyor``)."""
    return Path(os.environ.get("CONVEYOR_HOME", ".conveyor")).resolve()


def user_home_file() -> Path:
    """Where the quickstart records its home for the CLI: ``$XDG_CONFIG_HOME/conveyor/home``
    (``~/.config/conveyor/home``)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "conveyor" / "home"


def remember_home(home: Path) -> None:
    """Record ``home`` as the one the CLI uses when nothing nearer is found (the quickstart calls
    this: the last quickstart run wins)."""
    target = user_home_file()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(f"{home.resolve()}\n")


def locate_home(start: Path | None = None) -> Path | None:
    """The Conveyor home the CLI should use, or None when there is none to find.

    ``$CONVEYOR_HOME`` when set; else the nearest ``.conveyor/`` with a ``ledger.dsn`` in
    ``start`` (default: the working directory) or a folder above it, so a checkout's own
    quickstart wins inside it; else the home recorded by the last quickstart (see
    :func:`remember_home`) while it still holds a ``ledger.dsn``.
    """
    if os.environ.get("CONVEYOR_HOME"):
        return conveyor_home()
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / ".conveyor" / "ledger.dsn").is_file():
            return folder / ".conveyor"
    try:
        recorded = Path(user_home_file().read_text().strip())
    except (OSError, ValueError):
        return None
    return recorded if recorded.is_absolute() and (recorded / "ledger.dsn").is_file() else None


def airflow_uri_to_dsn(uri: str) -> str:
    """Turn an Airflow connection URI or JSON into a libpq URI psycopg accepts."""
    uri = uri.strip()
    if uri.startswith("{"):
        conn = json.loads(uri)
        host = conn.get("host") or ""
        user = quote(conn.get("login") or "", safe="")
        password = conn.get("password")
        auth = f"{user}:{quote(password, safe='')}@" if password else (f"{user}@" if user else "")
        port = f":{conn['port']}" if conn.get("port") else ""
        db = conn.get("schema") or ""
        query = {"host": host} if host.startswith("/") else {}
        netloc_host = "" if host.startswith("/") else host
        base = f"postgresql://{auth}{netloc_host}{port}/{db}"
        return f"{base}?{urlencode(query)}" if query else base
    parts = urlsplit(uri)
    # Airflow writes a connection of type conveyor_ledger as conveyor-ledger://
    if parts.scheme not in {"postgres", "postgresql", "conveyor-ledger", "conveyor_ledger"}:
        raise LedgerUnavailable(
            f"connection {CONN_ID!r} must be a postgres (or conveyor_ledger) connection, got scheme {parts.scheme!r}"
        )
    pairs = [(k, v) for k, v in parse_qsl(parts.query) if k not in _AIRFLOW_ONLY_KEYS]
    netloc = parts.netloc
    host = unquote(parts.hostname or "") if parts.hostname else ""
    if host.startswith("/"):
        # Airflow encodes a socket folder as the host; libpq wants it as ?host=.
        userinfo = netloc.rsplit("@", 1)[0] + "@" if "@" in netloc else ""
        netloc = userinfo
        pairs.append(("host", host))
    return f"postgresql://{netloc}{parts.path}" + (f"?{urlencode(pairs)}" if pairs else "")


def resolve_dsn(dsn: str | None = None, conn_id: str = CONN_ID) -> str:
    """The ledger's libpq DSN; raises :class:`LedgerUnavailable` when nothing is configured."""
    if dsn:
        return dsn
    if os.environ.get(_ENV_DSN):
        return os.environ[_ENV_DSN]
    env_name = f"AIRFLOW_CONN_{conn_id.upper()}"
    if os.environ.get(env_name):
        return airflow_uri_to_dsn(os.environ[env_name])
    dsn_file = conveyor_home() / "ledger.dsn"
    if conn_id == CONN_ID and dsn_file.exists():
        return dsn_file.read_text().strip()
    from_airflow = _from_airflow(conn_id)
    if from_airflow:
        return from_airflow
    raise LedgerUnavailable(
        f"no ledger configured: set the Airflow connection {conn_id!r} "
        f"(or {env_name}), or run ./scripts/quickstart to start the embedded one"
    )


def _from_airflow(conn_id: str) -> str | None:
    """The connection through Airflow's secrets backends (metadata DB, Vault...): the slow path,
    taken only when nothing cheaper is configured, e.g. inside a task or an Airflow container."""
    try:
        from airflow.sdk import BaseHook

        conn = BaseHook.get_connection(conn_id)
    except Exception:
        return None
    return airflow_uri_to_dsn(conn.get_uri())


def describe(dsn: str) -> str:
    """Host, port and database of a DSN for messages; never the password.

    Parsed here rather than by a driver so error paths stay import-free.
    """
    info: dict[str, str] = {}
    if "://" in dsn:
        parts = urlsplit(dsn)
        info["host"] = unquote(parts.hostname or "")
        if parts.port:
            info["port"] = str(parts.port)
        info["dbname"] = unquote(parts.path.lstrip("/"))
        info.update({k: v for k, v in parse_qsl(parts.query) if k in {"host", "port", "dbname"}})
    elif "=" in dsn:
        for token in dsn.split():
            key, _, value = token.partition("=")
            info[key] = value.strip("'")
    else:
        return "<unparseable DSN>"
    host = info.get("host") or "localhost"
    return f"host={host} port={info.get('port') or '5432'} dbname={info.get('dbname') or '?'}"
