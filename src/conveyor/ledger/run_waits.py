"""What a run's review waits on: its items still on the queue, the decisions taken on them, and
the corrected items waiting to be validated again.

Which statuses count as waiting, when a run may go on and what its review step reports is
:mod:`conveyor.review`'s (:mod:`~conveyor.review.run_state`, :mod:`~conveyor.review.pending_counter`,
:mod:`~conveyor.review.revalidation`); this module owns the statements. Each is read through the
index ``item_states_workflow_run_status`` (the decisions through ``transitions``' run index). The
functions take an open connection of the store (:func:`pending_batch` the triggers' shared
asynchronous one), so reads that shared one transaction still do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psycopg  # the ledger's modules load with the DAGs: the driver only when a statement runs


#: One statement for every (workflow, run, step) asked in a batch; each pair is an index range scan
#: of ``item_states_workflow_run_status``.
BATCH_SQL = """
SELECT k.workflow, k.run_id, k.step, count(i.item_id),
       count(i.item_id) FILTER (WHERE i.status = %(corrected)s),
       min(i.updated_at) FILTER (
           WHERE k.step <> '' AND i.status <> %(corrected)s AND NOT EXISTS (
               SELECT 1 FROM conveyor.review_escalations e
               WHERE e.item_id = i.item_id AND e.step = k.step AND e.waiting_since = i.updated_at))
FROM unnest(%(workflows)s::text[], %(run_ids)s::text[], %(steps)s::text[]) AS k(workflow, run_id, step)
LEFT JOIN conveyor.items i
       ON i.workflow = k.workflow AND i.run_id = k.run_id AND i.status = ANY(%(statuses)s::text[])
GROUP BY k.workflow, k.run_id, k.step
"""

#: The gate named by each corrected item's latest move to ``quarantined`` (index ``transitions_item``).
_GATES_SQL = """
SELECT i.item_id, q.gate
FROM conveyor.items i
LEFT JOIN LATERAL (
    SELECT t.detail->>'gate' AS gate FROM conveyor.transitions t
    WHERE t.item_id = i.item_id AND t.to_status = 'quarantined'
    ORDER BY t.id DESC LIMIT 1
) q ON true
WHERE i.workflow = %s AND i.run_id = %s AND i.status = %s
ORDER BY i.item_id
"""


@dataclass(frozen=True)
class ReviewMove:
    """One move of a run's item out of a review status: a decision (a person's or an escalation's).

    :param actor: who moved it (``reviewer:<name>``, ``<dag>.<task>#<try>``).
    :param to_status: where it went.
    """

    item_id: str
    actor: str
    to_status: str


@dataclass(frozen=True)
class PendingRow:
    """How many items of one (workflow, run) still wait, as :func:`pending_batch` counts them.

    :param step: the step asking ('' for none): :attr:`oldest` is counted for it.
    :param waiting: items in one of the asked statuses, ``corrected`` ones included.
    :param corrected: of those, the ones in the corrected status.
    :param oldest: when the longest-waiting item ``step`` has not escalated for its wait entered
        its status (None: none, or no step).
    """

    workflow: str
    run_id: str
    step: str
    waiting: int
    corrected: int
    oldest: datetime | None


@dataclass(frozen=True)
class CorrectedItem:
    """A corrected item and the gate its latest move to ``quarantined`` names.

    :param gate: ``detail.gate`` of that move as recorded (None: the move recorded none).
    """

    item_id: str
    gate: str | None


def pending_count(conn: psycopg.Connection, workflow: str, run_id: str, statuses: Sequence[str]) -> int:
    """How many items of the run are in one of ``statuses`` (one indexed count)."""
    row = conn.execute(
        "SELECT count(*) FROM conveyor.items WHERE workflow = %s AND run_id = %s AND status = ANY(%s::text[])",
        (workflow, run_id, list(statuses)),
    ).fetchone()
    return int(row[0]) if row else 0


def pending_ids(conn: psycopg.Connection, workflow: str, run_id: str, statuses: Sequence[str]) -> list[str]:
    """The ids of the run's items in one of ``statuses``, by item id."""
    rows = conn.execute(
        "SELECT item_id FROM conveyor.items WHERE workflow = %s AND run_id = %s"
        " AND status = ANY(%s::text[]) ORDER BY item_id",
        (workflow, run_id, list(statuses)),
    ).fetchall()
    return [r[0] for r in rows]


def moves_out_of(
    conn: psycopg.Connection, workflow: str, run_id: str, from_statuses: Sequence[str]
) -> list[ReviewMove]:
    """Every move of the run's items out of one of ``from_statuses``, oldest first."""
    rows = conn.execute(
        "SELECT item_id, actor, to_status FROM conveyor.transitions"
        " WHERE workflow = %s AND run_id = %s AND from_status = ANY(%s::text[]) ORDER BY id",
        (workflow, run_id, list(from_statuses)),
    ).fetchall()
    return [ReviewMove(item_id, actor, to_status) for item_id, actor, to_status in rows]


async def pending_batch(
    conn: psycopg.AsyncConnection,
    keys: Sequence[tuple[str, str, str]],
    *,
    statuses: Sequence[str],
    corrected: str,
) -> list[PendingRow]:
    """One row per asked (workflow, run id, step or ''), in one statement (see :data:`BATCH_SQL`).

    :param statuses: the statuses counted as waiting.
    :param corrected: the status counted apart (waiting to be validated again, never escalated).
    """
    cursor = await conn.execute(
        BATCH_SQL,
        {
            "workflows": [k[0] for k in keys],
            "run_ids": [k[1] for k in keys],
            "steps": [k[2] for k in keys],
            "statuses": list(statuses),
            "corrected": corrected,
        },
    )
    rows = await cursor.fetchall()
    return [
        PendingRow(workflow, run_id, step, int(n), int(fixed), oldest)
        for workflow, run_id, step, n, fixed, oldest in rows
    ]


def corrected_gates(conn: psycopg.Connection, workflow: str, run_id: str, status: str) -> list[CorrectedItem]:
    """The run's items in ``status`` (the corrected one), by item id, each with the gate its latest
    move to ``quarantined`` recorded."""
    rows = conn.execute(_GATES_SQL, (workflow, run_id, status)).fetchall()
    return [CorrectedItem(item_id, gate) for item_id, gate in rows]


__all__ = [
    "BATCH_SQL",
    "CorrectedItem",
    "PendingRow",
    "ReviewMove",
    "corrected_gates",
    "moves_out_of",
    "pending_batch",
    "pending_count",
    "pending_ids",
]
