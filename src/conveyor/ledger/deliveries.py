"""What came in and what went out of a workflow: the gate's batches and the outbox, for people.

:class:`Delivery` is one input a gate saw (``conveyor.batches``): accepted, rejected, repeated or
empty, with its reason. :class:`OutboxEntry` is one effect done once (``conveyor.effects``): a
publication with its files, or an item's side effect (a payment) with what the system answered.
:meth:`conveyor.ledger.Ledger.deliveries` and :meth:`~conveyor.ledger.Ledger.outbox` read them;
``conveyor batches`` and ``conveyor outbox`` print them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

#: What a person calls a batch record's stored status (``quarantined`` is a rejected batch).
ACCEPTED, REJECTED, REPEATED, EMPTY = "accepted", "rejected", "repeated", "empty"


@dataclass(frozen=True)
class Delivery:
    """One input a gate of a workflow's run saw, and what the gate made of it.

    :param outcome: ``accepted``, ``rejected``, ``repeated`` (another run had it) or ``empty``
        (no bytes, or no data rows).
    :param kind: the gate's code for a refusal (``missing_columns``, ``stale``...), None when accepted.
    :param rows: data rows read (None when the gate never got to count them).
    :param validated: rows that passed; ``quarantined``: rows sent to a person.
    """

    workflow: str
    run_id: str
    step: str
    outcome: str
    kind: str | None
    source: str | None
    rows: int | None
    validated: int | None
    quarantined: int | None
    reason: str | None
    input_hash: str | None
    at: datetime


@dataclass(frozen=True)
class OutboxEntry:
    """One effect recorded once: a publication of a run, or one item's side effect.

    :param key: the effect's key (an item id, or ``<workflow>:report:<run>`` for a publication).
    :param effect: the step's effect name (``publish_report``, ``pay``...).
    :param state: ``done``, or ``claimed`` (begun; not known to be done: look before redoing it).
    :param where: where it went: the files written, or what the other system answered.
    :param items: how many items a publication held (1 for an item's effect).
    """

    workflow: str
    run_id: str | None
    effect: str
    key: str
    state: str
    where: str
    items: int
    by: str
    claimed_at: datetime
    completed_at: datetime | None
    result: Any


def outcome_of(status: str, kind: str | None) -> str:
    if status == "accepted":
        return ACCEPTED
    if status == "repeated":
        return REPEATED
    return EMPTY if kind == "empty" else REJECTED


def read_deliveries(conn: psycopg.Connection, workflow: str, run_id: str | None, limit: int) -> list[Delivery]:
    """The workflow's batch records, newest first (by primary key prefix: one workflow's runs)."""
    query = (
        "SELECT workflow, run_id, step, status, source, input_hash, reason, detail, updated_at"
        " FROM conveyor.batches WHERE workflow = %s"
    )
    params: list[Any] = [workflow]
    if run_id is not None:
        query += " AND run_id = %s"
        params.append(run_id)
    rows = conn.execute(query + " ORDER BY updated_at DESC, step LIMIT %s", [*params, limit]).fetchall()
    out = []
    for name, run, step, status, source, input_hash, reason, detail, at in rows:
        detail = detail or {}
        summary = detail.get("summary") or {}
        kind = detail.get("kind")
        out.append(Delivery(
            workflow=name, run_id=run, step=step, outcome=outcome_of(status, kind), kind=kind, source=source,
            rows=summary.get("rows"), validated=summary.get("validated"), quarantined=summary.get("quarantined"),
            reason=reason, input_hash=input_hash, at=at,
        ))  # fmt: skip
    return out


@dataclass(frozen=True)
class EarlierBatch:
    """Another run's accepted batch of the same input (see :func:`accepted_elsewhere`)."""

    run_id: str
    at: datetime
    rows: int | None


def accepted_elsewhere(
    conn: psycopg.Connection, workflow: str, step: str, input_hash: str, run_id: str
) -> EarlierBatch | None:
    """The first other run whose gate ``step`` accepted an input with this hash (index ``batches_input``)."""
    row = conn.execute(
        "SELECT run_id, updated_at, detail->'summary'->>'rows' FROM conveyor.batches"
        " WHERE workflow = %s AND step = %s AND input_hash = %s AND run_id <> %s AND status = 'accepted'"
        " ORDER BY updated_at LIMIT 1",
        (workflow, step, input_hash, run_id),
    ).fetchone()
    if row is None:
        return None
    return EarlierBatch(run_id=row[0], at=row[1], rows=int(row[2]) if row[2] is not None else None)


_EFFECT_COLUMNS = "e.item_id, e.step, e.state, e.result, e.claimed_by, e.claimed_at, e.completed_at"


def read_outbox(conn: psycopg.Connection, workflow: str, run_id: str | None, limit: int) -> list[OutboxEntry]:
    """The workflow's effects, newest first.

    With a run: the run's items' effects (index ``item_states_workflow_run_status``, then each effect by
    primary key) and the run's publication (by its key). Without: index ``effects_workflow_claimed``.
    """
    if run_id is not None:
        rows = conn.execute(
            f"SELECT {_EFFECT_COLUMNS}, i.run_id FROM conveyor.items i"
            " JOIN conveyor.effects e ON e.item_id = i.item_id WHERE i.workflow = %s AND i.run_id = %s"
            f" UNION ALL SELECT {_EFFECT_COLUMNS}, %s::text FROM conveyor.effects e WHERE e.item_id = %s"
            " ORDER BY 6 DESC, 1 LIMIT %s",
            (workflow, run_id, run_id, publication_key(workflow, run_id), limit),
        ).fetchall()
    else:
        rows = conn.execute(
            f"SELECT {_EFFECT_COLUMNS}, i.run_id FROM ("
            "  SELECT * FROM conveyor.effects WHERE split_part(item_id, ':', 1) = %s"
            "  ORDER BY split_part(item_id, ':', 1), claimed_at DESC LIMIT %s"
            ") e LEFT JOIN conveyor.items i ON i.item_id = e.item_id ORDER BY e.claimed_at DESC, e.item_id",
            (workflow, limit),
        ).fetchall()
    return [_entry(workflow, *row) for row in rows]


def publication_key(workflow: str, run_id: str) -> str:
    """The outbox key of a run's publication (what ``PublishOperator`` claims)."""
    return f"{workflow}:report:{run_id}"


def _entry(workflow: str, key: str, effect: str, state: str, result: Any, by: str, claimed_at: datetime,
           completed_at: datetime | None, run_id: str | None) -> OutboxEntry:  # fmt: skip
    prefix = f"{workflow}:report:"
    if run_id is None and key.startswith(prefix):
        run_id = key[len(prefix) :]
    items = 1
    if isinstance(result, dict) and isinstance(result.get("files"), list):
        where = ", ".join(str(f) for f in result["files"])
        items = len(result.get("items") or [])
    elif isinstance(result, dict):
        where = ", ".join(f"{k}={v}" for k, v in result.items())
    else:
        where = "" if result is None else str(result)
    return OutboxEntry(workflow=workflow, run_id=run_id, effect=effect, key=key, state=state, where=where,
                       items=items, by=by, claimed_at=claimed_at, completed_at=completed_at, result=result)  # fmt: skip
