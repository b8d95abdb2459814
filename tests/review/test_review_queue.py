"""The review queue against the real ledger: listing, reading, deciding, races, refusals."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from conveyor.ledger import Ledger, UnknownItem
from conveyor.review.errors import DecisionConflict, InvalidDecision, NotAwaitingReview
from conveyor.review.review_queue import Action, ReviewQueue
from tests.review.conftest import route_to_review

WF = "supplier_exceptions"


@pytest.fixture
def queue(ledger: Ledger) -> ReviewQueue:
    return ReviewQueue(ledger)


def test_queue_lists_review_items_by_priority_then_age(ledger, queue):
    route_to_review(ledger, WF, "run-1", pending=["A"], quarantined=["B"], validated=["C"])
    time.sleep(0.02)
    route_to_review(ledger, WF, "run-2", pending=["D"], priorities={"D": 5})
    time.sleep(0.02)
    route_to_review(ledger, "invoice_processing", "run-9", quarantined=["INV-1"])

    page = queue.list()

    ids = [e.item.item_id for e in page.entries]
    # D has the highest priority; then oldest first (B was quarantined before A was routed).
    assert ids == [f"{WF}:D", f"{WF}:B", f"{WF}:A", "invoice_processing:INV-1"]
    assert page.total == 4
    assert f"{WF}:C" not in ids  # validated items are not on the queue
    entry = page.entries[2]
    assert entry.item.reason == "confidence 0.41 below 0.80"
    assert entry.item.confidence == pytest.approx(0.41)
    assert entry.item.ai_result == {"category": "late delivery", "summary": "maybe"}
    assert entry.age_seconds >= 0 and entry.waiting_since == entry.item.updated_at
    assert queue.workflows() == ["invoice_processing", WF]


def test_queue_filters_and_pages(ledger, queue):
    route_to_review(ledger, WF, "run-1", pending=["A", "B"], quarantined=["C"])
    route_to_review(ledger, WF, "run-2", pending=["D"])

    assert [e.item.item_id for e in queue.list(run_id="run-2").entries] == [f"{WF}:D"]
    assert [e.item.item_id for e in queue.list(status="quarantined").entries] == [f"{WF}:C"]
    assert queue.list(workflows=["invoice_processing"]).total == 0
    assert queue.list(workflows=[]).entries == []

    first = queue.list(workflows=[WF], limit=3)
    second = queue.list(workflows=[WF], limit=3, offset=3)
    assert first.total == second.total == 4
    assert len(first.entries) == 3 and len(second.entries) == 1
    assert {e.item.item_id for e in first.entries + second.entries} == {f"{WF}:{k}" for k in "ABCD"}

    with pytest.raises(ValueError, match="not a review status"):
        queue.list(status="validated")
    with pytest.raises(ValueError, match="limit"):
        queue.list(limit=0)


def test_view_shows_history_and_open_decisions(ledger, queue):
    route_to_review(ledger, WF, "run-1", pending=["A"], quarantined=["B"], validated=["C"])

    pending = queue.view(f"{WF}:A")
    assert pending.awaiting_review and pending.actions == [Action.APPROVE, Action.REJECT, Action.CORRECT]
    assert pending.approve_to == "ai_processed"
    assert [r.to_status for r in pending.history] == ["received", "validated", "pending_review"]
    assert pending.last_decision is None

    quarantined = queue.view(f"{WF}:B")
    assert quarantined.actions == [Action.APPROVE, Action.REJECT, Action.CORRECT]
    assert quarantined.approve_to == "validated"

    done = queue.view(f"{WF}:C")
    assert not done.awaiting_review and done.actions == [] and done.approve_to is None

    with pytest.raises(UnknownItem):
        queue.view(f"{WF}:nope")


def test_approve_reject_correct_write_guarded_transitions_with_audit_rows(ledger, queue):
    route_to_review(ledger, WF, "run-1", pending=["A", "B"], quarantined=["C", "D"])

    approved = queue.decide(f"{WF}:A", "approve", reviewer="alice", comment="checked with the supplier")
    rejected = queue.decide(f"{WF}:B", Action.REJECT, reviewer="bob")
    accepted = queue.decide(f"{WF}:C", "approve", reviewer="alice", comment="null is fine here")
    corrected = queue.decide(
        f"{WF}:D",
        "correct",
        reviewer="carol",
        comment="filled supplier",
        changes={"supplier_id": "S-7", "amount": 100},
    )

    assert (approved.from_status, approved.to_status) == ("pending_review", "ai_processed")
    assert (rejected.to_status, accepted.to_status, corrected.to_status) == (
        "rejected",
        "validated",
        "corrected",
    )
    assert ledger.get(f"{WF}:A").status == "ai_processed"
    assert ledger.get(f"{WF}:B").status == "rejected"
    assert ledger.get(f"{WF}:C").status == "validated"
    d = ledger.get(f"{WF}:D")
    # Merged field by field; only what changed is in the audit row's diff.
    assert d.status == "corrected" and d.payload == {"key": "D", "amount": 100, "supplier_id": "S-7"}
    assert ledger.history(f"{WF}:D")[-1].detail == {
        "action": "correct",
        "field": "payload",
        "changes": [{"field": "supplier_id", "before": None, "after": "S-7", "added": True}],
    }

    last = ledger.history(f"{WF}:A")[-1]
    assert (last.from_status, last.to_status, last.actor, last.reason) == (
        "pending_review",
        "ai_processed",
        "reviewer:alice",
        "checked with the supplier",
    )
    assert ledger.history(f"{WF}:B")[-1].actor == "reviewer:bob"
    assert ledger.history(f"{WF}:D")[-1].actor == "reviewer:carol"
    assert queue.list().total == 0


def test_invalid_decisions_are_refused_and_change_nothing(ledger, queue):
    route_to_review(ledger, WF, "run-1", pending=["A"], quarantined=["B"])

    with pytest.raises(InvalidDecision, match="corrected fields"):
        queue.decide(f"{WF}:B", "correct", reviewer="alice")
    with pytest.raises(InvalidDecision, match="changes nothing: amount already"):
        queue.decide(f"{WF}:B", "correct", reviewer="alice", changes={"amount": 100})
    with pytest.raises(InvalidDecision, match="non-empty JSON object"):
        queue.decide(f"{WF}:B", "correct", reviewer="alice", changes={})
    with pytest.raises(InvalidDecision, match="only accepted with 'correct'"):
        queue.decide(f"{WF}:B", "approve", reviewer="alice", changes={"amount": 1})
    with pytest.raises(InvalidDecision, match="unknown decision"):
        queue.decide(f"{WF}:A", "maybe", reviewer="alice")
    with pytest.raises(ValueError, match="reviewer name"):
        queue.decide(f"{WF}:A", "approve", reviewer="  ")
    with pytest.raises(UnknownItem):
        queue.decide(f"{WF}:missing", "approve", reviewer="alice")
    assert ledger.get(f"{WF}:A").status == "pending_review"
    assert ledger.get(f"{WF}:B").status == "quarantined"


def test_decision_on_item_not_awaiting_review_is_refused_clearly(ledger, queue):
    route_to_review(ledger, WF, "run-1", validated=["C"])

    with pytest.raises(NotAwaitingReview) as refused:
        queue.decide(f"{WF}:C", "approve", reviewer="alice")

    assert not isinstance(refused.value, DecisionConflict)
    assert "is not awaiting review: it is 'validated'" in str(refused.value)
    assert ledger.get(f"{WF}:C").status == "validated"
    assert len(ledger.history(f"{WF}:C")) == 2


def test_second_decision_gets_conflict_naming_who_decided(ledger, queue):
    route_to_review(ledger, WF, "run-1", pending=["A"])
    queue.decide(f"{WF}:A", "reject", reviewer="alice", comment="duplicate")

    with pytest.raises(DecisionConflict) as conflict:
        queue.decide(f"{WF}:A", "approve", reviewer="bob")

    assert conflict.value.decided_by == "reviewer:alice"
    assert conflict.value.status == "rejected"
    assert "already decided by reviewer:alice" in str(conflict.value)
    assert ledger.get(f"{WF}:A").status == "rejected"


def test_concurrent_deciders_exactly_one_wins(ledger, queue):
    """Many reviewers decide the same items at the same instant: each item moves exactly once."""
    keys = [f"K{i}" for i in range(20)]
    route_to_review(ledger, WF, "run-1", pending=keys)
    reviewers = ["alice", "bob", "carol", "dave"]
    barrier = threading.Barrier(len(reviewers))
    outcomes: dict[str, list[tuple[str, str]]] = {r: [] for r in reviewers}

    def work(name: str) -> None:
        own = ReviewQueue(Ledger(ledger.dsn))
        barrier.wait()
        for key in keys:
            action = "approve" if name in {"alice", "carol"} else "reject"
            try:
                own.decide(f"{WF}:{key}", action, reviewer=name)
                outcomes[name].append((key, "won"))
            except DecisionConflict as exc:
                outcomes[name].append((key, exc.decided_by))

    threads = [threading.Thread(target=work, args=(r,)) for r in reviewers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)

    for key in keys:
        winners = [r for r in reviewers if (key, "won") in outcomes[r]]
        assert len(winners) == 1, (key, outcomes)
        losers_saw = {who for r in reviewers for k, who in outcomes[r] if k == key and who != "won"}
        assert losers_saw == {f"reviewer:{winners[0]}"}
        decisions = [h for h in ledger.history(f"{WF}:{key}") if h.from_status == "pending_review"]
        assert len(decisions) == 1 and decisions[0].actor == f"reviewer:{winners[0]}"


def test_hostile_strings_are_stored_verbatim_and_harm_nothing(ledger, queue):
    injection = "x'); DROP TABLE conveyor.items; --"
    script = "<script>window.__pwned = 1</script>"
    route_to_review(ledger, WF, "run-1", pending=["A"], payloads={"A": {"note": script, "sql": injection}})

    queue.decide(f"{WF}:A", "approve", reviewer="o'brien", comment=injection + script)

    assert ledger.history(f"{WF}:A")[-1].reason == injection + script
    assert ledger.history(f"{WF}:A")[-1].actor == "reviewer:o'brien"
    assert ledger.get(f"{WF}:A").payload == {"note": script, "sql": injection}
    assert queue.list(workflows=[injection]).total == 0
    assert queue.list(run_id=injection).total == 0
    assert queue.search(injection) == []
    with psycopg.connect(ledger.dsn) as conn:
        assert conn.execute("SELECT count(*) FROM conveyor.items").fetchone()[0] == 1


def test_search_finds_an_item_by_id_or_business_key(ledger, queue):
    route_to_review(ledger, WF, "run-1", validated=["PO-1042"])
    route_to_review(ledger, "invoice_processing", "run-2", quarantined=["PO-1042"])

    by_key = queue.search(" PO-1042 ")
    assert {i.item_id for i in by_key} == {f"{WF}:PO-1042", "invoice_processing:PO-1042"}
    by_id = queue.search(f"{WF}:PO-1042")
    assert [(i.item_id, i.status, i.run_id) for i in by_id] == [(f"{WF}:PO-1042", "validated", "run-1")]
    assert [i.item_id for i in queue.search("PO-1042", workflows=["invoice_processing"])] == [
        "invoice_processing:PO-1042"
    ]
    assert queue.search("PO-9999") == []


def _declare_summary_step(ledger: Ledger) -> None:
    """The AI step of the routed items stores what its answers must be, as AIStepOperator does."""
    from typing import Literal

    from pydantic import BaseModel, ConfigDict

    from conveyor import AITask, NotVague, Required

    class Summary(BaseModel):
        model_config = ConfigDict(extra="forbid")
        category: Literal["late_delivery", "quality"]
        summary: str

    task = AITask(
        name="summarize_exception",
        instructions="Summarize.",
        output_schema=Summary,
        render=lambda item: dict(item.payload),
        checks=(Required(("category", "summary")), NotVague("summary")),
        label_field="category",
    )
    ledger.declare_ai_task(WF, "ai_processed", task.declaration(), actor="test.ai#1")


def test_correcting_an_ai_answer_merges_checks_keeps_the_models_answer_and_resumes(ledger, queue):
    route_to_review(ledger, WF, "run-1", pending=["A"])
    _declare_summary_step(ledger)

    done = queue.decide(
        f"{WF}:A",
        "correct",
        reviewer="alice",
        comment="category was misspelt",
        changes={"category": "late_delivery", "summary": "Acme delivered PO-1 two weeks late."},
    )

    assert (done.from_status, done.to_status) == ("pending_review", "ai_processed")
    item = ledger.get(f"{WF}:A")
    assert item.ai_result == {"category": "late_delivery", "summary": "Acme delivered PO-1 two weeks late."}
    last = ledger.history(f"{WF}:A")[-1]
    assert last.actor == "reviewer:alice" and last.reason == "category was misspelt"
    assert last.detail["model_answer"] == {"category": "late delivery", "summary": "maybe"}
    assert last.detail["model_confidence"] == pytest.approx(0.41)
    assert last.detail["ai_task"] == "summarize_exception"
    assert last.detail["changes"] == [
        {"field": "category", "before": "late delivery", "after": "late_delivery"},
        {"field": "summary", "before": "maybe", "after": "Acme delivered PO-1 two weeks late."},
    ]


def test_a_corrected_ai_answer_that_breaks_the_schema_or_a_check_is_refused(ledger, queue):
    route_to_review(ledger, WF, "run-1", pending=["A"])
    with pytest.raises(InvalidDecision, match="no AI step of workflow 'supplier_exceptions' has stored"):
        queue.decide(f"{WF}:A", "correct", reviewer="alice", changes={"category": "quality"})
    _declare_summary_step(ledger)

    with pytest.raises(InvalidDecision, match=r"category: 'late delivery' is not one of \['late_delivery'"):
        queue.decide(f"{WF}:A", "correct", reviewer="alice", changes={"summary": "Acme was two weeks late."})
    with pytest.raises(InvalidDecision, match="summary.*vague"):
        queue.decide(f"{WF}:A", "correct", reviewer="alice", changes={"category": "quality", "summary": "see notes"})
    with pytest.raises(InvalidDecision, match="'colour' is not part of the answer of AI task 'summarize_exception'"):
        queue.decide(f"{WF}:A", "correct", reviewer="alice", changes={"category": "quality", "colour": "red"})

    item = ledger.get(f"{WF}:A")
    assert item.status == "pending_review" and item.ai_result == {"category": "late delivery", "summary": "maybe"}
    assert len(ledger.history(f"{WF}:A")) == 3
