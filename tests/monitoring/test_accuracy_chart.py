"""The threshold curve on the health page, in a real headless Chromium, over a real step's records."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI

from conveyor.ai.runner import StepConfig, run_step
from conveyor.monitoring.api import router
from conveyor.quickstart.api_server import free_port
from conveyor.review.review_queue import ReviewQueue
from conveyor_examples.supplier_exceptions import CLASSIFY_EXCEPTION
from tests.ai.seeding import exception_rows, seed_exceptions
from tests.support.browser import chromium_page

WF = "supplier_exceptions"
SHOTS = Path("/tmp/shots-accuracy-chart")


@pytest.fixture
def decided(ledger) -> None:
    """A run of the step with spot checks, a reviewer who corrects every fifth one and approves the rest."""
    seed_exceptions(ledger, "r1", exception_rows(200))
    ledger.declare_ai_task(WF, "ai_processed", CLASSIFY_EXCEPTION.declaration(), actor="t#1")
    run_step(ledger, StepConfig.of(workflow=WF, run_id="r1", task=CLASSIFY_EXCEPTION, actor="t.classify#1",
                                min_confidence=0.5, spot_check=0.5, max_error_rate=0.25))  # fmt: skip
    queue = ReviewQueue(ledger)
    waiting = ledger.items(workflow=WF, run_id="r1", status="pending_review", limit=None)
    wrong = [i for i in waiting if "checked at random" in i.reason][::5]
    for item in wrong:
        other = "documentation" if item.ai_result["category"] != "documentation" else "other"
        queue.decide(item.item_id, "correct", reviewer="ann", changes={"category": other})
    queue.decide_many([i.item_id for i in waiting if i not in wrong], "approve", reviewer="ann")


@pytest.fixture
def served(decided) -> Iterator[str]:
    import uvicorn

    conveyor = FastAPI()
    conveyor.include_router(router)
    root = FastAPI()
    root.mount("/conveyor", conveyor)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(root, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "uvicorn did not start"
    yield f"http://127.0.0.1:{port}/conveyor"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.mark.browser
def test_the_health_page_draws_each_ai_steps_threshold_curve(served):
    with chromium_page(1280, 1700) as page:
        problems: list[str] = []
        page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
        page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)

        page.goto(f"{served}/health?workflow={WF}")
        page.wait_for_selector("body[data-state=ready]", timeout=30_000)

        panel = page.locator("#accuracy .panel[data-step='classify_exception']")
        assert panel.count() == 1
        assert int(panel.locator(".chart").get_attribute("data-points")) >= 15  # one per candidate threshold
        assert panel.locator("path[data-series='estimate']").count() == 1
        assert panel.locator("path[data-series='upper']").count() == 1
        assert panel.locator("line[data-series='target']").count() == 1
        assert panel.locator("circle[data-mark='now']").count() == 1
        text = panel.inner_text()
        assert "target 25%" in text and "now 0.50" in text
        assert "95% upper bound" in text and "spot checks" in text
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.locator("section.accuracy").screenshot(path=str(SHOTS / "threshold-curve.png"))
        assert problems == []
    assert (SHOTS / "threshold-curve.png").stat().st_size > 10_000
