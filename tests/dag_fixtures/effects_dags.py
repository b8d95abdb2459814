"""DAGs that drive the side-effect operators over items seeded in the same run."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param, task

from conveyor import ApprovalRoutingOperator, ArchiveOperator, EffectOutcome, ItemEffectOperator, PublishOperator
from conveyor_examples.invoices import PayInvoicesOperator

START = pendulum.datetime(2026, 1, 1, tz="UTC")

with DAG(
    "effects_publish",
    schedule=None,
    start_date=START,
    params={
        "drafts": Param(["Truck three days late.", "Twelve cartons short."], type="array"),
        "output_folder": Param("", type="string"),
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

    seed_approved() >> PublishOperator(
        task_id="publish_report",
        workflow="supplier_exceptions",
        templates=["templates/report.md.j2"],  # next to this DAG file
        title="Supplier exceptions {{ dag_run.run_after | ds }}",
        recipients=["procurement@example.com"],
        required_fields=["ai_result.draft"],
        output_folder="{{ params.output_folder or None }}",
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
    pay = PayInvoicesOperator(task_id="pay", workflow="invoice_processing", from_status="approved",
                              to_status="paid")
    archive = ArchiveOperator(task_id="archive", workflow="invoice_processing", from_status="paid",
                              to_status="archived", archive_folder="{{ params.archive }}")
    seed_classified() >> route >> pay >> archive


class NotifyOnce(ItemEffectOperator):
    """A side effect of the tests' own: a row per item in a table, refused for items marked so."""

    effect = "notify"

    def apply(self, items, context):  # type: ignore[no-untyped-def]
        from conveyor import Ledger

        outcome = EffectOutcome()
        with Ledger().connect() as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS public.notified (item_id text PRIMARY KEY, key text)")
            for item in items:
                if item.payload.get("refuse"):
                    outcome.refused[item.item_id] = "the recipient refused it"
                elif not item.payload.get("forget"):
                    conn.execute("INSERT INTO public.notified VALUES (%s, %s)", (item.item_id, item.idempotency_key))
                    outcome.done[item.item_id] = {"notified": True}
        return outcome


with DAG("effects_per_item", schedule=None, start_date=START, params={"items": Param([], type="array")}) as item_dag:

    @task
    def seed_approved_items(params=None, run_id=None):
        from conveyor.ledger import Ledger, NewItem

        ledger = Ledger()
        wf = "supplier_exceptions"
        ledger.receive(wf, run_id, [NewItem(i["key"], i) for i in params["items"]], actor="seed")
        ids = [f"{wf}:{i['key']}" for i in params["items"]]
        for before, after in (("received", "validated"), ("validated", "ai_processed"), ("ai_processed", "approved")):
            ledger.transition(wf, ids, to_status=after, from_status=before, actor="seed")

    seed_approved_items() >> NotifyOnce(task_id="notify", workflow="supplier_exceptions", from_status="approved",
                                        to_status="published", retries=0)


with DAG(
    "effects_publish_grouped",
    schedule=None,
    start_date=START,
    params={"rows": Param([], type="array"), "output_folder": Param("", type="string")},
) as grouped_dag:

    @task
    def seed_rows(params=None, run_id=None):
        """Approved items with the given payloads (``key``, ``supplier_id``, ``amount``) and a draft each."""
        from conveyor.ledger import Ledger, NewItem
        from conveyor.ledger.store import ItemUpdate

        ledger, wf = Ledger(), "supplier_exceptions"
        ledger.receive(wf, run_id, [NewItem(r["key"], r) for r in params["rows"]], actor="seed")
        ids = [f"{wf}:{r['key']}" for r in params["rows"]]
        ledger.transition(wf, ids, to_status="validated", from_status="received", actor="seed")
        ledger.transition(wf, {i: ItemUpdate(ai_result={"draft": f"Draft of {i}."}) for i in ids},
                          to_status="ai_processed", from_status="validated", actor="seed")
        ledger.transition(wf, ids, to_status="approved", from_status="ai_processed", actor="seed")

    seed_rows() >> PublishOperator(
        task_id="publish_report",
        workflow="supplier_exceptions",
        templates=["templates/grouped_report.md.j2"],
        title="Grouped {{ dag_run.run_after | ds }}",
        required_fields=["ai_result.draft"],
        output_folder="{{ params.output_folder or None }}",
        retries=3,
    )
