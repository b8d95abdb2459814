"""The review page by keyboard in Chromium (issues 21 and 26): a field form for corrections, recent
reject reasons by number, the ways on for blocked items, Undo, plain words, details by key.

Quarantined rows come from the real gate over a small supplier extract (so each quarantine records
its checks and the contract a correction is coerced to); key presses are counted as a reviewer
would press them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conveyor.ledger.store import ItemUpdate
from tests.review.conftest import route_to_review
from tests.review.test_decision_contract import ANSWER_SCHEMA, gate_rows, row
from tests.support.api import USERS
from tests.support.browser import chromium_page

WF = "supplier_exceptions"
SHOTS = Path("/tmp/shots-review-page-keys")

pytestmark = pytest.mark.browser


class Keys:
    """Presses keys on the page and counts them, as a reviewer's fingers would."""

    def __init__(self, page) -> None:
        self.page, self.count = page, 0

    def press(self, key: str) -> None:
        self.page.keyboard.press(key)
        self.count += 1

    def type(self, text: str) -> None:
        self.page.keyboard.type(text)
        self.count += len(text)


@pytest.fixture
def gated(ledger, tmp_path):
    """Quarantined by the real gate: supplier_id empty (hard), amount above the maximum (waivable),
    amount not a number (hard), and another waivable row."""
    gate_rows(ledger, tmp_path, [row(1), row(2, supplier_id=""), row(3, amount="2500000"), row(4, amount="12,50"),
                                 row(5, amount="3100000")])  # fmt: skip
    return {n: f"{WF}:EX-2026-{n:06d}" for n in range(1, 6)}


def open_page(page, api_server, query: str) -> None:
    page.goto(f"{api_server.url}/auth/login?next=/conveyor/review/%3F{query}")
    page.fill("input[name=username]", "rita")
    page.fill("input[name=password]", USERS["rita"][1])
    page.click("button[type=submit]")
    page.wait_for_selector("#queue tbody tr")


def open_item(page, item_id: str) -> None:
    page.click(f"#queue tbody tr[data-item-id='{item_id}']")
    try:
        page.wait_for_selector(f"#item-body[data-loaded='{item_id}']", timeout=20_000)
    except Exception as exc:  # once in CI, unexplained: say what the page showed instead
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "open-item-failed.png"))
        shown = page.evaluate("""() => ({
            url: location.href,
            title: document.querySelector('#item-title').dataset.itemId,
            loaded: document.querySelector('#item-body').dataset.loaded,
            result: document.querySelector('#decision-result').textContent,
            rows: [...document.querySelectorAll('#queue tbody tr')]
                .map(r => r.dataset.itemId + (r.classList.contains('cursor') ? '*' : '')),
        })""")
        raise AssertionError(f"{item_id} did not open; the page showed {shown}") from exc
    page.click("#item-head")  # keyboard focus on the page, not in a field


def result_says(page, text: str) -> None:
    try:
        page.wait_for_function("t => document.querySelector('#decision-result').textContent.includes(t)", arg=text)
    except Exception as exc:  # seen twice under load, cause not yet found: say what the page showed instead
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "result-says-failed.png"))
        shown = page.evaluate("""() => ({
            result: document.querySelector('#decision-result').textContent,
            title: document.querySelector('#item-title').dataset.itemId,
            approve_disabled: document.querySelector('#approve').disabled,
            recorded: window.__conveyorReview,
        })""")
        raise AssertionError(f"the result never said {text!r}; the page showed {shown}") from exc


def test_a_one_field_correction_is_a_form_with_the_failing_field_focused(api_server, ledger, gated):
    SHOTS.mkdir(parents=True, exist_ok=True)
    with chromium_page(1280, 800) as page:
        open_page(page, api_server, f"workflow%3D{WF}")
        open_item(page, gated[4])
        keys = Keys(page)
        keys.press("e")
        page.wait_for_selector("#editor:not([hidden]) #field-amount")
        # The failing field has the focus, its text selected: typing replaces it.
        assert page.evaluate("document.activeElement.id") == "field-amount"
        assert page.is_visible("#field-supplier_name") and not page.is_visible("#editor-text")
        assert page.get_attribute("#field-amount", "inputmode") == "decimal"
        keys.type("1.936,40")  # as printed on the invoice: read as the number, in the row's EUR
        page.screenshot(path=str(SHOTS / "field-form.png"))
        keys.press("Enter")
        result_says(page, "corrected")
        assert keys.count <= 10, keys.count
        item = ledger.get(gated[4])
        assert item.status == "corrected" and item.payload["amount"] == 1936.4  # a number, not the text
        assert item.payload["supplier_name"] == "Acme"  # the other fields stay as they were

        # The empty supplier: e, the id, Enter (10 keys); Approve was off, saying why, before.
        open_item(page, gated[2])
        assert page.is_disabled("#approve") and "supplier_id is empty" in page.inner_text("#approve-blocked")
        keys = Keys(page)
        keys.press("e")
        page.wait_for_selector("#editor:not([hidden]) #field-supplier_id")
        assert page.evaluate("document.activeElement.id") == "field-supplier_id"
        keys.type("SUP-0042")
        keys.press("Enter")
        result_says(page, "corrected")
        assert keys.count <= 10, keys.count
    assert ledger.get(gated[2]).payload["supplier_id"] == "SUP-0042"
    [fix] = [r for r in ledger.history(gated[2]) if r.to_status == "corrected"]
    assert fix.actor == "reviewer:rita" and fix.detail["changes"] == [
        {"field": "supplier_id", "before": None, "after": "SUP-0042"}]


