"""The gate in real DAG runs (dag.test()): the good extract, each batch-level failure, ledger mode."""

from __future__ import annotations

import json

import pytest

from tests.gate.conftest import MALFORMED

WORKFLOW = "supplier_exceptions"
MAL = "data/supplier_exceptions/malformed"


def xcom(run, task_id: str):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.scalars(
            XComModel.get_many(run_id=run.run_id, dag_ids=run.dag_id, task_ids=task_id, key="return_value")
        ).first()
        return None if row is None else XComModel.deserialize_value(row)


def task_instance(run, task_id: str):
    from airflow.utils.session import create_session

    with create_session() as session:
        ti = run.get_task_instance(task_id, session=session)
        return ti.state, ti.try_number


@pytest.fixture
def alerts(tmp_path, monkeypatch):
    path = tmp_path / "alerts.jsonl"
    monkeypatch.setenv("CONVEYOR_TEST_ALERTS", str(path))

    def read() -> list[dict]:
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    return read


def test_good_extract_runs_through_the_gate(airflow_db, ledger, alerts):
    from tests.dag_fixtures.gate_dags import gate_file_dag

    run = gate_file_dag.test()

    assert run.state == "success"
    summary = xcom(run, "gate")
    assert summary["rows"] == summary["validated"] == 480
    assert (summary["quarantined"], summary["status"], summary["rerun"]) == (0, "accepted", False)
    assert len(json.dumps(summary)) < 1000
    assert ledger.count_by_status(workflow=WORKFLOW, run_id=run.run_id) == {"validated": 480}
    history = ledger.history("supplier_exceptions:EX-2026-000001")
    assert history[-1].actor == "conveyor_gate_file.gate#1"
    assert ledger.get_batch(WORKFLOW, run.run_id, "gate")["status"] == "accepted"
    assert alerts() == []


def test_row_level_failures_leave_the_task_successful(airflow_db, ledger):
    from tests.dag_fixtures.gate_dags import gate_file_dag

    run = gate_file_dag.test(run_conf={"extract_path": f"{MAL}/formula_injection.csv"})

    assert run.state == "success"
    assert xcom(run, "gate")["quarantined"] == 3
    assert ledger.count_by_status(workflow=WORKFLOW, run_id=run.run_id) == {
        "validated": 477,
        "quarantined": 3,
    }


BATCH_FAILURES = [
    ("renamed_column.csv", {}, "column 'supplier_id' missing; found 'vendor_id' (similar)"),
    ("missing_column.csv", {}, "column 'po_number' missing"),
    ("empty.csv", {}, "input file is empty (0 bytes)"),
    ("header_only.csv", {}, "no data rows: header_only.csv has a header (10 columns) but no rows"),
    ("wrong_delimiter.csv", {}, "wrong_delimiter.csv is ';'-delimited"),
    ("non_utf8.csv", {}, "input file is not valid UTF-8: byte 0xfc at line 7"),
    ("ragged_rows.csv", {}, "line 59 of ragged_rows.csv has 11 fields, the header has 10"),
    ("date_format.csv", {}, "100.0% of rows failed the gate (480 of 480); at most 10.0% allowed"),
    ("stale.csv", {"max_age_days": 7}, "stale data: the newest exception_date in stale.csv is 2026-10-28"),
    ("truncated.csv", {"min_rows": 100}, "only 12 rows in truncated.csv; at least 100 expected (min_rows)"),
    ("does_not_exist.csv", {}, "input file not found"),
]


@pytest.mark.parametrize(("name", "conf", "message"), BATCH_FAILURES, ids=[c[0] for c in BATCH_FAILURES])
def test_batch_failure_fails_the_task_once_records_the_batch_and_alerts(
    airflow_db, ledger, alerts, name, conf, message
):
    from tests.dag_fixtures.gate_dags import gate_file_dag

    run = gate_file_dag.test(run_conf={"extract_path": f"{MAL}/{name}", **conf})

    assert run.state == "failed"
    assert task_instance(run, "gate") == ("failed", 1)  # no retry spent on data
    [alert] = alerts()
    assert alert["task_id"] == "gate" and alert["run_id"] == run.run_id
    assert alert["error"].startswith("validation gate rejected the batch: ")
    assert message in alert["error"]
    batch = ledger.get_batch(WORKFLOW, run.run_id, "gate")
    assert batch["status"] == "quarantined"
    assert message in batch["reason"]
    assert batch["source"] == str(MALFORMED / name)
    assert ledger.count_by_status(workflow=WORKFLOW) == {}


def test_a_missing_suite_fails_without_retries_and_names_the_suites(airflow_db, ledger, alerts):
    from tests.dag_fixtures.gate_dags import gate_file_dag

    run = gate_file_dag.test(run_conf={"suite": "supplier_exeptions"})

    assert run.state == "failed"
    assert task_instance(run, "gate") == ("failed", 1)
    [alert] = alerts()
    assert alert["error"].startswith(
        "validation gate is misconfigured: expectation suite 'supplier_exeptions' not found"
    )
    assert "supplier_exceptions" in alert["error"].split("suites in", 1)[1]
    assert ledger.count_by_status() == {}


def test_invoice_fields_are_gated_in_ledger_mode(airflow_db, ledger, alerts):
    from tests.dag_fixtures.gate_dags import gate_invoices_dag

    run = gate_invoices_dag.test()

    assert run.state == "success"
    summary = xcom(run, "validate_fields")
    assert (summary["rows"], summary["validated"], summary["quarantined"]) == (65, 60, 5)
    assert ledger.count_by_status(workflow="invoice_processing", run_id=run.run_id) == {
        "validated": 60,
        "quarantined": 5,
    }
    item = ledger.get("invoice_processing:unknown_vendor")
    assert item.reason.endswith(
        "vendor_id 'V-9999' is not a known vendor (include/data/invoices/vendors.csv)"
    )
    assert ledger.history(item.item_id)[-1].actor == "conveyor_gate_invoices.validate_fields#1"
    assert alerts() == []
