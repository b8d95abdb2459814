"""Review cards, priority from the declaration, bulk decisions and claims, on the real ledger."""

from __future__ import annotations

import threading

import psycopg
import pytest

from conveyor import ReviewField, Workflow
from conveyor.review.bulk import QueueFilter
from conveyor.review.claims import ClaimHeld, ReviewClaims
from conveyor.review.errors import DecisionConflict, InvalidDecision
from conveyor.review.review_queue import ReviewQueue
from tests.review.conftest import route_to_review

CARDS = Workflow(
    name="card_orders",
    source_field="supplier",
    review_card=(
        ReviewField("payload.supplier", label="Supplier", kind="label"),
        ReviewField("amount", kind="amount"),
        ReviewField("ai_result.summary", label="Summary", kind="long"),
        "confidence",
    ),
    priority_field="payload.amount",
)
WF = "supplier_exceptions"


@pytest.fixture
def queue(ledger) -> ReviewQueue:
    ledger.declare(CARDS, actor="tests")
    return ReviewQueue(ledger)


def test_card_fields_come_from_the_declaration_and_priority_orders_the_queue(queue, ledger):
    payloads = {
        "small": {"supplier": "Acme", "amount": 120},
        "big": {"supplier": "Globex", "amount": 9800.5},
        "none": {"supplier": "Initech", "amount": "n/a"},
    }
    route_to_review(ledger, CARDS.name, "run-1", pending=list(payloads), payloads=payloads)
    page = queue.list(workflows=[CARDS.name])
    assert [e.item.business_key for e in page.entries] == ["big", "small", "none"]
    assert [e.priority_value for e in page.entries] == [9800.5, 120, None]
    card = queue.card(page.entries[0].item)
    assert [(f.label, f.kind, f.value) for f in card] == [
        ("Supplier", "label", "Globex"),
        ("amount", "amount", 9800.5),
        ("Summary", "long", "maybe"),
        ("confidence", "percent", 0.41),
    ]
    # An explicit item priority still comes first; a workflow without a priority field sorts by age.
    route_to_review(ledger, WF, "run-2", quarantined=["Q"], priorities={"Q": 5})
    assert queue.list().entries[0].item.item_id == f"{WF}:Q"
    assert queue.card(queue.list(workflows=[WF]).entries[0].item) == []


def test_bulk_decision_by_ids_and_by_filter_lists_what_others_decided(queue, ledger):
    route_to_review(ledger, WF, "run-1", pending=["A", "B", "C"], quarantined=["Q"], validated=["V"])
    route_to_review(ledger, WF, "run-2", pending=["D"])
    queue.decide(f"{WF}:B", "reject", reviewer="sam", comment="dup")

    outcome = queue.decide_many(
        [f"{WF}:A", f"{WF}:B", f"{WF}:Q", f"{WF}:V", f"{WF}:nope"], "approve", reviewer="rita", comment="ok"
    )
    assert {d.item_id: d.to_status for d in outcome.decided} == {f"{WF}:A": "ai_processed", f"{WF}:Q": "validated"}
    assert [(r.item_id, r.decided_by, r.status) for r in outcome.already_decided] == [
        (f"{WF}:B", "reviewer:sam", "rejected")
    ]
    assert [r.item_id for r in outcome.not_awaiting_review] == [f"{WF}:V"]
    assert outcome.unknown == [f"{WF}:nope"]
    last = ledger.history(f"{WF}:A")[-1]
    assert (last.actor, last.reason, last.from_status) == ("reviewer:rita", "ok", "pending_review")

    by_filter = queue.decide_many(
        None, "reject", reviewer="rita", comment="bad run", where=QueueFilter([WF], run_id="run-1")
    )
    assert [d.item_id for d in by_filter.decided] == [f"{WF}:C"]
    assert ledger.get(f"{WF}:D").status == "pending_review"
    with pytest.raises(InvalidDecision):
        queue.decide_many([f"{WF}:D"], "correct", reviewer="rita")


