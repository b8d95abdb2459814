"""The AI step with the embedded models, on the sample data, against the real ledger."""

from __future__ import annotations

import pytest

from conveyor.ai.errors import AIStepFailed
from conveyor.ai.runner import StepConfig, run_step
from conveyor_examples.invoices import CLASSIFY_SPEND
from conveyor_examples.invoices import EXTRACT_FIELDS as EXTRACT_INVOICE_FIELDS
from conveyor_examples.supplier_exceptions import CLASSIFY_EXCEPTION
from tests.ai.seeding import (
    INBOX,
    MALFORMED_INVOICES,
    exception_labels,
    exception_rows,
    invoice_payload,
    seed,
    seed_exceptions,
)


def config(run_id: str, task=CLASSIFY_EXCEPTION, **overrides) -> StepConfig:
    return StepConfig.of(
        workflow=task.workflow, run_id=run_id, task=task, actor="ai_tests.ai_step#1", **overrides
    )


def test_classifies_the_sample_extract_and_routes_doubtful_items_to_review(ledger):
    rows = exception_rows()
    seed_exceptions(ledger, "r1", rows)

    summary = run_step(ledger, config("r1", batch_size=100))

    counts = ledger.count_by_status(workflow="supplier_exceptions", run_id="r1")
    assert summary["items"] == len(rows) == counts["ai_processed"] + counts["pending_review"]
    assert summary["passed"] == counts["ai_processed"] and summary["review"] == counts["pending_review"]
    # Confidences vary on the sample data: both routes are taken, and in a sensible share.
    assert 0.1 * len(rows) < counts["pending_review"] < 0.5 * len(rows)
    assert summary["review_reasons"]["low_confidence"] > 0
    assert summary["calls"] == 0 and summary["failed"] == 0

    labels = exception_labels()
    passed = ledger.items(workflow="supplier_exceptions", run_id="r1", status="ai_processed", limit=None)
    correct = sum(i.ai_result["category"] == labels[i.business_key] for i in passed)
    assert correct / len(passed) >= 0.95  # what passes the threshold is right
    sample = passed[0]
    assert sample.confidence >= 0.7
    assert sample.payload["po_number"] in sample.ai_result["draft"]
    assert sample.payload["supplier_name"] in sample.ai_result["draft"]
    assert sample.reason.startswith("classify_exception by local:supplier_exception_notes@")

    doubtful = ledger.items(workflow="supplier_exceptions", run_id="r1", status="pending_review", limit=None)
    low = [i for i in doubtful if i.confidence is not None and i.confidence < 0.7]
    assert low and all(i.review_target == "ai_processed" for i in doubtful)
    assert "is below the threshold 0.70 (category '" in low[0].reason
    assert low[0].ai_result["category"]  # the reviewer sees what the model proposed
    history = ledger.history(low[0].item_id)
    assert [h.to_status for h in history][-1] == "pending_review"
    assert history[-1].actor == "ai_tests.ai_step#1"


def test_a_second_run_of_the_step_resumes_with_nothing_left(ledger):
    seed_exceptions(ledger, "r1", exception_rows(30))
    first = run_step(ledger, config("r1"))
    again = run_step(ledger, config("r1"))

    assert first["items"] == 30
    assert again["items"] == 0 and again["passed"] == 0
    transitions = [
        h
        for i in ledger.item_ids(
            workflow="supplier_exceptions", run_id="r1", status=["ai_processed", "pending_review"]
        )
        for h in ledger.history(i)
        if h.from_status == "validated"
    ]
    assert len(transitions) == 30  # each item left 'validated' exactly once


def test_a_run_with_no_items_at_all_fails_loudly(ledger):
    with pytest.raises(AIStepFailed, match="has no items in the ledger at all") as failed:
        run_step(ledger, config("empty-run"))
    assert failed.value.retryable is False


