"""DAGs of bench/ai_shards_stack.py: N items of the sample extract, then the AI step in 1 or 2 shards.

The model is the connection ``bench_llm`` (the bench points it at its loopback LLM server); the
example workflow's own code comes from ``dags/`` on the components' ``PYTHONPATH``.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param, task

from conveyor.ai.operators import AIStepOperator
from conveyor_examples.supplier_exceptions import CLASSIFY_EXCEPTION, SUPPLIER_EXCEPTIONS

START = pendulum.datetime(2026, 1, 1, tz="UTC")


@task
def receive_and_validate(rows: int, run_id: str | None = None) -> int:
    """``rows`` exceptions (the sample extract, repeated with ids of this run), validated."""
    import csv
    import re

    from conveyor.include import include_dir
    from conveyor.ledger import Ledger, NewItem

    with (include_dir() / "data" / "supplier_exceptions" / "extract.csv").open(encoding="utf-8", newline="") as f:
        sample = list(csv.DictReader(f))
    tag = re.sub(r"[^A-Za-z0-9]", "", str(run_id))[-12:]
    items = []
    for n in range(int(rows)):
        row = dict(sample[n % len(sample)], exception_id=f"EX-{tag}-{n:06d}")
        items.append(NewItem(row["exception_id"], row))
    ledger = Ledger()
    ledger.declare(SUPPLIER_EXCEPTIONS, actor="bench.receive")
    ledger.receive("supplier_exceptions", run_id, items, actor="bench.receive")
    ids = [f"supplier_exceptions:{i.business_key}" for i in items]
    moved = ledger.transition(
        "supplier_exceptions", ids, to_status="validated", from_status="received", actor="bench.receive"
    ).moved
    return len(moved)


for shards in (1, 2):
    with DAG(
        f"bench_ai_shards_{shards}",
        schedule=None,
        start_date=START,
        catchup=False,
        tags=["bench"],
        params={"rows": Param(1200, type="integer")},
    ):
        receive_and_validate(rows="{{ params.rows }}") >> AIStepOperator.partial(
            task_id="classify",
            workflow=SUPPLIER_EXCEPTIONS,
            ai_task=CLASSIFY_EXCEPTION,
            model="bench_llm",
            min_confidence=0.5,
            batch_size=20,
            max_concurrency=4,
            lease_seconds=60,
        ).expand(shard=list(range(shards)))
