"""DAGs that drive the side-effect operators over items seeded in the same run."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param, task
from conveyor.effects.operators import ArchiveOperator, PaymentOperator, PublishReportOperator
from conveyor.routing.operators import ApprovalRoutingOperator

START = pendulum.datetime(2026, 1, 1, tz="UTC")

with DAG(
    "effects_publish",
    schedule=None,
    start_date=START,
    params={
        "drafts": Param(["Truck three days late.", "Twelve cartons short."], type="array"),
        "output_dir": Param("", type="string"),
    },
) as publish_dag:

    @task
    def seed_approved(params=None, run_id=None, ti=None):
        from conveyor.ledger import Ledger, NewItem
        from conveyor.ledger.store import ItemUpdate

        ledger = Ledger()
        keys = [f"EX-{n}" for n in range(len(params["drafts"]))]
        ledger.receive(
            "supplier_exceptions",
            run_id,
            [
                NewItem(
                    k,
                    {
                        "supplier_id": f"SUP-000{n % 2}",
                        "supplier_name": f"Supplier {n % 2}",
                        "amount": 100 * (n + 1),
                        "currency": "EUR",
                    },
                )
                for n, k in enumerate(keys)
            ],
            actor="seed",
        )
        ids = [f"supplier_exceptions:{k}" for k in keys]
        ledger.transition("supplier_exceptions", ids, to_status="validated", from_status="received", actor="seed")
        ledger.transition(
            "supplier_exceptions",
            {
                i: ItemUpdate(ai_result={"category": "late_delivery", "draft": d})
                for i, d in zip(ids, params["drafts"], strict=True)
            },
            to_status="ai_processed",
            from_status="validated",
            actor="seed",
        )
        ledger.transition("supplier_exceptions", ids, to_status="approved", from_status="ai_processed", actor="seed")

    seed_approved() >> PublishReportOperator(
        task_id="publish_report",
        workflow="supplier_exceptions",
        title="Supplier exceptions",
        recipients=["procurement@example.com"],
        output_dir="{{ params.output_dir }}",
    )


with DAG(
    "effects_pay",
    schedule=None,
    start_date=START,
    params={
        "inbox": Param("", type="string"),
        "archive": Param("", type="string"),
        "invoices": Param([], type="array"),
    },
) as pay_dag:

    @task
    def seed_classified(params=None, run_id=None):
        from pathlib import Path

        from conveyor.ledger import Ledger, NewItem
        from conveyor.ledger.store import ItemUpdate

        ledger = Ledger()
        wf = "invoice_processing"
        items = []
        for inv in params["invoices"]:
            path = Path(params["inbox"]) / f"{inv['key']}.json"
            items.append(NewItem(inv["key"], {"path": str(path), "name": path.name}))
        ledger.receive(wf, run_id, items, actor="seed")
        ids = [f"{wf}:{inv['key']}" for inv in params["invoices"]]
        ledger.transition(
            wf,
            {
                f"{wf}:{inv['key']}": ItemUpdate(ai_result=inv["fields"], confidence=inv["confidence"])
                for inv in params["invoices"]
            },
            to_status="extracted",
            from_status="received",
            actor="seed",
        )
        ledger.transition(wf, ids, to_status="validated", from_status="extracted", actor="seed")
        ledger.transition(wf, ids, to_status="classified", from_status="validated", actor="seed")

    route = ApprovalRoutingOperator(
        task_id="route",
        workflow="invoice_processing",
        from_status="classified",
        threshold="{{ var.value.get('conveyor_invoice_approval_threshold', 5000) }}",
        min_confidence=0.8,
    )
    pay = PaymentOperator(task_id="pay", workflow="invoice_processing")
    archive = ArchiveOperator(task_id="archive", workflow="invoice_processing", archive_dir="{{ params.archive }}")
    seed_classified() >> route >> pay >> archive
