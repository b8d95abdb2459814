"""The CLI from anywhere, and what it says when it does not know: a real process, the real ledger."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conveyor.ledger import NewItem
from tests.cli.test_cli import CONVEYOR, WF, run

LONG = "confidence 0.38 is below the threshold 0.50 (category 'documentation missing', draft: " + "x" * 80


@pytest.fixture
def seeded(ledger, ledger_dsn):
    ledger.receive(WF, "run-7", [NewItem("EX-2026-001001", {"supplier_id": "S1"}), NewItem("EX-2026-001002", {})],
                   actor="gate#1")  # fmt: skip
    ledger.receive("invoice_processing", "run-8", [NewItem("EX-2026-001002", {})], actor="intake#1")
    return ledger_dsn


def _bare_env(tmp_path: Path) -> dict[str, str]:
    """No ledger in the environment and a user-level config folder of this test's own."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"AIRFLOW_CONN_CONVEYOR_LEDGER", "CONVEYOR_LEDGER_DSN", "CONVEYOR_HOME"}}  # fmt: skip
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    return env


def test_the_ledger_is_found_from_a_subfolder_of_the_checkout(seeded, tmp_path):
    home = tmp_path / "checkout" / ".conveyor"
    home.mkdir(parents=True)
    (home / "ledger.dsn").write_text(seeded + "\n")
    deep = tmp_path / "checkout" / "dags" / "conveyor_examples"
    deep.mkdir(parents=True)

    result = subprocess.run([CONVEYOR, "status", f"{WF}:EX-2026-001001"], capture_output=True, text=True,
                            env=_bare_env(tmp_path), cwd=deep, timeout=60)  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert f"{WF}:EX-2026-001001: received" in result.stdout


def test_the_ledger_is_found_from_anywhere_through_the_home_the_quickstart_recorded(seeded, tmp_path):
    from conveyor.ledger.connection import remember_home

    home = tmp_path / "somewhere" / ".conveyor"
    home.mkdir(parents=True)
    (home / "ledger.dsn").write_text(seeded + "\n")
    env = _bare_env(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.environ["XDG_CONFIG_HOME"], saved = env["XDG_CONFIG_HOME"], os.environ.get("XDG_CONFIG_HOME")
    try:
        remember_home(home)
    finally:
        os.environ.pop("XDG_CONFIG_HOME") if saved is None else os.environ.update(XDG_CONFIG_HOME=saved)
    assert (tmp_path / "config" / "conveyor" / "home").read_text().strip() == str(home)

    result = subprocess.run([CONVEYOR, "items", "--workflow", WF, "--json"], capture_output=True, text=True,
                            env=env, cwd=elsewhere, timeout=60)  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert len(json.loads(result.stdout)) == 2
    (home / "ledger.dsn").unlink()  # a recorded home that has gone away is not used
    gone = subprocess.run([CONVEYOR, "status", "x:y"], capture_output=True, text=True, env=env, cwd=elsewhere,
                          timeout=60)  # fmt: skip
    assert gone.returncode == 4 and "no ledger configured" in gone.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("items", "--workflow", "supplier_exception"),
        ("queue", "--workflow", "supplierexceptions"),
        ("metrics", "--workflow", "supplier_exception"),
        ("items", "--workflow", "supplier_exception", "--run", "run-7", "--json"),
    ],
    ids=["items", "queue", "metrics", "items_json"],
)
def test_a_mistyped_workflow_exits_3_with_the_closest_name(seeded, args):
    result = run(*args, dsn=seeded)

    assert result.returncode == 3, (result.stdout, result.stderr)
    assert "did you mean supplier_exceptions?" in result.stderr
    assert result.stdout == ""


def test_an_unlike_workflow_name_lists_the_declared_ones(seeded):
    result = run("items", "--workflow", "payroll", dsn=seeded)

    assert result.returncode == 3
    assert "unknown workflow 'payroll'" in result.stderr
    assert "workflows: invoice_processing, supplier_exceptions" in result.stderr


