"""HumanReviewSensor in real DAG runs (dag.test(): the trigger runs inline, as a triggerer would
run it) against the real ledger, with reviewers deciding through the review queue meanwhile."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import timedelta

import psycopg
import pytest
import time_machine

from conveyor.ledger import Ledger
from conveyor.review.review_queue import ReviewQueue
from conveyor.review.sensors import Escalation, HumanReviewSensor

WF = "supplier_exceptions"
#: The escalation DAGs' review timeout (tests/dag_fixtures/review_dags.py): far longer than a
#: reviewer takes on a loaded machine; the tests move the clock past it instead of waiting it out.
DEADLINE = 120


def xcom(run, task_id: str, key: str = "return_value"):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.scalars(
            XComModel.get_many(run_id=run.run_id, dag_ids=run.dag_id, task_ids=task_id, key=key)
        ).first()
        return None if row is None else XComModel.deserialize_value(row)


def task_state(run, task_id: str) -> str:
    from airflow.utils.session import create_session

    with create_session() as session:
        return run.get_task_instance(task_id, session=session).state


class Reviewers:
    """People working the queue from another thread while the DAG run waits."""

    def __init__(
        self,
        ledger: Ledger,
        decide: Callable[[ReviewQueue, list[str]], None],
        *,
        wait_for: str | None,
        then_the_deadline_passes: bool = False,
    ):
        self.ledger = ledger
        self.decide = decide
        self.wait_for = wait_for
        self.then_the_deadline_passes = then_the_deadline_passes
        self.clock: time_machine.travel | None = None
        self.error: BaseException | None = None
        self.saw_waiter = False
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _waiter_present(self) -> bool:
        """Whether the sensor is waiting the way it should: a trigger connection, or a rescheduled task."""
        with psycopg.connect(self.ledger.dsn, autocommit=True) as conn:
            if self.wait_for == "trigger":
                return bool(
                    conn.execute(
                        "SELECT count(*) FROM pg_stat_activity"
                        " WHERE application_name = 'conveyor-review-trigger' AND datname = current_database()"
                    ).fetchone()[0]
                )
        return True

    def _run(self) -> None:
        try:
            queue = ReviewQueue(self.ledger)
            end = time.monotonic() + 90
            while time.monotonic() < end:
                waiting = [e.item.item_id for e in queue.list(workflows=[WF]).entries]
                if len(waiting) == 3 and self._waiter_present():
                    self.saw_waiter = True
                    time.sleep(1.0)
                    self.decide(queue, waiting)
                    if self.then_the_deadline_passes:
                        # The step's deadline passes when the test says so, not when a loaded
                        # machine happens to get there: the process's clock jumps past it (the
                        # trigger and the sensor read datetime.now; asyncio's waits keep real time).
                        self.clock = time_machine.travel(timedelta(seconds=DEADLINE + 1), tick=True)
                        self.clock.start()
                    return
                time.sleep(0.2)
            raise AssertionError("the run never routed its items or never waited")
        except BaseException as exc:  # reported by the test
            self.error = exc

    def __enter__(self) -> Reviewers:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.thread.join(timeout=100)
        if self.clock is not None:
            self.clock.stop()
        if self.error:
            raise self.error


def decide_all(queue: ReviewQueue, ids: list[str]) -> None:
    for item_id in ids:
        if item_id.endswith(":P1"):
            queue.decide(item_id, "approve", reviewer="alice", comment="fine")
        elif item_id.endswith(":P2"):
            queue.decide(item_id, "reject", reviewer="bob", comment="duplicate invoice")
        else:
            queue.decide(item_id, "approve", reviewer="alice", comment="accepted as is")


def test_deferrable_sensor_waits_in_the_trigger_until_every_item_is_decided(airflow_db, ledger):
    from tests.dag_fixtures.review_dags import review_deferrable

    with Reviewers(ledger, decide_all, wait_for="trigger") as reviewers:
        run = review_deferrable.test()

    assert reviewers.saw_waiter, "the sensor never waited in its trigger"
    assert run.state == "success"
    summary = xcom(run, "wait_for_review")
    assert summary["outcome"] == "all_decided" and summary["escalation_applied"] is None
    assert summary["needed_review"] == 3 and summary["decided"] == 3 and summary["pending"] == 0
    assert summary["decided_by"] == {"reviewer:alice": 2, "reviewer:bob": 1}
    assert summary["outcomes"] == {"ai_processed": 1, "rejected": 1, "validated": 1}
    assert summary["waited_seconds"] >= 1.0
    assert xcom(run, "downstream") == {"ai_processed": 1, "rejected": 1, "validated": 2}


def test_reschedule_mode_waits_without_a_triggerer(airflow_db, ledger):
    from tests.dag_fixtures.review_dags import review_reschedule

    with Reviewers(ledger, decide_all, wait_for=None):
        run = review_reschedule.test()

    assert run.state == "success"
    summary = xcom(run, "wait_for_review")
    assert summary["outcome"] == "all_decided" and summary["decided"] == 3
    assert summary["waited_seconds"] >= 1.0  # measured from the first reschedule, not the last poke
    from airflow.models.taskreschedule import TaskReschedule
    from airflow.utils.session import create_session
    from sqlalchemy import func, select

    with create_session() as session:
        ti = run.get_task_instance("wait_for_review", session=session)
        reschedules = session.scalar(
            select(func.count()).select_from(TaskReschedule).where(TaskReschedule.ti_id == ti.id)
        )
    assert reschedules >= 1, "the sensor never gave its worker slot back"


def test_timeout_with_escalation_reject_rejects_what_is_left(airflow_db, ledger):
    from tests.dag_fixtures.review_dags import review_escalate_reject

    def decide_one(queue: ReviewQueue, ids: list[str]) -> None:
        queue.decide(next(i for i in ids if i.endswith(":P1")), "approve", reviewer="alice")

    with Reviewers(ledger, decide_one, wait_for="trigger", then_the_deadline_passes=True):
        run = review_escalate_reject.test()

    assert run.state == "success"
    summary = xcom(run, "wait_for_review")
    assert summary["outcome"] == "timed_out" and summary["escalation_applied"] == "reject"
    assert summary["auto_rejected"] == 2 and summary["pending"] == 0
    assert summary["decided_by"] == {"reviewer:alice": 1, "review_escalate_reject.wait_for_review#1": 2}
    assert ledger.get(f"{WF}:P2").status == "rejected"
    last = ledger.history(f"{WF}:Q1")[-1]
    assert last.actor == "review_escalate_reject.wait_for_review#1"
    assert last.reason.startswith("no review decision within 2m00s")
    assert xcom(run, "downstream") == {"ai_processed": 1, "rejected": 2, "validated": 1}


def test_timeout_with_escalation_proceed_goes_on_with_approved_items(airflow_db, ledger):
    from tests.dag_fixtures.review_dags import review_escalate_proceed

    def decide_one(queue: ReviewQueue, ids: list[str]) -> None:
        queue.decide(next(i for i in ids if i.endswith(":P1")), "approve", reviewer="alice")

    with Reviewers(ledger, decide_one, wait_for="trigger", then_the_deadline_passes=True):
        run = review_escalate_proceed.test()

    assert run.state == "success"
    summary = xcom(run, "wait_for_review")
    assert summary["outcome"] == "timed_out" and summary["escalation_applied"] == "proceed"
    assert summary["decided"] == 1 and summary["pending"] == 2 and summary["auto_rejected"] == 0
    assert xcom(run, "downstream") == {
        "ai_processed": 1,
        "pending_review": 1,
        "quarantined": 1,
        "validated": 1,
    }


def test_timeout_with_escalation_fail_fails_and_alerts(airflow_db, ledger, tmp_path, monkeypatch):
    from tests.dag_fixtures.review_dags import review_escalate_fail

    alerts = tmp_path / "alerts.jsonl"
    monkeypatch.setenv("CONVEYOR_TEST_ALERTS", str(alerts))

    run = review_escalate_fail.test()

    assert run.state == "failed"
    assert task_state(run, "wait_for_review") == "failed"
    assert task_state(run, "downstream") == "upstream_failed"
    summary = xcom(run, "wait_for_review", key="review_summary")
    assert summary["outcome"] == "timed_out" and summary["escalation_applied"] == "fail"
    assert summary["pending"] == 3 and summary["decided"] == 0
    alert = json.loads(alerts.read_text().splitlines()[0])
    assert alert["task_id"] == "wait_for_review"
    assert "escalation 'fail'" in alert["error"] and "3 item(s) still waiting" in alert["error"]
    assert ledger.get(f"{WF}:Q1").status == "quarantined"  # the items stay on the queue


def test_sensor_arguments_are_checked():
    with pytest.raises(ValueError, match="escalation must be one of"):
        HumanReviewSensor(task_id="w", workflow=WF, escalation="ignore")
    with pytest.raises(ValueError, match="not both"):
        HumanReviewSensor(task_id="w", workflow=WF, mode="reschedule", deferrable=True)
    assert HumanReviewSensor(task_id="w", workflow=WF).deferrable is True  # [operators] default_deferrable
    assert HumanReviewSensor(task_id="w", workflow=WF, mode="reschedule").deferrable is False


def test_deferrable_follows_operators_default_deferrable_and_never_holds_a_worker_slot(monkeypatch):
    # Airflow's own default is off: the sensor then reschedules between looks instead of poking in a slot.
    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "False")
    sensor = HumanReviewSensor(task_id="w", workflow=WF)
    assert (sensor.deferrable, sensor.mode) == (False, "reschedule")
    poking = HumanReviewSensor(task_id="w", workflow=WF, mode="poke")
    assert (poking.deferrable, poking.mode) == (False, "poke")  # asked for: kept
    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "True")
    deferred = HumanReviewSensor(task_id="w", workflow=WF)
    assert (deferred.deferrable, deferred.mode) == (True, "poke")
    assert HumanReviewSensor(task_id="w", workflow=WF, deferrable=False).mode == "reschedule"


def test_poke_only_looks(airflow_db, ledger):
    """A look changes nothing: a corrected item waits for the step's work before looking, which
    poke never does (it stays 'corrected', and counts as waiting)."""
    from conveyor.ledger.changes import NewItem

    ledger.receive(WF, "run-poke", [NewItem("C1", {"amount": 1})], actor="test")
    ledger.transition(WF, [f"{WF}:C1"], to_status="quarantined", actor="test", reason="bad amount")
    ledger.transition(WF, [f"{WF}:C1"], to_status="corrected", actor="rita", reason="fixed by a reviewer")
    sensor = HumanReviewSensor(task_id="w", workflow=WF, run_id="run-poke")
    assert sensor.poke({}) is False  # an empty context: poke needs none, it only counts
    assert ledger.get(f"{WF}:C1").status == "corrected"
    assert HumanReviewSensor(task_id="w", workflow=WF, escalation="reject").escalation is Escalation.REJECT


def test_a_correction_no_gate_of_the_dag_can_validate_fails_the_step_instead_of_passing_it(airflow_db, ledger):
    """Nothing corrected is ever counted done unvalidated: with no gate to validate it again, the
    review step fails, naming the items and what to do, and the item stays 'corrected'."""
    from tests.dag_fixtures.review_dags import review_reschedule

    def correct_and_decide(queue: ReviewQueue, ids: list[str]) -> None:
        for item_id in ids:
            if item_id.endswith(":Q1"):
                queue.decide(item_id, "correct", reviewer="carol", changes={"amount": 12})
            else:
                queue.decide(item_id, "approve", reviewer="alice")

    with Reviewers(ledger, correct_and_decide, wait_for=None):
        run = review_reschedule.test()

    assert run.state == "failed"
    assert task_state(run, "wait_for_review") == "failed"
    assert ledger.get("supplier_exceptions:Q1").status == "corrected"
    assert ledger.get("supplier_exceptions:Q1").payload == {"key": "Q1", "amount": 12}
