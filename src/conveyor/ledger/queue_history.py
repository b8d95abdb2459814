"""The review queue over time, read from the audit trail: its size, oldest wait and overdue items
at any moment, and who waits in it now (for :mod:`conveyor.monitoring.metrics`).

An item's stay in the queue runs from its move into a review status to its next move; the items
waiting right now are found however long ago they entered. Each function takes an open connection.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from conveyor.ledger.metric_reads import REVIEW

if TYPE_CHECKING:
    import psycopg


@dataclass(frozen=True)
class QueueDetail:
    """The review queue at one moment.

    :param by_status: status -> items waiting in it.
    :param oldest: the longest-waiting items, oldest first (``item_id``, ``status``, ``age_s``,
        ``reason``, ``run_id``).
    """

    by_status: dict[str, int]
    oldest: list[dict[str, Any]]


# Review-queue stays: (item, status, entered, left) for entries since the look-back, plus the items
# waiting right now however long ago they entered. UNION drops the rows both halves produce.
_QUEUE_ENTRIES_CTE = """
entries AS (
    SELECT e.item_id, e.to_status AS status, e.at AS entered,
           (SELECT min(x.at) FROM conveyor.transitions x
             WHERE x.item_id = e.item_id AND (x.at, x.id) > (e.at, e.id)) AS left_at
    FROM conveyor.transitions e
    WHERE e.workflow = %(workflow)s AND e.to_status = ANY(%(review)s)
      AND e.at >= %(since)s AND e.at <= %(until)s
    UNION
    SELECT i.item_id, i.status,
           (SELECT max(x.at) FROM conveyor.transitions x
             WHERE x.item_id = i.item_id AND x.to_status = i.status),
           NULL::timestamptz
    FROM conveyor.items i
    WHERE i.workflow = %(workflow)s AND i.status = ANY(%(review)s)
)
"""

_QUEUE_AT_SQL = f"""
WITH {_QUEUE_ENTRIES_CTE}, moments AS (SELECT unnest(%(times)s::timestamptz[]) AS t)
SELECT m.t, count(e.item_id),
       extract(epoch FROM max(m.t - e.entered))::float8,
       count(e.item_id) FILTER (WHERE m.t - e.entered > %(bound)s)
FROM moments m
LEFT JOIN entries e ON e.entered <= m.t AND (e.left_at IS NULL OR e.left_at > m.t)
GROUP BY m.t ORDER BY m.t
"""

_QUEUE_DETAIL_SQL = f"""
WITH {_QUEUE_ENTRIES_CTE}, waiting AS (
    SELECT * FROM entries e WHERE e.entered <= %(until)s AND (e.left_at IS NULL OR e.left_at > %(until)s)
)
SELECT 'status' AS kind, status AS item_id, status, count(*)::float8 AS value, NULL AS reason, NULL AS run_id
FROM waiting GROUP BY status
UNION ALL
(SELECT 'oldest', w.item_id, w.status, extract(epoch FROM %(until)s - w.entered)::float8, i.reason, i.run_id
 FROM waiting w JOIN conveyor.items i USING (item_id)
 ORDER BY w.entered, w.item_id LIMIT %(oldest)s)
"""

def _queue_params(workflow: str, since: datetime, until: datetime) -> dict[str, Any]:
    return {"workflow": workflow, "review": REVIEW, "since": since, "until": until}



def queue_at(
    conn: psycopg.Connection[Any],
    workflow: str,
    times: Sequence[datetime],
    *,
    since: datetime,
    bound: timedelta,
) -> list[tuple[int, float | None, int]]:
    """(size, oldest age in seconds, items older than bound) of the review queue at each moment, in
    the order given.

    :param times: timezone-aware moments.
    :param since: review-queue stays that ended before this are not searched.
    """
    distinct = sorted({t.astimezone(UTC) for t in times})  # a moment listed twice must not be counted twice
    params = {**_queue_params(workflow, since, distinct[-1]), "times": distinct, "bound": bound}
    rows = {
        t: (size, oldest, over) for t, size, oldest, over in conn.execute(_QUEUE_AT_SQL, params).fetchall()
    }
    return [rows[t.astimezone(UTC)] for t in times]


def queue_detail(
    conn: psycopg.Connection[Any], workflow: str, *, since: datetime, until: datetime, oldest: int
) -> QueueDetail:
    """The review queue at ``until``: its size by status and its ``oldest`` longest waits."""
    rows = conn.execute(_QUEUE_DETAIL_SQL, {**_queue_params(workflow, since, until), "oldest": oldest}).fetchall()
    return QueueDetail(
        by_status={row[2]: int(row[3]) for row in rows if row[0] == "status"},
        oldest=[
            {"item_id": row[1], "status": row[2], "age_s": row[3], "reason": row[4], "run_id": row[5]}
            for row in rows
            if row[0] == "oldest"
        ],
    )
