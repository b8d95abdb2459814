"""supplier_exceptions end to end: real GX, the real local model, the real ledger, real people
played through the API server, and a real SMTP server for the alerts."""

from __future__ import annotations

import html
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conveyor import storage_path
from conveyor.quickstart import sample_feeds
from conveyor.review.previews import preview_path
from tests.dags.conftest import task_states

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "include" / "data" / "supplier_exceptions"
WF = "supplier_exceptions"


@pytest.fixture
def todays_extract(tmp_path) -> Path:
    name, text = sample_feeds.csv_delivery(
        SAMPLE / "extract.csv", key="exception_id", date_column="exception_date", delivery=1,
        today=datetime.now(UTC).date(), plant=sample_feeds.plant_supplier_rows,
    )
    (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path / name


def test_happy_path_publishes_one_report_and_a_rerun_changes_nothing(runner, ledger, todays_extract,
                                                                      mailbox, tmp_path, monkeypatch):
    monkeypatch.setenv("CONVEYOR_HOME", str(tmp_path / "home"))
    when = datetime.now(UTC).replace(microsecond=0)

    run, reviewer = runner.run(WF, {"extract_path": str(todays_extract)}, when=when)

    assert run.state == "success", task_states(run)
    counts = ledger.count_by_status(workflow=WF, run_id=run.run_id)
    rows = sum(1 for _ in todays_extract.open()) - 1
    assert sum(counts.values()) == rows
    assert set(counts) == {"published", "rejected"}, counts
    assert counts["published"] > rows * 0.9
    with ledger.connect() as conn:
        bad = conn.execute(
            "SELECT DISTINCT item_id FROM conveyor.transitions WHERE to_status = 'quarantined' AND run_id = %s",
            (run.run_id,),
        ).fetchall()
    # The feed's three bad rows were quarantined by the gate, then rejected by a person.
    assert len(bad) == 3
    assert {ledger.get(item_id).status for (item_id,) in bad} == {"rejected"}
    assert reviewer.signoffs == 1
    assert reviewer.decisions.get("approve", 0) > 0, "the local model should send some drafts to review"
    [outbox] = ledger.effects("publish_report").values()
    report = storage_path(outbox["result"]["files"][0]).read_text()
    assert f"# Supplier exceptions {when:%Y-%m-%d}" in report
    assert report.count("\n## ") >= 10  # one section per supplier
    published = ledger.items(workflow=WF, run_id=run.run_id, status="published", limit=3)
    for item in published:
        assert item.ai_result["draft"] in report
        assert [r.to_status for r in ledger.history(item.item_id)][-2:] == ["approved", "published"]
    assert mailbox.subjects == []  # nothing failed, nobody is alerted
    history = {i.item_id: len(ledger.history(i.item_id)) for i in ledger.items(workflow=WF, limit=None)}
    report_file = storage_path(outbox["result"]["files"][0])
    report_mtime = report_file.stat().st_mtime

    # Clear every task of the finished run and run it again (same run id).
    again, _ = runner.run(WF, {"extract_path": str(todays_extract)}, when=when)

    assert again.state == "success" and again.run_id == run.run_id
    assert len(ledger.effects("publish_report")) == 1
    assert report_file.stat().st_mtime == report_mtime
    assert {i.item_id: len(ledger.history(i.item_id)) for i in ledger.items(workflow=WF, limit=None)} == history


@pytest.mark.parametrize(
    ("feed", "message"),
    [
        # the founding incident: an upstream rename, and every step after it "succeeded" on nothing
        ("renamed_column.csv", "column 'supplier_id' missing; found 'vendor_id'"),
        # a feed nobody refreshes any more: it parses, but it is last month's news
        ("stale.csv", "stale data: the newest exception_date in stale.csv is 2026-10-28"),
    ],
)
def test_a_broken_feed_fails_at_the_gate_and_alerts_a_person(runner, ledger, mailbox, tmp_path, monkeypatch,
                                                             feed, message):
    monkeypatch.setenv("CONVEYOR_HOME", str(tmp_path / "home"))

    run, _ = runner.run(WF, {"extract_path": str(SAMPLE / "malformed" / feed)}, people=False)

    states = task_states(run)
    assert run.state == "failed"
    assert states["validate"] == "failed"
    assert {states[t] for t in ("review_inputs", "classify_and_draft", "director_signoff", "publish_report")} == {
        "upstream_failed"}
    batch = ledger.get_batch(WF, run.run_id, "validate")
    assert batch["status"] == "quarantined"
    assert message in batch["reason"]
    assert ledger.count_by_status(workflow=WF) == {}  # nothing was processed into garbage
    assert ledger.effects("publish_report") == {}
    assert not (tmp_path / "home" / "files" / "reports").exists()
    [subject] = mailbox.subjects
    assert "step 'validate' failed" in subject
    assert message in html.unescape(mailbox.bodies[0])


def test_the_same_extract_delivered_again_fails_at_the_gate_naming_the_first_run(
    runner, ledger, todays_extract, mailbox, tmp_path, monkeypatch
):
    monkeypatch.setenv("CONVEYOR_HOME", str(tmp_path / "home"))
    first, _ = runner.run(WF, {"extract_path": str(todays_extract)})
    assert first.state == "success", task_states(first)

    again, _ = runner.run(WF, {"extract_path": str(todays_extract)}, people=False,
                          when=datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=5))

    states = task_states(again)
    assert again.state == "failed" and states["validate"] == "failed"
    assert states["classify_and_draft"] == "upstream_failed"
    reason = ledger.get_batch(WF, again.run_id, "validate")["reason"]
    assert f"was already gated in run {first.run_id!r}" in reason and "nothing new to process" in reason
    assert ledger.count_by_status(workflow=WF, run_id=again.run_id) == {}
    assert len(ledger.effects("publish_report")) == 1
    assert any("step 'validate' failed" in s for s in mailbox.subjects)


