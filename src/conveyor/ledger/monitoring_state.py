"""Monitoring's state in the ledger database: metric snapshots, alert conditions, notifications.

The tables of migration 0006: ``conveyor.metric_snapshots`` (what each evaluation measured),
``conveyor.alert_state`` (one row per alert condition, keyed by workflow, rule and subject) and
``conveyor.alert_events`` (the notifications to deliver). What a condition's life means (when it
opens, is re-sent, resolves) is :class:`conveyor.monitoring.store.MonitoringStore`'s; this module
owns the statements. The functions take an open connection, so one evaluation's reads and writes
share its transaction (and the row locks :func:`lock_conditions` takes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

#: An alert condition's key: (workflow, rule, subject).
Key = tuple[str, str, str]


@dataclass(frozen=True)
class Condition:
    """One row of ``conveyor.alert_state``.

    :param state: ``firing`` or ``resolved``.
    :param detail: the alert as last found (its ``to_dict()``).
    """

    workflow: str
    rule: str
    subject: str
    state: str
    opened_at: datetime
    last_seen_at: datetime
    last_notified_at: datetime | None
    detail: dict[str, Any]

    @property
    def key(self) -> Key:
        return (self.workflow, self.rule, self.subject)


@dataclass(frozen=True)
class EventRow:
    """One row of ``conveyor.alert_events``, with the opening time of its condition.

    :param alert: the alert as queued (its ``to_dict()``).
    """

    id: int
    kind: str
    alert: dict[str, Any]
    as_of: datetime
    state: str
    opened_at: datetime | None


# -- snapshots -------------------------------------------------------------------------------------


def save_snapshots(conn: psycopg.Connection[Any], rows: Sequence[tuple[str, str, float, str]]) -> None:
    """Record snapshots (re-runs overwrite).

    :param rows: (workflow, as_of, window_hours, metrics as canonical JSON) per workflow.
    """
    conn.execute(
        """
                INSERT INTO conveyor.metric_snapshots (workflow, as_of, window_hours, metrics)
                SELECT * FROM unnest(%s::text[], %s::timestamptz[], %s::float8[], %s::jsonb[])
                ON CONFLICT (workflow, as_of) DO UPDATE
                SET window_hours = EXCLUDED.window_hours, metrics = EXCLUDED.metrics, created_at = now()
                """,
        ([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows]),
    )


def snapshots(
    conn: psycopg.Connection[Any], workflow: str, *, since: datetime, until: datetime
) -> list[dict[str, Any]]:
    """Recorded snapshots of ``workflow`` with ``since <= as_of <= until``, oldest first."""
    rows = conn.execute(
        "SELECT metrics FROM conveyor.metric_snapshots"
        " WHERE workflow = %s AND as_of BETWEEN %s AND %s"
        " ORDER BY as_of",
        (workflow, since, until),
    ).fetchall()
    return [r[0] for r in rows]


# -- alert conditions ------------------------------------------------------------------------------


def lock_conditions(conn: psycopg.Connection[Any], workflows: Sequence[str]) -> dict[Key, Condition]:
    """The conditions of ``workflows``, locked until the transaction ends.

    The row locks serialise two evaluations of the same workflows (a manual run beside the hourly one).
    """
    from psycopg.rows import dict_row

    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(
            "SELECT * FROM conveyor.alert_state WHERE workflow = ANY(%s) FOR UPDATE", (list(workflows),)
        )
        rows = cur.fetchall()
    found = [
        Condition(
            workflow=r["workflow"],
            rule=r["rule"],
            subject=r["subject"],
            state=r["state"],
            opened_at=r["opened_at"],
            last_seen_at=r["last_seen_at"],
            last_notified_at=r["last_notified_at"],
            detail=r["detail"],
        )
        for r in rows
    ]
    return {c.key: c for c in found}


def open_condition(
    conn: psycopg.Connection[Any], key: Key, *, severity: str, title: str, detail: str, as_of: datetime
) -> None:
    """Open (or re-open) a condition as firing since ``as_of``, never notified.

    :param detail: the alert as canonical JSON.
    """
    conn.execute(
        """
                        INSERT INTO conveyor.alert_state (workflow, rule, subject, state, severity, title,
                                                          detail, opened_at, last_seen_at)
                        VALUES (%s, %s, %s, 'firing', %s, %s, %s::jsonb, %s, %s)
                        ON CONFLICT (workflow, rule, subject) DO UPDATE SET
                            state = 'firing', severity = EXCLUDED.severity, title = EXCLUDED.title,
                            detail = EXCLUDED.detail, opened_at = EXCLUDED.opened_at,
                            last_seen_at = EXCLUDED.last_seen_at, last_notified_at = NULL, resolved_at = NULL
                        """,
        (*key, severity, title, detail, as_of, as_of),
    )


def refresh_condition(
    conn: psycopg.Connection[Any], key: Key, *, severity: str, title: str, detail: str, as_of: datetime
) -> None:
    """Record that a firing condition was found again at ``as_of``, as it is now."""
    conn.execute(
        "UPDATE conveyor.alert_state SET last_seen_at = GREATEST(last_seen_at, %s),"
        " severity = %s,"
        " title = %s, detail = %s::jsonb WHERE workflow = %s AND rule = %s AND subject = %s",
        (as_of, severity, title, detail, *key),
    )


def resolve_condition(conn: psycopg.Connection[Any], key: Key, *, as_of: datetime) -> None:
    """Mark a condition resolved at ``as_of``."""
    conn.execute(
        "UPDATE conveyor.alert_state SET state = 'resolved', resolved_at = %s"
        " WHERE workflow = %s AND rule = %s AND subject = %s",
        (as_of, *key),
    )


def firing(conn: psycopg.Connection[Any], workflow: str | None = None) -> list[dict[str, Any]]:
    """Conditions firing now, most severe and oldest first, as JSON-ready rows."""
    from psycopg.rows import dict_row

    query = (
        "SELECT workflow, rule, subject, severity, title, opened_at, last_seen_at, last_notified_at,"
        " notifications, detail FROM conveyor.alert_state WHERE state = 'firing'"
    )
    params: list[Any] = []
    if workflow is not None:
        query += " AND workflow = %s"
        params.append(workflow)
    query += " ORDER BY severity = 'critical' DESC, opened_at, workflow, rule, subject"
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(query, params).fetchall()


# -- notifications ---------------------------------------------------------------------------------


def queue_event(
    conn: psycopg.Connection[Any],
    key: Key,
    *,
    kind: str,
    severity: str,
    title: str,
    alert: str,
    as_of: datetime,
) -> int:
    """Queue a notification of a condition; return its id.

    An older notification of the same condition that never went out is replaced by this one.

    :param alert: the alert as canonical JSON.
    """
    conn.execute(
        "UPDATE conveyor.alert_events SET state = 'superseded'"
        " WHERE workflow = %s AND rule = %s AND subject = %s AND state = 'pending'",
        key,
    )
    row = conn.execute(
        """
            INSERT INTO conveyor.alert_events (workflow, rule, subject, kind, severity, title, alert, as_of)
            VALUES (%s, %s, %s, %s, %s, %s, %s::jsonb, %s) RETURNING id
            """,
        (*key, kind, severity, title, alert, as_of),
    ).fetchone()
    assert row is not None  # an INSERT ... RETURNING returns its row
    event_id: int = row[0]
    return event_id


def events(
    conn: psycopg.Connection[Any],
    *,
    ids: Sequence[int] | None = None,
    workflow: str | None = None,
    state: str | None = None,
    limit: int = 100,
) -> list[EventRow]:
    """Notifications, newest first, filtered by id, workflow and state."""
    from psycopg.rows import dict_row

    clauses: list[str] = ["TRUE"]
    params: list[Any] = []
    if ids is not None:
        clauses.append("e.id = ANY(%s)")
        params.append(list(ids))
    if workflow is not None:
        clauses.append("e.workflow = %s")
        params.append(workflow)
    if state is not None:
        clauses.append("e.state = %s")
        params.append(state)
    params.append(limit)
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            "SELECT e.*, s.opened_at FROM conveyor.alert_events e LEFT JOIN conveyor.alert_state s"
            " USING (workflow, rule, subject) WHERE "
            + " AND ".join(clauses)
            + " ORDER BY e.id DESC LIMIT %s",
            params,
        ).fetchall()
    return [
        EventRow(
            id=r["id"], kind=r["kind"], alert=r["alert"], as_of=r["as_of"], state=r["state"],
            opened_at=r["opened_at"],
        )
        for r in rows
    ]


def mark_sent(
    conn: psycopg.Connection[Any],
    event_id: int,
    channels: Sequence[str],
    *,
    key: Key,
    as_of: datetime,
    counts_as_notified: bool,
) -> bool:
    """Record that every channel accepted the notification; False when it was not pending any more.

    :param key: its condition.
    :param as_of: its evaluation time, recorded as the condition's last notification.
    :param counts_as_notified: a ``resolved`` notification does not move its condition's last
        notification (the condition is over).
    """
    moved = conn.execute(
        "UPDATE conveyor.alert_events SET state = 'sent', sent_at = now(), channels = %s"
        " WHERE id = %s AND state = 'pending' RETURNING id",
        (list(channels), event_id),
    ).fetchone()
    if moved and counts_as_notified:
        conn.execute(
            "UPDATE conveyor.alert_state"
            " SET last_notified_at = GREATEST(COALESCE(last_notified_at, %s), %s),"
            " notifications = notifications + 1 WHERE workflow = %s AND rule = %s AND subject = %s",
            (as_of, as_of, *key),
        )
    return moved is not None


__all__ = [
    "Condition", "EventRow", "Key", "events", "firing", "lock_conditions", "mark_sent", "open_condition",
    "queue_event", "refresh_condition", "resolve_condition", "save_snapshots", "snapshots",
]
