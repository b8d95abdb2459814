"""Publish, one effect per item, pay and archive in real DAG runs: once, however often a run is cleared."""

from __future__ import annotations

import json

import pendulum
import pytest

LOGICAL = pendulum.datetime(2026, 3, 2, 6, tz="UTC")


def test_publish_renders_the_users_template_once_and_a_rerun_publishes_nothing_again(airflow_db, ledger, tmp_path):
    from tests.dag_fixtures.effects_dags import publish_dag

    conf = {"output_folder": tmp_path.as_uri()}
    run = publish_dag.test(logical_date=LOGICAL, run_after=LOGICAL, run_conf=conf)
    assert run.state == "success"
    report = tmp_path / "report.md"
    text = report.read_text()
    assert text.startswith("# Supplier exceptions 2026-03-02\n")
    assert "- EX-0: Truck three days late. (100.00)" in text and "- EX-1: Twelve cartons short. (200.00)" in text
    assert ledger.count_by_status(workflow="supplier_exceptions") == {"published": 2}
    [outbox] = ledger.effects("publish_report").values()
    assert outbox["state"] == "done" and outbox["result"]["recipients"] == ["procurement@example.com"]
    assert outbox["result"]["files"] == [report.as_uri()]
    first_mtime = report.stat().st_mtime_ns
    history_before = {i.item_id: len(ledger.history(i.item_id)) for i in ledger.items()}

    # The same run again (dag.test replaces the finished run): every task re-executes.
    rerun = publish_dag.test(logical_date=LOGICAL, run_after=LOGICAL, run_conf=conf)

    assert rerun.state == "success" and rerun.run_id == run.run_id
    assert report.stat().st_mtime_ns == first_mtime
    assert len(ledger.effects("publish_report")) == 1
    assert {i.item_id: len(ledger.history(i.item_id)) for i in ledger.items()} == history_before


def test_publish_goes_to_the_storage_base_by_default(airflow_db, ledger, tmp_path, monkeypatch):
    from tests.dag_fixtures.effects_dags import publish_dag

    monkeypatch.setenv("AIRFLOW__CONVEYOR__STORAGE_BASE", (tmp_path / "shared").as_uri())
    run = publish_dag.test(logical_date=LOGICAL.add(days=2), run_after=LOGICAL.add(days=2),
                           run_conf={"output_folder": ""})

    assert run.state == "success"
    [report] = (tmp_path / "shared" / "reports" / "supplier_exceptions").glob("*/report.md")
    assert report.parent.name == run.run_id.replace(":", "_")


def test_an_empty_required_field_fails_loudly_and_publishes_nothing(airflow_db, ledger, tmp_path):
    from tests.dag_fixtures.effects_dags import publish_dag

    run = publish_dag.test(logical_date=LOGICAL.add(days=1), run_after=LOGICAL.add(days=1),
                           run_conf={"output_folder": tmp_path.as_uri(), "drafts": ["Late.", ""]})

    assert run.state == "failed"
    assert list(tmp_path.iterdir()) == []
    assert ledger.effects("publish_report") == {}
    assert ledger.count_by_status(workflow="supplier_exceptions") == {"approved": 2}


def test_one_effect_per_item_once_refused_ones_to_a_person_forgotten_ones_retried(airflow_db, ledger):
    from tests.dag_fixtures.effects_dags import item_dag

    items = [{"key": "A"}, {"key": "B", "refuse": True}, {"key": "C", "forget": True}]
    run = item_dag.test(logical_date=LOGICAL, run_after=LOGICAL, run_conf={"items": items})

    # C was neither done nor refused: the task fails (a retry tries it again), A is done and moved.
    assert run.state == "failed"
    statuses = {i.business_key: i.status for i in ledger.items(workflow="supplier_exceptions")}
    assert statuses == {"A": "published", "B": "pending_review", "C": "approved"}
    assert ledger.get("supplier_exceptions:B").reason == "the recipient refused it"
    assert ledger.get("supplier_exceptions:B").review_target == "published"
    with ledger.connect() as conn:
        rows = conn.execute("SELECT item_id, key FROM public.notified").fetchall()
        conn.execute("DROP TABLE public.notified")
    assert rows == [("supplier_exceptions:A", ledger.effect_key("supplier_exceptions:A", "notify"))]
    assert ledger.effects("notify")["supplier_exceptions:A"]["state"] == "done"


def _invoice(key, vendor, number, total, confidence=0.95):
    return {"key": key, "confidence": confidence,
            "fields": {"vendor_id": vendor, "invoice_number": number, "total": total, "currency": "EUR"}}


