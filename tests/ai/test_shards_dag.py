"""The sharded AI step in real DAG runs (dag.test()): mapped task instances over one run's items."""

from __future__ import annotations

from tests.ai.conftest import PRIMARY_CONN


def summaries(run, task_id: str) -> dict[int, dict]:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.scalars(
            XComModel.get_many(run_id=run.run_id, dag_ids=run.dag_id, task_ids=task_id, key="return_value")
        ).all()
        return {row.map_index: XComModel.deserialize_value(row) for row in rows}


def task_states(run, task_id: str) -> dict[int, str]:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(
            select(TaskInstance.map_index, TaskInstance.state).where(
                TaskInstance.dag_id == run.dag_id, TaskInstance.run_id == run.run_id, TaskInstance.task_id == task_id
            )
        ).all()
    return {m: str(s) for m, s in rows}


def test_a_mapped_ai_step_shares_the_runs_items_between_its_shards(airflow_db, ledger, llm):
    from tests.dag_fixtures.ai_dags import ai_sharded_dag

    run = ai_sharded_dag.test(run_conf={"rows": 30, "model": PRIMARY_CONN})

    assert run.state == "success"
    assert task_states(run, "classify_exceptions") == {0: "success", 1: "success", 2: "success"}
    done = summaries(run, "classify_exceptions")
    assert sorted(done) == [0, 1, 2] and [done[n]["shard"] for n in range(3)] == [0, 1, 2]
    # dag.test() runs the shards one after the other: the first takes every chunk, its siblings
    # find nothing left, which is no failure (the run has items).
    assert sum(s["items"] for s in done.values()) == 30 == sum(s["claimed"] for s in done.values())
    assert llm.stats()["calls"] == 30 == sum(s["calls"] for s in done.values())
    counts = ledger.count_by_status(workflow="supplier_exceptions", run_id=run.run_id)
    assert counts.get("validated") is None and sum(counts.values()) == 30
    with ledger.connect() as conn:
        holders = conn.execute("SELECT count(*) FROM conveyor.step_leases").fetchone()
    assert holders == (0,)

    run = ai_sharded_dag.test(run_conf={"rows": 0, "model": PRIMARY_CONN})  # a run without any item
    assert run.state == "failed"
    assert set(task_states(run, "classify_exceptions").values()) == {"failed"}
