"""Reads of the review queue: its pages, the workflows with items on it, and "where is item X".

Which statuses are on the queue, how large a page may be and how a workflow's priority field is
turned into a value (:func:`conveyor.review.cards.priority_sql`) is :mod:`conveyor.review.review_queue`'s;
this module owns the statements. A page is read through the partial review index. The functions
take an open connection of the store, so a page and its total are read in one transaction.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from conveyor.ledger.records import ITEM_COLUMNS, Item

if TYPE_CHECKING:
    import psycopg  # the ledger's modules load with the DAGs: the driver only when a statement runs


@dataclass(frozen=True)
class QueueRow:
    """One item of a page of the queue.

    :param age_seconds: how long it has been waiting (since its ``updated_at``), by the database clock.
    :param priority_value: the value of its workflow's priority field (None: no such field, or no number).
    """

    item: Item
    age_seconds: float
    priority_value: float | None


def queue_clause(
    params: dict[str, Any], *, statuses: Sequence[str], workflows: Collection[str] | None, run_id: str | None
) -> str:
    """The ``WHERE`` clause of a page (and its count) of the items in ``statuses``; its parameters
    are added to ``params``.

    :param workflows: only these workflows (None: every workflow).
    :param run_id: only items carried by this run (None: every run).
    """
    where = ["status = ANY(%(statuses)s)"]
    params["statuses"] = list(statuses)
    if workflows is not None:
        where.append("workflow = ANY(%(workflows)s)")
        params["workflows"] = sorted(workflows)
    if run_id is not None:
        where.append("run_id = %(run_id)s")
        params["run_id"] = run_id
    return " AND ".join(where)


def page_sql(clause: str, order_value: str) -> str:
    """One page of the queue: the items matching ``clause`` (read through the partial review index),
    ordered by priority, the priority field's value (``order_value``), then age."""
    return (
        f"SELECT {ITEM_COLUMNS}, extract(epoch FROM now() - updated_at)::float8 AS age_seconds,"
        f" {order_value}::float8 AS priority_value"
        f" FROM conveyor.items WHERE {clause}"
        " ORDER BY priority DESC, priority_value DESC NULLS LAST, updated_at ASC, item_id"
        " LIMIT %(limit)s OFFSET %(offset)s"
    )


def page(conn: psycopg.Connection, clause: str, order_value: str, params: dict[str, Any]) -> tuple[int, list[QueueRow]]:
    """(how many items match ``clause``, the page of them :func:`page_sql` reads).

    :param clause: from :func:`queue_clause`.
    :param order_value: an SQL expression over the item's row (the priority field's value).
    :param params: the parameters of both, with ``limit`` and ``offset``.
    """
    from psycopg.rows import dict_row

    with conn.cursor(row_factory=dict_row) as cur:
        total = cur.execute(f"SELECT count(*) AS n FROM conveyor.items WHERE {clause}", params).fetchone()
        rows = cur.execute(page_sql(clause, order_value), params).fetchall()
    entries = []
    for row in rows:
        age = row.pop("age_seconds")
        value = row.pop("priority_value")
        entries.append(QueueRow(Item(**row), age, value))
    return (int(total["n"]) if total else 0), entries


def workflows_with(conn: psycopg.Connection, statuses: Sequence[str]) -> list[str]:
    """The workflows with at least one item in one of ``statuses``, by name."""
    rows = conn.execute(
        "SELECT DISTINCT workflow FROM conveyor.items WHERE status = ANY(%s) ORDER BY workflow",
        (list(statuses),),
    ).fetchall()
    return [r[0] for r in rows]


def search(conn: psycopg.Connection, text: str, *, workflows: Collection[str] | None, limit: int) -> list[Item]:
    """Items whose id or business key is exactly ``text``, newest first (at most ``limit``).

    :param workflows: only these workflows (None: every workflow).
    """
    query = f"SELECT {ITEM_COLUMNS} FROM conveyor.items WHERE (item_id = %(q)s OR business_key = %(q)s)"
    params: dict[str, Any] = {"q": text, "limit": limit}
    if workflows is not None:
        query += " AND workflow = ANY(%(workflows)s)"
        params["workflows"] = sorted(workflows)
    query += " ORDER BY updated_at DESC, item_id LIMIT %(limit)s"
    from psycopg.rows import dict_row

    with conn.cursor(row_factory=dict_row) as cur:
        return [Item(**row) for row in cur.execute(query, params).fetchall()]


__all__ = ["QueueRow", "page", "page_sql", "queue_clause", "search", "workflows_with"]
