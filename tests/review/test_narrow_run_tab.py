"""The run's Review tab beside Airflow's grid is narrow: when one column per card field would push
"Why it waits" out of its panel, the card fields share one column; a wide window keeps them apart.
Real headless Chromium in the real Airflow UI."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from conveyor_examples.supplier_exceptions import SUPPLIER_EXCEPTIONS
from tests.review.conftest import route_to_review
from tests.support.browser import chromium_page
from tests.support.review_page import log_in, review_frame, run_tab

pytestmark = pytest.mark.browser

SHOTS = Path("/tmp/shots-review-page")
#: the supplier workflow's declaration (its review card), on the run fixture's DAG: the run tab
#: shows the items of the DAG's own workflow
CARD = dataclasses.replace(SUPPLIER_EXCEPTIONS, name="review_page_orders", version=None)
SUPPLIERS = ["Helvetia Präzisionsteile AG", "Nordwind Logistics GmbH", "Bergmann Stahlhandel AG"]


def test_card_fields_share_a_column_when_the_tab_is_narrow(api_server, ledger, airflow_db):
    from tests.dag_fixtures.review_page_dags import orders_dag

    run = orders_dag.test()
    ledger.declare(CARD, actor="tests")
    data = {
        f"EX-2026-{k:06d}": {
            "supplier_name": SUPPLIERS[k % 3], "po_number": f"PO-10{k:04d}", "amount": 400 + k * 13.5,
            "supplier_id": None if k >= 6 else f"SUP-{k:04d}",
            "notes": "Safety data sheet for precision bushings is outdated (version from 2019), please send it",
        }
        for k in range(8)
    }  # fmt: skip
    keys = list(data)
    route_to_review(ledger, CARD.name, run.run_id, pending=keys[:6], quarantined=keys[6:], payloads=data)
    SHOTS.mkdir(parents=True, exist_ok=True)
    seen = {}
    for width in (1280, 1920):
        with chromium_page(width, 900) as page:
            log_in(page, api_server.url, "rita", run_tab(CARD.name, run.run_id))
            frame = review_frame(page)
            frame.wait_for_selector("#item-title:not(:empty)")
            page.screenshot(path=str(SHOTS / f"run-tab-{width}.png"))
            heads = frame.eval_on_selector_all("#queue thead th", "ths => ths.map(t => t.textContent)")
            overflow = frame.evaluate(
                "document.querySelector('#queue').scrollWidth - document.querySelector('#queue-panel').clientWidth"
            )
            panel = frame.locator("#queue-panel").bounding_box()
            reason = frame.locator("#queue tbody tr td.checks").first.bounding_box()
            assert overflow <= 1, (width, overflow)
            # The search box and its button are whole inside the tab, not clipped at its edge.
            view_width = frame.evaluate("document.documentElement.clientWidth")
            for box in ("#search", "#search-form button"):
                edge = frame.evaluate(f"document.querySelector('{box}').getBoundingClientRect().right")
                assert edge <= view_width, (width, box, edge, view_width)
            assert reason["x"] + reason["width"] <= panel["x"] + panel["width"] + 1, (width, reason, panel)
            seen[width] = heads
            if width == 1280:  # the empty pairs of a quarantined row are left out of its card
                first = frame.inner_text("#queue tbody tr:first-child td.card")
                assert "Supplier" in first and "Category" not in first, first
    assert seen[1280] == ["", "Item", "Card", "Why it waits"]
    assert seen[1920] == ["", "Item", "Supplier", "PO", "Amount", "Category", "Confidence", "Why it waits"]
