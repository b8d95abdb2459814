"""A minimal DAG proving the test environment runs tasks against the ledger."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, task

with DAG("conveyor_smoke", schedule=None, start_date=pendulum.datetime(2026, 1, 1)) as smoke_dag:

    @task
    def receive_one() -> int:
        from conveyor.ledger import Ledger, NewItem

        ledger = Ledger()
        return len(ledger.receive("supplier_exceptions", "smoke", [NewItem("X", {"a": 1})], actor="t").inserted)

    receive_one()