def test_review_timeout_proceeds_with_confident_drafts_only(runner, ledger, todays_extract, mailbox, tmp_path,
                                                            monkeypatch):
    monkeypatch.setenv("CONVEYOR_HOME", str(tmp_path / "home"))
    # Reviewers stay silent; only the director signs off. The drafts review gives up after 3 s.
    run, reviewer = runner.run(
        WF, {"extract_path": str(todays_extract)}, reviewers=False,
        adjust={"review_drafts": {"timeout": 3}, "review_inputs": {"timeout": 3}},
    )
    assert reviewer.decisions == {} and reviewer.signoffs == 1
    assert run.state == "success", task_states(run)
    summary = run.get_task_instance("review_drafts").xcom_pull(task_ids="review_drafts")
    assert summary["escalation_applied"] == "proceed"
    counts = ledger.count_by_status(workflow=WF, run_id=run.run_id)
    assert summary["pending"] == counts.get("pending_review", 0) + counts.get("quarantined", 0)
    assert summary["pending"] > 0
    [outbox] = ledger.effects("publish_report").values()
    waiting = ledger.item_ids(workflow=WF, run_id=run.run_id, status="pending_review")
    assert not set(waiting) & set(outbox["result"]["items"])
    quarantined = ledger.item_ids(workflow=WF, run_id=run.run_id, status="quarantined")
    assert len(quarantined) == 3  # nobody decided on the bad rows either: they stay out of the report
    assert len(outbox["result"]["items"]) + len(waiting) + len(quarantined) == 480


def test_deadline_alert_is_declared_and_its_callback_reaches_a_person(mailbox):
    import asyncio

    from conveyor.monitoring.task_alerts import deadline_missed
    from conveyor.quickstart.run import load_dag

    dag = load_dag(WF, REPO / "dags")
    [alert] = dag.deadline if isinstance(dag.deadline, list) else [dag.deadline]
    assert alert.interval == timedelta(hours=2)
    # Queued, not logical date: runs triggered over REST or the UI have no logical date. Conveyor's
    # RUN_QUEUED_AT, not Airflow's DAGRUN_QUEUED_AT: Airflow 3.3.2 cannot clear a failed run with
    # the latter open (tests/deploy/test_faults.py clears such runs). Serialized with its class path,
    # so the scheduler finds it through the plugin.
    from airflow.serialization.encoders import encode_deadline_alert

    assert type(alert.reference).__name__ == "RunQueuedAt"
    assert encode_deadline_alert(alert)["reference"] == {
        "reference_type": "RunQueuedAt", "__class_path": "conveyor.monitoring.deadlines.RunQueuedAt"}
    assert alert.callback.path == "conveyor.monitoring.task_alerts.deadline_missed"

    asyncio.run(deadline_missed(**alert.callback.kwargs))

    assert mailbox.subjects == ["[Conveyor] supplier_exceptions: not done by 08:00"]


