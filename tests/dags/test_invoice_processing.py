"""invoice_processing end to end: an inbox of real invoice files to payments and archive, once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from conveyor.quickstart import sample_feeds
from tests.dags.conftest import task_states

REPO = Path(__file__).resolve().parents[2]
WF = "invoice_processing"
SAMPLE_INBOX = REPO / "include" / "data" / "invoices" / "inbox"


def deliver(inbox: Path, delivery: int = 1) -> dict[str, str]:
    inbox.mkdir(parents=True, exist_ok=True)
    documents = sample_feeds.invoice_documents(SAMPLE_INBOX, delivery, datetime.now(UTC).date())
    for name, text in documents.items():
        (inbox / name).write_text(text, encoding="utf-8")
    return documents


def payments(ledger, run_id: str) -> list[tuple]:
    with ledger.connect() as conn:
        return conn.execute(
            "SELECT item_id, amount, idempotency_key FROM example_erp.payments WHERE run_id = %s", (run_id,)
        ).fetchall()


def test_inbox_to_payment_and_archive_once(runner, ledger, mailbox, tmp_path, monkeypatch):
    monkeypatch.setenv("CONVEYOR_HOME", str(tmp_path / "home"))
    inbox = tmp_path / "inbox"
    documents = deliver(inbox)
    when = datetime.now(UTC).replace(microsecond=0)

    run, reviewer = runner.run(WF, {"inbox_path": str(inbox)}, when=when)

    assert run.state == "success", task_states(run)
    counts = ledger.count_by_status(workflow=WF, run_id=run.run_id)
    assert sum(counts.values()) == len(documents)
    assert set(counts) <= {"archived", "rejected"}, counts
    assert reviewer.decisions.get("approve", 0) > 0  # large amounts went to a person
    assert list(inbox.iterdir()) == []  # every document was taken in
    paid = payments(ledger, run.run_id)
    assert len(paid) == counts["archived"]
    assert len({p[2] for p in paid}) == len(paid)
    archived = ledger.items(workflow=WF, run_id=run.run_id, status="archived", limit=None)
    for item in archived[:5]:
        assert (tmp_path / "home" / "files" / "archive" / WF / item.payload["name"]).is_file()
        assert float(next(p[1] for p in paid if p[0] == item.item_id)) == item.ai_result["total"]
    over = [i for i in archived if i.ai_result["total"] > 5000]
    assert over and all(
        any(r.actor.startswith("reviewer:") for r in ledger.history(i.item_id)) for i in over
    ), "every invoice over the threshold was approved by a person"
    # Over the threshold and otherwise sure: a routine approval, not an exception.
    approvals = [i for i in over if any(r.to_status == "pending_approval" for r in ledger.history(i.item_id))]
    assert approvals and all((i.confidence or 0) >= 0.55 for i in approvals)

    again, _ = runner.run(WF, {"inbox_path": str(inbox)}, when=when)

    assert again.state == "success" and again.run_id == run.run_id
    assert len(payments(ledger, run.run_id)) == len(paid)
    assert ledger.count_by_status(workflow=WF, run_id=run.run_id) == counts


def test_an_empty_inbox_is_a_quiet_hour_skipped_with_nobody_paged(runner, ledger, mailbox, tmp_path):
    inbox = tmp_path / "empty"
    inbox.mkdir()

    run, _ = runner.run(WF, {"inbox_path": str(inbox)}, people=False)

    states = task_states(run)
    assert run.state == "success", states
    assert states["intake"] == "skipped" and states["pay"] == "skipped"
    assert mailbox.subjects == []


def test_invoices_delivered_again_are_set_aside_naming_the_run_that_took_them(
    runner, ledger, mailbox, tmp_path, monkeypatch
):
    monkeypatch.setenv("CONVEYOR_HOME", str(tmp_path / "home"))
    inbox = tmp_path / "inbox"
    documents = deliver(inbox)
    first, _ = runner.run(WF, {"inbox_path": str(inbox)})
    assert first.state == "success", task_states(first)

    deliver(inbox)  # the same 60 files again
    later = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    again, _ = runner.run(WF, {"inbox_path": str(inbox)}, people=False, when=later)

    states = task_states(again)
    assert again.state == "success" and states["intake"] == "skipped", states
    assert [p.name for p in inbox.iterdir()] == ["duplicates"]
    [aside] = (inbox / "duplicates").iterdir()
    assert aside.name == again.run_id.replace(":", "_") and len(list(aside.iterdir())) == len(documents)
    assert ledger.count_by_status(workflow=WF, run_id=again.run_id) == {}
    assert mailbox.subjects == []
    assert len(payments(ledger, first.run_id)) == ledger.count_by_status(workflow=WF, run_id=first.run_id)["archived"]


def test_an_invoice_corrected_during_the_review_is_validated_again_and_paid_in_the_same_run(
    runner, ledger, tmp_path, monkeypatch
):
    """An invoice whose total does not add up is quarantined by the gate over the extracted fields;
    the reviewer corrects the total; the same suite passes it and the run pays and archives it."""
    import json

    from conveyor.quickstart.reviewer import reviewer_policy

    monkeypatch.setenv("CONVEYOR_HOME", str(tmp_path / "home"))
    inbox = tmp_path / "inbox"
    documents = deliver(inbox)
    good = json.loads(next(text for name, text in sorted(documents.items()) if name.endswith(".json")))
    lines_sum = round(sum(li["amount"] for li in good["line_items"]), 2)
    bad = {**good, "invoice_number": "INV-1001-2026-77777", "total": round(lines_sum + 100, 2)}
    (inbox / "INV-1001-2026-77777.json").write_text(json.dumps(bad), encoding="utf-8")
    corrected: list[str] = []

    def policy(item: dict) -> tuple:
        if (item.get("ai_result") or {}).get("invoice_number") != "INV-1001-2026-77777":
            return reviewer_policy(item)
        if item["status"] == "quarantined":
            corrected.append(item["reason"])
            return "correct", "the vendor's total was mistyped", {"total": lines_sum}
        return "approve", "checked"

    run, reviewer = runner.run(WF, {"inbox_path": str(inbox)}, policy=policy)

    assert run.state == "success", (task_states(run), reviewer.errors)
    assert len(corrected) == 1 and "the total does not equal the sum of the line items" in corrected[0]
    [item] = [i for i in ledger.items(workflow=WF, run_id=run.run_id, limit=None)
              if (i.ai_result or {}).get("invoice_number") == "INV-1001-2026-77777"]  # fmt: skip
    assert item.status == "archived", ledger.history(item.item_id)
    assert item.ai_result["total"] == lines_sum and item.ai_result["vendor"] == good["vendor"]
    moves = [(r.from_status, r.to_status) for r in ledger.history(item.item_id)]
    assert ("quarantined", "corrected") in moves and ("corrected", "validated") in moves
    [correction] = [r for r in ledger.history(item.item_id) if r.to_status == "corrected"]
    assert correction.detail["field"] == "ai_result"  # the gate read the extracted fields
    assert correction.detail["changes"] == [{"field": "total", "before": lines_sum + 100, "after": lines_sum}]
    assert [p for p in payments(ledger, run.run_id) if p[0] == item.item_id][0][1] == lines_sum
