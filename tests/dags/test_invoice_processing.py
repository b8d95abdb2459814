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


def test_pdf_invoices_are_paid_and_files_no_one_can_read_go_to_a_person(runner, ledger, mailbox, tmp_path, monkeypatch):
    """Most invoices arrive as PDF: those with a text layer are read and paid once; a scan without
    one and a Word file are held for a person with the reason; the inbox (a name with parentheses,
    '#' and '%') is left empty."""
    from tests.support.pdfs import scanned_pdf, text_pdf

    monkeypatch.setenv("CONVEYOR_HOME", str(tmp_path / "home"))
    inbox = tmp_path / "inbox (march) #2 100%"
    documents = deliver(inbox)
    as_pdf = sorted(name for name in documents if name.endswith(".txt"))[:3]
    for name in as_pdf:  # exported by an accounting system: the same printed invoice, as a PDF
        (inbox / name).unlink()
        (inbox / f"{Path(name).stem}.pdf").write_bytes(text_pdf(documents[name].splitlines()))
    (inbox / "scan 0042 (vendor).pdf").write_bytes(scanned_pdf())
    (inbox / "remittance #7.docx").write_bytes(b"PK\x03\x04 a word file")

    run, reviewer = runner.run(WF, {"inbox_path": str(inbox)})

    assert run.state == "success", (task_states(run), reviewer.errors)
    assert list(inbox.iterdir()) == []  # every file was taken in
    items = {i.business_key: i for i in ledger.items(workflow=WF, run_id=run.run_id, limit=None)}
    assert len(items) == len(documents) + 2
    paid = {p[0]: p for p in payments(ledger, run.run_id)}
    for name in as_pdf:
        invoice = items[Path(name).stem]
        assert invoice.payload["format"] == "pdf"
        assert invoice.status == "archived", ledger.history(invoice.item_id)
        assert float(paid[invoice.item_id][1]) == invoice.ai_result["total"]  # paid once, the printed total
    for key, reason in (
        ("scan 0042 (vendor)", "scan 0042 (vendor).pdf is a PDF without a text layer (1 page; a scanned image?)"),
        ("remittance #7", "remittance #7.docx is a .docx file, not a document type this workflow reads"),
    ):
        held = items[key]
        assert held.item_id not in paid
        assert held.status == "rejected"  # the scripted person read the reason and sent it back
        [quarantine] = [r for r in ledger.history(held.item_id) if r.to_status == "quarantined"]
        assert quarantine.reason.startswith(reason)
    assert set(ledger.count_by_status(workflow=WF, run_id=run.run_id)) <= {"archived", "rejected"}
