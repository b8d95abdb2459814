"""Monitoring state in the ledger database: metric snapshots, open alerts and notifications.

De-duplication: an alert condition is keyed by (workflow, rule, subject). The first evaluation that
finds it opens it and queues a ``fired`` notification; later evaluations that still find it only
refresh it, and queue a ``repeated`` notification once ``renotify`` has passed since the last one
that went out. A condition not found for ``resolve_after`` is resolved, with a ``resolved``
notification when people had been told about it. A notification counts as sent only once every
channel accepted it (:meth:`MonitoringStore.mark_sent`), so a failed delivery is retried, never lost.

All times are evaluation times (``as_of``), so re-running an hour gives the same decisions. The
statements are the ledger's (:mod:`conveyor.ledger.monitoring_state`); this module decides.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from conveyor.ledger import monitoring_state as state_rows
from conveyor.ledger.hashing import canonical_json
from conveyor.ledger.store import Ledger
from conveyor.monitoring.alert_model import Alert
from conveyor.monitoring.snapshot import HealthSnapshot


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

    def save_snapshots(self, snapshots: Iterable[HealthSnapshot]) -> int:
        """Record what an evaluation measured (one row per workflow and ``as_of``; re-runs overwrite)."""
        rows = [(s.workflow, s.when, s.window_hours, canonical_json(s.as_xcom())) for s in snapshots]
        if not rows:
            return 0
        with self.ledger.connect() as conn:
            state_rows.save_snapshots(conn, rows)
        return len(rows)

    def snapshots(self, workflow: str, *, since: datetime, until: datetime) -> list[HealthSnapshot]:
        """Recorded snapshots of ``workflow`` with ``since <= as_of <= until``, oldest first."""
        with self.ledger.connect() as conn:
            found = state_rows.snapshots(conn, workflow, since=since, until=until)
        return [HealthSnapshot.from_xcom(s) for s in found]

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
        with self.ledger.connect() as conn:
            # Row locks serialise two evaluations of the same workflows (a manual run beside the hourly one).
            known = state_rows.lock_conditions(conn, evaluated)
            for key, alert in found.items():
                policy = policies.get(alert.workflow, Policy())
                row = known.get(key)
                detail = canonical_json(alert.to_dict())
                if row is None or row.state == "resolved":
                    state_rows.open_condition(
                        conn, key, severity=alert.severity, title=alert.title, detail=detail, as_of=as_of
                    )
                    due.append(("fired", alert, as_of))
                    continue
                state_rows.refresh_condition(
                    conn, key, severity=alert.severity, title=alert.title, detail=detail, as_of=as_of
                )
                last = row.last_notified_at
                if last is None:
                    due.append(("fired", alert, row.opened_at))  # the first notification never went out
                elif as_of - last >= policy.renotify:
                    due.append(("repeated", alert, row.opened_at))
            for key, row in known.items():
                if key in found or row.state != "firing":
                    continue
                policy = policies.get(row.workflow, Policy())
                if as_of - row.last_seen_at < policy.resolve_after:
                    continue  # not clear long enough: a condition flapping at its bound stays one alert
                state_rows.resolve_condition(conn, key, as_of=as_of)
                if row.last_notified_at is not None and policy.notify_resolved:
                    due.append(("resolved", Alert.from_dict(row.detail), row.opened_at))
            events = [
                AlertEvent(
                    id=state_rows.queue_event(
                        conn,
                        alert.key,
                        kind=kind,
                        severity=alert.severity,
                        title=alert.title,
                        alert=canonical_json(alert.to_dict()),
                        as_of=as_of,
                    ),
                    kind=kind,
                    alert=alert,
                    as_of=as_of,
                    state="pending",
                    opened_at=opened,
                )
                for kind, alert, opened in due
            ]
        return events

    def events(
        self,
        *,
        ids: Sequence[int] | None = None,
        workflow: str | None = None,
        state: str | None = None,
        limit: int = 100,
    ) -> list[AlertEvent]:
        """Notifications, newest first, filtered by id, workflow and state."""
        with self.ledger.connect() as conn:
            rows = state_rows.events(conn, ids=ids, workflow=workflow, state=state, limit=limit)
        return [
            AlertEvent(
                id=r.id,
                kind=r.kind,
                alert=Alert.from_dict(r.alert),
                as_of=r.as_of,
                state=r.state,
                opened_at=r.opened_at,
            )
            for r in rows
        ]

    def mark_sent(self, event: AlertEvent, channels: Sequence[str]) -> bool:
        """Record that every channel accepted ``event``; False when it was not pending any more."""
        with self.ledger.connect() as conn:
            return state_rows.mark_sent(
                conn,
                event.id,
                channels,
                key=event.alert.key,
                as_of=event.as_of,
                # a resolved condition is over: its last notification stays the last one it fired
                counts_as_notified=event.kind != "resolved",
            )

    def open_alerts(self, workflow: str | None = None) -> list[dict[str, Any]]:
        """Conditions firing now, most severe and oldest first."""
        with self.ledger.connect() as conn:
            return state_rows.firing(conn, workflow)
