"""workflow_health: every hour, is each Conveyor workflow still producing, and is anyone told if not?

Silence is never success: a workflow that stops completing items, sends more of them to people,
slows down in one stage, or leaves items waiting for a person raises an alert that says what moved,
by how much, compared with what, and where to look.

    measure   every active workflow, from the ledger: throughput, exception rate and its sources,
              cycle time by stage (gate / model / review / approval / publish), review queue size and age
    evaluate  the rules against each workflow's thresholds (the defaults, then what its Workflow
              declaration says, then this run's overrides); an open condition is not re-sent every hour
    notify    e-mail (connection conveyor_smtp, to Variable conveyor_alert_email) and webhook
              (connection conveyor_alert_webhook)

Counters and timings go to Airflow's metrics backend (StatsD / OpenTelemetry) as ``conveyor.*``.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Param, task

from conveyor import evaluate_health, measure_health, notify_health

RETRY = {"retries": 3, "retry_delay": timedelta(minutes=2), "retry_exponential_backoff": True}


def _as_of(context: dict) -> str:
    """The evaluation time: the ``as_of`` param, else the end of the run's data interval, else when
    the run was due (runs triggered with no logical date have no data interval)."""
    given = context["params"].get("as_of")
    if given:
        return str(given)
    end = context.get("data_interval_end") or context["dag_run"].run_after
    return end.isoformat()


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
        params = context["params"]
        return measure_health(params["thresholds"], as_of=_as_of(context), workflows=params["workflows"])

    @task(
        **RETRY,
        doc_md="""Apply the alert rules to the snapshots and reconcile them with the open alerts: a new
condition is queued for notification, one still firing only after `renotify_hours`, one clear for
`resolve_after_hours` is resolved.

Recovery: retry — the reconciliation is one transaction under row locks, so a failed attempt changed
nothing and a retry decides again from the same snapshots.""",
    )
    def evaluate(measured: dict, **context) -> list[int]:
        return evaluate_health(measured, context["params"]["thresholds"])

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
        return notify_health(event_ids, context)

    notify(evaluate(measure()))
