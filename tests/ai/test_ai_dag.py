"""The AI step in real DAG runs (dag.test()) on ledger items: embedded model, then an LLM connection."""

from __future__ import annotations

from tests.ai.conftest import PRIMARY_CONN


def xcom(run, task_id: str):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.scalars(
            XComModel.get_many(run_id=run.run_id, dag_ids=run.dag_id, task_ids=task_id, key="return_value")
        ).first()
        return None if row is None else XComModel.deserialize_value(row)


def test_the_ai_step_runs_in_a_dag_on_the_runs_items(airflow_db, ledger, llm):
    from tests.dag_fixtures.ai_dags import ai_step_dag

    run = ai_step_dag.test(run_conf={"rows": 40, "model": "local"})

    assert run.state == "success"
    summary = xcom(run, "classify_exceptions")
    assert summary["items"] == 40 and summary["run_id"] == run.run_id
    assert summary["model"].startswith("local:supplier_exception_notes@")
    counts = ledger.count_by_status(workflow="supplier_exceptions", run_id=run.run_id)
    assert counts == {"ai_processed": summary["passed"], "pending_review": summary["review"]}
    assert summary["review"] > 0 and summary["passed"] > 0
    moved = ledger.history(
        ledger.item_ids(workflow="supplier_exceptions", run_id=run.run_id, status="ai_processed")[0]
    )[-1]
    assert moved.actor == "conveyor_ai_step.classify_exceptions#1"

    # The same DAG pointed at an LLM connection: one connection away, the same guardrails.
    with ledger.connect() as conn:
        conn.execute("DELETE FROM conveyor.transitions")
        conn.execute("DELETE FROM conveyor.items")
    run = ai_step_dag.test(run_conf={"rows": 10, "model": PRIMARY_CONN})

    assert run.state == "success"
    summary = xcom(run, "classify_exceptions")
    assert summary["model"] == f"llm:openai:fake-model@{llm.base_url}"
    assert summary["calls"] == 10 == llm.stats()["calls"] and summary["items"] == 10
