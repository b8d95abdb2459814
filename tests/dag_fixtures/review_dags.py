"""DAGs the review tests run with dag.test(): items routed to review, then a HumanReviewSensor.

Each DAG's first task routes items of its own run to review as the gate and the AI step would:
two ``pending_review`` (doubtful AI output), one ``quarantined`` (failed the gate), one passed.
Reviewers decide from the test, through the review queue, while the sensor waits.
"""

from __future__ import annotations

import json
import os
from datetime import timedelta

import pendulum
from airflow.sdk import DAG, task

from conveyor.review.sensors import HumanReviewSensor

WORKFLOW = "supplier_exceptions"
START = pendulum.datetime(2026, 1, 1, tz="UTC")


@task
def route_items(run_id: str | None = None) -> list[str]:
    """Receive four items for this run and route three of them to review."""
    from conveyor.ledger import Ledger, NewItem
    from conveyor.ledger.store import ItemUpdate

    ledger = Ledger()
    keys = ["P1", "P2", "Q1", "OK1"]
    ledger.receive(WORKFLOW, run_id, [NewItem(k, {"key": k, "amount": 10}) for k in keys], actor="fixture.route#1")
    ids = {k: f"{WORKFLOW}:{k}" for k in keys}
    ledger.transition(WORKFLOW, [ids["Q1"]], to_status="quarantined", actor="fixture.gate#1", reason="bad row")
    ledger.transition(WORKFLOW, [ids["P1"], ids["P2"], ids["OK1"]], to_status="validated", actor="fixture.gate#1")
    ledger.transition(
        WORKFLOW,
        {
            ids[k]: ItemUpdate(reason="low confidence", confidence=0.3, review_target="ai_processed")
            for k in ("P1", "P2")
        },
        to_status="pending_review",
        actor="fixture.ai#1",
    )
    return sorted(ids.values())


@task
def downstream(run_id: str | None = None) -> dict[str, int]:
    """What a publish step would see: the run's items per status."""
    from conveyor.ledger import Ledger

    return Ledger().count_by_status(workflow=WORKFLOW, run_id=run_id)


def record_alert(context) -> None:
    """A failure callback standing in for a notifier: writes the alert where the test reads it."""
    path = os.environ.get("CONVEYOR_TEST_ALERTS")
    if path:
        ti = context["ti"]
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"task_id": ti.task_id, "run_id": ti.run_id, "error": str(context.get("exception"))}))
            out.write("\n")


def _review_dag(dag_id: str, **sensor_kwargs) -> DAG:
    with DAG(dag_id, schedule=None, start_date=START, catchup=False, tags=["conveyor-tests"]) as dag:
        wait = HumanReviewSensor(task_id="wait_for_review", workflow=WORKFLOW, **sensor_kwargs)
        route_items() >> wait >> downstream()
    return dag


#: Deferrable (the default): waits in the trigger until every item is decided.
review_deferrable = _review_dag("review_deferrable", poke_interval=0.5, timeout=timedelta(minutes=2))

#: No triggerer: reschedule mode, one look per poke interval.
review_reschedule = _review_dag("review_reschedule", mode="reschedule", poke_interval=1, timeout=timedelta(minutes=2))

#: Timeouts with each declared escalation. With a reviewer deciding first, the test moves the clock
#: past the 2-minute deadline (tests/review/test_sensors.py); with nobody, 2 s pass by themselves.
review_escalate_reject = _review_dag("review_escalate_reject", poke_interval=0.5, timeout=120, escalation="reject")
review_escalate_proceed = _review_dag("review_escalate_proceed", poke_interval=0.5, timeout=120, escalation="proceed")
review_escalate_fail = _review_dag(
    "review_escalate_fail", poke_interval=0.5, timeout=2, escalation="fail", on_failure_callback=record_alert
)

#: Escalation per item age: each item is rejected (or fails the step) once it waited 1.5 s.
review_item_reject = _review_dag(
    "review_item_reject", poke_interval=30, timeout=timedelta(minutes=2), item_timeout=1.5, item_escalation="reject"
)
review_item_fail = _review_dag(
    "review_item_fail", poke_interval=30, timeout=timedelta(minutes=2), item_timeout=1.5, item_escalation="fail"
)
