"""Versioned SQL migrations of the ledger schema, safe to run on every start.

Each ``migrations/NNNN_name.sql`` runs once, in its own transaction, under an advisory lock so
concurrent starters (scheduler, workers, the CLI) never apply one twice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

import psycopg

_LOCK_KEY = 0x636F6E76  # 'conv'
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def available_migrations() -> list[Migration]:
    """Every migration shipped in the package, in order."""
    found = []
    for entry in resources.files("conveyor.ledger.migrations").iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), match.group(2), entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise RuntimeError(f"duplicate migration versions: {versions}")
    return found


def applied_versions(conn: psycopg.Connection) -> set[int]:
    exists = conn.execute("SELECT to_regclass('conveyor.schema_migrations')").fetchone()
    if not exists or exists[0] is None:
        return set()
    return {row[0] for row in conn.execute("SELECT version FROM conveyor.schema_migrations")}


def upgrade(conn: psycopg.Connection, target: int | None = None) -> list[str]:
    """Apply the pending migrations up to ``target`` (all when None); return the names applied."""
    applied: list[str] = []
    for migration in available_migrations():
        if target is not None and migration.version > target:
            break
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            conn.execute("CREATE SCHEMA IF NOT EXISTS conveyor")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS conveyor.schema_migrations ("
                " version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            if migration.version in applied_versions(conn):
                continue
            conn.execute(migration.sql)
            conn.execute(
                "INSERT INTO conveyor.schema_migrations (version, name) VALUES (%s, %s)",
                (migration.version, migration.name),
            )
            applied.append(f"{migration.version:04d}_{migration.name}")
    return applied


def current_version(conn: psycopg.Connection) -> int:
    versions = applied_versions(conn)
    return max(versions) if versions else 0
