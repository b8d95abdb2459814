"""The three steps of a health check, as the ``workflow_health`` DAG (or your own) calls them.

    measure_health   every active workflow, from the ledger: throughput, exception rate and its
                     sources, cycle time by stage, review queue size and age; one snapshot each;
    evaluate_health  the alert rules under each workflow's thresholds (defaults, then its
                     declaration's, then the run's overrides); an open condition is not re-sent
                     every hour;
    notify_health    the due notifications through Airflow notifiers (e-mail, webhook).

Each returns something small and JSON-ready, for XCom.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any


def measure_health(
    thresholds: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    as_of: str | None = None,
    workflows: Sequence[str] = (),
) -> dict[str, Any]:
    """Measure and record every workflow's health; emit the numbers as Airflow metrics.

    :param thresholds: overrides, ``{"*": {...}, "<workflow>": {...}}``.
    :param as_of: the end of the measured window (ISO; default now).
    :param workflows: only these (default: every workflow with recent activity).
    """
    from conveyor.ledger import Ledger
    from conveyor.monitoring.health import measure_all
    from conveyor.monitoring.telemetry import emit_health, emit_measure_time

    measured = measure_all(Ledger(), thresholds or {}, as_of=as_of, workflows=list(workflows))
    for snapshot in measured.snapshots:
        emit_health(snapshot)
    emit_measure_time(timedelta(seconds=measured.seconds))
    return measured.as_xcom()


def evaluate_health(
    measured: Mapping[str, Any], thresholds: Mapping[str, Mapping[str, Any]] | None = None
) -> list[int]:
    """The alert rules over :func:`measure_health`'s snapshots; returns the ids of notifications due."""
    import logging

    from conveyor.ledger import Ledger
    from conveyor.monitoring.health import evaluate_all
    from conveyor.monitoring.snapshot import HealthSnapshot

    try:
        from airflow.sdk.configuration import conf
    except ImportError:  # pragma: no cover - older Task SDKs
        from airflow.configuration import conf
    snapshots = [HealthSnapshot.from_xcom(s) for s in measured["snapshots"]]
    alerts, events = evaluate_all(
        Ledger(), snapshots, thresholds or {}, as_of=measured["as_of"],
        base_url=conf.get("api", "base_url", fallback="") or "",
    )
    log = logging.getLogger(__name__)
    for alert in alerts:
        log.warning("%s %s: %s", alert.severity.upper(), alert.rule, alert.title)
    log.info("%d alert(s) found, %d notification(s) due", len(alerts), len(events))
    return [event.id for event in events]


def notify_health(event_ids: Sequence[int], context: Mapping[str, Any]) -> dict[str, Any]:
    """Send the due notifications; raises when any could not reach a person (so the task retries)."""
    from conveyor.ledger import Ledger
    from conveyor.monitoring.notifiers import deliver
    from conveyor.monitoring.store import MonitoringStore

    store = MonitoringStore(Ledger())
    events = store.events(ids=list(event_ids), limit=len(event_ids)) if event_ids else []
    delivery = deliver(store, list(reversed(events)), context)  # oldest first
    if delivery.failed:
        raise RuntimeError(f"{len(delivery.failed)} alert(s) not delivered: {delivery.failed}")
    return {"sent": delivery.sent, "channels": delivery.channels}
