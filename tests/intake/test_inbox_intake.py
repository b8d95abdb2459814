"""An inbox in real DAG runs, on a local folder and on S3: every file accounted for, whatever its
name; a missing, unreadable or unreachable inbox fails naming it; only an existing, empty inbox is
a quiet hour."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.gate.conftest import INVOICES
from tests.gate.test_gate_dag import task_instance
from tests.intake.conftest import BUCKET, Place
from tests.support.pdfs import scanned_pdf, text_pdf

WF = "invoice_processing"
INBOX = "inbox (march) #2 100% é"
SAMPLES = INVOICES / "inbox"
CONVEYOR = str(Path(sys.executable).with_name("conveyor"))


def deliver(place: Place, folder: str) -> dict[str, bytes]:
    """Five files with the names upstream systems give them: three invoices (text, PDF with a text
    layer, JSON), a scanned PDF and a Word file."""
    printed = (SAMPLES / "INV-1001-2026-03283.txt").read_text(encoding="utf-8")
    files = {
        "INV-1001 (final) #3 100%.txt": printed.encode(),
        "INV-1005 été?.pdf": text_pdf((SAMPLES / "INV-1005-2026-02761.csv").read_text().splitlines()),
        "INV-1002-2026-00970.json": (SAMPLES / "INV-1002-2026-00970.json").read_bytes(),
        "scan (2026-11).pdf": scanned_pdf(),
        "remittance #7.docx": b"PK\x03\x04 not really a word file",
    }
    for name, data in files.items():
        place.put(f"{folder}/{name}", data)
    return files


def cli(ledger, *args: str) -> str:
    env = dict(os.environ, CONVEYOR_LEDGER_DSN=ledger.dsn)
    done = subprocess.run([CONVEYOR, *args], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("named_by", ["relative", "absolute"])
def test_every_file_of_an_inbox_with_odd_names_is_taken_in_or_held_for_a_person(
    place, named_by, airflow_db, ledger, alerts
):
    from conveyor import storage
    from tests.dag_fixtures.intake_dags import inbox_dag

    files = deliver(place, INBOX)
    # Absolute: a plain path on a disk (the reporter's case: it was percent-encoded on the way), a URL on S3.
    inbox = INBOX if named_by == "relative" else str(place.root / INBOX) if place.root else place.url(INBOX)

    run = inbox_dag.test(run_conf={"inbox_path": inbox})

    assert run.state == "success", alerts()
    items = {i.business_key: i for i in ledger.items(workflow=WF, run_id=run.run_id, limit=None)}
    assert set(items) == {Path(name).stem for name in files}  # every file is an item: none left unseen
    assert {k: i.status for k, i in items.items()} == {
        "INV-1001 (final) #3 100%": "received",
        "INV-1005 été?": "received",
        "INV-1002-2026-00970": "received",
        "scan (2026-11)": "quarantined",
        "remittance #7": "quarantined",
    }
    assert items["scan (2026-11)"].reason == (
        "scan (2026-11).pdf is a PDF without a text layer (1 page; a scanned image?): no text to extract, "
        "a person must read it"
    )
    assert items["remittance #7"].reason.startswith(
        "remittance #7.docx is a .docx file, not a document type this workflow reads (.txt, .csv, .json, .pdf)"
    )
    for name, data in files.items():  # each item points at its landed copy, on the same storage
        payload = items[Path(name).stem].payload
        assert payload["name"] == name and payload["path"].startswith(place.kind)
        assert storage.storage_path(payload["path"]).read_bytes() == data
    # Nothing is left in the inbox; on S3 the marker keeps the emptied folder in existence.
    assert place.names(INBOX) == ([] if place.kind == "file" else [".conveyor-inbox"])
    # What a person reads: the quarantined documents and why, from the conveyor command.
    queue = json.loads(cli(ledger, "items", "--workflow", WF, "--status", "quarantined", "--json"))
    assert {row["item_id"].split(":", 1)[1] for row in queue} == {"scan (2026-11)", "remittance #7"}

    quiet = inbox_dag.test(run_conf={"inbox_path": inbox}, logical_date=datetime(2026, 3, 2, tzinfo=UTC))

    assert quiet.state == "success" and task_instance(quiet, "intake")[0] == "skipped"  # emptied, still there


def test_a_missing_inbox_fails_the_run_naming_it(place, airflow_db, ledger, alerts):
    from tests.dag_fixtures.intake_dags import inbox_dag

    place.put("inbox (march)/INV-1.txt", b"Vendor: x\n")  # the folder the share was renamed to

    run = inbox_dag.test(run_conf={"inbox_path": "inbox (april)"})

    assert run.state == "failed"
    [alert] = alerts()
    assert alert["task_id"] == "intake"
    assert f"inbox {place.url('inbox (april)')} does not exist" in alert["error"]
    assert "A missing inbox is not a quiet hour" in alert["error"]
    assert ledger.count_by_status(workflow=WF, run_id=run.run_id) == {}


def test_an_existing_empty_inbox_is_a_quiet_hour(place, airflow_db, ledger, alerts):
    from tests.dag_fixtures.intake_dags import inbox_dag

    place.put("empty (inbox)/.conveyor-inbox", b"")  # on a disk the folder is enough; on S3 the marker

    run = inbox_dag.test(run_conf={"inbox_path": "empty (inbox)"})

    assert run.state == "success" and task_instance(run, "intake")[0] == "skipped"
    assert alerts() == []


def test_an_inbox_that_is_a_file_fails_naming_it(tmp_path, airflow_db, ledger, alerts):
    from tests.dag_fixtures.intake_dags import inbox_dag

    (tmp_path / "inbox #1.txt").write_text("not a folder")

    run = inbox_dag.test(run_conf={"inbox_path": str(tmp_path / "inbox #1.txt")})

    assert run.state == "failed"
    assert f"inbox file://{tmp_path}/inbox #1.txt is a file, not a folder" in alerts()[0]["error"]


def test_an_unreachable_bucket_fails_naming_the_inbox_and_the_cause(airflow_db, ledger, alerts, monkeypatch):
    from conveyor.quickstart.api_server import free_port
    from tests.dag_fixtures.intake_dags import inbox_dag

    closed = free_port()  # nothing listens there: the object store is down
    monkeypatch.setenv("AIRFLOW_CONN_DOWN_S3", json.dumps({
        "conn_type": "aws", "login": "test", "password": "test",
        "extra": {"endpoint_url": f"http://127.0.0.1:{closed}", "region_name": "us-east-1",
                  "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 2}},
    }))  # fmt: skip

    run = inbox_dag.test(run_conf={"inbox_path": f"s3://down_s3@{BUCKET}/inbox (march)"})

    assert run.state == "failed"
    [alert] = alerts()
    assert f"inbox s3://down_s3@{BUCKET}/inbox (march)" in alert["error"]
    assert "cannot be listed" in alert["error"] and str(closed) in alert["error"]
