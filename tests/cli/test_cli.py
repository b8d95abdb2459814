"""The ``conveyor`` command as a user runs it: a real process against the real ledger."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conveyor.ledger import NewItem

WF = "supplier_exceptions"
CONVEYOR = str(Path(sys.executable).with_name("conveyor"))


def run(*args: str, dsn: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ, **(env or {}))
    if dsn:
        full_env["CONVEYOR_LEDGER_DSN"] = dsn
    return subprocess.run([CONVEYOR, *args], capture_output=True, text=True, env=full_env, timeout=60)


@pytest.fixture
def seeded(ledger, ledger_dsn):
    ledger.receive(
        WF,
        "run-7",
        [
            NewItem("PO-1042", {"supplier_id": "SUP-0001", "notes": "late «truck»"}),
            NewItem("PO-1043", {"supplier_id": "SUP-0002"}),
        ],
        actor="gate#1",
    )
    ledger.transition(
        WF, [f"{WF}:PO-1042"], to_status="validated", from_status="received", actor="gate#1", reason="passed the gate"
    )
    return ledger_dsn


def test_status_answers_where_an_item_is(seeded):
    result = run("status", f"{WF}:PO-1042", dsn=seeded)
    assert result.returncode == 0, result.stderr
    assert f"{WF}:PO-1042: validated" in result.stdout
    assert "run-7" in result.stdout
    assert "passed the gate" in result.stdout


def test_status_json(seeded):
    result = run("status", f"{WF}:PO-1042", "--json", dsn=seeded)
    data = json.loads(result.stdout)
    assert data["status"] == "validated"
    assert data["payload"]["notes"] == "late «truck»"


def test_history_lists_every_transition(seeded):
    text = run("history", f"{WF}:PO-1042", dsn=seeded)
    assert text.returncode == 0
    assert "received" in text.stdout and "validated" in text.stdout and "gate#1" in text.stdout
    data = json.loads(run("history", f"{WF}:PO-1042", "--json", dsn=seeded).stdout)
    assert [(r["from_status"], r["to_status"]) for r in data] == [(None, "received"), ("received", "validated")]


def test_items_filters(seeded):
    data = json.loads(
        run("items", "--workflow", WF, "--run", "run-7", "--status", "received", "--json", dsn=seeded).stdout
    )
    assert [i["item_id"] for i in data] == [f"{WF}:PO-1043"]
    table = run("items", "--run", "run-7", dsn=seeded)
    assert f"{WF}:PO-1042" in table.stdout and f"{WF}:PO-1043" in table.stdout
    assert "no items match" in run("items", "--run", "nope", dsn=seeded).stdout
    assert (
        f"progress of run run-7 ({WF}): 0 of 2 done (published), 0 waiting for a person, 0 stopped, 2 in flight"
    ) in table.stdout


def test_unknown_item_exits_3(seeded):
    result = run("status", f"{WF}:PO-9999", dsn=seeded)
    assert result.returncode == 3
    assert f"unknown item '{WF}:PO-9999'" in result.stderr
    assert run("history", f"{WF}:PO-9999", dsn=seeded).returncode == 3


def test_bad_filter_exits_2_with_the_valid_statuses(seeded):
    result = run("items", "--workflow", WF, "--status", "finished", dsn=seeded)
    assert result.returncode == 2
    assert f"'finished' is not a status of workflow '{WF}'" in result.stderr and "pending_review" in result.stderr
    result = run("items", "--status", "Finished!", dsn=seeded)
    assert result.returncode == 2 and "invalid status name 'Finished!'" in result.stderr
    assert run("items", "--limit", "0", dsn=seeded).returncode == 2


def test_unreachable_database_names_the_host_not_the_password():
    result = run("status", "x:y", dsn="postgresql://conveyor:hunter2-secret@127.0.0.1:1/ledger")
    assert result.returncode == 4
    assert "host=127.0.0.1 port=1 dbname=ledger" in result.stderr
    assert "hunter2-secret" not in result.stderr + result.stdout
    listing = run("items", dsn="postgresql://conveyor:hunter2-secret@127.0.0.1:1/ledger")
    assert listing.returncode == 4 and "hunter2-secret" not in listing.stderr


def test_airflow_connection_uri_is_understood(seeded):
    from tests.support.postgres import airflow_conn_uri_for

    dbname = seeded.rsplit("/", 1)[1].split("?")[0]
    env = {"AIRFLOW_CONN_CONVEYOR_LEDGER": airflow_conn_uri_for(dbname) + "?__extra__=%7B%7D"}
    result = run("status", f"{WF}:PO-1042", env=env)
    assert result.returncode == 0, result.stderr


def test_nothing_configured_says_how_to_configure(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"AIRFLOW_CONN_CONVEYOR_LEDGER", "CONVEYOR_LEDGER_DSN"}}
    env["CONVEYOR_HOME"] = str(tmp_path)
    result = subprocess.run([CONVEYOR, "status", "x:y"], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 4
    assert "conveyor_ledger" in result.stderr and "quickstart" in result.stderr


def test_db_upgrade_reports_up_to_date(fresh_db):
    first = json.loads(run("db", "upgrade", "--json", dsn=fresh_db).stdout)
    assert first["applied"][0] == "0001_items"
    second = run("db", "upgrade", dsn=fresh_db)
    assert second.returncode == 0
    assert "up to date" in second.stdout


def test_status_does_not_import_airflow_or_the_write_driver(seeded):
    probe = (
        "import sys, runpy; sys.argv=['conveyor','status','supplier_exceptions:PO-1042'];"
        "from conveyor.cli.main import main; main();"
        "heavy=[m for m in ('airflow','psycopg','pandas','great_expectations','sklearn') if m in sys.modules];"
        "print('HEAVY', heavy)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, CONVEYOR_LEDGER_DSN=seeded),
    )
    assert "HEAVY []" in result.stdout, result.stdout + result.stderr