def test_a_known_reject_reason_is_three_keys_and_R_with_nothing_selected_says_so(api_server, ledger, gated):
    with chromium_page(1280, 800) as page:
        open_page(page, api_server, f"workflow%3D{WF}")
        open_item(page, gated[3])
        page.keyboard.press("R")
        page.wait_for_selector("#bulk-result.error")
        assert page.inner_text("#bulk-result").startswith("Nothing selected: press x")
        assert page.is_hidden("#reason-dialog")

        page.keyboard.press("r")
        page.wait_for_selector("#reason-dialog[open]")
        page.keyboard.type("amount confirmed wrong by the supplier")
        page.keyboard.press("Enter")
        result_says(page, "rejected")
        assert page.is_hidden("#undo")  # a rejection is final: no Undo that would only say so

        open_item(page, gated[5])
        keys = Keys(page)
        keys.press("r")
        page.wait_for_selector("#reason-dialog[open] #recent-reasons li")
        assert page.inner_text("#recent-reasons li") == "amount confirmed wrong by the supplier"
        keys.press("1")
        keys.press("Enter")
        result_says(page, "rejected")
        assert keys.count <= 4, keys.count
    for n in (3, 5):
        last = ledger.history(gated[n])[-1]
        assert last.to_status == "rejected" and last.reason == "amount confirmed wrong by the supplier"


def test_a_second_key_while_saving_is_refused_where_the_reviewer_looks(api_server, ledger, gated):
    with chromium_page(1280, 800) as page:
        open_page(page, api_server, f"workflow%3D{WF}")
        open_item(page, gated[3])
        # The first approval is held on its way to the server until the second key is in: two
        # presses "at once" were not at once under load (the first was saved and the page had moved
        # to the next item when the second came, so the second was judged there).
        held: list = []

        def hold(route) -> None:
            held.append(route)

        page.route("**/decisions", hold)
        page.keyboard.press("a")
        for _ in range(300):
            if held:
                break
            page.wait_for_timeout(20)
        assert held, "the approval never left the page"
        page.keyboard.press("a")
        page.wait_for_function("() => window.__conveyorReview.refused === 1")
        held[0].continue_()
        page.unroute("**/decisions")
        result_says(page, "approved")
        recorded = page.evaluate("window.__conveyorReview")
        assert len(recorded["decisions"]) == 1 and recorded["refused"] == 1, recorded
        assert "was not applied: press it again" in page.inner_text("#decision-result")
    assert ledger.get(gated[3]).status == "validated"
    # The next item was not decided by the refused key.
    assert {ledger.get(gated[n]).status for n in (2, 4, 5)} == {"quarantined"}


def test_undo_takes_back_ones_own_last_decision_by_key(api_server, ledger, gated):
    with chromium_page(1280, 800) as page:
        open_page(page, api_server, f"workflow%3D{WF}")
        open_item(page, gated[3])
        # Plain words, before the key is pressed: where an approval sends it, the checks' messages.
        panel = page.inner_text("#item-panel")
        assert "Approve sends it on as" in panel and "checked, going on to the next step" in panel
        assert "expect_" not in panel and "validated" not in panel.split("History")[0]
        page.keyboard.press("a")
        result_says(page, "approved")
        assert ledger.get(gated[3]).status == "validated"
        page.wait_for_selector("#undo:not([hidden])")
        page.keyboard.press("u")
        result_says(page, "Undone")
    item = ledger.get(gated[3])
    assert item.status == "quarantined"
    assert ledger.history(gated[3])[-1].detail["action"] == "undo"


