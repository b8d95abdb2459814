"""Which steps a review step runs again for corrected rows: the resumable ledger steps between
the gate and itself, in the DAG's order (end to end: tests/dags/test_supplier_exceptions.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pendulum
from airflow.sdk import DAG, task

from conveyor import AIStepOperator, ApprovalRoutingOperator, HumanReviewSensor, PublishOperator, ValidationGateOperator
from conveyor.review.catch_up import CatchUp, steps_between

WF = "supplier_exceptions"


def build() -> DAG:
    with DAG("catch_up_shape", schedule=None, start_date=pendulum.datetime(2026, 1, 1)) as dag:
        gate = ValidationGateOperator(task_id="validate", workflow=WF, suite="supplier_exceptions", source="x.csv")
        inputs = HumanReviewSensor(task_id="review_inputs", workflow=WF)
        classify = AIStepOperator(task_id="classify", workflow=WF, ai_task="classify_exception")

        @task
        def enrich() -> None:
            """A step of the user's own: not resumable as far as Conveyor knows."""

        route = ApprovalRoutingOperator(task_id="route", workflow=WF, from_status="ai_processed",
                                        amount_field="amount", threshold=1000)  # fmt: skip
        review = HumanReviewSensor(task_id="review_late", workflow=WF)
        publish = PublishOperator(task_id="publish", workflow=WF, templates=["t.md.j2"])
        gate >> inputs >> classify >> enrich() >> route >> review >> publish
    return dag


def context_of(dag: DAG, task_id: str) -> dict:
    return {"ti": SimpleNamespace(task=dag.get_task(task_id))}


def test_the_late_review_runs_the_resumable_steps_after_the_gate_in_order_and_names_the_others():
    dag = build()
    resumable, others = steps_between(context_of(dag, "review_late"), ["validate"])
    assert [t.task_id for t in resumable] == ["classify", "route"]  # not the sensors, not publish
    assert others == ["enrich"]


def test_a_review_right_after_the_gate_runs_nothing_again():
    dag = build()
    assert steps_between(context_of(dag, "review_inputs"), ["validate"]) == ([], [])


def test_the_outcome_says_what_ran_and_what_a_person_should_check():
    text = CatchUp(ran={"classify": {}}, skipped=["enrich"]).describe()
    assert "ran classify again" in text and "not run again (check the corrected items against them): enrich" in text