def test_concurrent_bulk_and_single_decisions_decide_each_item_once(queue, ledger):
    keys = [f"K{n:03d}" for n in range(120)]
    route_to_review(ledger, WF, "run-1", pending=keys)
    ids = [f"{WF}:{k}" for k in keys]
    bulk_ids, single_ids = ids[:80], ids[40:]
    results: dict[str, object] = {}
    singles: dict[str, str] = {}
    start = threading.Barrier(2)

    def bulk() -> None:
        start.wait()
        results["bulk"] = queue.decide_many(bulk_ids, "approve", reviewer="bulky", comment="all fine")

    def one_by_one() -> None:
        start.wait()
        for item_id in single_ids:
            try:
                queue.decide(item_id, "reject", reviewer="solo")
                singles[item_id] = "won"
            except DecisionConflict as exc:
                singles[item_id] = exc.decided_by

    threads = [threading.Thread(target=bulk), threading.Thread(target=one_by_one)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    outcome = results["bulk"]
    won_by_bulk = {d.item_id for d in outcome.decided}
    lost_by_bulk = {r.item_id: r.decided_by for r in outcome.already_decided}
    assert won_by_bulk | set(lost_by_bulk) == set(bulk_ids) and not won_by_bulk & set(lost_by_bulk)
    assert set(lost_by_bulk.values()) <= {"reviewer:solo"}
    for item_id in single_ids:
        if item_id in won_by_bulk:
            assert singles[item_id] == "reviewer:bulky"
        else:
            assert singles[item_id] == "won"
    # Each item has exactly one decision in its history.
    for item_id in ids:
        decisions = [r for r in ledger.history(item_id) if r.from_status == "pending_review"]
        assert len(decisions) == 1, item_id


def test_claims_show_the_holder_expire_and_end_with_a_decision(queue, ledger):
    route_to_review(ledger, WF, "run-1", pending=["A", "B"])
    claims = ReviewClaims(ledger, minutes=5)
    mine = claims.claim(f"{WF}:A", "rita")
    assert mine.reviewer == "rita" and mine.expires_at > mine.claimed_at
    assert claims.claim(f"{WF}:A", "rita").expires_at >= mine.expires_at  # renewing is fine
    with pytest.raises(ClaimHeld) as held:
        claims.claim(f"{WF}:A", "sam")
    assert held.value.claim.reviewer == "rita" and "being reviewed by rita" in str(held.value)
    assert set(claims.live([f"{WF}:A", f"{WF}:B"])) == {f"{WF}:A"}

    # An expired claim is nobody's: the next reviewer takes it over.
    ReviewClaims(ledger, minutes=0).claim(f"{WF}:B", "sam")
    assert claims.live([f"{WF}:B"]) == {}
    assert claims.claim(f"{WF}:B", "rita").reviewer == "rita"

    # Only one's own claim is released; a decision through the bulk route ends every claim on it.
    assert claims.release([f"{WF}:A"], "sam") == 0
    queue.decide_many([f"{WF}:A"], "approve", reviewer="sam")
    assert claims.live([f"{WF}:A", f"{WF}:B"]).keys() == {f"{WF}:B"}


def test_claim_minutes_come_from_the_conveyor_option(ledger, monkeypatch):
    monkeypatch.setenv("AIRFLOW__CONVEYOR__REVIEW_CLAIM_MINUTES", "3")
    assert ReviewClaims(ledger).minutes == 3


def _seed_pending(ledger, n: int, run_id: str = "run-big") -> None:
    """``n`` items waiting in pending_review (written by SQL: the decision, not the routing, is tested)."""
    with ledger.connect() as conn:
        conn.execute(
            "INSERT INTO conveyor.items (item_id, workflow, business_key, run_id, status, payload, input_hash,"
            " review_target) SELECT %s || ':K-' || g, %s, 'K-' || g, %s, 'pending_review', '{}'::jsonb,"
            " md5(g::text), 'ai_processed' FROM generate_series(1, %s) AS g",
            (WF, WF, run_id, n),
        )
        conn.execute("ANALYZE conveyor.item_states, conveyor.item_bodies")


@pytest.mark.slow
def test_all_matching_decides_every_one_of_50000_items_and_wakes_the_run(ledger):
    """Issue 21: "all matching" stopped at 10,000 and said nothing of the rest."""
    _seed_pending(ledger, 50_000)
    queue = ReviewQueue(ledger)
    with psycopg.connect(ledger.dsn, autocommit=True) as conn:
        conn.execute(f"LISTEN {ledger.REVIEW_CHANNEL}")
        outcome = queue.decide_many(None, "reject", reviewer="alice", comment="feed withdrawn",
                                    where=QueueFilter([WF], run_id="run-big"))  # fmt: skip
        notes = list(conn.notifies(timeout=2, stop_after=1))
    assert len(outcome.decided) == 50_000 and outcome.remaining == 0
    assert ledger.count_by_status(workflow=WF) == {"rejected": 50_000}
    with ledger.connect() as conn:
        audited = conn.execute("SELECT count(*) FROM conveyor.transitions WHERE actor = 'reviewer:alice'").fetchone()
    assert audited[0] == 50_000
    assert notes and notes[0].payload.endswith("run-big")


def test_all_matching_with_a_cap_says_how_many_remain(ledger):
    _seed_pending(ledger, 1_200)
    outcome = ReviewQueue(ledger).decide_many(
        None, "approve", reviewer="alice", where=QueueFilter([WF]), max_items=500
    )
    assert len(outcome.decided) == 500 and outcome.remaining == 700
    assert ledger.count_by_status(workflow=WF) == {"ai_processed": 500, "pending_review": 700}
