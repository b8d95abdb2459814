"""The bundled workflows on a real deployment: what ``dag.test()`` hides.

The session's native stack (tests/support/stack): api-server, scheduler, dag-processor, triggerer and
two Celery workers that share no disk; every Conveyor file on an S3 API on loopback; the ledger and
the settings loaded as docker-compose's init loads them. Runs are triggered over REST with
``logical_date: null`` (what the API and the UI's trigger form send), the people work through the
plugin's review API and Airflow's HITL API, and runs are cleared through Airflow's REST API.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from conveyor.ledger import Ledger
from conveyor.quickstart import sample_feeds
from conveyor.quickstart.reviewer import Policy, ScriptedReviewer, WorkflowRun, reviewer_policy
from tests.conftest import STACK_CONVEYOR_PREFIX
from tests.support.stack import NativeStack
from tests.support.stack.polling import wait_until

# A run on the stack takes minutes (review waits, a retry delay of a minute after a lost worker).
pytestmark = [pytest.mark.stack, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "include" / "data"
SUPPLIER, INVOICES = "supplier_exceptions", "invoice_processing"


class StackPeople:
    """The stack's users as the scripted reviewer knows them: a reviewer and a director."""

    def __init__(self, stack: NativeStack) -> None:
        self.stack = stack

    def client(self, user: str | None = None) -> Any:
        import httpx

        name = {"reviewer": "rita", "director": "admin"}[user or "reviewer"]
        # A client of its own: the reviewer thread closes it when it stops.
        return httpx.Client(base_url=self.stack.url, headers={"Authorization": f"Bearer {self.stack.token(name)}"},
                            timeout=30)


def put(stack: NativeStack, relative: str, text: str) -> None:
    """A file delivered to the stack's storage base (``s3://bucket/conveyor/<relative>``)."""
    stack.s3().put_object(Bucket=stack.options.bucket, Key=f"{STACK_CONVEYOR_PREFIX}/{relative}", Body=text.encode())


def keys(stack: NativeStack, prefix: str) -> dict[str, str]:
    """Object key -> ETag of everything under ``conveyor/<prefix>``."""
    found: dict[str, str] = {}
    for page in stack.s3().get_paginator("list_objects_v2").paginate(
        Bucket=stack.options.bucket, Prefix=f"{STACK_CONVEYOR_PREFIX}/{prefix}"
    ):
        found.update({o["Key"]: o["ETag"] for o in page.get("Contents", [])})
    return found


def deliver_supplier_extract(stack: NativeStack, delivery: int) -> str:
    name, text = sample_feeds.csv_delivery(
        DATA / "supplier_exceptions" / "extract.csv", key="exception_id", date_column="exception_date",
        delivery=delivery, today=datetime.now(UTC).date(), plant=sample_feeds.plant_supplier_rows,
    )
    put(stack, f"feeds/supplier_exceptions/{name}", text)
    return f"feeds/supplier_exceptions/{name}"


#: The inbox the triggered invoice run is given in its conf. The Variable's inbox (its default
#: ``inbox/invoice_processing``) stays empty: the scheduler's hourly ticks find a quiet hour there
#: whenever they come, and never take the documents of the run the test watches.
REST_INBOX = "inbox/invoice_processing_rest"


def deliver_invoices(stack: NativeStack, delivery: int) -> int:
    documents = sample_feeds.invoice_documents(DATA / "invoices" / "inbox", delivery, datetime.now(UTC).date())
    for name, text in documents.items():
        put(stack, f"{REST_INBOX}/{name}", text)
    return len(documents)


@dataclass
class Started:
    """A run triggered over REST, with the scripted people working it."""

    dag_id: str
    run_id: str
    reviewer: ScriptedReviewer


def correcting_sign_errors(item: dict[str, Any]) -> tuple[str, str] | tuple[str, str, dict[str, Any]]:
    """The reviewer fixes a negative amount (a sign error of the feed) instead of rejecting the row,
    typing the amount as text, as a form or a CSV-minded client sends it: the decision coerces it
    to the number the gate reads (issue 21)."""
    amount = item["payload"].get("amount")
    if item["status"] == "quarantined" and isinstance(amount, int | float) and amount < 0:
        return "correct", "sign error in the feed: the amount is owed, not credited", {"amount": f"{-amount:.2f}"}
    return reviewer_policy(item)


