"""The test environment itself: a DAG run by dag.test() on the migrated metadata DB writes to the ledger."""

from __future__ import annotations


def test_dag_test_runs_a_task_against_the_ledger(airflow_db, ledger):
    from tests.dag_fixtures.smoke_dags import smoke_dag

    run = smoke_dag.test()

    assert run.state == "success"
    assert ledger.count_by_status() == {"received": 1}
    assert ledger.history("supplier_exceptions:X")[0].to_status == "received"
