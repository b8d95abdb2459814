"""Escalations per item age: the ``conveyor.review_escalations`` rows, one per (item, step, wait).

When an item has waited too long, what the step does about it and what a person is told is
:mod:`conveyor.review.item_escalation`'s; this module owns the statements. An escalation is
recorded once per wait (the table's primary key), whichever attempt of the step gets there first.
The functions take an open connection of the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psycopg  # the ledger's modules load with the DAGs: the driver only when a statement runs


#: Items of the run on the queue since before the cut-off, not escalated by this step for this wait
#: (index ``item_states_workflow_run_status``; the escalations' primary key).
_OVERDUE_SQL = """
SELECT i.item_id, i.status, i.updated_at, i.reason
FROM conveyor.items i
WHERE i.workflow = %(workflow)s AND i.run_id = %(run_id)s AND i.status = ANY(%(statuses)s::text[])
  AND i.updated_at <= %(cutoff)s
  AND NOT EXISTS (
      SELECT 1 FROM conveyor.review_escalations e
      WHERE e.item_id = i.item_id AND e.step = %(step)s AND e.waiting_since = i.updated_at)
ORDER BY i.updated_at, i.item_id
"""

#: Records the escalation of each item's wait (once: the primary key).
_RECORD_SQL = """
INSERT INTO conveyor.review_escalations (item_id, step, waiting_since, workflow, run_id, action)
SELECT x.item_id, %(step)s, x.since, %(workflow)s, %(run_id)s, %(action)s
FROM unnest(%(ids)s::text[], %(since)s::timestamptz[]) AS x(item_id, since)
ON CONFLICT DO NOTHING
"""


@dataclass(frozen=True)
class OverdueItem:
    """An item of the run that has waited longer than the step allows.

    :param waiting_since: when it entered its review status (its ``updated_at``): the wait an
        escalation ends.
    :param reason: why it waits (the item's reason).
    """

    item_id: str
    status: str
    waiting_since: datetime
    reason: str | None

    def waited(self, now: datetime) -> timedelta:
        return now - self.waiting_since


def overdue(
    conn: psycopg.Connection,
    *,
    workflow: str,
    run_id: str,
    step: str,
    statuses: Sequence[str],
    cutoff: datetime,
) -> list[OverdueItem]:
    """Items of the run in one of ``statuses`` since ``cutoff`` or earlier that ``step`` has not
    escalated for this wait, longest waiting first.

    :param statuses: the statuses that are a wait for a person.
    """
    params = {"workflow": workflow, "run_id": run_id, "statuses": list(statuses), "cutoff": cutoff, "step": step}
    rows = conn.execute(_OVERDUE_SQL, params).fetchall()
    return [OverdueItem(r[0], r[1], r[2], r[3]) for r in rows]


def record(
    conn: psycopg.Connection, items: Sequence[OverdueItem], *, workflow: str, run_id: str, step: str, action: str
) -> None:
    """Record that ``step`` escalated each item's wait with ``action`` (a wait already recorded is
    left as it is).

    :param action: what the escalation did (``alert``, ``reject``).
    """
    conn.execute(
        _RECORD_SQL,
        {
            "step": step,
            "workflow": workflow,
            "run_id": run_id,
            "action": action,
            "ids": [o.item_id for o in items],
            "since": [o.waiting_since for o in items],
        },
    )


def counts_by_action(conn: psycopg.Connection, workflow: str, run_id: str, step: str) -> dict[str, int]:
    """action -> how many item waits ``step`` escalated that way in the run."""
    rows = conn.execute(
        "SELECT action, count(*) FROM conveyor.review_escalations"
        " WHERE workflow = %s AND run_id = %s AND step = %s GROUP BY action ORDER BY action",
        (workflow, run_id, step),
    ).fetchall()
    return {action: int(n) for action, n in rows}


__all__ = ["OverdueItem", "counts_by_action", "overdue", "record"]
