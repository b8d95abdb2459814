"""Publish, pay and archive in real DAG runs: effects happen once, however often a run is cleared."""

from __future__ import annotations

import json

import pendulum
import pytest

LOGICAL = pendulum.datetime(2026, 3, 2, 6, tz="UTC")


def test_publish_writes_one_report_and_rerun_publishes_nothing_again(airflow_db, ledger, tmp_path):
    from tests.dag_fixtures.effects_dags import publish_dag

    run = publish_dag.test(logical_date=LOGICAL, run_after=LOGICAL, run_conf={"output_dir": str(tmp_path)})
    assert run.state == "success"
    [report] = tmp_path.glob("report-*.md")
    text = report.read_text()
    assert "Truck three days late." in text and "Twelve cartons short." in text
    assert ledger.count_by_status(workflow="supplier_exceptions") == {"published": 2}
    effects = ledger.effects("publish_report")
    assert len(effects) == 1
    [outbox] = effects.values()
    assert outbox["state"] == "done" and outbox["result"]["recipients"] == ["procurement@example.com"]
    first_mtime = report.stat().st_mtime_ns
    history_before = {i.item_id: len(ledger.history(i.item_id)) for i in ledger.items()}

    # Run the same run (same run_id: dag.test replaces the finished run) again: every task re-executes.
    rerun = publish_dag.test(logical_date=LOGICAL, run_after=LOGICAL, run_conf={"output_dir": str(tmp_path)})

    assert rerun.state == "success" and rerun.run_id == run.run_id
    assert report.stat().st_mtime_ns == first_mtime
    assert len(ledger.effects("publish_report")) == 1
    assert {i.item_id: len(ledger.history(i.item_id)) for i in ledger.items()} == history_before


def test_a_blank_draft_fails_loudly_and_publishes_nothing(airflow_db, ledger, tmp_path):
    from tests.dag_fixtures.effects_dags import publish_dag

    run = publish_dag.test(logical_date=LOGICAL.add(days=1), run_after=LOGICAL.add(days=1),
                           run_conf={"output_dir": str(tmp_path), "drafts": ["Late.", ""]})

    assert run.state == "failed"
    assert list(tmp_path.glob("report-*")) == []
    assert ledger.effects("publish_report") == {}
    assert ledger.count_by_status(workflow="supplier_exceptions") == {"approved": 2}


def _invoice(key, vendor, number, total, confidence=0.95):
    return {"key": key, "confidence": confidence,
            "fields": {"vendor_id": vendor, "invoice_number": number, "total": total, "currency": "EUR"}}


@pytest.fixture
def inbox(tmp_path):
    folder = tmp_path / "inbox"
    folder.mkdir()
    return folder


def test_payments_once_per_invoice_and_files_archived(airflow_db, ledger, inbox, tmp_path):
    from tests.dag_fixtures.effects_dags import pay_dag

    invoices = [
        _invoice("INV-A", "V-1", "A-1", 120.0),
        _invoice("INV-B", "V-1", "A-2", 99999.0),            # over the threshold: to a person
        _invoice("INV-C", "V-2", "C-1", 50.0, confidence=0.4),  # doubtful: to a person
        _invoice("INV-D", "V-1", "A-1", 120.0),               # same vendor invoice number as INV-A
        _invoice("INV-E", "V-3", None, 80.0),                 # no invoice number: cannot be paid
    ]
    for inv in invoices:
        (inbox / f"{inv['key']}.json").write_text(json.dumps(inv["fields"]))
    conf = {"inbox": str(inbox), "archive": str(tmp_path / "archive"), "invoices": invoices}

    run = pay_dag.test(logical_date=LOGICAL, run_after=LOGICAL, run_conf=conf)

    assert run.state == "success"
    statuses = {i.item_id.split(":")[1]: i.status for i in ledger.items(workflow="invoice_processing")}
    assert statuses == {"INV-A": "archived", "INV-B": "pending_review", "INV-C": "pending_review",
                        "INV-D": "pending_review", "INV-E": "pending_review"}
    assert ledger.get("invoice_processing:INV-E").reason == "cannot pay: no invoice_number extracted"
    assert "already paid under another item" in ledger.get("invoice_processing:INV-D").reason
    assert "over the approval threshold" in ledger.get("invoice_processing:INV-B").reason
    assert "confidence 0.40" in ledger.get("invoice_processing:INV-C").reason
    with ledger.connect() as conn:
        payments = conn.execute("SELECT item_id, amount FROM conveyor.payments").fetchall()
    assert [(p[0], float(p[1])) for p in payments] == [("invoice_processing:INV-A", 120.0)]
    assert (tmp_path / "archive" / "INV-A.json").is_file() and not (inbox / "INV-A.json").exists()

    rerun = pay_dag.test(logical_date=LOGICAL, run_after=LOGICAL, run_conf=conf)

    assert rerun.state == "success" and rerun.run_id == run.run_id
    assert ledger.get("invoice_processing:INV-A").status == "archived"
    with ledger.connect() as conn:
        assert conn.execute("SELECT count(*) FROM conveyor.payments").fetchone() == (1,)
