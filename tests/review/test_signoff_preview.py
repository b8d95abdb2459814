"""The director's sign-off prompt links to the full report it approves, stored in the ledger and
served by the Conveyor app behind Airflow's login (a real DAG run, a real API server)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote, unquote

import pytest
from markupsafe import escape

from conveyor.quickstart.api_server import ApiServer
from conveyor.quickstart.dag_test import manual_run_id, run_dag_test
from conveyor.review.previews import Preview, SignOffPreviews, preview_path, preview_url

WF = "supplier_exceptions"
HOSTILE = "<script>alert('draft')</script> Truck late."


def _run_signed_off(api_server: ApiServer, drafts: list[str], monkeypatch) -> tuple[object, object]:
    """One dag.test() run of the fixture DAG, the director (admin) approving through the HITL API."""

    from conveyor.quickstart.reviewer import ScriptedReviewer, WorkflowRun
    from tests.dag_fixtures.signoff_dags import signoff_dag

    monkeypatch.setenv("AIRFLOW__API__BASE_URL", api_server.url)  # the links point at this server

    class Users:
        def client(self, user: str | None = None):  # type: ignore[no-untyped-def]
            return api_server.client("admin")

    when = datetime.now(UTC).replace(microsecond=0)
    run_id = manual_run_id(when)
    director = ScriptedReviewer(Users(), WorkflowRun(signoff_dag.dag_id, None), run_id, interval=0.5)  # type: ignore[arg-type]
    director.start()
    try:
        run = run_dag_test(signoff_dag, when, {"drafts": drafts})
    finally:
        director.stop()
    return run, director


def test_the_prompt_links_to_the_stored_full_report_which_the_link_serves(api_server, ledger, monkeypatch):
    drafts = [HOSTILE] + [f"Draft number {n} of a long report." for n in range(1, 40)]

    run, director = _run_signed_off(api_server, drafts, monkeypatch)

    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    tasks = ("seed_drafted", "director_signoff", "approve_items", "publish_report")
    assert states == dict.fromkeys(tasks, "success"), (states, director.errors)
    assert director.signoffs == 1
    # The whole rendering of every output is stored for the run's sign-off task.
    stored = SignOffPreviews(ledger).get(WF, run.run_id, "director_signoff")
    assert stored is not None and list(stored.files) == ["report.md", "report.html"]
    assert stored.items == len(drafts) and stored.source_task == "publish_report"
    assert stored.rendered_by == "signoff_preview.director_signoff#1"
    assert all(str(escape(d)) in stored.files["report.html"] for d in drafts)
    assert "<script>" not in stored.files["report.html"]  # the template escaped it
    assert all(d[-20:] in stored.files["report.md"] for d in drafts)

    with api_server.client("admin") as admin:
        details = admin.get(f"/api/v2/dags/signoff_preview/dagRuns/{run.run_id}/hitlDetails").json()
    [prompt] = details["hitl_details"]
    body = prompt["body"]
    # Counts, a link to every file under [api] base_url, and only a short excerpt.
    assert f"**What you sign off:** {len(drafts)} item(s)" in body
    main = api_server.url + preview_path(WF, run.run_id, "director_signoff", "report.html")
    assert f"**[Open the report preview]({main})**" in body
    assert f"{len(drafts)} item(s), 2 file(s)" in body
    links = dict(re.findall(r"\[(report\.\w+)\]\((http[^)]+)\)", body))
    assert set(links) == {"report.md", "report.html"}
    assert "Start of `report.md` (the rest on the preview page):" in body
    assert "Draft number 39" not in body and len(body) < 4000  # the report itself is behind the link

    with api_server.client("admin") as admin:
        page = admin.get(links["report.html"])
        markdown = admin.get(links["report.md"])
    assert page.status_code == 200, page.text
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"].startswith("sandbox")
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.text == stored.files["report.html"] and "Draft number 39 of a long report." in page.text
    assert markdown.status_code == 200 and markdown.headers["content-type"].startswith("text/plain")
    assert markdown.text == stored.files["report.md"]
    with api_server.client(None) as anonymous:
        refused = anonymous.get(links["report.html"], headers={"Accept": "application/json"})
    assert refused.status_code == 401


def test_a_retried_sign_off_replaces_its_preview_and_one_without_a_preview_removes_it(ledger):
    store = SignOffPreviews(ledger)
    key = (WF, "run-1", "director_signoff")
    first = Preview(*key, source_task="publish_report", files={"r.md": "one", "r.html": "<p>one</p>"}, items=2)
    other = Preview(WF, "run-2", "director_signoff", "publish_report", {"r.md": "other"}, 1)
    assert store.save([first, other]) == 2

    assert store.save([Preview(*key, source_task="publish_report", files={"r.md": "two"}, items=3)]) == 1

    again = store.get(*key)
    assert again is not None and dict(again.files) == {"r.md": "two"} and again.items == 3
    assert store.discard([key, (WF, "run-9", "director_signoff")]) == 1
    assert store.get(*key) is None
    assert store.get(WF, "run-2", "director_signoff") == other


@pytest.fixture
def stored_preview(ledger) -> Preview:
    preview = Preview(
        WF,
        "manual__2026-12-01T06:00:00+00:00",
        "director_signoff",
        "publish_report",
        {"report.md": "# Report\n\n- EX-1: late", "report.html": "<h1>Report</h1><p>EX-1: late</p>"},
        1,
    )
    SignOffPreviews(ledger).save([preview])
    return preview


def test_the_preview_page_serves_each_file_and_answers_404_for_unknown_ones(api_server, stored_preview):
    p = stored_preview
    with api_server.client("victor") as viewer, api_server.client(None) as anonymous:
        html = viewer.get(preview_path(*p.key, "report.html"))
        text = viewer.get(preview_url("", *p.key, "report.md"))
        no_file = viewer.get(preview_path(*p.key, "report.pdf"))
        no_preview = viewer.get(preview_path(WF, "run-unknown", "director_signoff", "report.html"))
        missing = anonymous.get(preview_path(*p.key, "report.html"), headers={"Accept": "application/json"})
        browser = anonymous.get(preview_path(*p.key, "report.html"), headers={"Accept": "text/html"})

    assert html.status_code == 200 and html.text == p.files["report.html"]
    assert html.headers["content-type"] == "text/html; charset=utf-8"
    assert "sandbox" in html.headers["content-security-policy"]
    assert text.status_code == 200 and text.text == p.files["report.md"]
    assert text.headers["content-type"] == "text/plain; charset=utf-8"
    assert no_file.status_code == 404
    assert no_file.json()["detail"].endswith("has no file 'report.pdf'; it has 'report.md', 'report.html'")
    assert no_preview.status_code == 404
    assert no_preview.json()["detail"].startswith(
        "no sign-off preview stored for task 'director_signoff' of supplier_exceptions run 'run-unknown'"
    )
    assert missing.status_code == 401
    # A person following the link without a session goes to Airflow's login, then back to it.
    assert browser.status_code == 302
    assert browser.headers["location"].startswith("/auth/login?next=")
    assert "/conveyor/review/signoff/" in unquote(browser.headers["location"])


SHOTS = Path("/tmp/shots-review-page")


@pytest.mark.browser
def test_the_link_opens_the_report_from_the_airflow_uis_required_actions_view(api_server, ledger, monkeypatch):
    """In real Chromium: the director opens the task's Required Actions view in the Airflow UI,
    follows the prompt's link and reads the report, then approves (the run goes on)."""
    import threading

    from tests.dag_fixtures.signoff_dags import signoff_dag
    from tests.support.browser import chromium_page
    from tests.support.review_page import log_in

    monkeypatch.setenv("AIRFLOW__API__BASE_URL", api_server.url)
    when = datetime.now(UTC).replace(microsecond=0)
    run_id = manual_run_id(when)
    hitl = f"/api/v2/dags/signoff_preview/dagRuns/{quote(run_id, safe='')}"
    seen: dict[str, object] = {}
    errors: list[BaseException] = []
    stop = threading.Event()

    def director() -> None:
        try:
            with api_server.client("admin") as admin:
                while not stop.wait(0.5):  # wait until the task is parked, as a person would see it
                    details = admin.get(f"{hitl}/hitlDetails")
                    parked = [
                        d for d in (details.json().get("hitl_details", []) if details.status_code == 200 else [])
                        if d["task_instance"]["state"] in ("awaiting_input", "deferred")
                    ]
                    if parked:
                        break
                else:
                    return
                SHOTS.mkdir(parents=True, exist_ok=True)
                with chromium_page(1300, 1000) as page:
                    view = (f"/dags/signoff_preview/runs/{quote(run_id, safe='')}"
                            "/tasks/director_signoff/required_actions")
                    log_in(page, api_server.url, "admin", view)
                    link = page.get_by_role("link", name="Open the report preview")
                    link.wait_for()
                    seen["href"] = link.get_attribute("href")
                    page.screenshot(path=str(SHOTS / "signoff-required-actions.png"), full_page=True)
                    page.goto(str(seen["href"]))
                    page.wait_for_selector("h1")
                    seen["heading"] = page.inner_text("h1")
                    seen["rows"] = page.locator("tr").count()
                    page.screenshot(path=str(SHOTS / "signoff-preview.png"), full_page=True)
                answered = admin.patch(
                    f"{hitl}/taskInstances/director_signoff/-1/hitlDetails", json={"chosen_options": ["Approve"]}
                )
                seen["answer"] = answered.status_code
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            errors.append(exc)

    thread = threading.Thread(target=director, daemon=True)
    thread.start()
    try:
        run = run_dag_test(signoff_dag, when, {"drafts": ["Truck three days late.", "Twelve cartons short."]})
    finally:
        stop.set()
        thread.join(timeout=60)

    assert errors == [], errors
    assert seen["href"] == api_server.url + preview_path(WF, run_id, "director_signoff", "report.html")
    assert str(seen["heading"]).startswith("Supplier exceptions ")
    assert seen["rows"] == 3  # the header and the two drafted items
    assert seen["answer"] == 200 and run.state == "success"
