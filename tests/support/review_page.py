"""Driving the review page in Chromium as a reviewer would: log in, then decide items by keyboard."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

from tests.support.api import USERS


def run_tab(dag_id: str, run_id: str) -> str:
    """The path of the review tab of a DAG run in the Airflow UI."""
    from urllib.parse import quote

    return f"/dags/{dag_id}/runs/{quote(run_id, safe='')}/plugin/conveyor-review-run"


def log_in(page: Any, base_url: str, user: str, next_path: str) -> None:
    """Log into Airflow (simple auth manager's form) and land on ``next_path`` (already quoted)."""
    from urllib.parse import quote

    page.goto(f"{base_url}/auth/login?next={quote(next_path, safe='')}")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", USERS[user][1])
    page.click("button[type=submit]")
    last = next_path.rstrip("/").rsplit("/", 1)[-1]
    page.wait_for_url(lambda url: url.rstrip("/").endswith(last))


def is_review_page(url: str) -> bool:
    """Whether a frame shows the review page itself (its path, whatever the host UI mirrors)."""
    from urllib.parse import urlparse

    return urlparse(url).path.startswith("/conveyor/review/")


def review_frame(page: Any, timeout: float = 30) -> Any:
    """The review page's frame inside the Airflow UI, once its queue has rows."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # The page's own frame, not Airflow's: the UI mirrors a plugin frame's path into its own URL
        # (/plugin/conveyor-review/conveyor/review/?item=...), so match the frame's path, not a substring.
        frame = next((f for f in page.frames if f is not page.main_frame and is_review_page(f.url)), None)
        if frame is not None:
            frame.wait_for_selector("#queue tbody tr")
            return frame
        page.wait_for_timeout(100)  # (a sleep would stop Playwright from seeing the frame)
    page.screenshot(path="/tmp/review-page-missing.png")
    urls = [f.url for f in page.frames]
    raise AssertionError(f"the review page did not show up in the Airflow UI at {page.url}: frames {urls}")


@dataclass(frozen=True)
class KeyboardRun:
    """What a scripted reviewer measured deciding items by keyboard."""

    decisions: int
    seconds: float
    latencies_ms: list[float]
    errors: int

    @property
    def per_minute(self) -> float:
        return self.decisions / self.seconds * 60 if self.seconds else 0.0

    @property
    def median_ms(self) -> float:
        return statistics.median(self.latencies_ms) if self.latencies_ms else 0.0

    @property
    def p95_ms(self) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] if ordered else 0.0


def decide_by_keyboard(page: Any, frame: Any, count: int, *, reject_every: int = 5) -> KeyboardRun:
    """Decide ``count`` items with the keys only: ``a`` approves, every ``reject_every``-th item is
    rejected with ``r``, a typed reason and Enter. Each decision waits until the page shows the next
    item (what a person waits for); the page itself records each decision's latency."""
    frame.wait_for_selector("#item-title:not(:empty)")
    frame.click("#item-head")  # keyboard focus inside the review page's frame
    start_count = frame.evaluate("window.__conveyorReview.decisions.length")
    started = time.monotonic()
    for n in range(count):
        if reject_every and n % reject_every == reject_every - 1:
            page.keyboard.press("r")
            frame.wait_for_selector("#reason-dialog[open]")
            page.keyboard.type("wrong supplier")
            page.keyboard.press("Enter")
        else:
            page.keyboard.press("a")
        frame.wait_for_function(
            "n => window.__conveyorReview.decisions.length >= n", arg=start_count + n + 1, timeout=15_000
        )
    seconds = time.monotonic() - started
    recorded = frame.evaluate("window.__conveyorReview")
    latencies = [d["ms"] for d in recorded["decisions"][start_count:]]
    return KeyboardRun(count, seconds, latencies, int(recorded["errors"]))
