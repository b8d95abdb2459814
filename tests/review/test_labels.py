"""Decisions become labels: every way to decide an AI answer records whether the model's answer stood."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from conveyor.ai.runner import StepConfig, run_step
from conveyor.review.bulk import QueueFilter
from conveyor.review.review_queue import ReviewQueue
from conveyor_examples.supplier_exceptions import CLASSIFY_EXCEPTION
from tests.ai.seeding import exception_rows, seed_exceptions

WORKFLOW = "supplier_exceptions"


def _labels(ledger):
    now = datetime.now(UTC)
    return {
        label.item_id: label
        for label in ledger.answer_labels(WORKFLOW, since=now - timedelta(hours=1), until=now + timedelta(hours=1))
    }


def test_each_decision_labels_the_answer_with_its_confidence_checks_and_share(ledger):
    seed_exceptions(ledger, "r1", exception_rows(80))
    # what the operator stores when the step runs: a correction is checked against it
    ledger.declare_ai_task(WORKFLOW, "ai_processed", CLASSIFY_EXCEPTION.declaration(), actor="t.classify#1")
    run_step(
        ledger,
        StepConfig.of(workflow=WORKFLOW, run_id="r1", task=CLASSIFY_EXCEPTION, actor="t.classify#1", spot_check=0.25),
    )
    queue = ReviewQueue(ledger)
    waiting = ledger.items(workflow=WORKFLOW, run_id="r1", status="pending_review", limit=None)
    spot = [i for i in waiting if "checked at random" in i.reason]
    doubtful = [i for i in waiting if i not in spot and i.confidence is not None]
    assert len(spot) >= 4 and len(doubtful) >= 3

    # one bulk approval over spot checks and doubtful answers: one label each, set-based
    approved = [spot[0].item_id, spot[1].item_id, doubtful[0].item_id]
    queue.decide_many(approved, "approve", reviewer="ann", comment="fine")
    # a correction of a spot check: wrong, with the field
    other = "documentation" if spot[2].ai_result["category"] != "documentation" else "late_delivery"
    queue.decide(spot[2].item_id, "correct", reviewer="bob", changes={"category": other})
    # a rejection: the input was bad; a filter-based approval of the rest of run r1
    queue.decide(doubtful[1].item_id, "reject", reviewer="bob", comment="garbled note")
    labels = _labels(ledger)

    assert {i: labels[i].outcome for i in approved} == dict.fromkeys(approved, "right")
    first = labels[spot[0].item_id]
    assert first.spot_check and first.share == 0.25 and first.confidence == spot[0].confidence
    assert first.failed_checks == [] and first.decided_by == "reviewer:ann" and first.step == "classify_exception"
    low = labels[doubtful[0].item_id]
    assert not low.spot_check and low.share == 1.0 and low.failed_checks and low.confidence == doubtful[0].confidence
    corrected = labels[spot[2].item_id]
    assert (corrected.outcome, corrected.fields, corrected.spot_check) == ("wrong", ["category"], True)
    assert labels[doubtful[1].item_id].outcome == "bad_input"

    # taken back: undecided again, no label; decided again: labelled by the new decision
    queue.decide(spot[0].item_id, "undo", reviewer="ann")
    assert spot[0].item_id not in _labels(ledger)
    queue.decide(spot[0].item_id, "reject", reviewer="ann", comment="on second thought")
    assert _labels(ledger)[spot[0].item_id].outcome == "bad_input"

    outcome = queue.decide_many(None, "approve", reviewer="cy", where=QueueFilter(workflows=[WORKFLOW], run_id="r1"))
    labels = _labels(ledger)
    assert all(labels[d.item_id].outcome == "right" for d in outcome.decided)
    assert len(labels) == len(waiting) - len(outcome.blocked)


def test_decisions_on_items_no_ai_step_routed_write_no_label(ledger):
    from tests.review.conftest import route_to_review

    route_to_review(ledger, WORKFLOW, "r2", pending=["P1"], quarantined=["Q1"])
    ReviewQueue(ledger).decide_many([f"{WORKFLOW}:P1", f"{WORKFLOW}:Q1"], "reject", reviewer="ann")
    assert _labels(ledger) == {}
