"""Reads of items and their audit trail through a psycopg connection of the store.

The steps read what they work on here (ids in a status, items by id, each item's latest move);
the CLI's one-item reads take the lighter path of :mod:`conveyor.ledger.lookup`. The filters and
the items query are shared with that module, so both answer the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg.rows import dict_row

from conveyor.ledger.errors import UnknownItem
from conveyor.ledger.lookup import filters, items_query
from conveyor.ledger.records import (
    ITEM_COLUMNS,
    ITEM_TEXT_COLUMNS,
    TRANSITION_COLUMNS,
    Item,
    TransitionRecord,
    items_from_text_rows,
)
from conveyor.ledger.statuses import as_statuses


def get(conn: psycopg.Connection, item_id: str) -> Item:
    """One item; raises :class:`UnknownItem`."""
    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(f"SELECT {ITEM_COLUMNS} FROM conveyor.items WHERE item_id = %s", (item_id,)).fetchone()
    if row is None:
        raise UnknownItem(item_id)
    return Item(**row)


def by_id(conn: psycopg.Connection, item_ids: Sequence[str]) -> list[Item]:
    """The items with these ids (those that exist), each looked up by key."""
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            f"SELECT {ITEM_COLUMNS} FROM conveyor.items WHERE item_id = ANY(%s)", (list(item_ids),)
        ).fetchall()
    return [Item(**row) for row in rows]


def history(conn: psycopg.Connection, item_id: str) -> list[TransitionRecord]:
    """Every transition of an item, oldest first; raises :class:`UnknownItem`."""
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            f"SELECT {TRANSITION_COLUMNS} FROM conveyor.transitions WHERE item_id = %s ORDER BY id",
            (item_id,),
        ).fetchall()
        if not rows and cur.execute("SELECT 1 FROM conveyor.items WHERE item_id = %s", (item_id,)).fetchone() is None:
            raise UnknownItem(item_id)
    return [TransitionRecord(**row) for row in rows]


def latest_moves(
    conn: psycopg.Connection, item_ids: Sequence[str], to_status: str | Sequence[str] | None
) -> dict[str, TransitionRecord]:
    """Each item's latest transition (into one of ``to_status`` when given), in one query read
    through the ``transitions_item`` index."""
    query = f"SELECT DISTINCT ON (item_id) {TRANSITION_COLUMNS} FROM conveyor.transitions WHERE item_id = ANY(%s)"
    params: list[Any] = [list(item_ids)]
    if to_status is not None:
        query += " AND to_status = ANY(%s)"
        params.append(list(as_statuses(to_status)))
    query += " ORDER BY item_id, id DESC"
    with conn.cursor(row_factory=dict_row) as cur:
        return {row["item_id"]: TransitionRecord(**row) for row in cur.execute(query, params).fetchall()}


def matching(
    conn: psycopg.Connection,
    *,
    workflow: str | None,
    run_id: str | None,
    status: str | Sequence[str] | None,
    limit: int | None,
    offset: int,
) -> list[Item]:
    """Items matching every filter given, newest first."""
    query, params = items_query(
        workflow=workflow, run_id=run_id, status=status, limit=limit, offset=offset, columns=ITEM_TEXT_COLUMNS
    )
    # Plain tuples (a dict per row costs a tenth of a 100k-item read), JSON parsed in bulk.
    return items_from_text_rows(conn.execute(query, params).fetchall())


def count_by_status(conn: psycopg.Connection, workflow: str | None, run_id: str | None) -> dict[str, int]:
    """status -> items (of the workflow and run, when given)."""
    where, params = filters(workflow, run_id, None)
    rows = conn.execute(
        f"SELECT status, count(*) FROM conveyor.items{where} GROUP BY status ORDER BY status", params
    ).fetchall()
    return {status: count for status, count in rows}


def counts_by_workflow(conn: psycopg.Connection, run_id: str, workflow: str | None) -> dict[str, dict[str, int]]:
    """workflow -> status -> items of the run (a run id can be shared by several workflows' DAGs)."""
    where, params = filters(workflow, run_id, None)
    rows = conn.execute(
        f"SELECT workflow, status, count(*) FROM conveyor.items{where} GROUP BY 1, 2", params
    ).fetchall()
    out: dict[str, dict[str, int]] = {}
    for name, status, count in rows:
        out.setdefault(name, {})[status] = count
    return out


def ids_in(conn: psycopg.Connection, workflow: str, run_id: str, status: str | Sequence[str]) -> list[str]:
    """Just the ids (cheap): what a step works on."""
    where, params = filters(workflow, run_id, status)
    rows = conn.execute(f"SELECT item_id FROM conveyor.items{where} ORDER BY item_id", params).fetchall()
    return [r[0] for r in rows]
