"""The ways on for blocked items, in real runs (issue 21), decided over the HTTP review API.

* supplier_exceptions on the LLM server on 127.0.0.1: the model fails one item (no answer); an
  approval is refused naming ``ai_result.draft``; sent back to the AI step (``retry_ai``), the run's
  review step runs the AI step for it, the model answers, and the run publishes it.
* invoice_processing: the same invoice delivered twice, both waved through the duplicate check by
  a careless reviewer; the payment step pays one and refuses the other ("already paid under another
  item"). Approving the refused one is refused; ``retry_effect`` tries the payment again (refused
  again, nothing paid twice); ``done_elsewhere`` with a reference moves it on and the run archives
  it: one payment for the invoice number.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from conveyor import storage_path
from conveyor.ai.spot_checks import drawn, spot_seed
from conveyor.quickstart import sample_feeds
from conveyor.quickstart.dag_test import manual_run_id
from conveyor.quickstart.reviewer import reviewer_policy
from conveyor.quickstart.run import load_dag
from tests.ai.conftest import PRIMARY_CONN, llm, llm_server_process  # noqa: F401 - fixtures
from tests.dags.conftest import Runner, task_states

REPO = Path(__file__).resolve().parents[2]
BASE = "/conveyor/api/review"


@pytest.fixture
def runner(api_server, ledger) -> Runner:
    return Runner(api_server)


def decide(client: Any, item_id: str, body: dict[str, Any]) -> Any:
    return client.post(f"{BASE}/items/{quote(item_id, safe='')}/decision", json=body)


def test_an_item_the_model_failed_is_refused_on_approve_and_answered_after_retry_ai(
    runner, ledger, llm, api_server, tmp_path, monkeypatch  # noqa: F811 - the imported fixture
):
    wf = "supplier_exceptions"
    monkeypatch.setenv("CONVEYOR_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AIRFLOW_VAR_CONVEYOR_SUPPLIER_MODEL", PRIMARY_CONN)  # the LLM, one Variable away
    name, text = sample_feeds.csv_delivery(
        REPO / "include" / "data" / wf / "extract.csv", key="exception_id", date_column="exception_date",
        delivery=1, today=datetime.now(UTC).date(), plant=sample_feeds.plant_supplier_rows,
    )  # fmt: skip
    (tmp_path / name).write_text(text, encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(text)))
    key = rows[1]["exception_id"]
    assert sum(key in r["exception_id"] for r in rows) == 1  # the rule matches this item's prompt only
    target = f"{wf}:{key}"
    # The run whose AI step's spot-check draw passes this item by (the draw is seeded by the run id,
    # so 2% of run ids sent its new answer to review anyway, and the moves below were not its).
    step = load_dag(wf, REPO / "dags").get_task("classify_and_draft")
    when = datetime.now(UTC).replace(microsecond=0)
    while drawn(spot_seed(wf, manual_run_id(when), step.task_id), target, step.spot_check):
        when -= timedelta(seconds=1)
    # The model rejects this item's request once (a permanent error: no retry, no fallback), then answers.
    llm.configure(rules=[{"match": key, "kind": "400", "times": 1}])
    refusals: list[Any] = []

    with api_server.client("rita") as rita:

        def policy(item: dict[str, Any]):
            if item["item_id"] != target or (item.get("ai_result") or {}).get("draft"):
                return reviewer_policy(item)
            if not refusals:  # as a reviewer would: Approve first, and read why not
                refusals.append(decide(rita, target, {"action": "approve", "comment": "looks fine"}))
            return "retry_ai", "the model did not answer: ask it again"

        run, reviewer = runner.run(wf, {"extract_path": str(tmp_path / name)}, policy=policy, when=when)

    assert run.state == "success", (task_states(run), reviewer.errors)
    [refused] = refusals
    assert refused.status_code == 409, refused.text
    detail = refused.json()["detail"]
    assert detail["code"] == "approval_blocked" and "ai_result.draft" in detail["message"], detail
    assert [b["code"] for b in detail["blockers"]] == ["no_answer"]
    assert "retry_ai" in detail["blockers"][0]["actions"]

    item = ledger.get(target)
    assert item.status == "published", ledger.history(target)
    assert item.ai_result["draft"].strip() and item.ai_result["category"]
    moves = [(r.from_status, r.to_status, r.actor.split("#")[0]) for r in ledger.history(target)]
    at = moves.index(("validated", "pending_review", f"{wf}.classify_and_draft"))
    assert moves[at + 1:at + 4] == [
        ("pending_review", "corrected", "reviewer:rita"),
        ("corrected", "validated", f"{wf}.review_drafts"),  # through its gate again
        ("validated", "ai_processed", f"{wf}.review_drafts"),  # and its AI step, which answered
    ], moves
    prompts = [p for p in llm.stats()["prompts"] if key in p]
    assert len(prompts) == 2  # the failed request and the one after retry_ai
    [outbox] = ledger.effects("publish_report").values()
    assert target in outbox["result"]["items"]
    assert item.ai_result["draft"] in storage_path(outbox["result"]["files"][0]).read_text()


def _payments(ledger, invoice_number: str) -> list[tuple]:
    with ledger.connect() as conn:
        return conn.execute("SELECT item_id, amount FROM example_erp.payments WHERE invoice_number = %s",
                            (invoice_number,)).fetchall()  # fmt: skip


def test_a_refused_payment_is_retried_then_recorded_done_elsewhere_and_paid_once(
    runner, ledger, api_server, tmp_path, monkeypatch
):
    wf = "invoice_processing"
    monkeypatch.setenv("CONVEYOR_HOME", str(tmp_path / "home"))
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    documents = sample_feeds.invoice_documents(REPO / "include" / "data" / "invoices" / "inbox", 1,
                                               datetime.now(UTC).date())  # fmt: skip
    for doc, text in documents.items():
        (inbox / doc).write_text(text, encoding="utf-8")
    original = sorted(d for d in documents if d.endswith(".json"))[0]
    invoice = json.loads(documents[original])
    copy = f"rescan {Path(original).stem}.json"  # the same invoice, scanned in again under another name
    (inbox / copy).write_text(documents[original], encoding="utf-8")
    number = invoice["invoice_number"]

    def waving_duplicates_through(item: dict[str, Any]):
        if item["status"] == "quarantined" and (item.get("ai_result") or {}).get("invoice_number") == number:
            return "approve", "two deliveries, both to pay"  # a duplicate is a business rule: waivable
        return reviewer_policy(item)

    when = datetime.now(UTC).replace(microsecond=0)
    run, reviewer = runner.run(wf, {"inbox_path": str(inbox)}, when=when, policy=waving_duplicates_through)

    assert run.state == "success", (task_states(run), reviewer.errors)
    paid = _payments(ledger, number)
    assert len(paid) == 1, paid
    twins = [i for i in ledger.items(workflow=wf, run_id=run.run_id, limit=None)
             if (i.ai_result or {}).get("invoice_number") == number]  # fmt: skip
    assert len(twins) == 2
    [refused] = [i for i in twins if i.item_id != paid[0][0]]
    assert refused.status == "pending_review" and "already paid under another item" in refused.reason

    with api_server.client("rita") as rita:
        approve = decide(rita, refused.item_id, {"action": "approve"})
        assert approve.status_code == 409, approve.text
        [blocker] = approve.json()["detail"]["blockers"]
        assert blocker["code"] == "effect_refused" and "'paid'" in blocker["need"]
        assert ledger.get(refused.item_id).status == "pending_review"

        retry = decide(rita, refused.item_id, {"action": "retry_effect", "comment": "try the ERP again"})
        assert retry.status_code == 200, retry.text
        assert ledger.get(refused.item_id).status == "approved"
        again, _ = runner.run(wf, {"inbox_path": str(inbox)}, when=when, people=False)  # the run, cleared
        assert again.state == "success" and again.run_id == run.run_id, task_states(again)
        assert ledger.get(refused.item_id).status == "pending_review"  # tried again, refused again
        assert _payments(ledger, number) == paid  # and nothing paid twice

        bare = decide(rita, refused.item_id, {"action": "done_elsewhere"})
        assert bare.status_code == 422 and "reference" in bare.json()["detail"], bare.text
        done = decide(rita, refused.item_id, {"action": "done_elsewhere", "reference": f"paid as {paid[0][0]}"})
        assert done.status_code == 200, done.text
    assert ledger.get(refused.item_id).status == "paid"
    effect = ledger.effects("pay", [refused.item_id])[refused.item_id]
    assert effect["state"] == "done" and effect["result"]["done_elsewhere"] == f"paid as {paid[0][0]}"

    last, _ = runner.run(wf, {"inbox_path": str(inbox)}, when=when, people=False)

    assert last.state == "success", task_states(last)
    assert {ledger.get(i.item_id).status for i in twins} == {"archived"}
    assert _payments(ledger, number) == paid  # one payment for the invoice, ever
    [record] = [r for r in ledger.history(refused.item_id) if r.to_status == "paid"]
    assert record.actor == "reviewer:rita" and record.detail["reference"] == f"paid as {paid[0][0]}"

