"""Monitoring state in the ledger database: metric snapshots, open alerts and notifications.

De-duplication: an alert condition is keyed by (workflow, rule, subject). The first evaluation that
finds it opens it and queues a ``fired`` notification; later evaluations that still find it only
refresh it, and queue a ``repeated`` notification once ``renotify`` has passed since the last one
that went out. A condition not found for ``resolve_after`` is resolved, with a ``resolved``
notification when people had been told about it. A notification counts as sent only once every
channel accepted it (:meth:`MonitoringStore.mark_sent`), so a failed delivery is retried, never lost.

All times are evaluation times (``as_of``), so re-running an hour gives the same decisions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from psycopg.rows import dict_row

from conveyor.ledger.store import Ledger, canonical_json
from conveyor.monitoring.alerts import Alert


@dataclass(frozen=True)
class Policy:
    """How often one workflow's conditions are re-sent and how long they must clear.

    :param renotify: a condition still firing is sent again after this long.
    :param resolve_after: a condition not seen for this long is resolved.
    :param notify_resolved: send a notification when a condition people were told about clears.
    """

    renotify: timedelta = timedelta(hours=24)
    resolve_after: timedelta = timedelta(hours=2)
    notify_resolved: bool = True


@dataclass(frozen=True)
class AlertEvent:
    """A notification to deliver (or delivered)."""

    id: int
    kind: str
    alert: Alert
    as_of: datetime
    state: str
    opened_at: datetime | None = None


class MonitoringStore:
    """Reads and writes of the monitoring tables (migration 0006) through the ledger's connection.

    :param ledger: the ledger whose database holds the tables.
    """

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    # -- snapshots ---------------------------------------------------------------------------

    def save_snapshots(self, snapshots: Iterable[Mapping[str, Any]]) -> int:
        """Record what an evaluation measured (one row per workflow and ``as_of``; re-runs overwrite)."""
        rows = [(s["workflow"], s["as_of"], s["window_hours"], canonical_json(s)) for s in snapshots]
        if not rows:
            return 0
        with self.ledger.connect() as conn:
            conn.execute(
                """
                INSERT INTO conveyor.metric_snapshots (workflow, as_of, window_hours, metrics)
                SELECT * FROM unnest(%s::text[], %s::timestamptz[], %s::float8[], %s::jsonb[])
                ON CONFLICT (workflow, as_of) DO UPDATE
                SET window_hours = EXCLUDED.window_hours, metrics = EXCLUDED.metrics, created_at = now()
                """,
                ([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows]),
            )
        return len(rows)

    def snapshots(self, workflow: str, *, since: datetime, until: datetime) -> list[dict[str, Any]]:
        """Recorded snapshots of ``workflow`` with ``since <= as_of <= until``, oldest first."""
        with self.ledger.connect() as conn:
            rows = conn.execute(
                "SELECT metrics FROM conveyor.metric_snapshots"
                " WHERE workflow = %s AND as_of BETWEEN %s AND %s"
                " ORDER BY as_of",
                (workflow, since, until),
            ).fetchall()
        return [r[0] for r in rows]

    # -- alert state -------------------------------------------------------------------------

    def reconcile(
        self,
        alerts: Sequence[Alert],
        *,
        workflows: Iterable[str],
        as_of: datetime,
        policies: Mapping[str, Policy] | None = None,
    ) -> list[AlertEvent]:
        """Apply one evaluation's alerts to the open conditions; return the notifications now due.

        :param alerts: every alert this evaluation found.
        :param workflows: the workflows that were evaluated (a condition of a workflow not
            evaluated this time is left alone).
        :param as_of: the evaluation time.
        :param policies: workflow -> :class:`Policy` (default policy for a workflow not listed).
        """
        policies = policies or {}
        evaluated = sorted(set(workflows) | {a.workflow for a in alerts})
        found = {a.key: a for a in alerts}
        due: list[tuple[str, Alert, datetime | None]] = []
        with self.ledger.connect() as conn, conn.cursor(row_factory=dict_row) as cur:
            # Row locks serialise two evaluations of the same workflows (a manual run beside the hourly one).
            cur.execute(
                "SELECT * FROM conveyor.alert_state WHERE workflow = ANY(%s) FOR UPDATE", (evaluated,)
            )
            known = {(r["workflow"], r["rule"], r["subject"]): r for r in cur.fetchall()}
            for key, alert in found.items():
                policy = policies.get(alert.workflow, Policy())
                row = known.get(key)
                if row is None or row["state"] == "resolved":
                    cur.execute(
                        """
                        INSERT INTO conveyor.alert_state (workflow, rule, subject, state, severity, title,
                                                          detail, opened_at, last_seen_at)
                        VALUES (%s, %s, %s, 'firing', %s, %s, %s::jsonb, %s, %s)
                        ON CONFLICT (workflow, rule, subject) DO UPDATE SET
                            state = 'firing', severity = EXCLUDED.severity, title = EXCLUDED.title,
                            detail = EXCLUDED.detail, opened_at = EXCLUDED.opened_at,
                            last_seen_at = EXCLUDED.last_seen_at, last_notified_at = NULL, resolved_at = NULL
                        """,
                        (*key, alert.severity, alert.title, canonical_json(alert.to_dict()), as_of, as_of),
                    )
                    due.append(("fired", alert, as_of))
                    continue
                cur.execute(
                    "UPDATE conveyor.alert_state SET last_seen_at = GREATEST(last_seen_at, %s),"
                    " severity = %s,"
                    " title = %s, detail = %s::jsonb WHERE workflow = %s AND rule = %s AND subject = %s",
                    (as_of, alert.severity, alert.title, canonical_json(alert.to_dict()), *key),
                )
                last = row["last_notified_at"]
                if last is None:
                    due.append(("fired", alert, row["opened_at"]))  # the first notification never went out
                elif as_of - last >= policy.renotify:
                    due.append(("repeated", alert, row["opened_at"]))
            for key, row in known.items():
                if key in found or row["state"] != "firing":
                    continue
                policy = policies.get(row["workflow"], Policy())
                if as_of - row["last_seen_at"] < policy.resolve_after:
                    continue  # not clear long enough: a condition flapping at its bound stays one alert
                cur.execute(
                    "UPDATE conveyor.alert_state SET state = 'resolved', resolved_at = %s"
                    " WHERE workflow = %s AND rule = %s AND subject = %s",
                    (as_of, *key),
                )
                if row["last_notified_at"] is not None and policy.notify_resolved:
                    due.append(("resolved", Alert.from_dict(row["detail"]), row["opened_at"]))
            events = [self._queue_event(cur, kind, alert, as_of, opened) for kind, alert, opened in due]
        return events

    @staticmethod
    def _queue_event(
        cur: Any, kind: str, alert: Alert, as_of: datetime, opened_at: datetime | None
    ) -> AlertEvent:
        # An older notification of the same condition that never went out is replaced by this one.
        cur.execute(
            "UPDATE conveyor.alert_events SET state = 'superseded'"
            " WHERE workflow = %s AND rule = %s AND subject = %s AND state = 'pending'",
            alert.key,
        )
        row = cur.execute(
            """
            INSERT INTO conveyor.alert_events (workflow, rule, subject, kind, severity, title, alert, as_of)
            VALUES (%s, %s, %s, %s, %s, %s, %s::jsonb, %s) RETURNING id
            """,
            (*alert.key, kind, alert.severity, alert.title, canonical_json(alert.to_dict()), as_of),
        ).fetchone()
        return AlertEvent(
            id=row["id"], kind=kind, alert=alert, as_of=as_of, state="pending", opened_at=opened_at
        )

    def events(
        self,
        *,
        ids: Sequence[int] | None = None,
        workflow: str | None = None,
        state: str | None = None,
        limit: int = 100,
    ) -> list[AlertEvent]:
        """Notifications, newest first, filtered by id, workflow and state."""
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
        with self.ledger.connect() as conn, conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(
                "SELECT e.*, s.opened_at FROM conveyor.alert_events e LEFT JOIN conveyor.alert_state s"
                " USING (workflow, rule, subject) WHERE "
                + " AND ".join(clauses)
                + " ORDER BY e.id DESC LIMIT %s",
                params,
            ).fetchall()
        return [
            AlertEvent(
                id=r["id"],
                kind=r["kind"],
                alert=Alert.from_dict(r["alert"]),
                as_of=r["as_of"],
                state=r["state"],
                opened_at=r["opened_at"],
            )
            for r in rows
        ]

    def mark_sent(self, event: AlertEvent, channels: Sequence[str]) -> bool:
        """Record that every channel accepted ``event``; False when it was not pending any more."""
        with self.ledger.connect() as conn:
            moved = conn.execute(
                "UPDATE conveyor.alert_events SET state = 'sent', sent_at = now(), channels = %s"
                " WHERE id = %s AND state = 'pending' RETURNING id",
                (list(channels), event.id),
            ).fetchone()
            if moved and event.kind != "resolved":
                conn.execute(
                    "UPDATE conveyor.alert_state"
                    " SET last_notified_at = GREATEST(COALESCE(last_notified_at, %s), %s),"
                    " notifications = notifications + 1 WHERE workflow = %s AND rule = %s AND subject = %s",
                    (event.as_of, event.as_of, *event.alert.key),
                )
        return moved is not None

    def open_alerts(self, workflow: str | None = None) -> list[dict[str, Any]]:
        """Conditions firing now, most severe and oldest first."""
        query = (
            "SELECT workflow, rule, subject, severity, title, opened_at, last_seen_at, last_notified_at,"
            " notifications, detail FROM conveyor.alert_state WHERE state = 'firing'"
        )
        params: list[Any] = []
        if workflow is not None:
            query += " AND workflow = %s"
            params.append(workflow)
        query += " ORDER BY severity = 'critical' DESC, opened_at, workflow, rule, subject"
        with self.ledger.connect() as conn, conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(query, params).fetchall()