@pytest.fixture
def inbox(tmp_path):
    folder = tmp_path / "inbox"
    folder.mkdir()
    return folder


def test_payments_once_per_invoice_and_files_archived(airflow_db, ledger, inbox, tmp_path):
    from tests.dag_fixtures.effects_dags import pay_dag

    invoices = [
        _invoice("INV-A", "V-1", "A-1", 120.0),
        _invoice("INV-B", "V-1", "A-2", 99999.0),            # over the threshold: an approval for a person
        _invoice("INV-C", "V-2", "C-1", 50.0, confidence=0.4),  # doubtful: a review
        _invoice("INV-D", "V-1", "A-1", 120.0),               # same vendor invoice number as INV-A
        _invoice("INV-E", "V-3", None, 80.0),                 # no invoice number: cannot be paid
    ]
    for inv in invoices:
        (inbox / f"{inv['key']}.json").write_text(json.dumps(inv["fields"]))
    conf = {"inbox": str(inbox), "archive": (tmp_path / "archive").as_uri(), "invoices": invoices}

    run = pay_dag.test(logical_date=LOGICAL, run_after=LOGICAL, run_conf=conf)

    assert run.state == "success"
    statuses = {i.item_id.split(":")[1]: i.status for i in ledger.items(workflow="invoice_processing")}
    assert statuses == {"INV-A": "archived", "INV-B": "pending_approval", "INV-C": "pending_review",
                        "INV-D": "pending_review", "INV-E": "pending_review"}
    assert ledger.get("invoice_processing:INV-E").reason == "cannot pay: no invoice_number extracted"
    assert "already paid under another item" in ledger.get("invoice_processing:INV-D").reason
    assert "over the approval threshold" in ledger.get("invoice_processing:INV-B").reason
    assert "confidence 0.40" in ledger.get("invoice_processing:INV-C").reason
    with ledger.connect() as conn:
        payments = conn.execute("SELECT item_id, amount FROM example_erp.payments").fetchall()
    assert [(p[0], float(p[1])) for p in payments] == [("invoice_processing:INV-A", 120.0)]
    assert (tmp_path / "archive" / "INV-A.json").is_file() and not (inbox / "INV-A.json").exists()

    rerun = pay_dag.test(logical_date=LOGICAL, run_after=LOGICAL, run_conf=conf)

    assert rerun.state == "success" and rerun.run_id == run.run_id
    assert ledger.get("invoice_processing:INV-A").status == "archived"
    with ledger.connect() as conn:
        assert conn.execute("SELECT count(*) FROM example_erp.payments").fetchone() == (1,)


def _grouped_rows(at: int, **odd):
    rows = [{"key": f"EX-{n}", "supplier_id": f"SUP-000{n % 2}", "amount": 100.0 * (n + 1)} for n in range(6)]
    rows[at].update(odd)
    return rows


@pytest.mark.parametrize(
    ("at", "odd", "why"),
    [
        (2, {"supplier_id": None}, "'<' not supported"),
        (2, {"amount": "1936.40"}, "'<' not supported"),
        (3, {"amount": "1936.40"}, "'<' not supported"),  # not in the first item's group
    ],
    ids=["empty-supplier", "text-amount", "text-amount-in-another-group"],
)
def test_an_item_the_report_cannot_render_goes_to_a_person_and_the_rest_is_published(
    airflow_db, ledger, tmp_path, at, odd, why
):
    """Issue 21: one item broke the grouped report and publish_report failed three times; now that
    item is parked for review with the reason, the others are published, the run is green."""
    from tests.dag_fixtures.effects_dags import grouped_dag

    run = grouped_dag.test(logical_date=LOGICAL.add(days=5), run_after=LOGICAL.add(days=5),
                           run_conf={"rows": _grouped_rows(at, **odd), "output_folder": tmp_path.as_uri()})

    assert run.state == "success"
    (ti,) = [t for t in run.get_task_instances() if t.task_id == "publish_report"]
    assert ti.try_number == 1  # no retry spent on a deterministic error
    parked = ledger.get(f"supplier_exceptions:EX-{at}")
    assert parked.status == "pending_review" and why in parked.reason and "publish_report" in parked.reason
    assert ledger.count_by_status(workflow="supplier_exceptions") == {"published": 5, "pending_review": 1}
    text = (tmp_path / "grouped_report.md").read_text()
    assert f"EX-{at}" not in text and all(f"EX-{n}" in text for n in range(6) if n != at)
    # A person cannot approve it back into the publication as it is.
    from conveyor.review.blockers import blockers_of

    assert blockers_of(ledger, [parked])[parked.item_id][0].code == "needs_correction"
