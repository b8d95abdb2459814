"""The steps of the ``workflow_health`` DAG, callable (and tested) without Airflow.

``measure_all`` reads every active workflow's health and records it; ``evaluate_all`` turns the
snapshots into alerts under each workflow's thresholds and reconciles them with the open ones,
returning the notifications due. Delivery is in :mod:`.notifiers` (it needs Airflow).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from conveyor.ledger.errors import UnknownWorkflow
from conveyor.ledger.store import Ledger
from conveyor.monitoring import metrics
from conveyor.monitoring.accuracy_alerts import accuracy_snapshot
from conveyor.monitoring.alerts import Alert, Thresholds, evaluate
from conveyor.monitoring.snapshot import HealthSnapshot
from conveyor.monitoring.store import AlertEvent, MonitoringStore, Policy

log = logging.getLogger(__name__)


def thresholds_of(ledger: Ledger, config: Mapping[str, Mapping[str, Any]], workflow: str) -> Thresholds:
    """A workflow's thresholds: defaults, its declaration's own, then the run's overrides."""
    return Thresholds.for_workflow(config, workflow, ledger.workflow(workflow).thresholds)


@dataclass(frozen=True)
class Measured:
    """What one measurement produced.

    :param snapshots: one workflow's health each, with its AI steps' accuracy.
    :param seconds: how long the measurement took.
    """

    as_of: datetime
    snapshots: list[HealthSnapshot]
    seconds: float

    def as_xcom(self) -> dict[str, Any]:
        """What ``measure_health`` hands to ``evaluate_health``: the snapshots as JSON."""
        return {"as_of": self.as_of.isoformat(), "snapshots": [s.as_xcom() for s in self.snapshots]}


def measure_all(
    ledger: Ledger,
    config: Mapping[str, Mapping[str, Any]],
    *,
    as_of: datetime | str | None = None,
    workflows: Sequence[str] | None = None,
) -> Measured:
    """Measure every workflow (those with recent activity when ``workflows`` is empty) and record it.

    :param config: thresholds per workflow (see :meth:`Thresholds.for_workflow`).
    :param as_of: end of the measured window (default: now).
    :param workflows: the workflows to measure; empty or None means every active one.
    """
    when = metrics.utc(as_of)
    started = time.monotonic()
    if not workflows:
        # A workflow quiet for longer than its comparison span has no baseline to fall from.
        default = Thresholds.for_workflow(config, "*")
        span = timedelta(hours=default.window_hours) + timedelta(days=default.baseline_days)
        workflows = metrics.active_workflows(ledger, since=when - span)
    snapshots = []
    for workflow in workflows:
        try:
            t = thresholds_of(ledger, config, workflow)
        except UnknownWorkflow as exc:  # items older than declarations, of a DAG that never ran since
            log.warning("not measured: %s", exc)
            continue
        snapshot = metrics.measure(
            ledger,
            workflow,
            as_of=when,
            window_hours=t.window_hours,
            baseline_days=t.baseline_days,
            source_field=t.source_field,
            queue_age_bound_hours=t.queue_age_hours,
        )
        # the AI steps' error of what passed unreviewed, this period and the one before
        accuracy = accuracy_snapshot(ledger, workflow, as_of=when, days=t.accuracy_days)
        snapshots.append(dataclasses.replace(snapshot, accuracy=accuracy))
    MonitoringStore(ledger).save_snapshots(snapshots)
    return Measured(as_of=when, snapshots=snapshots, seconds=time.monotonic() - started)


def evaluate_all(
    ledger: Ledger,
    snapshots: Sequence[HealthSnapshot],
    config: Mapping[str, Mapping[str, Any]],
    *,
    as_of: datetime | str,
    base_url: str = "",
) -> tuple[list[Alert], list[AlertEvent]]:
    """Apply the alert rules to every snapshot and reconcile with the open alerts.

    :returns: every alert found, and the notifications due now (new, repeated or resolved).
    """
    when = metrics.utc(as_of)
    alerts: list[Alert] = []
    policies: dict[str, Policy] = {}
    for snapshot in snapshots:
        t = thresholds_of(ledger, config, snapshot.workflow)
        alerts += evaluate(snapshot, t, base_url=base_url)
        policies[snapshot.workflow] = Policy(
            renotify=timedelta(hours=t.renotify_hours), resolve_after=timedelta(hours=t.resolve_after_hours)
        )
    events = MonitoringStore(ledger).reconcile(
        alerts, workflows=[s.workflow for s in snapshots], as_of=when, policies=policies
    )
    return alerts, events
