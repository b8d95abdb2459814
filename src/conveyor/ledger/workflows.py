"""Workflow declarations in the ledger: stored when a DAG runs, read by every other process.

A declaration (:class:`~conveyor.workflow.Workflow`) is stored under a version per distinct
definition: the same declaration again is the same version (a no-op), a changed one is the next
version. Items carry the version they were received under.

Reads are cached per process: a version never changes once stored; which version is the latest
is looked up again after :data:`LATEST_TTL` seconds, so a newly deployed DAG is seen within
seconds by the API server and the CLI without a restart.
"""

from __future__ import annotations

import json
import threading
import time
from typing import TYPE_CHECKING, Any

from conveyor.ledger.errors import UnknownWorkflow
from conveyor.workflow import Workflow

if TYPE_CHECKING:
    import psycopg

#: Seconds a process trusts its answer to "which version is the latest".
LATEST_TTL = 5.0

_lock = threading.Lock()
_versions: dict[tuple[str, str, int], Workflow] = {}
_latest: dict[tuple[str, str], tuple[float, Workflow]] = {}
_declared: dict[tuple[str, str], Workflow] = {}


def declare(conn: psycopg.Connection, dsn: str, workflow: Workflow, *, actor: str | None = None) -> Workflow:
    """Store ``workflow`` (a no-op when this exact declaration is stored); return it with its version."""
    key = (dsn, workflow.digest)
    known = _declared.get(key)
    if known is not None:
        return known
    definition = json.dumps(workflow.definition(), sort_keys=True, default=str)
    with conn.transaction():
        # One declarer at a time per workflow, so two workers never take the same new version.
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('conveyor.workflows'), hashtext(%s))", (workflow.name,))
        row = conn.execute(
            "SELECT version FROM conveyor.workflows WHERE name = %s AND digest = %s", (workflow.name, workflow.digest)
        ).fetchone()
        if row is None:
            row = conn.execute(
                "INSERT INTO conveyor.workflows (name, version, digest, definition, declared_by)"
                " SELECT %s, coalesce(max(version), 0) + 1, %s, %s::jsonb, %s FROM conveyor.workflows"
                " WHERE name = %s RETURNING version",
                (workflow.name, workflow.digest, definition, actor, workflow.name),
            ).fetchone()
    assert row is not None
    version = int(row[0])
    stored = Workflow.from_definition(workflow.definition(), version=version)
    with _lock:
        _declared[key] = stored
        _versions[(dsn, workflow.name, version)] = stored
        _latest.pop((dsn, workflow.name), None)
    return stored


def latest(conn_factory: Any, dsn: str, name: str) -> Workflow:
    """The latest declaration of ``name``; raises :class:`UnknownWorkflow` when none is stored.

    :param conn_factory: a callable returning a connection context (``Ledger.connect``), used only
        when the cache cannot answer.
    """
    check_name(name)
    cached = _latest.get((dsn, name))
    if cached is not None and time.monotonic() - cached[0] < LATEST_TTL:
        return cached[1]
    with conn_factory() as conn:
        row = conn.execute(
            "SELECT version, definition FROM conveyor.workflows WHERE name = %s ORDER BY version DESC LIMIT 1",
            (name,),
        ).fetchone()
    if row is None:
        raise UnknownWorkflow(
            f"unknown workflow {name!r}: it has no declaration in the ledger. Declare it with "
            f"conveyor.Workflow(name={name!r}, chain=(...)) and pass that object to the workflow's "
            "operators; the declaration is stored when the DAG runs"
        )
    version = int(row[0])
    flow = Workflow.from_definition(row[1], version=version)
    with _lock:
        _latest[(dsn, name)] = (time.monotonic(), flow)
        _versions[(dsn, name, version)] = flow
    return flow


def versions(conn_factory: Any, dsn: str, name: str) -> dict[int, Workflow]:
    """Every stored version of ``name`` (empty when none)."""
    check_name(name)
    with conn_factory() as conn:
        rows = conn.execute(
            "SELECT version, definition FROM conveyor.workflows WHERE name = %s ORDER BY version", (name,)
        ).fetchall()
    found: dict[int, Workflow] = {}
    for version, definition in rows:
        cached = _versions.get((dsn, name, int(version)))
        found[int(version)] = cached or Workflow.from_definition(definition, version=int(version))
    return found


def names(conn: psycopg.Connection) -> list[str]:
    """Every declared workflow."""
    return [r[0] for r in conn.execute("SELECT DISTINCT name FROM conveyor.workflows ORDER BY name").fetchall()]


def check_name(name: str) -> None:
    if not name or ":" in name or not all(c.isalnum() or c == "_" for c in name):
        raise UnknownWorkflow(f"invalid workflow name {name!r}")


def forget() -> None:
    """Drop every cached answer (tests that empty the ledger between cases)."""
    with _lock:
        _versions.clear()
        _latest.clear()
        _declared.clear()
