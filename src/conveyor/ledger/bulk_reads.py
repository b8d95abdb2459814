"""What a bulk review decision reads: the queue's items a filter selects, and who decided first
the items it could not move.

Which statuses a filter may name, how many items a round takes and what a lost race means is
:mod:`conveyor.review.bulk`'s; this module owns the statements. A filter's items are read through
the partial review index, oldest first, page after page by (``updated_at``, item id). The
functions take an open connection of the store.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg  # the ledger's modules load with the DAGs: the driver only when a statement runs



@dataclass(frozen=True)
class QueuedItem:
    """One item a filter selects, and its place in the order.

    :param updated_at: when it entered its review status (the order's first key).
    """

    item_id: str
    updated_at: datetime


@dataclass(frozen=True)
class LastMove:
    """Who moved an item out of a review status last, and when.

    :param actor: ``reviewer:<name>`` for a person, ``<dag>.<task>#<try>`` for a step.
    """

    actor: str
    at: datetime


def _where(statuses: Sequence[str], workflows: Collection[str], run_id: str | None) -> tuple[str, list[Any]]:
    clause = " WHERE status = ANY(%s) AND workflow = ANY(%s)"
    params: list[Any] = [list(statuses), sorted(workflows)]
    if run_id:
        clause += " AND run_id = %s"
        params.append(run_id)
    return clause, params


def matching_sql(
    statuses: Sequence[str],
    workflows: Collection[str],
    run_id: str | None,
    *,
    limit: int,
    after: tuple[datetime, str] | None = None,
    columns: str = "item_id",
) -> tuple[str, list[Any]]:
    """The query (and its parameters) selecting ``columns`` of the items in ``statuses`` of
    ``workflows`` (and of the run, when given), oldest first, at most ``limit``.

    :param after: only items after this (updated_at, item id) in that order.
    :param columns: ``item_id`` or ``item_id, updated_at`` (the statement's text: only these).
    """
    if columns not in ("item_id", "item_id, updated_at"):
        raise ValueError(f"a filter selects item_id or item_id, updated_at, not {columns!r}")
    where, params = _where(statuses, workflows, run_id)
    query = f"SELECT {columns} FROM conveyor.items{where}"
    if after is not None:
        query += " AND (updated_at, item_id) > (%s, %s)"
        params.extend(after)
    query += " ORDER BY updated_at, item_id LIMIT %s"
    params.append(limit)
    return query, params


def matching_page(
    conn: psycopg.Connection,
    statuses: Sequence[str],
    workflows: Collection[str],
    run_id: str | None,
    *,
    limit: int,
    after: tuple[datetime, str] | None = None,
) -> list[QueuedItem]:
    """The items :func:`matching_sql` selects, with their ``updated_at``."""
    query, params = matching_sql(statuses, workflows, run_id, limit=limit, after=after, columns="item_id, updated_at")
    return [QueuedItem(r[0], r[1]) for r in conn.execute(query, params).fetchall()]


def count_matching(
    conn: psycopg.Connection, statuses: Sequence[str], workflows: Collection[str], run_id: str | None
) -> int:
    """How many items are in ``statuses`` of ``workflows`` (and of the run, when given) now."""
    where, params = _where(statuses, workflows, run_id)
    row = conn.execute(f"SELECT count(*) FROM conveyor.items{where}", params).fetchone()
    return int(row[0]) if row else 0


def last_moves_out_of(
    conn: psycopg.Connection, item_ids: Sequence[str], from_statuses: Sequence[str]
) -> dict[str, LastMove]:
    """item id -> its latest move out of one of ``from_statuses``, in one query (items never moved
    out of them are left out)."""
    rows = conn.execute(
        "SELECT DISTINCT ON (item_id) item_id, actor, at FROM conveyor.transitions"
        " WHERE item_id = ANY(%s) AND from_status = ANY(%s) ORDER BY item_id, id DESC",
        (list(item_ids), list(from_statuses)),
    ).fetchall()
    return {row[0]: LastMove(row[1], row[2]) for row in rows}


__all__ = ["LastMove", "QueuedItem", "count_matching", "last_moves_out_of", "matching_page", "matching_sql"]