def test_a_unique_business_key_is_resolved_and_an_ambiguous_one_answered_with_its_items(seeded):
    unique = run("status", "EX-2026-001001", dsn=seeded)
    assert unique.returncode == 0, unique.stderr
    assert unique.stdout.startswith(f"{WF}:EX-2026-001001: received")
    assert run("history", "EX-2026-001001", dsn=seeded).returncode == 0

    both = run("status", "EX-2026-001002", dsn=seeded)
    assert both.returncode == 3
    assert "2 items have the business key 'EX-2026-001002'" in both.stderr
    assert f"invoice_processing:EX-2026-001002, {WF}:EX-2026-001002" in both.stderr
    assert "<workflow>:<business key>" in both.stderr

    none = run("history", "EX-1999-000000", dsn=seeded)
    assert none.returncode == 3 and "no workflow has an item with the business key" in none.stderr


def test_a_mistyped_item_id_names_the_item_meant(seeded):
    typo_key = run("status", f"{WF}:EX-2026-00100l", dsn=seeded)
    assert typo_key.returncode == 3
    assert "did you mean" in typo_key.stderr and f"{WF}:EX-2026-001001" in typo_key.stderr

    typo_workflow = run("status", "supplier_exception:EX-2026-001001", dsn=seeded)
    assert typo_workflow.returncode == 3
    assert f"did you mean {WF}:EX-2026-001001?" in typo_workflow.stderr


def test_full_prints_whole_reasons(ledger, ledger_dsn):
    from conveyor.ledger.store import ItemUpdate

    ledger.receive(WF, "run-1", [NewItem("K1", {})], actor="gate#1")
    ledger.transition(WF, [f"{WF}:K1"], to_status="validated", from_status="received", actor="gate#1")
    ledger.transition(WF, [f"{WF}:K1"], to_status="ai_processed", from_status="validated", actor="ai#1")
    ledger.transition(WF, {f"{WF}:K1": ItemUpdate(reason=LONG)}, to_status="pending_review",
                      from_status="ai_processed", actor="ai#1", reason=LONG)  # fmt: skip

    cut = run("items", "--workflow", WF, dsn=ledger_dsn)
    assert LONG not in cut.stdout and "confidence 0.38 is below" in cut.stdout
    assert "--full prints them whole" in cut.stdout
    for args in (("items", "--workflow", WF), ("history", f"{WF}:K1"), ("queue", "--workflow", WF)):
        whole = run(*args, "--full", dsn=ledger_dsn)
        assert whole.returncode == 0, whole.stderr
        assert LONG in whole.stdout, args
        assert "--full prints" not in whole.stdout


def test_status_shows_the_current_reason_not_an_old_gate_failure(ledger, ledger_dsn):
    from conveyor.ledger.store import ItemUpdate

    gate_failure = "failed 1 check: notes is empty"
    ledger.receive(WF, "run-1", [NewItem("K2", {})], actor="gate#1")
    ledger.transition(WF, {f"{WF}:K2": ItemUpdate(reason=gate_failure, last_error=gate_failure)},
                      to_status="quarantined", from_status="received", actor="gate#1")  # fmt: skip
    quarantined = run("status", f"{WF}:K2", dsn=ledger_dsn)
    assert gate_failure in quarantined.stdout

    ledger.transition(WF, [f"{WF}:K2"], to_status="validated", from_status="quarantined", actor="reviewer:ann",
                      reason="approved by ann: the note is on the back")  # fmt: skip
    approved = run("status", f"{WF}:K2", dsn=ledger_dsn)

    assert approved.returncode == 0
    assert "approved by ann: the note is on the back" in approved.stdout
    assert gate_failure not in approved.stdout
    assert gate_failure in run("history", f"{WF}:K2", dsn=ledger_dsn).stdout  # the history keeps it
