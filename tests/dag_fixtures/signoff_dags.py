"""A DAG the sign-off tests run with dag.test(): drafted items, the director's sign-off with a
preview of the report, then the publication it approves."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param, task

from conveyor import PromoteItemsOperator, PublishOperator, SignOffOperator

WORKFLOW = "supplier_exceptions"
START = pendulum.datetime(2026, 1, 1, tz="UTC")

with DAG(
    "signoff_preview",
    schedule=None,
    start_date=START,
    params={"drafts": Param(["Truck three days late.", "Twelve cartons short."], type="array")},
) as signoff_dag:

    @task
    def seed_drafted(params=None, run_id=None):
        """Items of this run with the AI step's drafts, waiting for the sign-off (ai_processed)."""
        from conveyor.ledger import Ledger, NewItem
        from conveyor.ledger.store import ItemUpdate

        ledger = Ledger()
        keys = [f"EX-{n}" for n in range(len(params["drafts"]))]
        ledger.receive(
            WORKFLOW,
            run_id,
            [NewItem(k, {"supplier_id": "SUP-1", "amount": 100 * (n + 1), "currency": "EUR"})
             for n, k in enumerate(keys)],
            actor="seed",
        )
        ids = [f"{WORKFLOW}:{k}" for k in keys]
        ledger.transition(WORKFLOW, ids, to_status="validated", from_status="received", actor="seed")
        ledger.transition(
            WORKFLOW,
            {i: ItemUpdate(ai_result={"draft": d}) for i, d in zip(ids, params["drafts"], strict=True)},
            to_status="ai_processed",
            from_status="validated",
            actor="seed",
        )

    signoff = SignOffOperator(
        task_id="director_signoff",
        workflow=WORKFLOW,
        status="ai_processed",
        preview="publish_report",
        subject="Report of run {{ run_id }}: approve?",
    )
    approve = PromoteItemsOperator(
        task_id="approve_items", workflow=WORKFLOW, from_status="ai_processed", to_status="approved",
        reason="signed off",
    )
    publish = PublishOperator(
        task_id="publish_report",
        workflow=WORKFLOW,
        templates=["templates/report.md.j2", "templates/report.html.j2"],  # next to this DAG file
        title="Supplier exceptions {{ dag_run.run_after | ds }}",
        required_fields=["ai_result.draft"],
    )
    seed_drafted() >> signoff >> approve >> publish
