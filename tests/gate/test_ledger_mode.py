"""Ledger mode: the invoice flow validates the fields its extraction step wrote (extracted -> validated)."""

from __future__ import annotations

import json

import pytest

from conveyor.gate.errors import BatchRejected
from conveyor.gate.results import GateResultStore
from conveyor.ledger import NewItem
from conveyor.ledger.actors import reviewer_actor
from conveyor.ledger.store import ItemUpdate
from tests.gate.conftest import INVOICES, run_gate, snapshot

WORKFLOW = "invoice_processing"
RUN = "inbox-2026-11-30"


def expected_fields() -> list[dict]:
    lines = (INVOICES / "expected_fields.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def extracted(ledger, entries: list[dict], run_id: str = RUN) -> None:
    """The state the extraction step leaves: each invoice file an item in 'extracted' with its fields."""
    ledger.receive(
        WORKFLOW,
        run_id,
        [NewItem(e["business_key"], {"path": e["path"]}) for e in entries],
        actor="invoice_processing.receive#1",
    )
    ledger.transition(
        WORKFLOW,
        {
            f"{WORKFLOW}:{e['business_key']}": ItemUpdate(ai_result=e["fields"], confidence=0.97)
            for e in entries
        },
        to_status="extracted",
        actor="invoice_processing.extract#1",
        from_status="received",
    )


def gate_invoices(ledger, run_id: str = RUN, **settings):
    return run_gate(ledger, "ledger", run_id=run_id, workflow=WORKFLOW, suite="invoice_fields", **settings)


def test_extracted_invoices_are_validated_or_quarantined_with_reasons(ledger):
    extracted(ledger, expected_fields())

    summary = gate_invoices(ledger)

    assert (summary.rows, summary.validated, summary.quarantined) == (65, 60, 5)
    assert summary.source == f"ledger: {WORKFLOW} run {RUN!r}, items in 'extracted' (ai_result)"
    assert ledger.count_by_status(workflow=WORKFLOW, run_id=RUN) == {"validated": 60, "quarantined": 5}
    reasons = {i.business_key: i.reason for i in ledger.items(workflow=WORKFLOW, status="quarantined")}
    assert reasons["total_mismatch"] == (
        "failed 1 check: the total does not equal the sum of the line items (off by 100)"
    )
    assert reasons["unknown_vendor"] == (
        "failed 1 check: vendor_id 'V-9999' is not a known vendor (include/data/invoices/vendors.csv)"
    )
    assert reasons["due_before_invoice"].startswith(
        "failed 1 check: due date is before the invoice date (due_date 2026-11-02"
    )
    assert reasons["future_date"] == (
        "failed 1 check: invoice_date 2027-06-15 is in the future or more than a year old"
    )
    assert reasons["line_arithmetic"].startswith(
        "failed 1 check: a line item's amount is not quantity x unit price"
    )
    good = ledger.get(f"{WORKFLOW}:INV-1001-2026-03283")
    assert good.status == "validated"
    assert good.ai_result["total"] == 632.8  # the gate reads the AI result, it does not rewrite it
    assert [h.to_status for h in ledger.history(good.item_id)] == ["received", "extracted", "validated"]
    finding = GateResultStore(ledger).for_item(f"{WORKFLOW}:total_mismatch")[0]
    assert finding["row_key"] == f"{WORKFLOW}:total_mismatch"
    assert finding["failures"][0]["column"] == "total_difference"


def test_duplicate_invoice_numbers_in_one_run_are_quarantined(ledger):
    entries = expected_fields()[:10]
    entries.append({**entries[3], "business_key": "scan-of-the-same-invoice"})
    extracted(ledger, entries)

    summary = gate_invoices(ledger, max_exception_rate=0.25)

    assert (summary.validated, summary.quarantined) == (9, 2)
    quarantined = {i.business_key: i.reason for i in ledger.items(workflow=WORKFLOW, status="quarantined")}
    assert set(quarantined) == {entries[3]["business_key"], "scan-of-the-same-invoice"}
    number = entries[3]["fields"]["invoice_number"]
    assert quarantined["scan-of-the-same-invoice"] == (
        f"failed 1 check: invoice_number {number!r} appears 2 times in the input "
        f"(items {entries[3]['business_key']}, scan-of-the-same-invoice)"
    )


def test_unparseable_extracted_values_are_row_failures(ledger):
    entries = expected_fields()[:3]
    broken = json.loads(json.dumps(entries[0]))
    broken["fields"]["invoice_date"] = "11/02/2026"
    broken["fields"]["line_items"][0]["quantity"] = "ten"
    extracted(ledger, [broken, *entries[1:]])

    summary = gate_invoices(ledger, max_exception_rate=0.5)

    assert summary.quarantined == 1
    item = ledger.get(f"{WORKFLOW}:{broken['business_key']}")
    assert "invoice_date '11/02/2026' is not a date in the form YYYY-MM-DD" in item.reason
    assert "line_items.quantity 'ten' is not a number" in item.reason


def test_no_extracted_items_is_a_failure(ledger):
    with pytest.raises(BatchRejected) as caught:
        gate_invoices(ledger)

    assert caught.value.kind == "empty"
    assert "no items in status 'extracted' for run 'inbox-2026-11-30'" in caught.value.reason
    assert ledger.get_batch(WORKFLOW, RUN, "gate")["status"] == "quarantined"


def test_a_field_no_item_has_is_a_batch_failure(ledger):
    entries = [json.loads(json.dumps(e)) for e in expected_fields()[:5]]
    for entry in entries:
        entry["fields"].pop("vendor_id")
    extracted(ledger, entries)

    with pytest.raises(BatchRejected, match=r"column 'vendor_id' missing"):
        gate_invoices(ledger)
    assert ledger.count_by_status(workflow=WORKFLOW) == {"extracted": 5}


def test_rerun_changes_nothing_and_a_corrected_item_goes_through_again(ledger):
    extracted(ledger, expected_fields())
    gate_invoices(ledger)
    before = snapshot(ledger)

    again = gate_invoices(ledger)

    assert again.rerun is True and again.validated == 60
    assert snapshot(ledger) == before
    # A reviewer corrects the vendor id and sends the item back through the gate.
    item = ledger.get(f"{WORKFLOW}:unknown_vendor")
    fixed = dict(item.ai_result, vendor_id="V-1002", vendor="Brightline IT Hardware B.V.")
    ledger.transition(
        WORKFLOW,
        {item.item_id: ItemUpdate(ai_result=fixed, reason="vendor corrected")},
        to_status="extracted",
        actor=reviewer_actor("dana"),
        from_status="quarantined",
    )

    third = gate_invoices(ledger)

    assert (third.rows, third.validated, third.quarantined) == (1, 1, 0)
    assert ledger.get(item.item_id).status == "validated"
    assert ledger.count_by_status(workflow=WORKFLOW) == {"validated": 61, "quarantined": 4}


def test_a_returned_item_that_still_fails_is_quarantined_again_without_failing_the_batch(ledger):
    extracted(ledger, expected_fields())
    gate_invoices(ledger)
    item = ledger.get(f"{WORKFLOW}:total_mismatch")
    ledger.transition(
        WORKFLOW,
        [item.item_id],
        to_status="extracted",
        actor=reviewer_actor("dana"),
        from_status="quarantined",
        reason="please check again",
    )

    summary = gate_invoices(ledger)

    assert (summary.rows, summary.validated, summary.quarantined) == (1, 0, 1)
    assert ledger.get(item.item_id).status == "quarantined"
    assert ledger.get_batch(WORKFLOW, RUN, "gate")["status"] == "accepted"
    assert [h.to_status for h in ledger.history(item.item_id)][-3:] == [
        "quarantined",
        "extracted",
        "quarantined",
    ]
