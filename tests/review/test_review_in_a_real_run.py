"""A reviewer in Chromium works a real run of supplier_exceptions while it waits: corrects the
quarantined negative amount in the correction form and rewrites one doubtful AI draft. The run validates
the corrected row again, drafts it, and publishes both items with the human values; the scripted
reviewer decides the rest and the director signs off through Airflow's HITL API."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from conveyor import storage_path
from conveyor.quickstart import sample_feeds
from conveyor.quickstart.api_server import ApiServer
from conveyor.quickstart.reviewer import reviewer_policy
from tests.dags.conftest import Runner, task_states
from tests.support.browser import chromium_page
from tests.support.review_page import log_in, review_frame, run_tab

pytestmark = pytest.mark.browser

WF = "supplier_exceptions"
REPO = Path(__file__).resolve().parents[2]
SHOTS = Path("/tmp/shots-review-in-a-run")


class BrowserReviewer(threading.Thread):
    """rita, in her own Chromium: the run's Review tab, the editor for two items."""

    def __init__(self, ledger, base_url: str, run_id: str) -> None:
        super().__init__(name="browser-reviewer", daemon=True)
        self.ledger, self.base_url, self.run_id = ledger, base_url, run_id
        self.corrected: str | None = None
        self.drafted: str | None = None
        self.sentence = ""
        self.chosen = threading.Event()  # the scripted reviewer leaves drafts alone until then
        self.error: BaseException | None = None

    def _wait(self, status: str, what) -> list:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            items = self.ledger.items(workflow=WF, run_id=self.run_id, status=status, limit=None)
            found = [i for i in items if what(i)]
            if found:
                return found
            time.sleep(0.5)
        raise AssertionError(f"no {status} item of the run showed up")

    def run(self) -> None:
        try:
            self._work()
        except BaseException as exc:  # reported by the test
            self.error = exc
            self.chosen.set()

    def _open(self, page, item_id: str):
        from playwright.sync_api import Error

        tab = run_tab(WF, self.run_id)
        for attempt in range(3):
            try:
                page.goto(f"{self.base_url}{tab}")
                break
            except Error as exc:
                # Seen once in CI: net::ERR_ABORTED on this reload. Most likely the open page's own
                # navigation (the Airflow UI mirrors the review frame's path into its URL) landed while
                # goto was pending; a person would press reload again, and so does rita.
                if "ERR_ABORTED" not in str(exc) or attempt == 2:
                    raise
        frame = review_frame(page, timeout=60)
        frame.click(f"#queue tbody tr[data-item-id='{item_id}']")
        frame.wait_for_selector(f"#item-body[data-loaded='{item_id}']")
        frame.click("#item-head")
        return frame

    def _edit(self, page, frame, field: str, value, shot: str) -> None:
        """e, the field in the correction form, Enter (as a reviewer corrects one field)."""
        page.keyboard.press("e")
        frame.wait_for_selector(f"#editor:not([hidden]) #field-{field}")
        frame.fill(f"#field-{field}", str(value))
        page.screenshot(path=str(SHOTS / shot))
        frame.press(f"#field-{field}", "Enter")
        frame.wait_for_selector("#decision-result.ok:has-text('corrected')")

    def _work(self) -> None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        with chromium_page(1440, 900, timeout_ms=60_000) as page:
            log_in(page, self.base_url, "rita", run_tab(WF, self.run_id))
            # 1. The negative amount, quarantined by the gate: fix its sign in the editor.
            [bad] = self._wait("quarantined", lambda i: isinstance(i.payload.get("amount"), (int, float))
                               and i.payload["amount"] < 0)  # fmt: skip
            frame = self._open(page, bad.item_id)
            self._edit(page, frame, "amount", abs(bad.payload["amount"]), "correct-input.png")
            self.corrected = bad.item_id
            # 2. A doubtful draft of the AI step: rewrite it (only the draft changes).
            doubtful = self._wait("pending_review", lambda i: i.item_id != bad.item_id)
            target = sorted(doubtful, key=lambda i: i.item_id)[0]
            self.drafted = target.item_id
            self.chosen.set()
            row = target.payload
            self.sentence = (f"{row['supplier_name']} reported an exception on {row['po_number']}; rita checked it "
                             "with the supplier by phone.")  # fmt: skip
            frame = self._open(page, target.item_id)
            self._edit(page, frame, "draft", self.sentence, "edit-draft.png")
            page.screenshot(path=str(SHOTS / "after-edits.png"))


def test_a_reviewer_corrects_input_and_rewrites_a_draft_in_the_browser_during_a_real_run(
    api_server: ApiServer, ledger, airflow_db, tmp_path, monkeypatch
):
    from airflow.models.dagrun import DagRun
    from airflow.utils.types import DagRunType

    monkeypatch.setenv("CONVEYOR_HOME", str(tmp_path / "home"))
    name, text = sample_feeds.csv_delivery(
        REPO / "include" / "data" / WF / "extract.csv", key="exception_id", date_column="exception_date",
        delivery=1, today=datetime.now(UTC).date(), plant=sample_feeds.plant_supplier_rows,
    )  # fmt: skip
    (tmp_path / name).write_text(text, encoding="utf-8")
    when = datetime.now(UTC).replace(microsecond=0)
    run_id = DagRun.generate_run_id(run_type=DagRunType.MANUAL, logical_date=when, run_after=when)
    rita = BrowserReviewer(ledger, api_server.url, run_id)

    def policy(item: dict):
        """The scripted colleague: everything but what rita works on (everything once rita fails, so the
        run ends and the test reports rita's error instead of waiting out its timeout)."""
        if rita.error is not None:
            return reviewer_policy(item)
        if item["status"] == "quarantined":
            amount = item["payload"].get("amount")
            return None if isinstance(amount, (int, float)) and amount < 0 else reviewer_policy(item)
        if not rita.chosen.is_set() or item["item_id"] in (rita.drafted, rita.corrected):
            return None
        return reviewer_policy(item)

    rita.start()
    run, scripted = Runner(api_server).run(WF, {"extract_path": str(tmp_path / name)}, when=when, policy=policy)
    rita.join(timeout=60)
    if rita.error:
        raise rita.error

    assert run.state == "success", (task_states(run), scripted.errors)
    fixed, drafted = ledger.get(rita.corrected), ledger.get(rita.drafted)
    assert fixed.status == "published" and fixed.payload["amount"] > 0
    assert drafted.status == "published" and drafted.ai_result["draft"] == rita.sentence
    [by_rita] = [r for r in ledger.history(fixed.item_id) if r.to_status == "corrected"]
    assert by_rita.actor == "reviewer:rita" and by_rita.detail["changes"][0]["field"] == "amount"
    [edit] = [r for r in ledger.history(drafted.item_id) if r.actor == "reviewer:rita"]
    assert edit.detail["changes"] == [
        {"field": "draft", "before": edit.detail["model_answer"]["draft"], "after": rita.sentence}
    ]
    [outbox] = ledger.effects("publish_report").values()
    report = storage_path(outbox["result"]["files"][0]).read_text()
    assert rita.sentence in report and fixed.item_id in outbox["result"]["items"]
    assert set(ledger.count_by_status(workflow=WF, run_id=run.run_id)) == {"published", "rejected"}
    assert all((SHOTS / n).stat().st_size > 10_000 for n in ("correct-input.png", "edit-draft.png"))