def start(stack: NativeStack, dag_id: str, conf: dict[str, Any], policy: Policy = reviewer_policy) -> Started:
    stack.wait_for_dag(dag_id)
    stack.unpause(dag_id)
    run_id = stack.trigger(dag_id, conf)  # "logical_date": null, as the UI's trigger form sends
    reviewer = ScriptedReviewer(StackPeople(stack), WorkflowRun(dag_id, dag_id, conf, policy=policy), run_id,  # type: ignore[arg-type]
                                interval=1.0)
    reviewer.start()
    return Started(dag_id, run_id, reviewer)


def finish(stack: NativeStack, started: Started, timeout: float = 600) -> dict[str, Any]:
    try:
        return stack.wait_for_run(started.dag_id, started.run_id, timeout=timeout)
    finally:
        started.reviewer.stop()
        assert started.reviewer.errors == [], started.reviewer.errors


def effects(stack: NativeStack, started: Started) -> dict[str, Any]:
    """Everything a re-run must leave exactly as it was: items, outbox, payments, published files."""
    ledger = Ledger(stack.databases.ledger_dsn)
    with ledger.connect() as conn:
        outbox = conn.execute(
            "SELECT item_id, step, state, result FROM conveyor.effects WHERE item_id LIKE %s ORDER BY 1, 2",
            (f"{started.dag_id}:%",),
        ).fetchall()
        payments = (
            conn.execute(
                "SELECT payment_id, item_id, amount, idempotency_key FROM example_erp.payments WHERE run_id = %s"
                " ORDER BY payment_id", (started.run_id,),
            ).fetchall()
            if started.dag_id == INVOICES else []
        )
    return {
        "statuses": ledger.count_by_status(workflow=started.dag_id, run_id=started.run_id),
        "outbox": outbox,
        "payments": payments,
        "reports": keys(stack, f"reports/{started.dag_id}/"),
        "archive": keys(stack, f"archive/{started.dag_id}/"),
    }


def scheduled_run(stack: NativeStack, dag_id: str, timeout: float = 120) -> str:
    """Unpause ``dag_id``: with catchup off, the scheduler creates the run of the latest schedule tick."""
    stack.wait_for_dag(dag_id)
    stack.unpause(dag_id)

    def created() -> str | None:
        runs = stack.client().get(f"/api/v2/dags/{dag_id}/dagRuns", params={"run_type": "scheduled"}).json()
        return runs["dag_runs"][0]["dag_run_id"] if runs["total_entries"] else None

    return wait_until(created, timeout=timeout, what=f"the scheduled run of {dag_id}")


def worked(stack: NativeStack, dag_id: str, run_id: str) -> Started:
    reviewer = ScriptedReviewer(StackPeople(stack), WorkflowRun(dag_id, dag_id), run_id, interval=1.0)  # type: ignore[arg-type]
    reviewer.start()
    return Started(dag_id, run_id, reviewer)