def test_a_row_corrected_during_the_review_is_validated_again_and_published_in_the_same_run(
    runner, ledger, todays_extract, tmp_path, monkeypatch
):
    """The reviewer corrects the negative amount: first wrongly (still negative: the same suite
    quarantines it again, with the new reason), then rightly, with the amount as text as a form or
    a CSV-minded client sends it (``{"amount": "1936.40"}``): it lands as the number 1936.4 and the
    run publishes it (issue 21). A doubtful draft is rewritten by the reviewer: the report carries
    the reviewer's sentence."""
    from conveyor.quickstart.reviewer import reviewer_policy

    monkeypatch.setenv("CONVEYOR_HOME", str(tmp_path / "home"))
    attempts: dict[str, int] = {}
    rewritten: dict[str, str] = {}

    def policy(item: dict) -> tuple:
        amount = item["payload"].get("amount")
        if item["status"] == "quarantined" and isinstance(amount, (int, float)) and amount < 0:
            attempts[item["item_id"]] = attempts.get(item["item_id"], 0) + 1
            fixed = -1.0 if attempts[item["item_id"]] == 1 else "1936.40"
            return "correct", "sign typo in the feed", {"amount": fixed}
        if item["status"] == "pending_review" and item["item_id"] in attempts:
            return "approve", "checked"
        if item["status"] == "pending_review" and not rewritten:
            row = item["payload"]
            rewritten[item["item_id"]] = (
                f"{row['supplier_name']} reported an exception on {row['po_number']}, checked by phone with "
                "the supplier and confirmed by the reviewer."
            )
            return "correct", "rewrote the draft", {"draft": rewritten[item["item_id"]]}
        return reviewer_policy(item)

    run, reviewer = runner.run(WF, {"extract_path": str(todays_extract)}, policy=policy)

    assert run.state == "success", (task_states(run), reviewer.errors)
    [item_id] = attempts
    assert attempts[item_id] == 2
    item = ledger.get(item_id)
    assert item.status == "published", ledger.history(item_id)
    assert item.payload["amount"] > 0 and item.payload["supplier_name"]  # merged: the row kept its fields
    history = ledger.history(item_id)
    moves = [(r.from_status, r.to_status) for r in history]
    assert moves[:6] == [
        (None, "received"),
        ("received", "quarantined"),
        ("quarantined", "corrected"),
        ("corrected", "quarantined"),  # -1.0 is still negative: the same suite says so
        ("quarantined", "corrected"),
        ("corrected", "validated"),
    ]
    # Issue 21: the quarantine also records which checks a person may waive and the contract a
    # correction is coerced to (the API server has no suite file).
    detail = history[1].detail
    assert {k: detail[k] for k in ("gate", "suite", "field")} == {
        "gate": "validate", "suite": "supplier_exceptions", "field": "payload"}
    assert detail["checks"] and all("waivable" in c for c in detail["checks"])
    assert detail["contract"]["columns"]["amount"] == {"type": "number", "currency_column": "currency"}
    assert history[2].actor == "reviewer:rita"
    assert history[2].detail["changes"][0]["field"] == "amount"
    assert history[2].detail["changes"][0]["after"] == -1.0
    assert history[3].detail["gate"] == "validate:corrections" and "amount" in (history[3].reason or "")
    assert history[5].actor.startswith(f"{WF}.review_inputs")
    assert moves[-1] == ("approved", "published")
    counts = ledger.count_by_status(workflow=WF, run_id=run.run_id)
    assert set(counts) == {"published", "rejected"}, counts  # nothing left at received or corrected
    # The text amount was coerced to the number the gate reads, in the ledger and in the report.
    assert history[4].detail["changes"][0] == {"field": "amount", "before": -1.0, "after": 1936.4}
    assert item.payload["amount"] == 1936.4 and type(item.payload["amount"]) is float
    with ledger.connect() as conn:
        stored = conn.execute("SELECT jsonb_typeof(payload->'amount') FROM conveyor.items WHERE item_id = %s",
                              (item_id,)).fetchone()[0]  # fmt: skip
    assert stored == "number"

    # The rewritten draft: published as the reviewer wrote it, the model's answer kept in the history.
    [(drafted, sentence)] = rewritten.items()
    assert ledger.get(drafted).status == "published" and ledger.get(drafted).ai_result["draft"] == sentence
    [correction] = [r for r in ledger.history(drafted) if r.from_status == "pending_review"]
    assert correction.to_status == "ai_processed" and correction.detail["ai_task"] == "classify_exception"
    assert correction.detail["model_answer"]["draft"] != sentence
    [outbox] = ledger.effects("publish_report").values()
    report = storage_path(outbox["result"]["files"][0]).read_text()
    assert sentence in report and item_id in outbox["result"]["items"]
    [line] = [x for x in report.splitlines() if x.startswith(f"| {item.business_key} |")]
    assert "| 1,936.40 EUR |" in line, line


