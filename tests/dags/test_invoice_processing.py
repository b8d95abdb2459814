"""invoice_processing end to end: an inbox of real invoice files to payments and archive, once."""

from __future__ import annotations

import html
from datetime import UTC, datetime
from pathlib import Path

from conveyor.quickstart import sample_feeds

from tests.dags.conftest import task_states

REPO = Path(__file__).resolve().parents[2]
WF = "invoice_processing"


def test_inbox_to_payment_and_archive_once(runner, ledger, mailbox, tmp_path, monkeypatch):
    monkeypatch.setenv("CONVEYOR_HOME", str(tmp_path / "home"))
    inbox = tmp_path / "inbox"
    count = sample_feeds.invoice_inbox(REPO / "include" / "data" / "invoices" / "inbox", inbox, 1,
                                       datetime.now(UTC).date())
    when = datetime.now(UTC).replace(microsecond=0)

    run, reviewer = runner.run(WF, {"inbox_path": str(inbox)}, when=when)

    assert run.state == "success", task_states(run)
    counts = ledger.count_by_status(workflow=WF, run_id=run.run_id)
    assert sum(counts.values()) == count
    assert set(counts) <= {"archived", "rejected"}, counts
    assert reviewer.decisions.get("approve", 0) > 0  # large amounts went to a person
    with ledger.connect() as conn:
        payments = conn.execute(
            "SELECT item_id, amount, idempotency_key FROM conveyor.payments WHERE run_id = %s", (run.run_id,)
        ).fetchall()
    assert len(payments) == counts["archived"]
    assert len({p[2] for p in payments}) == len(payments)
    archived = ledger.items(workflow=WF, run_id=run.run_id, status="archived", limit=None)
    for item in archived[:5]:
        assert not Path(item.payload["path"]).exists()
        assert (tmp_path / "home" / "archive" / WF / item.payload["name"]).is_file()
        assert float(next(p[1] for p in payments if p[0] == item.item_id)) == item.ai_result["total"]
    over = [i for i in archived if i.ai_result["total"] > 5000]
    assert over and all(
        any(r.actor.startswith("reviewer:") for r in ledger.history(i.item_id)) for i in over
    ), "every invoice over the threshold was approved by a person"

    again, _ = runner.run(WF, {"inbox_path": str(inbox)}, when=when)

    assert again.state == "success" and again.run_id == run.run_id
    with ledger.connect() as conn:
        assert conn.execute("SELECT count(*) FROM conveyor.payments").fetchone() == (len(payments),)
    assert ledger.count_by_status(workflow=WF, run_id=run.run_id) == counts


def test_an_empty_inbox_fails_loudly(runner, ledger, mailbox, tmp_path):
    inbox = tmp_path / "empty"
    inbox.mkdir()

    run, _ = runner.run(WF, {"inbox_path": str(inbox)}, people=False)

    assert run.state == "failed"
    assert task_states(run)["intake"] == "failed"
    assert task_states(run)["pay"] == "upstream_failed"
    assert any("step 'intake' failed" in s for s in mailbox.subjects)
    assert any("has no documents" in html.unescape(b) for b in mailbox.bodies)
