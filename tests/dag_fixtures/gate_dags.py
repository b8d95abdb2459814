"""DAGs the gate tests run with dag.test(): the validation gate on a file (params point it at any
file), and the invoice flow's gate in ledger mode after a stand-in extraction step.

The failure callback stands in for a notifier: it appends the alert (task, run, exception text)
to the file named by ``CONVEYOR_TEST_ALERTS``, where the test reads what a person would be told.
"""

from __future__ import annotations

import json
import os
from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Param, task

from conveyor.gate.operators import ValidationGateOperator

START = pendulum.datetime(2026, 1, 1, tz="UTC")


def record_alert(context) -> None:
    path = os.environ.get("CONVEYOR_TEST_ALERTS")
    if path:
        ti = context["ti"]
        with open(path, "a", encoding="utf-8") as out:
            out.write(
                json.dumps(
                    {
                        "task_id": ti.task_id,
                        "run_id": ti.run_id,
                        "try_number": ti.try_number,
                        "error": str(context.get("exception")),
                    }
                )
                + "\n"
            )


with DAG(
    "conveyor_gate_file",
    schedule=None,
    start_date=START,
    catchup=False,
    tags=["conveyor-tests"],
    params={
        "extract_path": Param("data/supplier_exceptions/extract.csv", type="string"),
        "suite": Param("supplier_exceptions", type="string"),
        "min_rows": Param(1, type="integer"),
        "max_age_days": Param(30, type="integer"),
        "max_exception_rate": Param(0.1, type="number"),
        "as_of": Param("2026-11-30T06:00:00+00:00", type="string"),
    },
    # Retries are configured: a batch failure must not use them.
    default_args={"retries": 3, "retry_delay": timedelta(seconds=0), "on_failure_callback": record_alert},
) as gate_file_dag:
    ValidationGateOperator(
        task_id="gate",
        workflow="supplier_exceptions",
        suite="{{ params.suite }}",
        source="{{ params.extract_path }}",
        min_rows="{{ params.min_rows }}",
        max_age="{{ params.max_age_days }}",
        max_exception_rate="{{ params.max_exception_rate }}",
        as_of="{{ params.as_of }}",
    )


@task
def extract_fields(run_id: str | None = None) -> int:
    """Stand-in for the AI extraction step: each inbox file becomes an 'extracted' item whose
    AI result is the file's known fields (include/data/invoices/expected_fields.jsonl)."""
    from conveyor.include import include_dir
    from conveyor.ledger import Ledger, NewItem
    from conveyor.ledger.store import ItemUpdate

    lines = (include_dir() / "data" / "invoices" / "expected_fields.jsonl").read_text(encoding="utf-8")
    entries = [json.loads(line) for line in lines.splitlines()]
    ledger = Ledger()
    ledger.receive(
        "invoice_processing",
        run_id,
        [NewItem(e["business_key"], {"path": e["path"]}) for e in entries],
        actor="conveyor_gate_invoices.extract_fields#1",
    )
    moved = ledger.transition(
        "invoice_processing",
        {
            f"invoice_processing:{e['business_key']}": ItemUpdate(ai_result=e["fields"], confidence=0.97)
            for e in entries
        },
        to_status="extracted",
        actor="conveyor_gate_invoices.extract_fields#1",
        from_status="received",
    )
    return len(moved.moved)


with DAG(
    "conveyor_gate_invoices",
    schedule=None,
    start_date=START,
    catchup=False,
    tags=["conveyor-tests"],
    default_args={"retries": 2, "retry_delay": timedelta(seconds=0), "on_failure_callback": record_alert},
) as gate_invoices_dag:
    extract_fields() >> ValidationGateOperator(
        task_id="validate_fields",
        workflow="invoice_processing",
        suite="invoice_fields",
        source="ledger",
        as_of="2026-11-30T06:00:00+00:00",
    )