def test_a_row_corrected_at_the_drafts_review_is_drafted_and_published_by_the_same_run(
    runner, ledger, todays_extract, tmp_path, monkeypatch
):
    """The inputs review gives up (proceed) before anyone looks at the bad rows; the reviewer fixes
    the negative amount while the drafts review waits. Validated again, the row is classified and
    drafted by the run's AI step, run again by the drafts review for it, and published: nothing is
    left behind at 'validated' in a finished run."""
    from conveyor.quickstart.reviewer import reviewer_policy

    monkeypatch.setenv("CONVEYOR_HOME", str(tmp_path / "home"))
    fixed: list[str] = []

    def policy(item: dict):
        if item["status"] != "quarantined":
            return reviewer_policy(item)
        counts = ledger.count_by_status(workflow=WF, run_id=item["run_id"])
        if not counts.get("ai_processed") and not counts.get("pending_review"):
            return None  # the inputs review is still waiting: decide at the drafts review
        amount = item["payload"].get("amount")
        if isinstance(amount, (int, float)) and amount < 0:
            fixed.append(item["item_id"])
            return "correct", "sign typo in the feed", {"amount": abs(amount)}
        return reviewer_policy(item)

    run, reviewer = runner.run(WF, {"extract_path": str(todays_extract)}, policy=policy,
                               adjust={"review_inputs": {"timeout": 2}})  # fmt: skip

    assert run.state == "success", (task_states(run), reviewer.errors)
    summary = run.get_task_instance("review_inputs").xcom_pull(task_ids="review_inputs")
    assert summary["escalation_applied"] == "proceed" and summary["pending"] == 3
    [item_id] = fixed
    moves = [(r.from_status, r.to_status, r.actor.split("#")[0]) for r in ledger.history(item_id)]
    assert moves[2:5] == [
        ("quarantined", "corrected", "reviewer:rita"),
        ("corrected", "validated", f"{WF}.review_drafts"),  # validated again by the gate's suite
        ("validated", moves[4][1], f"{WF}.review_drafts"),  # and through the AI step, for this row
    ]
    assert moves[4][1] in {"ai_processed", "pending_review"}
    assert ledger.get(item_id).status == "published" and ledger.get(item_id).ai_result["draft"]
    counts = ledger.count_by_status(workflow=WF, run_id=run.run_id)
    assert set(counts) == {"published", "rejected"}, counts
    drafts = run.get_task_instance("review_drafts").xcom_pull(task_ids="review_drafts")
    assert drafts["caught_up"] == ["classify_and_draft"]
    [outbox] = ledger.effects("publish_report").values()
    assert item_id in outbox["result"]["items"]


def test_a_rejected_sign_off_fails_the_run_naming_who_and_why_and_alerts_a_person(
    runner, ledger, todays_extract, mailbox, tmp_path, monkeypatch
):
    monkeypatch.setenv("CONVEYOR_HOME", str(tmp_path / "home"))

    run, reviewer = runner.run(
        WF, {"extract_path": str(todays_extract)}, signoff="Reject", signoff_reason="totals do not match the ERP"
    )

    states = task_states(run)
    assert run.state == "failed", states
    assert states["director_signoff"] == "failed" and reviewer.signoffs == 1
    assert states["approve_items"] == states["publish_report"] == "upstream_failed"
    assert ledger.effects("publish_report") == {}  # nothing was published
    counts = ledger.count_by_status(workflow=WF, run_id=run.run_id)
    assert "approved" not in counts and "published" not in counts and counts["ai_processed"] > 0
    # A person hears it, with who rejected and why.
    [subject] = [s for s in mailbox.subjects if "director_signoff" in s]
    [body] = [b for b in mailbox.bodies if "rejected by" in b]
    assert "failed in run" in subject
    assert "rejected by admin: totals do not match the ERP" in html.unescape(body)

    # The prompt said what was signed off and showed the report before anything was published.
    with runner.api.client("admin") as director:
        details = director.get(f"/api/v2/dags/{WF}/dagRuns/{run.run_id}/hitlDetails").json()["hitl_details"]
    [prompt] = [d for d in details if d["task_instance"]["task_id"] == "director_signoff"]
    assert f"**What you sign off:** {counts['ai_processed']} item(s)" in prompt["body"]
    # ... linked the whole report (every rendering, stored for this sign-off) and kept a short excerpt.
    # ([api] base_url is unset in this process: the link is relative to the server showing the prompt)
    link = preview_path(WF, run.run_id, "director_signoff", "supplier_report.html")
    assert f"**[Open the report preview]({link})**" in prompt["body"]
    assert "# Supplier exceptions " in prompt["body"]  # the report's own heading, as it will be published
    drafts = [i.ai_result["draft"] for i in ledger.items(workflow=WF, run_id=run.run_id, status="ai_processed")]
    with runner.api.client("admin") as director:
        page = director.get(link)
    assert page.status_code == 200 and page.headers["content-security-policy"].startswith("sandbox")
    assert all(html.escape(d, quote=False) in page.text for d in drafts)
    assert prompt["chosen_options"] == ["Reject"]
    assert prompt["params_input"] == {"reason": "totals do not match the ERP"}