def test_rule_checks_send_vague_and_empty_input_to_review_with_the_reason(ledger):
    rows = exception_rows(10)
    rows[0] = {**rows[0], "notes": ""}
    rows[1] = {**rows[1], "notes": "Goods arrived 3 days late, see notes"}
    seed_exceptions(ledger, "r1", rows)

    summary = run_step(ledger, config("r1", max_failure_rate=0.2))

    empty = ledger.get(f"supplier_exceptions:{rows[0]['exception_id']}")
    assert empty.status == "pending_review"
    assert (
        empty.reason
        == "input cannot be sent to the model: the exception has no notes: there is nothing to classify"
    )
    vague = ledger.get(f"supplier_exceptions:{rows[1]['exception_id']}")
    assert vague.status == "pending_review"
    assert "draft is vague (says 'see notes')" in vague.reason
    assert summary["failure_reasons"] == {"input_error": 1}
    # The sample's own vague note ("something seems wrong, please check") is caught too.
    sample_vague = ledger.get("supplier_exceptions:EX-2026-000007")
    assert (
        sample_vague.status == "pending_review"
        and "draft is vague (says 'please check')" in sample_vague.reason
    )
    assert summary["review_reasons"]["check:vague"] == 2


def test_above_the_failure_rate_the_step_fails_with_counts_per_reason(ledger):
    rows = [{**r, "notes": ""} for r in exception_rows(4)] + exception_rows(20)[4:]
    seed_exceptions(ledger, "r1", rows)

    with pytest.raises(AIStepFailed) as failed:
        run_step(ledger, config("r1", max_failure_rate=0.1))

    message = str(failed.value)
    assert message.startswith("4 of 20 item(s) failed (20%, above max_failure_rate 10%): 4 input_error")
    assert failed.value.retryable is False  # the failed items are in review already
    assert ledger.count_by_status(workflow="supplier_exceptions", run_id="r1").get("validated") is None


def test_extracts_invoice_fields_from_the_inbox_in_all_three_formats(ledger):
    documents = sorted(INBOX.iterdir()) + sorted(MALFORMED_INVOICES.glob("*_*.*"))
    seed(
        ledger,
        "invoice_processing",
        "r1",
        [(p.stem, invoice_payload(p)) for p in documents],
        status="received",
    )

    summary = run_step(ledger, config("r1", task=EXTRACT_INVOICE_FIELDS, min_confidence=0.9))

    counts = ledger.count_by_status(workflow="invoice_processing", run_id="r1")
    assert (
        counts["extracted"] == 60 + 2
    )  # the clean inbox, plus future_date and unknown_vendor (later checks)
    assert counts["pending_review"] == 3
    assert summary["passed"] == 62
    txt = ledger.get("invoice_processing:INV-1001-2026-03283")
    assert txt.ai_result["total"] == 632.8 and len(txt.ai_result["line_items"]) == 3
    assert txt.ai_result["invoice_date"] == "2026-11-26" and txt.ai_result["vendor_id"] == "V-1001"
    mismatch = ledger.get("invoice_processing:total_mismatch")
    assert mismatch.status == "pending_review" and mismatch.review_target == "extracted"
    assert mismatch.reason.startswith("confidence 0.66 is below the threshold 0.90")


def test_classifies_spend_from_the_extracted_fields_and_keeps_them(ledger):
    documents = sorted(INBOX.iterdir())
    seed(
        ledger,
        "invoice_processing",
        "r1",
        [(p.stem, invoice_payload(p)) for p in documents],
        status="received",
    )
    run_step(ledger, config("r1", task=EXTRACT_INVOICE_FIELDS))
    extracted = ledger.item_ids(workflow="invoice_processing", run_id="r1", status="extracted")
    ledger.transition(
        "invoice_processing", extracted, to_status="validated", from_status="extracted", actor="gate"
    )

    summary = run_step(ledger, config("r1", task=CLASSIFY_SPEND, min_confidence=0.5))

    assert summary["items"] == 60
    item = ledger.get("invoice_processing:INV-1003-2026-00967")
    assert item.status == "classified"
    assert item.ai_result["spend_category"] == "software"
    assert item.ai_result["invoice_number"] == "INV-1003-2026-00967"  # the extracted fields stay
    vendors = {
        "V-1001": "office_supplies",
        "V-1002": "it_hardware",
        "V-1003": "software",
        "V-1004": "logistics",
        "V-1005": "facilities",
        "V-1006": "professional_services",
        "V-1007": "raw_materials",
        "V-1008": "travel",
        "V-1009": "office_supplies",
        "V-1010": "raw_materials",
        "V-1011": "software",
    }
    classified = ledger.items(workflow="invoice_processing", run_id="r1", status="classified", limit=None)
    agree = sum(i.ai_result["spend_category"] == vendors[i.ai_result["vendor_id"]] for i in classified)
    assert agree / len(classified) >= 0.9
