"""A person's decision never breaks a step's contract (issue 21), through the real API server.

Quarantined rows come from the real gate over a small supplier extract, so each quarantine records
what a person may waive and the contract a correction is coerced to; the API server decides on
them with no suite file.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

from conveyor.ledger.store import ItemUpdate
from tests.gate.conftest import run_gate
from tests.review.conftest import route_to_review

WF = "supplier_exceptions"
BASE = "/conveyor/api/review"
COLUMNS = ["exception_id", "supplier_id", "supplier_name", "po_number", "exception_date", "amount", "currency",
           "quantity_ordered", "quantity_received", "notes"]  # fmt: skip


def item_url(item_id: str, suffix: str = "") -> str:
    return f"{BASE}/items/{quote(item_id, safe='')}{suffix}"


def row(n: int, **values: str) -> dict[str, str]:
    base = {"exception_id": f"EX-2026-{n:06d}", "supplier_id": "SUP-0042", "supplier_name": "Acme",
            "po_number": "PO-104233", "exception_date": "2026-11-20", "amount": "1250.40", "currency": "EUR",
            "quantity_ordered": "10", "quantity_received": "8", "notes": "two units short on delivery"}  # fmt: skip
    base.update(values)
    return base


def gate_rows(ledger, tmp_path: Path, rows: list[dict[str, str]], run_id: str = "run-1") -> None:
    path = tmp_path / f"{run_id}.csv"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    run_gate(ledger, path, run_id=run_id, max_exception_rate=1.0)


@pytest.fixture(scope="module")
def rita(api_server):
    client = api_server.client("rita")
    yield client
    client.close()


@pytest.fixture
def gated(ledger, tmp_path):
    """Four rows: clean, supplier_id empty (hard), amount above the maximum (a business rule),
    amount not a number (hard, type)."""
    gate_rows(ledger, tmp_path, [row(1), row(2, supplier_id=""), row(3, amount="2500000"), row(4, amount="12,50")])
    ids = {n: f"{WF}:EX-2026-{n:06d}" for n in range(1, 5)}
    assert ledger.get(ids[2]).status == "quarantined" and ledger.get(ids[3]).status == "quarantined"
    return ids


def test_approving_an_empty_required_field_is_refused_naming_the_field(rita, ledger, gated):
    refused = rita.post(item_url(gated[2], "/decision"), json={"action": "approve"})
    assert refused.status_code == 409, refused.text
    body = refused.json()["detail"]
    assert body["code"] == "approval_blocked"
    assert [b["field"] for b in body["blockers"]] == ["supplier_id"]
    assert "supplier_id is empty" in body["message"] and "correct" in body["blockers"][0]["actions"]
    assert ledger.get(gated[2]).status == "quarantined"
    # The page reads the same before the key is pressed: the item view and the queue name it.
    view = rita.get(item_url(gated[2])).json()
    assert [b["field"] for b in view["blockers"]] == ["supplier_id"]
    queue = rita.get(f"{BASE}/queue", params={"workflow": WF}).json()["items"]
    blocked = {e["item_id"]: [b["field"] for b in e["blockers"]] for e in queue}
    assert blocked[gated[2]] == ["supplier_id"] and blocked[gated[3]] == []
    # A type failure is hard too.
    typed = rita.post(item_url(gated[4], "/decision"), json={"action": "approve"})
    assert typed.status_code == 409 and typed.json()["detail"]["blockers"][0]["field"] == "amount"


def test_a_business_rule_may_be_approved_as_it_is(rita, ledger, gated):
    done = rita.post(item_url(gated[3], "/decision"), json={"action": "approve", "comment": "known big order"})
    assert done.status_code == 200, done.text
    assert done.json()["to_status"] == "validated"


def test_a_text_amount_is_coerced_to_the_number_the_gate_reads(rita, ledger, gated):
    done = rita.post(item_url(gated[4], "/decision"), json={"action": "correct", "changes": {"amount": "1936.40"}})
    assert done.status_code == 200, done.text
    item = ledger.get(gated[4])
    assert item.status == "corrected" and item.payload["amount"] == 1936.4
    assert isinstance(item.payload["amount"], float)
    diff = ledger.history(gated[4])[-1].detail["changes"]
    assert diff == [{"field": "amount", "before": "12,50", "after": 1936.4}]


def test_an_amount_typed_as_printed_on_a_euro_invoice_is_read_in_the_items_currency(rita, ledger, gated):
    """The suite declares amount's currency_column: the row's EUR is the one sign a person may type."""
    done = rita.post(item_url(gated[4], "/decision"), json={"action": "correct", "changes": {"amount": "1.936,40 €"}})
    assert done.status_code == 200, done.text
    assert ledger.get(gated[4]).payload["amount"] == 1936.4
    assert ledger.history(gated[4])[-1].detail["changes"] == [{"field": "amount", "before": "12,50", "after": 1936.4}]


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"amount": "twelve"}, ["amount", "a number"]),
        ({"amount": "R$ 1.936,40"}, ["amount", "'R$'", "in EUR", "unconverted"]),
        ({"amount": "1,936"}, ["amount", "could be 1936 or 1.936"]),
        ({"quantity_ordered": 2.5}, ["quantity_ordered", "a whole number"]),
        ({"exception_date": "20/11/2026"}, ["exception_date", "a date"]),
        ({"colour": "blue"}, ["unknown field", "'colour'"]),
        ({"notes": "x" * 70_000}, ["'notes'", "at most 65,536"]),
    ],
    ids=["text-for-number", "another-currency", "ambiguous-comma", "fraction-for-integer", "wrong-date-form",
         "unknown-field", "oversized"],
)
def test_a_correction_that_breaks_the_contract_is_refused_naming_the_field(rita, ledger, gated, changes, words):
    refused = rita.post(item_url(gated[2], "/decision"), json={"action": "correct", "changes": changes})
    assert refused.status_code == 422, refused.text
    for word in words:
        assert word in refused.json()["detail"], (word, refused.json())
    assert ledger.get(gated[2]).status == "quarantined"


def test_the_cli_refuses_the_same_approval_with_the_same_message(ledger, gated):
    conveyor = str(Path(sys.executable).with_name("conveyor"))
    done = subprocess.run(
        [conveyor, "--dsn", ledger.dsn, "review", gated[2], "--approve", "--by", "carol"],
        capture_output=True, text=True, env=dict(os.environ), timeout=60,
    )
    assert done.returncode != 0
    assert "supplier_id is empty" in done.stderr and "cannot be approved as it is" in done.stderr
    assert ledger.get(gated[2]).status == "quarantined"


def test_a_bulk_approval_moves_the_waivable_items_and_names_the_blocked_ones(rita, ledger, gated):
    done = rita.post(f"{BASE}/decisions", json={"action": "approve", "filter": {"workflow": WF}})
    assert done.status_code == 200, done.text
    body = done.json()
    assert [d["item_id"] for d in body["decided"]] == [gated[3]]
    blocked = {b["item_id"]: [x["field"] for x in b["blockers"]] for b in body["blocked"]}
    assert blocked == {gated[2]: ["supplier_id"], gated[4]: ["amount"]}
    assert body["remaining"] == 0


# -- an item without an AI answer ---------------------------------------------------------------

ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"category": {"type": "string"}, "draft": {"type": "string", "minLength": 1}},
    "required": ["category", "draft"],
}


@pytest.fixture
def unanswered(ledger):
    """A validated item whose AI step failed (no answer), on the queue as the AI step routes it."""
    ledger.declare_ai_task(WF, "ai_processed", {"name": "classify_exception", "output_schema": ANSWER_SCHEMA})
    route_to_review(ledger, WF, "run-1", validated=["N1", "N2"])
    ledger.transition(
        WF,
        {f"{WF}:{k}": ItemUpdate(reason="model error: no answer", review_target="ai_processed") for k in ("N1", "N2")},
        to_status="pending_review", actor="test.ai#1", from_status="validated",
    )  # fmt: skip
    return f"{WF}:N1", f"{WF}:N2"


def test_an_item_without_an_answer_cannot_be_approved_as_it_is(rita, ledger, unanswered):
    refused = rita.post(item_url(unanswered[0], "/decision"), json={"action": "approve"})
    assert refused.status_code == 409, refused.text
    (blocker,) = refused.json()["detail"]["blockers"]
    assert blocker["code"] == "no_answer" and set(blocker["actions"]) >= {"correct", "retry_ai"}
    bulk = rita.post(f"{BASE}/decisions", json={"action": "approve", "item_ids": list(unanswered)}).json()
    assert bulk["decided"] == [] and {b["item_id"] for b in bulk["blocked"]} == set(unanswered)
    assert ledger.get(unanswered[0]).status == "pending_review"


def test_the_reviewer_writes_the_answer_checked_against_the_schema(rita, ledger, unanswered):
    half = rita.post(item_url(unanswered[0], "/decision"), json={"action": "correct", "changes": {"category": "x"}})
    assert half.status_code == 422 and "draft" in half.json()["detail"]
    answer = {"category": "late delivery", "draft": "Acme delivered PO-104233 late."}
    done = rita.post(item_url(unanswered[0], "/decision"), json={"action": "correct", "changes": answer})
    assert done.status_code == 200, done.text
    assert ledger.get(unanswered[0]).status == "ai_processed"
    assert ledger.get(unanswered[0]).ai_result == answer


def test_an_item_without_an_answer_is_sent_back_to_the_ai_step(rita, ledger, unanswered):
    done = rita.post(item_url(unanswered[1], "/decision"), json={"action": "retry_ai", "comment": "try again"})
    assert done.status_code == 200, done.text
    item = ledger.get(unanswered[1])
    # corrected: the run's review step validates it again and runs its AI step (catch_up)
    assert item.status == "corrected" and item.review_target == "ai_processed"
    assert ledger.history(unanswered[1])[-1].detail["action"] == "retry_ai"


# -- an item whose effect was refused --------------------------------------------------------------


@pytest.fixture
def refused_effect(ledger):
    """Two approved items whose effect ``pay_out`` was refused, on the queue as ItemEffectOperator puts them."""
    route_to_review(ledger, WF, "run-1", validated=["E1", "E2"])
    ids = [f"{WF}:E1", f"{WF}:E2"]
    for step in ("ai_processed", "approved"):
        ledger.transition(WF, ids, to_status=step, actor="test.step#1")
    ledger.claim_effects("pay_out", ids, actor="test.pay#1")
    ledger.transition(
        WF,
        {i: ItemUpdate(reason="already paid under another item", review_target="published",
                       detail={"effect": "pay_out", "from_status": "approved"}) for i in ids},
        to_status="pending_review", actor="test.pay#1", from_status="approved",
    )  # fmt: skip
    return ids


def test_a_refused_effect_cannot_be_approved_into_the_effects_status(rita, ledger, refused_effect):
    refused = rita.post(item_url(refused_effect[0], "/decision"), json={"action": "approve"})
    assert refused.status_code == 409, refused.text
    (blocker,) = refused.json()["detail"]["blockers"]
    assert blocker["code"] == "effect_refused" and "already paid under another item" in blocker["need"]
    assert set(blocker["actions"]) == {"retry_effect", "done_elsewhere", "reject"}
    assert ledger.get(refused_effect[0]).status == "pending_review"


def test_a_refused_effect_is_not_corrected_into_the_effects_status(rita, ledger, refused_effect):
    view = rita.get(item_url(refused_effect[0])).json()
    assert "correct" not in view["actions"] and view["form"] == []
    fixed = rita.post(item_url(refused_effect[0], "/decision"),
                      json={"action": "correct", "changes": {"draft": "Paid by hand."}})  # fmt: skip
    assert fixed.status_code == 422 and "a correction does not apply" in fixed.json()["detail"], fixed.text
    assert ledger.get(refused_effect[0]).status == "pending_review"


def test_a_refused_effect_is_recorded_done_elsewhere_with_its_reference(rita, ledger, refused_effect):
    bare = rita.post(item_url(refused_effect[0], "/decision"), json={"action": "done_elsewhere"})
    assert bare.status_code == 422 and "reference" in bare.json()["detail"]
    done = rita.post(item_url(refused_effect[0], "/decision"),
                     json={"action": "done_elsewhere", "reference": "ERP-PAY-7731"})  # fmt: skip
    assert done.status_code == 200, done.text
    assert ledger.get(refused_effect[0]).status == "published"
    effect = ledger.effects("pay_out", [refused_effect[0]])[refused_effect[0]]
    assert effect["state"] == "done" and effect["result"]["done_elsewhere"] == "ERP-PAY-7731"


def test_a_refused_effect_is_sent_back_to_be_tried_again(rita, ledger, refused_effect):
    done = rita.post(item_url(refused_effect[1], "/decision"), json={"action": "retry_effect"})
    assert done.status_code == 200, done.text
    assert ledger.get(refused_effect[1]).status == "approved"
    assert refused_effect[1] in ledger.claim_effects("pay_out", [refused_effect[1]], actor="test.pay#2")


@pytest.mark.browser
def test_the_page_says_why_approve_is_off_before_the_key_is_pressed(api_server, ledger, gated):
    from tests.support.api import USERS
    from tests.support.browser import chromium_page

    with chromium_page(1500, 1000) as page:
        page.goto(f"{api_server.url}/auth/login?next=/conveyor/review/%3Fworkflow%3D{WF}")
        page.fill("input[name=username]", "rita")
        page.fill("input[name=password]", USERS["rita"][1])
        page.click("button[type=submit]")
        page.wait_for_selector(f"#queue tbody tr[data-item-id='{gated[2]}']")
        page.click(f"#queue tbody tr[data-item-id='{gated[2]}']")
        page.wait_for_selector(f"#item-body[data-loaded='{gated[2]}']")
        page.wait_for_selector("#approve-blocked:not([hidden])")
        assert "supplier_id is empty" in page.inner_text("#approve-blocked")
        assert page.is_disabled("#approve")
        page.click("#item-head")
        page.keyboard.press("a")
        page.wait_for_selector("#decision-result", state="visible")
        page.wait_for_function("() => document.querySelector('#decision-result').textContent.startsWith('Not applied')")
        assert ledger.get(gated[2]).status == "quarantined"
        # A waivable item on the same page: Approve is on, and works.
        page.click(f"#queue tbody tr[data-item-id='{gated[3]}']")
        page.wait_for_selector(f"#item-body[data-loaded='{gated[3]}']")
        assert page.is_hidden("#approve-blocked") and page.is_enabled("#approve")
        page.click("#approve")
        page.wait_for_function("() => document.querySelector('#decision-result').textContent.includes('now validated')")
    assert ledger.get(gated[3]).status == "validated"


# -- undo ------------------------------------------------------------------------------------------


def test_a_reviewer_undoes_their_own_approval_while_the_item_has_not_moved_on(rita, api_server, ledger, gated):
    approved = rita.post(item_url(gated[3], "/decision"), json={"action": "approve"})
    assert approved.status_code == 200 and approved.json()["undoable"] is True  # the page offers Undo
    with api_server.client("admin") as admin:
        theirs = admin.post(item_url(gated[3], "/decision"), json={"action": "undo"})
    assert theirs.status_code == 422 and "only they can undo it" in theirs.json()["detail"]
    undone = rita.post(item_url(gated[3], "/decision"), json={"action": "undo"})
    assert undone.status_code == 200, undone.text
    assert undone.json()["to_status"] == "quarantined" and ledger.get(gated[3]).status == "quarantined"
    last = ledger.history(gated[3])[-1]
    assert last.actor == "reviewer:rita" and last.detail["action"] == "undo"
    assert last.detail["undoes"]["to_status"] == "validated"
    # Once the item has moved on (a step picked it up), there is nothing to undo.
    rita.post(item_url(gated[3], "/decision"), json={"action": "approve"})
    ledger.transition(WF, [gated[3]], to_status="ai_processed", actor="test.ai#1", from_status="validated")
    late = rita.post(item_url(gated[3], "/decision"), json={"action": "undo"})
    assert late.status_code == 422 and ledger.get(gated[3]).status == "ai_processed"


def test_undoing_a_correction_restores_the_values_and_a_rejection_is_final(rita, ledger, gated):
    corrected = rita.post(item_url(gated[4], "/decision"), json={"action": "correct", "changes": {"amount": "19.5"}})
    assert ledger.get(gated[4]).payload["amount"] == 19.5 and corrected.json()["undoable"] is True
    undone = rita.post(item_url(gated[4], "/decision"), json={"action": "undo"})
    assert undone.status_code == 200, undone.text
    item = ledger.get(gated[4])
    assert item.status == "quarantined" and item.payload["amount"] == "12,50"
    rejected = rita.post("/conveyor/api/review/decisions",
                         json={"action": "reject", "comment": "wrong key", "item_ids": [gated[2]]})  # as the page
    assert rejected.json()["decided"][0]["undoable"] is False  # so the page offers no Undo
    final = rita.post(item_url(gated[2], "/decision"), json={"action": "undo"})
    assert final.status_code == 422 and "final" in final.json()["detail"]


def test_the_cli_undoes_its_own_approval(ledger, gated):
    conveyor = str(Path(sys.executable).with_name("conveyor"))

    def cli(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([conveyor, "--dsn", ledger.dsn, "review", gated[3], *argv, "--by", "carol"],
                              capture_output=True, text=True, env=dict(os.environ), timeout=60)  # fmt: skip

    assert cli("--approve").returncode == 0 and ledger.get(gated[3]).status == "validated"
    done = cli("--undo")
    assert done.returncode == 0, done.stderr
    assert ledger.get(gated[3]).status == "quarantined"
    assert ledger.history(gated[3])[-1].detail["action"] == "undo"


# -- the correction form (issue 26) ------------------------------------------------------------------


def test_the_item_view_carries_a_typed_correction_form_with_the_failing_field(rita, ledger, gated, unanswered):
    view = rita.get(item_url(gated[4])).json()
    form = {f["name"]: f for f in view["form"]}
    assert view["form"][0]["name"] == "amount" and len(form) == 10  # the failing field first, then the others
    assert form["amount"]["kind"] == "number" and form["amount"]["failing"] and form["amount"]["value"] == "12,50"
    assert [n for n, f in form.items() if f["failing"]] == ["amount"]
    date = form["exception_date"]
    assert date["kind"] == "date" and date["hint"] == "a date in the form YYYY-MM-DD"
    assert form["supplier_name"] == {"name": "supplier_name", "kind": "text", "value": "Acme", "choices": [],
                                     "failing": False, "hint": None}  # fmt: skip
    assert {f["name"]: f["failing"] for f in rita.get(item_url(gated[2])).json()["form"]}["supplier_id"] is True
    # An AI answer's form comes from the AI step's stored output schema; the blocked fields fail.
    answer = {f["name"]: f for f in rita.get(item_url(unanswered[0])).json()["form"]}
    assert set(answer) == {"category", "draft"} and answer["draft"]["failing"] and answer["category"]["failing"]


def test_a_decided_item_is_not_claimed(rita, ledger, gated):
    assert rita.post(item_url(gated[3], "/claim"), json={}).status_code == 200  # on the queue: claimed
    rita.post(item_url(gated[2], "/decision"), json={"action": "reject", "comment": "no supplier"})
    late = rita.post(item_url(gated[2], "/claim"), json={})
    assert late.status_code == 409 and late.json()["detail"]["code"] == "not_awaiting_review", late.text
    assert late.json()["detail"]["status"] == "rejected"