@pytest.fixture(scope="module")
def finished(stack: NativeStack, stack_mailbox: tuple[int, list[str]]) -> Iterator[dict[str, Started]]:
    """A fresh deployment, as its operators meet it: the DAGs unpaused (each gets its scheduled run, no
    conf: the feed locations are the Variables airflow_settings.yaml loaded), then runs triggered over
    REST; people work every run; all finish."""
    # The daily extract waits where the Variable conveyor_supplier_extract says; the inbox is empty.
    # A deployment creates its inbox (on S3: its marker object): a missing inbox fails the run, as
    # a renamed share or a failed mount must, and only an existing empty one is a quiet hour.
    put(stack, "inbox/invoice_processing/.conveyor-inbox", "")
    put(stack, f"{REST_INBOX}/.conveyor-inbox", "")
    # Dated as of the scheduled run's own day (its last 06:00 tick): between midnight and 06:00 UTC
    # that is yesterday, and rows dated today would rightly be quarantined as "in the future".
    tick_day = (datetime.now(UTC) - timedelta(hours=6)).date()
    put(stack, "feeds/supplier_exceptions/extract.csv",
        sample_feeds.csv_delivery(DATA / "supplier_exceptions" / "extract.csv", key="exception_id",
                                  date_column="exception_date", delivery=1, today=tick_day,
                                  plant=sample_feeds.plant_supplier_rows)[1])
    scheduled = {dag_id: worked(stack, dag_id, scheduled_run(stack, dag_id)) for dag_id in (SUPPLIER, INVOICES)}
    # The inbox's quiet hour ends before documents arrive; the scheduled supplier run goes on meanwhile,
    # beside the triggered runs, as on a deployment where runs overlap.
    finish(stack, scheduled[INVOICES])
    quiet_hour = {ti["task_id"]: ti["state"] for ti in stack.task_instances(INVOICES, scheduled[INVOICES].run_id)}
    assert quiet_hour["intake"] == "skipped" and set(quiet_hour.values()) == {"skipped"}, quiet_hour
    assert not [s for s in stack_mailbox[1] if INVOICES in s], stack_mailbox[1]  # a quiet hour pages nobody

    extract = deliver_supplier_extract(stack, delivery=2)
    invoices = deliver_invoices(stack, delivery=1)
    runs = {SUPPLIER: start(stack, SUPPLIER, {"extract_path": extract}, policy=correcting_sign_errors),
            INVOICES: start(stack, INVOICES, {"inbox_path": REST_INBOX})}
    for started in (scheduled[SUPPLIER], *runs.values()):
        finish(stack, started)
    statuses = effects(stack, runs[INVOICES])["statuses"]
    assert statuses.get("archived", 0) + statuses.get("rejected", 0) == invoices, statuses
    yield {**runs, "scheduled_supplier": scheduled[SUPPLIER]}


def test_the_other_bundled_dags_run_when_triggered_over_rest_without_a_logical_date(
    stack: NativeStack, finished: dict[str, Started]
) -> None:
    name, text = sample_feeds.csv_delivery(DATA / "inspection_notes" / "notes.csv", key="inspection_id",
                                           date_column="inspected_on", delivery=1, today=datetime.now(UTC).date())
    put(stack, f"feeds/inspection_notes/{name}", text)
    notes = start(stack, "inspection_notes", {"extract_path": f"feeds/inspection_notes/{name}"})
    finish(stack, notes)
    assert set(effects(stack, notes)["statuses"]) == {"published", "rejected"}
    health = start(stack, "workflow_health", {})
    finish(stack, health)
    with Ledger(stack.databases.ledger_dsn).connect() as conn:
        measured = {r[0] for r in conn.execute("SELECT DISTINCT workflow FROM conveyor.metric_snapshots")}
    assert measured >= {SUPPLIER, INVOICES, "inspection_notes"}  # read from the stored declarations


def test_a_scheduled_run_on_a_fresh_deployment_reads_its_feed_from_the_deployment_config(
    stack: NativeStack, finished: dict[str, Started]
) -> None:
    scheduled = finished["scheduled_supplier"]
    assert scheduled.run_id.startswith("scheduled__")
    states = effects(stack, scheduled)["statuses"]
    assert set(states) == {"published", "rejected"} and states["rejected"] == 3, states


