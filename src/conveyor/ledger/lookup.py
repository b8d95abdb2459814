"""The fast read path behind ``conveyor status`` and ``conveyor history``.

"Where is this item right now" must answer in well under half a second, process start
included. psycopg 3 costs ~0.5 s to import here, psycopg2 (a C extension that Airflow's
postgres provider installs anyway) ~0.15 s, so these two primary-key reads use psycopg2.
Everything that writes goes through :class:`conveyor.ledger.store.Ledger`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from conveyor.ledger.connection import describe, resolve_dsn
from conveyor.ledger.errors import LedgerUnavailable, UnknownItem, UnknownWorkflow
from conveyor.ledger.records import ITEM_COLUMNS, TRANSITION_COLUMNS, Item, TransitionRecord
from conveyor.ledger.statuses import as_statuses

if TYPE_CHECKING:
    from psycopg2.extensions import connection


def _connect(dsn: str) -> connection:
    import psycopg2

    try:
        return psycopg2.connect(dsn, connect_timeout=10, application_name="conveyor-cli")
    except psycopg2.OperationalError as exc:
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise LedgerUnavailable(f"cannot reach the ledger database at {describe(dsn)}: {first_line}") from None


def get_item(item_id: str, dsn: str | None = None) -> Item:
    """One item by id, or by a business key that is unique across workflows; raises
    :class:`UnknownItem` naming the closest ids (or every item a bare key could mean)."""
    conn = _connect(resolve_dsn(dsn))
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT {ITEM_COLUMNS} FROM conveyor.items WHERE item_id = %s", (item_id,))
            row = cur.fetchone()
            if row is None:
                found = _find_item_id(cur, item_id)
                cur.execute(f"SELECT {ITEM_COLUMNS} FROM conveyor.items WHERE item_id = %s", (found,))
                row = cur.fetchone()
    finally:
        conn.close()
    if row is None:
        raise UnknownItem(item_id)
    return Item(*row)


def get_history(item_id: str, dsn: str | None = None) -> list[TransitionRecord]:
    """Every transition of an item (by id or unique business key), oldest first; raises
    :class:`UnknownItem` as :func:`get_item` does."""
    conn = _connect(resolve_dsn(dsn))
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM conveyor.items WHERE item_id = %s", (item_id,))
            if cur.fetchone() is None:
                item_id = _find_item_id(cur, item_id)
            cur.execute(
                f"SELECT {TRANSITION_COLUMNS} FROM conveyor.transitions WHERE item_id = %s ORDER BY id",
                (item_id,),
            )
            rows = cur.fetchall()
    finally:
        conn.close()
    return [TransitionRecord(*row) for row in rows]


def check_workflow(name: str, dsn: str | None = None) -> None:
    """Raise :class:`UnknownWorkflow` naming the closest declared names when ``name`` is neither
    declared nor the workflow of any item (a typo must not read as an empty answer)."""
    from conveyor.ledger.workflows import check_name

    check_name(name)
    conn = _connect(resolve_dsn(dsn))
    try:
        with conn.cursor() as cur:
            names = _workflow_names(cur)
            if name in names:
                return
            cur.execute("SELECT 1 FROM conveyor.items WHERE workflow = %s LIMIT 1", (name,))
            if cur.fetchone() is not None:
                return
    finally:
        conn.close()
    raise UnknownWorkflow(f"unknown workflow {name!r}: the ledger has no workflow of that name{_suggest(name, names)}")


def _workflow_names(cur: Any) -> list[str]:
    cur.execute("SELECT DISTINCT name FROM conveyor.workflows ORDER BY name")
    return [row[0] for row in cur.fetchall()]


def _suggest(word: str, names: Sequence[str]) -> str:
    """``; did you mean a or b?`` for the closest of ``names``, else the names there are."""
    import difflib

    close = difflib.get_close_matches(word, names, n=3, cutoff=0.6)
    if close:
        return f"; did you mean {' or '.join(close)}?"
    return f" (workflows: {', '.join(names)})" if names else " (no workflow is declared yet)"


def _find_item_id(cur: Any, ref: str) -> str:
    """The id ``ref`` means when it is not an item id itself: a bare business key found in exactly
    one workflow. Otherwise raises :class:`UnknownItem` with the ids a person probably meant.

    Every read here is by primary key or on the small declarations table, so a miss costs no more
    than a hit on a ledger of millions of items.
    """
    import difflib

    names = _workflow_names(cur)
    if ":" not in ref:
        cur.execute(
            "SELECT item_id FROM conveyor.items WHERE item_id = ANY(%s) ORDER BY item_id",
            ([f"{name}:{ref}" for name in names],),
        )
        found: list[str] = [row[0] for row in cur.fetchall()]
        if len(found) == 1:
            return found[0]
        shape = " (item ids are <workflow>:<business key>)"
        if found:
            raise UnknownItem(ref, f"{shape}; {len(found)} items have the business key {ref!r}: "
                                   f"{', '.join(found)}", tuple(found))  # fmt: skip
        raise UnknownItem(ref, f"{shape}; no workflow has an item with the business key {ref!r}")
    workflow, key = ref.split(":", 1)
    if workflow not in names:
        guesses = [f"{name}:{key}" for name in difflib.get_close_matches(workflow, names, n=3, cutoff=0.6)]
        cur.execute("SELECT item_id FROM conveyor.items WHERE item_id = ANY(%s) ORDER BY item_id", (guesses,))
        found = [row[0] for row in cur.fetchall()]
        if found:
            raise UnknownItem(ref, f"; did you mean {' or '.join(found)}?", tuple(found))
        raise UnknownItem(ref, f"; {workflow!r} is not a workflow{_suggest(workflow, names)}")
    # The ids sorting next to it hold the likely typos of its last characters: two primary-key range
    # reads of five rows each (a filter on the workflow in SQL could scan on past the workflow's end).
    cur.execute(
        "(SELECT item_id FROM conveyor.items WHERE item_id > %s ORDER BY item_id LIMIT 5)"
        " UNION ALL (SELECT item_id FROM conveyor.items WHERE item_id < %s ORDER BY item_id DESC LIMIT 5)",
        (ref, ref),
    )
    same = [row[0] for row in cur.fetchall() if row[0].startswith(f"{workflow}:")]
    near = difflib.get_close_matches(ref, same, n=3, cutoff=0.8)
    raise UnknownItem(ref, f"; did you mean {' or '.join(near)}?" if near else "", tuple(near))


def get_items(
    *,
    workflow: str | None = None,
    run_id: str | None = None,
    status: str | Sequence[str] | None = None,
    limit: int | None = 100,
    dsn: str | None = None,
) -> list[Item]:
    """Items matching every filter given, the newest received first (what ``conveyor items`` lists)."""
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
    """The query of :meth:`Ledger.items`: the newest received first (ties by id).

    With a workflow and no run it reads index ``item_bodies_workflow_received`` in order and stops
    at the limit: the workflow is also named as the first part of the item id, the index's key
    (migration 0019: the index no move writes)."""
    where, params = filters(workflow, run_id, status)
    if workflow is not None and run_id is None:
        where += " AND split_part(item_id, ':', 1) = %s"
        params.append(workflow)
    query = f"SELECT {columns} FROM conveyor.items{where} ORDER BY created_at DESC, item_id"
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
