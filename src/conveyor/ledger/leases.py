"""How :meth:`conveyor.ledger.Ledger.claim_chunk` hands a run's waiting items out to sharded steps.

Several task instances of one step (a mapped AI step: ``.expand(shard=range(4))``) work on one
run. Each takes its next chunk with one set-based statement: up to ``limit`` items of the run in
the step's from-status that no live lease keeps, locked with ``FOR UPDATE SKIP LOCKED`` (a
sibling claiming at the same instant skips them instead of waiting), with a lease written or
taken over in ``conveyor.step_leases`` and the ids returned. The row locks end with the claiming
transaction; the lease lasts ``lease_seconds`` (renewed while the chunk is worked on), so a chunk
whose model calls take minutes stays the holder's, and a killed holder's chunk is free again
once its lease expires.

An item is claimable when it has no lease, or its lease is not the claiming attempt's own and
either has expired or belongs to the same holder (a retry of the same shard re-takes the leases
of the killed attempt at once). The attempt that wrote a lease never claims it again, so the
items it deferred (transient model errors) are not handed back to it in a loop.

The lease's ``ON CONFLICT ... WHERE`` re-checks the live lease row, whatever the statement's
snapshot saw: two claims racing for the same item give it to one of them only. The loser sees
fewer ids than it picked (``picked`` tells it so) and claims again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psycopg


@dataclass(frozen=True)
class Holder:
    """Who holds a lease: a task instance and its attempt.

    :param name: the task instance: ``<dag>/<run>/<task>/<map index>``, the same for its retries.
    :param attempt: its try number.
    """

    name: str
    attempt: int


@dataclass(frozen=True)
class Claim:
    """What one claim came to.

    :param item_ids: the items now leased to the claimer, sorted.
    :param picked: how many items the statement picked before the lease check (more than
        ``len(item_ids)`` when a sibling's lease, committed meanwhile, won some).
    """

    item_ids: list[str]
    picked: int


#: A lease the claimer may take: none, or not its own attempt's and expired or its own holder's.
_FREE = (
    "NOT (l.holder = %(holder)s AND l.attempt = %(attempt)s)"
    " AND (l.expires_at < clock_timestamp() OR l.holder = %(holder)s)"
)

CLAIM = f"""
WITH picked AS (
    SELECT i.item_id
    FROM conveyor.item_states i
    WHERE i.workflow = %(workflow)s AND i.run_id = %(run_id)s AND i.status = %(status)s
      AND NOT EXISTS (
          SELECT 1 FROM conveyor.step_leases l
          WHERE l.step = %(step)s AND l.item_id = i.item_id AND NOT ({_FREE})
      )
    LIMIT %(limit)s
    FOR UPDATE OF i SKIP LOCKED
), leased AS (
    INSERT INTO conveyor.step_leases AS l (step, item_id, workflow, holder, attempt, expires_at)
    SELECT %(step)s, item_id, %(workflow)s, %(holder)s, %(attempt)s,
           clock_timestamp() + make_interval(secs => %(lease_seconds)s)
    FROM picked
    ON CONFLICT (step, item_id) DO UPDATE
        SET holder = EXCLUDED.holder, attempt = EXCLUDED.attempt,
            leased_at = clock_timestamp(), expires_at = EXCLUDED.expires_at
        WHERE {_FREE}
    RETURNING item_id
)
SELECT (SELECT count(*) FROM picked), coalesce((SELECT array_agg(item_id ORDER BY item_id) FROM leased), '{{}}')
"""


def params(
    *, workflow: str, run_id: str, status: str, step: str, holder: Holder, limit: int, lease_seconds: float
) -> dict[str, object]:
    """The parameters of :data:`CLAIM` (also what the plan test explains)."""
    return {
        "workflow": workflow,
        "run_id": run_id,
        "status": status,
        "step": step,
        "holder": holder.name,
        "attempt": holder.attempt,
        "limit": limit,
        "lease_seconds": float(lease_seconds),
    }


def claim(
    conn: psycopg.Connection,
    *,
    workflow: str,
    run_id: str,
    status: str,
    step: str,
    holder: Holder,
    limit: int,
    lease_seconds: float,
) -> Claim:
    """Run :data:`CLAIM` once (see :func:`params` for the arguments)."""
    query = params(
        workflow=workflow, run_id=run_id, status=status, step=step, holder=holder, limit=limit,
        lease_seconds=lease_seconds,
    )
    row = conn.execute(CLAIM, query).fetchone()
    assert row is not None
    return Claim(item_ids=list(row[1]), picked=int(row[0]))


def renew(conn: psycopg.Connection, step: str, holder: Holder, lease_seconds: float) -> int:
    """Push the expiry of every lease this attempt holds on the step; returns how many."""
    cur = conn.execute(
        "UPDATE conveyor.step_leases SET expires_at = clock_timestamp() + make_interval(secs => %s)"
        " WHERE step = %s AND holder = %s AND attempt = %s",
        (float(lease_seconds), step, holder.name, holder.attempt),
    )
    return cur.rowcount


def release(conn: psycopg.Connection, step: str, holder: Holder, item_ids: Sequence[str] | None = None) -> int:
    """Drop this attempt's leases on the step (only those of ``item_ids`` when given)."""
    query = "DELETE FROM conveyor.step_leases WHERE step = %s AND holder = %s AND attempt = %s"
    args: list[object] = [step, holder.name, holder.attempt]
    if item_ids is not None:
        query += " AND item_id = ANY(%s)"
        args.append(list(item_ids))
    return conn.execute(query, args).rowcount


def foreign_live(
    conn: psycopg.Connection, *, workflow: str, run_id: str, status: str, step: str, holder: Holder
) -> int:
    """How many of the run's items in ``status`` are under a live lease of another holder."""
    row = conn.execute(
        """
        SELECT count(*) FROM conveyor.item_states i JOIN conveyor.step_leases l
          ON l.step = %(step)s AND l.item_id = i.item_id
        WHERE i.workflow = %(workflow)s AND i.run_id = %(run_id)s AND i.status = %(status)s
          AND l.expires_at >= clock_timestamp() AND l.holder <> %(holder)s
        """,
        {"workflow": workflow, "run_id": run_id, "status": status, "step": step, "holder": holder.name},
    ).fetchone()
    return int(row[0]) if row else 0
