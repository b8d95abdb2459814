"""DAGs the AI step's tests run with dag.test(): sample exceptions into the ledger, then the AI step.

Params choose the model: ``local`` (the embedded default) or the id of a ``pydanticai``
connection (the tests point one at their OpenAI-compatible server), and an optional fallback.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Param, task

from conveyor.ai.operators import AIStepOperator
from conveyor_examples.supplier_exceptions import CLASSIFY_EXCEPTION

START = pendulum.datetime(2026, 1, 1, tz="UTC")


@task
def receive_and_validate(rows: int, run_id: str | None = None) -> int:
    """Stand-in for extract + gate: the first ``rows`` exceptions of the sample extract, validated."""
    import csv

    from conveyor.include import include_dir
    from conveyor.ledger import Ledger, NewItem

    with (include_dir() / "data" / "supplier_exceptions" / "extract.csv").open(
        encoding="utf-8", newline=""
    ) as f:
        records = list(csv.DictReader(f))[: int(rows)]
    ledger = Ledger()
    ledger.receive(
        "supplier_exceptions",
        run_id,
        [NewItem(r["exception_id"], r) for r in records],
        actor="conveyor_ai_step.receive_and_validate#1",
    )
    ids = [f"supplier_exceptions:{r['exception_id']}" for r in records]
    return len(
        ledger.transition(
            "supplier_exceptions",
            ids,
            to_status="validated",
            from_status="received",
            actor="conveyor_ai_step.receive_and_validate#1",
        ).moved
    )


with DAG(
    "conveyor_ai_step",
    schedule=None,
    start_date=START,
    catchup=False,
    tags=["conveyor-tests"],
    params={"rows": Param(40, type="integer"), "model": Param("local", type="string")},
    default_args={"retries": 1, "retry_delay": timedelta(seconds=0)},
) as ai_step_dag:
    receive_and_validate(rows="{{ params.rows }}") >> AIStepOperator(
        task_id="classify_exceptions",
        workflow="supplier_exceptions",
        ai_task=CLASSIFY_EXCEPTION,
        model="{{ params.model }}",
        fallback_model="local",
        min_confidence=0.7,
        max_failure_rate=0.1,
        batch_size=16,
        max_concurrency=4,
    )


with DAG(
    "conveyor_ai_step_sharded",
    schedule=None,
    start_date=START,
    catchup=False,
    tags=["conveyor-tests"],
    params={"rows": Param(30, type="integer"), "model": Param("local", type="string")},
    default_args={"retries": 0},
) as ai_sharded_dag:
    # One step over three task instances (dynamic task mapping): each claims chunks of the run's items.
    receive_and_validate(rows="{{ params.rows }}") >> AIStepOperator.partial(
        task_id="classify_exceptions",
        workflow="supplier_exceptions",
        ai_task=CLASSIFY_EXCEPTION,
        model="{{ params.model }}",
        min_confidence=0.5,
        max_failure_rate=0.1,
        batch_size=4,
        max_concurrency=2,
        lease_seconds=30,
    ).expand(shard=list(range(3)))  # a list: a range object would be expanded as its text