@pytest.fixture
def blocked(ledger):
    """An item its AI step gave no answer and one whose payment was refused, as the steps route them."""
    ledger.declare_ai_task(WF, "ai_processed", {"name": "classify_exception", "output_schema": ANSWER_SCHEMA})
    route_to_review(ledger, WF, "run-1", validated=["N1", "E1"])
    ledger.transition(WF, {f"{WF}:N1": ItemUpdate(reason="model error: no answer", review_target="ai_processed")},
                      to_status="pending_review", actor="test.ai#1", from_status="validated")  # fmt: skip
    ledger.transition(WF, [f"{WF}:E1"], to_status="ai_processed", actor="test.ai#1")
    ledger.transition(WF, [f"{WF}:E1"], to_status="approved", actor="test.promote#1")
    ledger.claim_effects("pay_out", [f"{WF}:E1"], actor="test.pay#1")
    ledger.transition(
        WF, {f"{WF}:E1": ItemUpdate(reason="invoice 77 of vendor V is already paid under another item",
                                    review_target="published",
                                    detail={"effect": "pay_out", "from_status": "approved"})},
        to_status="pending_review", actor="test.pay#1", from_status="approved",
    )  # fmt: skip
    return f"{WF}:N1", f"{WF}:E1"


def test_the_ways_on_are_offered_as_keys_with_why_approve_is_off(api_server, ledger, blocked):
    unanswered, refused = blocked
    SHOTS.mkdir(parents=True, exist_ok=True)
    with chromium_page(1280, 800) as page:
        open_page(page, api_server, f"workflow%3D{WF}")
        open_item(page, unanswered)
        assert page.is_disabled("#approve") and "ai_result.draft is empty" in page.inner_text("#approve-blocked")
        assert page.is_visible("#retry-ai") and page.is_hidden("#retry-effect") and page.is_hidden("#done-elsewhere")
        page.screenshot(path=str(SHOTS / "no-answer.png"))
        page.keyboard.press("i")
        result_says(page, "sent back to the AI step")
        assert ledger.get(unanswered).status == "corrected"

        open_item(page, refused)
        assert page.is_disabled("#approve") and "already paid under another item" in page.inner_text("#approve-blocked")
        assert page.is_visible("#retry-effect") and page.is_visible("#done-elsewhere") and page.is_hidden("#retry-ai")
        assert page.is_hidden("#edit")  # a refused effect is not corrected
        page.screenshot(path=str(SHOTS / "refused-effect.png"))
        page.keyboard.press("w")
        page.wait_for_selector("#reason-dialog[open]")
        assert page.is_hidden("#recent-reasons")  # a reference, not a reject reason
        page.keyboard.type("ERP-PAY-7731")
        page.keyboard.press("Enter")
        result_says(page, "recorded as done elsewhere")
    assert ledger.get(refused).status == "published"
    assert ledger.effects("pay_out", [refused])[refused]["result"]["done_elsewhere"] == "ERP-PAY-7731"


def test_details_are_reachable_by_key_and_a_decided_item_is_not_claimed(api_server, ledger, gated):
    from conveyor.review.claims import ReviewClaims

    ledger.transition(WF, {gated[5]: ItemUpdate(reason="by hand")}, to_status="rejected", actor="reviewer:sam")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with chromium_page(1280, 800) as page:
        open_page(page, api_server, f"workflow%3D{WF}%26status%3Dwaiting")
        # A status the queue does not have: said so, the workflow kept.
        assert "no status" in page.inner_text("#bulk-result")
        assert f"workflow={WF}" in page.url and "status=" not in page.url
        open_item(page, gated[4])
        history = "#history-box"
        assert not page.evaluate(f"(s => {{ const r = document.querySelector(s).getBoundingClientRect();"
                                 f" return r.top >= 0 && r.top < window.innerHeight; }})('{history}')")
        parts = page.evaluate("[...document.querySelectorAll('#item-body .details')].filter(n => !n.hidden).length")
        assert parts >= 2  # the data, (the source row,) the history
        for _ in range(parts):  # d brings each into view in turn: the last press, the history
            page.keyboard.press("d")
        page.wait_for_function(f"(s => {{ const r = document.querySelector(s).getBoundingClientRect();"
                               f" return r.top >= 0 && r.top < window.innerHeight; }})('{history}')")
        page.screenshot(path=str(SHOTS / "details-by-key.png"))
        # Opening an already-decided item (a link) shows it and claims nothing.
        page.goto(f"{api_server.url}/conveyor/review/?workflow={WF}&item={gated[5]}")
        page.wait_for_selector(f"#item-body[data-loaded='{gated[5]}']")
        assert "not awaiting review" in page.inner_text("#decision-result")
        page.wait_for_timeout(500)
    assert gated[5] not in ReviewClaims(ledger, minutes=1).live([gated[5]])
