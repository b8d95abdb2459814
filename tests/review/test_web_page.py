"""The review page in a real headless Chromium, logged into a real Airflow API server."""

from __future__ import annotations

import json

import pytest

from conveyor.quickstart.api_server import ApiServer
from tests.review.conftest import route_to_review
from tests.support.api import USERS
from tests.support.browser import chromium_page
from tests.support.review_page import is_review_page

WF = "supplier_exceptions"
SCRIPT = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'

pytestmark = pytest.mark.browser


@pytest.fixture
def browser_page():
    with chromium_page(1500, 1000) as page:
        yield page


def test_reviewer_approves_an_item_from_the_page_in_the_airflow_ui(
    api_server: ApiServer, ledger, browser_page, tmp_path
):
    route_to_review(
        ledger, WF, "run-7", pending=["PO-1", "PO-2"], payloads={"PO-1": {"note": SCRIPT, "amount": 7}}
    )
    route_to_review(ledger, "invoice_processing", "run-8", quarantined=["INV-3"])
    page = browser_page
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))

    # Log into Airflow (simple auth manager's login page), landing on the plugin's page in the UI.
    page.goto(f"{api_server.url}/auth/login?next=/plugin/conveyor-review")
    page.fill("input[name=username]", "rita")
    page.fill("input[name=password]", USERS["rita"][1])
    page.click("button[type=submit]")
    page.wait_for_url("**/plugin/conveyor-review")

    # The Airflow UI shows the review page in its frame.
    review = page.frame_locator("iframe[src*='/conveyor/review/']")
    queue = review.locator("#queue tbody")
    queue.locator("tr").first.wait_for()
    assert queue.locator("tr").count() == 3
    assert "3 waiting" in review.locator("#queue-summary").inner_text()
    first_row = queue.locator("tr").first
    assert "confidence 0.41 below 0.80" in first_row.locator("td.checks").inner_text()
    age = first_row.locator(".age").inner_text()
    assert age.endswith("s") or age.endswith("m")

    # Filter by workflow, open the item: its data (the hostile payload shows as text) and history.
    review.locator("#filter-workflow").select_option(WF)
    review.locator("#queue tbody tr", has_text="invoice_processing").wait_for(state="detached")
    review.locator(f"#queue tbody tr[data-item-id='{WF}:PO-1']").click()
    review.locator(f"#item-title[data-item-id='{WF}:PO-1']").wait_for()
    payload_text = review.locator("#item-payload").inner_text()
    assert json.loads(payload_text) == {"note": SCRIPT, "amount": 7}
    assert "<script>window.__pwned = 1</script>" in payload_text
    review.locator(f"#item-body[data-loaded='{WF}:PO-1']").wait_for()
    assert review.locator("#history tbody tr").count() == 3

    # Approve with a comment: the next item opens.
    review.locator("#comment").fill("checked with procurement <b>bold</b>")
    review.locator("#approve").click()
    review.locator("#decision-result", has_text="approved: now ai_processed").wait_for()
    review.locator(f"#item-title[data-item-id='{WF}:PO-2']").wait_for()

    # The ledger shows the decision, made by the logged-in reviewer.
    item = ledger.get(f"{WF}:PO-1")
    assert item.status == "ai_processed"
    last = ledger.history(f"{WF}:PO-1")[-1]
    assert (last.actor, last.reason) == ("reviewer:rita", "checked with procurement <b>bold</b>")
    review.locator(f"#queue tbody tr[data-item-id='{WF}:PO-1']").wait_for(state="detached")

    # Where is item INV-3: the search box answers from the ledger.
    review.locator("#filter-workflow").select_option("")
    review.locator("#search").fill("INV-3")
    review.locator("#search-form button").click()
    review.locator("#search-result li", has_text="invoice_processing:INV-3").wait_for()
    assert "quarantined" in review.locator("#search-result li").inner_text()
    assert "run-8" in review.locator("#search-result li").inner_text()
    review.locator("#item-title[data-item-id='invoice_processing:INV-3']").wait_for()

    # Nothing from the data ran as code.
    frame = next(f for f in page.frames if f is not page.main_frame and is_review_page(f.url))
    assert frame.evaluate("window.__pwned") is None
    assert dialogs == []
    assert frame.evaluate("document.querySelectorAll('#item-payload script, #item-payload img').length") == 0

    screenshot = tmp_path / "review-page.png"
    page.screenshot(path=str(screenshot), full_page=True)
    assert screenshot.stat().st_size > 10_000
