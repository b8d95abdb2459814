"""Reads of items and their audit trail through a psycopg connection of the store.

The steps read what they work on here (ids in a status, items by id, each item's latest move);
the CLI's one-item reads take the lighter path of :mod:`conveyor.ledger.lookup`. The filters and
the items query are shared with that module, so both answer the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
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
    decode_json_columns,
    items_from_text_rows,
)
from conveyor.ledger.statuses import as_statuses

#: the item columns that hold a step's data (JSON), the ones :func:`data_digests` and
#: :func:`data_of` read by name
DATA_FIELDS = ("payload", "ai_result")


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
    """Items matching every filter given, the newest received first."""
    query, params = items_query(
        workflow=workflow, run_id=run_id, status=status, limit=limit, offset=offset, columns=ITEM_TEXT_COLUMNS
    )
    # Plain tuples (a dict per row costs a tenth of a 100k-item read), JSON parsed in bulk.
    return items_from_text_rows(conn.execute(query, params).fetchall())


def count_by_status(conn: psycopg.Connection, workflow: str | None, run_id: str | None) -> dict[str, int]:
    """status -> items (of the workflow and run, when given)."""
    where, params = filters(workflow, run_id, None)
    rows = conn.execute(
        f"SELECT status, count(*) FROM conveyor.item_states{where} GROUP BY status ORDER BY status", params
    ).fetchall()
    return {status: count for status, count in rows}


def counts_by_workflow(conn: psycopg.Connection, run_id: str, workflow: str | None) -> dict[str, dict[str, int]]:
    """workflow -> status -> items of the run (a run id can be shared by several workflows' DAGs)."""
    where, params = filters(workflow, run_id, None)
    rows = conn.execute(
        f"SELECT workflow, status, count(*) FROM conveyor.item_states{where} GROUP BY 1, 2", params
    ).fetchall()
    out: dict[str, dict[str, int]] = {}
    for name, status, count in rows:
        out.setdefault(name, {})[status] = count
    return out


def ids_in(conn: psycopg.Connection, workflow: str, run_id: str, status: str | Sequence[str]) -> list[str]:
    """Just the ids (cheap): what a step works on."""
    where, params = filters(workflow, run_id, status)
    rows = conn.execute(f"SELECT item_id FROM conveyor.item_states{where} ORDER BY item_id", params).fetchall()
    return [r[0] for r in rows]


def runs_of(conn: psycopg.Connection, item_ids: Sequence[str]) -> list[tuple[str, str, datetime]]:
    """(item id, run id, created at) of the items with these ids that exist."""
    rows = conn.execute(
        "SELECT item_id, run_id, created_at FROM conveyor.items WHERE item_id = ANY(%s)",
        (list(item_ids),),
    ).fetchall()
    return [(item_id, run_id, created_at) for item_id, run_id, created_at in rows]


def waiting_data(
    conn: psycopg.Connection, item_ids: Sequence[str], *, workflow: str, status: str
) -> list[tuple[str, Any, Any]]:
    """(item id, payload, AI result) of those of ``item_ids`` still in ``status``, by item id.

    The JSON is read as text and parsed in bulk (see :func:`decode_json_columns`)."""
    rows = conn.execute(
        "SELECT item_id, payload::text, ai_result::text FROM conveyor.items"
        " WHERE item_id = ANY(%s) AND workflow = %s AND status = %s ORDER BY item_id",
        (list(item_ids), workflow, status),
    ).fetchall()
    return [(r[0], r[1], r[2]) for r in decode_json_columns(rows, (1, 2))]


def _data_field(name: str) -> str:
    # The column name goes into the statement's text: only the known ones may.
    if name not in DATA_FIELDS:
        raise ValueError(f"an item's data is one of {DATA_FIELDS}, not {name!r}")
    return name


def data_digests(
    conn: psycopg.Connection, workflow: str, run_id: str, status: str, data_field: str
) -> list[tuple[str, str]]:
    """(item id, md5 of the item's ``data_field`` as text, '' for none) of the run's items in
    ``status``, by item id: a cheap fingerprint of what a step is about to read."""
    column = _data_field(data_field)
    rows = conn.execute(
        f"SELECT item_id, md5(coalesce({column}::text, '')) FROM conveyor.items"  # noqa: S608
        " WHERE workflow = %s AND run_id = %s AND status = %s ORDER BY item_id",
        (workflow, run_id, status),
    ).fetchall()
    return [(item_id, digest) for item_id, digest in rows]


def data_of(conn: psycopg.Connection, item_ids: Sequence[str], data_field: str) -> dict[str, Any]:
    """item id -> its ``data_field`` (parsed JSON), of the items with these ids that exist."""
    column = _data_field(data_field)
    return dict(
        conn.execute(
            f"SELECT item_id, {column} FROM conveyor.items WHERE item_id = ANY(%s)",  # noqa: S608
            (list(item_ids),),
        ).fetchall()
    )