def test_runs_triggered_without_a_logical_date_finish_and_publish_through_object_storage(
    stack: NativeStack, finished: dict[str, Started]
) -> None:
    supplier, invoices = finished[SUPPLIER], finished[INVOICES]
    assert stack.run(SUPPLIER, supplier.run_id)["logical_date"] is None
    states = effects(stack, supplier)["statuses"]
    # Of the three planted bad rows, the negative amount was corrected during the review: validated
    # again by the run's review step and published by the same run; the other two were rejected.
    assert set(states) == {"published", "rejected"} and states["rejected"] == 2, states
    assert supplier.reviewer.decisions.get("correct") == 1, supplier.reviewer.decisions
    with Ledger(stack.databases.ledger_dsn).connect() as conn:
        [(item_id, status, amount)] = conn.execute(
            "SELECT i.item_id, i.status, i.payload->>'amount' FROM conveyor.items i"
            " JOIN conveyor.transitions t USING (item_id)"
            " WHERE i.run_id = %s AND t.to_status = 'corrected'", (supplier.run_id,),
        ).fetchall()
    assert status == "published" and float(amount) > 0, (item_id, status, amount)
    # Sent as text ("467.98"), it was stored and published as a number.
    with Ledger(stack.databases.ledger_dsn).connect() as conn:
        [(kind,)] = conn.execute("SELECT jsonb_typeof(payload->'amount') FROM conveyor.items WHERE item_id = %s",
                                 (item_id,)).fetchall()  # fmt: skip
    assert kind == "number", kind
    corrected = [r for r in Ledger(stack.databases.ledger_dsn).history(item_id) if r.to_status == "corrected"]
    assert corrected[0].detail["changes"][0]["field"] == "amount", corrected[0].detail
    [report] = [k for k in keys(stack, f"reports/{SUPPLIER}/")
                if f"/{supplier.run_id.replace(':', '_')}/" in k and k.endswith(".md")]
    text = stack.s3().get_object(Bucket=stack.options.bucket, Key=report)["Body"].read().decode()
    run_after = stack.run(SUPPLIER, supplier.run_id)["run_after"][:10]
    assert text.startswith(f"# Supplier exceptions {run_after}\n")  # the title's date without a logical date
    key = item_id.split(":", 1)[1]
    [line] = [x for x in text.splitlines() if x.startswith(f"| {key} |")]
    assert f"| {float(amount):,.2f} EUR |" in line, line
    assert supplier.reviewer.signoffs == 1

    paid = effects(stack, invoices)
    assert paid["statuses"].get("archived") == len(paid["payments"]) > 0
    assert len(paid["archive"]) == len(paid["payments"])
    # Every document was taken out of the inbox; its marker keeps the empty inbox on S3.
    marker = f"{STACK_CONVEYOR_PREFIX}/{REST_INBOX}/.conveyor-inbox"
    assert list(keys(stack, f"{REST_INBOX}/")) == [marker]

    # The workers kept nothing on their own disks: every file went through the bucket.
    for name in stack.worker_names:
        assert list((stack.worker_home(name) / "cwd").iterdir()) == [], name
    hosts = {ti["hostname"] for run in (supplier, invoices) for ti in stack.task_instances(run.dag_id, run.run_id)
             if ti["hostname"]}
    assert len(hosts) == 2, hosts  # the runs' tasks ran on both workers


def test_clearing_finished_runs_through_the_rest_api_changes_no_effect(
    stack: NativeStack, finished: dict[str, Started]
) -> None:
    """Both ways the UI clears a finished run, at once: every task of the supplier run, and the invoice
    run from a middle task with its downstream tasks."""
    clears = {SUPPLIER: None, INVOICES: ["validate"]}
    before, tries_before, cleared, again = {}, {}, {}, {}
    for started in (finished[SUPPLIER], finished[INVOICES]):
        before[started.dag_id] = effects(stack, started)
        tries_before[started.dag_id] = {ti["task_id"]: ti["try_number"]
                                        for ti in stack.task_instances(started.dag_id, started.run_id)}
        task_ids = clears[started.dag_id]
        cleared[started.dag_id] = stack.clear(started.dag_id, started.run_id, task_ids=task_ids,
                                              include_downstream=task_ids is not None)
        assert cleared[started.dag_id], started.dag_id
        again[started.dag_id] = worked(stack, started.dag_id, started.run_id)
    assert {ti["task_id"] for ti in cleared[SUPPLIER]} == {ti["task_id"] for ti in
                                                             stack.task_instances(SUPPLIER, finished[SUPPLIER].run_id)}
    assert "intake" not in {ti["task_id"] for ti in cleared[INVOICES]}  # upstream of the middle task: kept
    for started in again.values():
        finish(stack, started)
    for started in again.values():
        tries = {ti["task_id"]: ti["try_number"] for ti in stack.task_instances(started.dag_id, started.run_id)}
        earlier = tries_before[started.dag_id]
        assert {t for t in tries if tries[t] > earlier[t]} == {ti["task_id"] for ti in cleared[started.dag_id]}
        assert effects(stack, started) == before[started.dag_id], started.dag_id
