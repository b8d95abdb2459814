"""workflow_health: every hour, is each Conveyor workflow still producing, and is anyone told if not?

Silence is never success: a workflow that stops completing items, sends more of them to people,
slows down in one stage, or leaves items waiting for a person raises an alert that says what moved,
by how much, compared with what, and where to look.

    measure   every active workflow, from the ledger: throughput, exception rate and its sources,
              cycle time by stage (gate / model / review / approval / publish), review queue size and age
    evaluate  the rules below against each workflow's thresholds; an open condition is not re-sent
              every hour (de-duplicated in the ledger)
    notify    e-mail (connection conveyor_smtp, to Variable conveyor_alert_email) and webhook
              (connection conveyor_alert_webhook)

Counters and timings go to Airflow's metrics backend (StatsD / OpenTelemetry) as ``conveyor.*``.
"""

from __future__ import annotations

import logging
from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Param, task

#: The declared thresholds: "*" for every workflow, then a workflow's own overrides.
THRESHOLDS: dict[str, dict[str, object]] = {
    "*": {
        "window_hours": 24,  # measure the last 24 hours...
        "baseline_days": 7,  # ...against the same hours on each of the previous 7 days
        "zero_output_min_expected": 1,  # nothing completed, where the usual day completes >= 1: alert
        "throughput_drop_share": 0.9,  # completions down 90% or more from the usual: alert
        "throughput_min_expected": 10,  # (only judged when the usual is at least 10 items)
        "exception_rate_bound": 0.15,  # more than 15% of received items to review or quarantine: alert
        "exception_min_items": 20,  # (only judged with at least 20 items received)
        "cycle_growth": 1.5,  # p95 entry-to-completion 1.5x the usual...
        "cycle_min_increase_minutes": 30,  # ...and 30 min longer: alert, naming the bottleneck stage
        "cycle_min_items": 10,
        "queue_age_hours": 24,  # an item waiting for a person longer than a day: alert
        "queue_growth_factor": 3,  # review queue 3x its usual size at this hour...
        "queue_min_size": 10,  # ...and at least 10 items: alert
        "renotify_hours": 24,  # a condition still firing is re-sent once a day, not every hour
        "resolve_after_hours": 2,  # and counts as resolved after 2 clear hours
    },
    "supplier_exceptions": {"source_field": "supplier_id"},
    "invoice_processing": {"source_field": "vendor_id"},
}

RETRY = {"retries": 3, "retry_delay": timedelta(minutes=2), "retry_exponential_backoff": True}

log = logging.getLogger(__name__)


def _as_of(context: dict) -> str:
    """The evaluation time: the ``as_of`` param, else the end of the run's data interval."""
    given = context["params"].get("as_of")
    if given:
        return str(given)
    end = context.get("data_interval_end") or context.get("logical_date") or context["dag_run"].run_after
    return end.isoformat()


def _thresholds(context: dict) -> dict[str, dict[str, object]]:
    """The declared thresholds with a run's overrides on top (an override names only what it changes)."""
    given = context["params"].get("thresholds") or {}
    return {name: {**THRESHOLDS.get(name, {}), **given.get(name, {})} for name in {*THRESHOLDS, *given}}


with DAG(
    dag_id="workflow_health",
    description="Throughput, exceptions, cycle time by stage and queue age per workflow; alerts to a person",
    schedule="@hourly",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=timedelta(minutes=50),
    tags=["conveyor", "monitoring"],
    doc_md=__doc__,
    params={
        "as_of": Param(None, type=["null", "string"], description="evaluate as of this ISO time"),
        "workflows": Param([], type="array", description="workflows to evaluate (empty: every active one)"),
        "thresholds": Param({}, type="object", description="overrides, e.g. {'*': {'queue_age_hours': 8}}"),
    },
) as dag:

    @task(
        **RETRY,
        doc_md="""Measure every active workflow from the ledger, record one snapshot per workflow and hour,
and emit the numbers as Airflow metrics.

Recovery: retry — a read of the ledger plus an upsert keyed by (workflow, hour): a retry or a re-run writes
the same rows, and an unreachable ledger is usually back within minutes.""",
    )
    def measure(**context) -> dict:
        from conveyor.ledger import Ledger
        from conveyor.monitoring.health import measure_all
        from conveyor.monitoring.telemetry import emit_health, emit_measure_time

        measured = measure_all(
            Ledger(), _thresholds(context), as_of=_as_of(context), workflows=context["params"]["workflows"]
        )
        for snapshot in measured.snapshots:
            emit_health(snapshot)
        emit_measure_time(timedelta(seconds=measured.seconds))
        return {"as_of": measured.as_of.isoformat(), "snapshots": measured.snapshots}

    @task(
        **RETRY,
        doc_md="""Apply the alert rules to the snapshots and reconcile them with the open alerts: a new
condition is queued for notification, one still firing only after `renotify_hours`, one clear for
`resolve_after_hours` is resolved.

Recovery: retry — the reconciliation is one transaction under row locks, so a failed attempt changed
nothing and a retry decides again from the same snapshots.""",
    )
    def evaluate(measured: dict, **context) -> list[int]:
        from airflow.sdk.configuration import conf
        from conveyor.ledger import Ledger
        from conveyor.monitoring.health import evaluate_all

        alerts, events = evaluate_all(
            Ledger(),
            measured["snapshots"],
            _thresholds(context),
            as_of=measured["as_of"],
            base_url=conf.get("api", "base_url", fallback="") or "",
        )
        for alert in alerts:
            log.warning("%s %s: %s", alert.severity.upper(), alert.rule, alert.title)
        log.info("%d alert(s) found, %d notification(s) due", len(alerts), len(events))
        return [event.id for event in events]

    @task(
        retries=5,
        retry_delay=timedelta(minutes=5),
        retry_exponential_backoff=True,
        doc_md="""Send the due notifications through Airflow notifiers (SmtpNotifier on `conveyor_smtp` to
the Variable `conveyor_alert_email`; a JSON webhook on `conveyor_alert_webhook`).

Recovery: retry — mail and webhook outages are transient, and a notification is marked sent only when
every channel accepted it, so a retry re-sends exactly the unsent ones; with no channel configured the
task fails, so a person sees that alerts are not reaching anyone.""",
    )
    def notify(event_ids: list[int], **context) -> dict:
        from conveyor.ledger import Ledger
        from conveyor.monitoring.notifiers import deliver
        from conveyor.monitoring.store import MonitoringStore

        store = MonitoringStore(Ledger())
        events = store.events(ids=event_ids, limit=len(event_ids)) if event_ids else []
        delivery = deliver(store, list(reversed(events)), context)  # oldest first
        if delivery.failed:
            raise RuntimeError(f"{len(delivery.failed)} alert(s) not delivered: {delivery.failed}")
        return {"sent": delivery.sent, "channels": delivery.channels}

    notify(evaluate(measure()))
