"""``conveyor batches`` and ``conveyor outbox`` on records the gate and the effect steps write."""

from __future__ import annotations

import json

import pytest

from conveyor.ledger import NewItem
from tests.cli.test_cli import WF, run


@pytest.fixture
def records(ledger, ledger_dsn):
    """Four deliveries of the gate (one per outcome) and an outbox of a publication and payments."""
    ledger.record_batch(WF, "run-1", "validate", status="accepted", source="file:///feeds/day1.csv",
                        input_hash="a" * 64, detail={"summary": {"rows": 480, "validated": 477, "quarantined": 3}})
    ledger.record_batch(WF, "run-2", "validate", status="quarantined", source="file:///feeds/day2.csv",
                        reason="column 'supplier_id' missing; found 'vendor_id' (similar)",
                        detail={"kind": "missing_columns"})
    ledger.record_batch(WF, "run-3", "validate", status="repeated", source="file:///feeds/day1.csv",
                        reason="day1.csv was already gated in run 'run-1'", detail={"kind": "repeated"})
    ledger.record_batch(WF, "run-4", "validate", status="quarantined", source="file:///feeds/day4.csv",
                        reason="input file is empty (0 bytes): day4.csv", detail={"kind": "empty"})
    ledger.record_batch("invoice_processing", "run-9", "validate", status="accepted")

    ledger.receive("invoice_processing", "run-9", [NewItem("INV-1", {}), NewItem("INV-2", {})], actor="intake#1")
    ids = ["invoice_processing:INV-1", "invoice_processing:INV-2"]
    ledger.claim_effects("pay", ids, actor="invoice_processing.pay#1")
    ledger.complete_effects("pay", {ids[0]: {"payment_id": 7001}})
    key = "invoice_processing:report:run-9"
    ledger.claim_effects("publish_report", [key], actor="invoice_processing.publish#1")
    ledger.complete_effects("publish_report", {key: {"files": ["file:///r/run-9/report.md"], "items": ids}})
    ledger.claim_effects("publish_report", ["invoice_processing:report:run-8"], actor="x#1")
    ledger.complete_effects("publish_report", {"invoice_processing:report:run-8": {"files": ["file:///r/8.md"],
                                                                                   "items": ["a"]}})
    return ledger_dsn


def test_batches_lists_every_delivery_with_its_outcome_and_reason(records):
    result = run("batches", "--workflow", WF, "--json", dsn=records)

    assert result.returncode == 0, result.stderr
    found = {d["run_id"]: d for d in json.loads(result.stdout)}
    assert {run_id: d["outcome"] for run_id, d in found.items()} == {
        "run-1": "accepted", "run-2": "rejected", "run-3": "repeated", "run-4": "empty",
    }
    assert (found["run-1"]["rows"], found["run-1"]["quarantined"]) == (480, 3)
    assert found["run-2"]["reason"].startswith("column 'supplier_id' missing")
    assert found["run-2"]["kind"] == "missing_columns"

    one = run("batches", "--workflow", WF, "--run", "run-4", dsn=records)
    assert one.returncode == 0
    assert "empty" in one.stdout and "input file is empty (0 bytes)" in one.stdout and "run-1" not in one.stdout
    table = run("batches", "--workflow", WF, dsn=records).stdout
    assert "480 (3 to a person)" in table and "rejected" in table
    assert "reached a gate" in run("batches", "--workflow", WF, "--run", "nope", dsn=records).stdout


def test_outbox_lists_what_was_done_once_and_where(records):
    result = run("outbox", "--workflow", "invoice_processing", "--run", "run-9", "--json", dsn=records)

    assert result.returncode == 0, result.stderr
    entries = {e["key"]: e for e in json.loads(result.stdout)}
    assert set(entries) == {"invoice_processing:INV-1", "invoice_processing:INV-2", "invoice_processing:report:run-9"}
    report = entries["invoice_processing:report:run-9"]
    assert (report["effect"], report["state"], report["items"], report["run_id"]) == (
        "publish_report", "done", 2, "run-9")
    assert report["where"] == "file:///r/run-9/report.md"
    paid = entries["invoice_processing:INV-1"]
    assert (paid["effect"], paid["state"], paid["where"], paid["run_id"]) == ("pay", "done", "payment_id=7001", "run-9")
    assert entries["invoice_processing:INV-2"]["state"] == "claimed"

    every = json.loads(run("outbox", "--workflow", "invoice_processing", "--json", dsn=records).stdout)
    assert {e["run_id"] for e in every} == {"run-8", "run-9"} and len(every) == 4
    table = run("outbox", "--workflow", "invoice_processing", "--run", "run-9", dsn=records).stdout
    assert "payment_id=7001" in table and "1 effect(s) claimed and not recorded done" in table
    assert "was published or applied" in run("outbox", "--workflow", WF, dsn=records).stdout


def test_batches_and_outbox_refuse_an_unknown_workflow(records):
    for command in ("batches", "outbox"):
        result = run(command, "--workflow", "invoice_processin", dsn=records)
        assert result.returncode == 3
        assert "did you mean invoice_processing?" in result.stderr
    assert run("batches", dsn=records).returncode == 2  # --workflow is required


def test_the_outbox_of_a_workflow_is_read_by_index(ledger):
    """``outbox --workflow W`` without a run reads index effects_workflow_claimed, never the whole table."""
    with ledger.connect() as conn:
        conn.execute(
            "INSERT INTO conveyor.effects (item_id, step, claimed_by)"
            " SELECT 'wf_' || (n % 50) || ':' || n, 'pay', 'x' FROM generate_series(1, 200000) n"
        )
        conn.execute("ANALYZE conveyor.effects")
    from conveyor.ledger.deliveries import read_outbox

    with ledger.connect() as conn:
        plan = json.dumps(conn.execute(
            "EXPLAIN (FORMAT JSON) SELECT * FROM conveyor.effects WHERE split_part(item_id, ':', 1) = %s"
            " ORDER BY split_part(item_id, ':', 1), claimed_at DESC LIMIT 100", ("wf_7",)).fetchone()[0])
        assert "effects_workflow_claimed" in plan and "Sort" not in plan
        assert len(read_outbox(conn, "wf_7", None, 100)) == 100


def test_metrics_of_a_run_whose_batch_was_refused_says_why(records):
    result = run("metrics", "--workflow", WF, "--run", "run-2", dsn=records)

    assert result.returncode == 0, result.stderr
    assert ("input rejected  at step validate of run run-2: column 'supplier_id' missing; found 'vendor_id'"
            " (similar) (conveyor batches --workflow supplier_exceptions --run 'run-2')") in result.stdout
    data = json.loads(run("metrics", "--workflow", WF, "--run", "run-4", "--json", dsn=records).stdout)
    assert [b["outcome"] for b in data["workflows"][0]["refused_batches"]] == ["empty"]
