"""The fast read path behind ``conveyor status`` and ``conveyor history``.

"Where is this item right now" must answer in well under half a second, process start
included. psycopg 3 costs ~0.5 s to import here, psycopg2 (a C extension that Airflow's
postgres provider installs anyway) ~0.15 s, so these two primary-key reads use psycopg2.
Everything that writes goes through :class:`conveyor.ledger.store.Ledger`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conveyor.ledger.connection import describe, resolve_dsn
from conveyor.ledger.errors import LedgerUnavailable, UnknownItem
from conveyor.ledger.records import ITEM_COLUMNS, TRANSITION_COLUMNS, Item, TransitionRecord
from conveyor.ledger.statuses import as_statuses


def _connect(dsn: str):  # type: ignore[no-untyped-def]
    import psycopg2

    try:
        return psycopg2.connect(dsn, connect_timeout=10, application_name="conveyor-cli")
    except psycopg2.OperationalError as exc:
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise LedgerUnavailable(f"cannot reach the ledger database at {describe(dsn)}: {first_line}") from None


def get_item(item_id: str, dsn: str | None = None) -> Item:
    """One item by id; raises :class:`UnknownItem`."""
    conn = _connect(resolve_dsn(dsn))
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT {ITEM_COLUMNS} FROM conveyor.items WHERE item_id = %s", (item_id,))
            row = cur.fetchone()
    finally:
        conn.close()
    if row is None:
        raise UnknownItem(item_id)
    return Item(*row)


def get_history(item_id: str, dsn: str | None = None) -> list[TransitionRecord]:
    """Every transition of an item, oldest first; raises :class:`UnknownItem`."""
    conn = _connect(resolve_dsn(dsn))
    try:
        with conn.cursor() as cur:
            cur.execute(
                f"SELECT {TRANSITION_COLUMNS} FROM conveyor.transitions WHERE item_id = %s ORDER BY id",
                (item_id,),
            )
            rows = cur.fetchall()
            if not rows:
                cur.execute("SELECT 1 FROM conveyor.items WHERE item_id = %s", (item_id,))
                if cur.fetchone() is None:
                    raise UnknownItem(item_id)
    finally:
        conn.close()
    return [TransitionRecord(*row) for row in rows]


def get_items(
    *,
    workflow: str | None = None,
    run_id: str | None = None,
    status: str | Sequence[str] | None = None,
    limit: int | None = 100,
    dsn: str | None = None,
) -> list[Item]:
    """Items matching every filter given, newest first (what ``conveyor items`` lists)."""
    query, params = items_query(workflow=workflow, run_id=run_id, status=status, limit=limit)
    conn = _connect(resolve_dsn(dsn))
    try:
        with conn.cursor() as cur:
            cur.execute(query, params)
            rows = cur.fetchall()
    finally:
        conn.close()
    return [Item(*row) for row in rows]


def items_query(
    *,
    workflow: str | None,
    run_id: str | None,
    status: str | Sequence[str] | None,
    limit: int | None,
    offset: int = 0,
    columns: str = ITEM_COLUMNS,
) -> tuple[str, list[Any]]:
    """The query of :meth:`Ledger.items`: newest first, so that with a workflow and no run it reads
    index ``items_workflow_newest`` in order and stops at the limit."""
    where, params = filters(workflow, run_id, status)
    query = f"SELECT {columns} FROM conveyor.items{where} ORDER BY updated_at DESC, item_id"
    if limit is not None:
        query += " LIMIT %s OFFSET %s"
        params += [limit, offset]
    return query, params


def filters(workflow: str | None, run_id: str | None, status: str | Sequence[str] | None) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if workflow is not None:
        clauses.append("workflow = %s")
        params.append(workflow)
    if run_id is not None:
        clauses.append("run_id = %s")
        params.append(run_id)
    if status is not None:
        clauses.append("status = ANY(%s)")
        params.append(list(as_statuses(status)))
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params
