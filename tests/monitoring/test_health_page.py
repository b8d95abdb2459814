"""The health page in a real headless Chromium, against the router served by uvicorn on 127.0.0.1."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI

from conveyor.monitoring.api import router
from conveyor.quickstart.api_server import free_port
from tests.monitoring.conftest import MARKUP_SOURCE
from tests.support.browser import chromium_page
from tests.support.workflows import declaration

SHOTS = Path("/tmp/shots-review-page")


@pytest.fixture
def served(recent) -> Iterator[str]:
    """The router mounted under /conveyor, as the Conveyor app is inside the Airflow API server."""
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
def test_health_page_draws_every_chart_with_data(served, recent, tmp_path):
    with chromium_page(1280, 1500) as page:
        problems: list[str] = []
        page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
        page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)

        page.goto(f"{served}/health?workflow=wf_queue")
        page.wait_for_selector("body[data-state=ready]", timeout=30_000)

        # Seven days in 6 h buckets: 28 bars of completions, every bucket has a queue size.
        assert page.get_attribute("#chart-throughput", "data-points") == "28"
        assert page.get_attribute("#chart-queue", "data-points") == "28"
        assert int(page.get_attribute("#chart-exceptions", "data-points")) >= 27
        assert (
            int(page.get_attribute("#chart-cycle", "data-points")) > 28
        )  # stacked stages + the p95 line
        assert int(page.get_attribute("#chart-age", "data-points")) > 0
        assert page.locator("#chart-cycle g[data-series='review (mean)'] rect").count() > 0
        assert page.locator("#chart-cycle g[data-series='p95 total'] path").count() == 1

        cards = page.inner_text("#cards")
        assert "Throughput, last 24 h" in cards and "Review queue" in cards and "waiting" in cards
        runs = page.locator("#runs tr")
        assert runs.count() >= 8  # header + 8 daily runs + the manual one
        assert "manual__markup" in page.inner_text("#runs")
        assert "bottleneck: review" in page.inner_text("#alerts")
        assert page.locator("#workflow option").all_inner_texts() == ["supplier_exceptions", "wf_queue"]

        # Item data is text, never markup.
        first_source = page.locator("#sources tr").nth(1).locator("td").first
        assert first_source.inner_text() == MARKUP_SOURCE
        assert page.locator("#sources img").count() == 0 and page.title() != "pwned"

        page.screenshot(path=str(tmp_path / "health-wf_queue.png"), full_page=True)

        # Another period re-draws with hourly buckets.
        page.select_option("#days", "2")
        # (selectors, not wait_for_function: the page's CSP forbids evaluating strings, rightly)
        page.wait_for_selector("#chart-throughput[data-points='48']")
        page.wait_for_selector("body[data-state=ready]")
        page.select_option("#workflow", "supplier_exceptions")
        page.wait_for_selector("#status:has-text('supplier_exceptions as of')")
        assert page.get_attribute("#chart-throughput", "data-points") == "48"
        page.screenshot(path=str(tmp_path / "health-supplier_exceptions.png"), full_page=True)
        assert problems == []

    shot = tmp_path / "health-wf_queue.png"
    assert shot.stat().st_size > 20_000
    print(f"screenshots in {tmp_path}")


@pytest.mark.browser
def test_time_axes_use_one_unit_and_runs_show_their_airflow_state(served, recent, ledger, airflow_db):
    from conveyor.ledger import NewItem
    from tests.dag_fixtures.review_page_dags import failing_dag

    # A run that failed before any of its items moved: 480 received, none done, none in review.
    run = failing_dag.test()
    assert str(run.state) in ("failed", "DagRunState.FAILED")
    ledger.declare(declaration("review_page_failing"), actor="tests")
    ledger.receive(
        "review_page_failing", run.run_id, [NewItem(f"F-{n}", {"n": n}) for n in range(480)], actor="t.extract#1"
    )
    with chromium_page(1440, 900) as page:
        problems: list[str] = []
        page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
        page.goto(f"{served}/health?workflow=wf_queue")
        page.wait_for_selector("body[data-state=ready]", timeout=30_000)
        for chart in ("chart-cycle", "chart-age"):
            ticks = page.eval_on_selector_all(
                f"#{chart} svg text[text-anchor=end]", "ts => ts.map(t => t.textContent)"
            )
            assert len(set(ticks)) == len(ticks) == 5, ticks
            assert len({t.split(" ")[-1] for t in ticks}) == 1, ticks  # one unit per axis
        # The runs table fits its card.
        fits = page.evaluate(
            "() => { const p = document.querySelector('#runs').closest('.panel');"
            " return p.scrollWidth <= p.clientWidth + 1; }"
        )
        assert fits
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "health.png"), full_page=True)

        page.goto(f"{served}/health?workflow=review_page_failing")
        page.wait_for_selector("body[data-state=ready]", timeout=30_000)
        row = page.locator("#runs tr", has_text=run.run_id)
        assert "failed" in row.locator(".run-state").inner_text()
        assert "0 of 480" in row.inner_text()
        page.locator("#runs").scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / "health-failed-run.png"), full_page=True)
        assert problems == []
