"""Recovery declarations and ``conveyor lint``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conveyor.recovery_doc import Recovery, declared, recovery

FIXTURES = Path(__file__).parent / "lint_fixtures"


def test_recovery_line_round_trips():
    doc = recovery(
        Recovery.CIRCUIT_BREAKER, Recovery.ALTERNATIVE_PATH, why="the model endpoint fails", doc="Calls the model."
    )
    assert doc.startswith("Calls the model.")
    assert "Recovery: circuit breaker + alternative path — the model endpoint fails" in doc
    assert declared(doc) == [Recovery.CIRCUIT_BREAKER, Recovery.ALTERNATIVE_PATH]


@pytest.mark.parametrize("text", [None, "", "Retries on failure.", "Recovery: hope — it works"])
def test_no_or_unknown_strategy_is_not_a_declaration(text):
    assert declared(text) == []


def test_markdown_emphasis_is_accepted():
    assert declared("**Recovery:** manual intervention — fix the feed") == [Recovery.MANUAL_INTERVENTION]


def test_a_strategy_is_required():
    with pytest.raises(ValueError):
        recovery(why="nothing")


def test_lint_fails_the_undeclared_task():
    conveyor = str(Path(sys.executable).with_name("conveyor"))
    done = subprocess.run([conveyor, "lint", str(FIXTURES), "--json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["tasks_checked"] == 2
    assert [(f["dag_id"], f["task_id"]) for f in report["findings"]] == [("lint_fixture", "undeclared")]
    text = subprocess.run([conveyor, "lint", str(FIXTURES)], capture_output=True, text=True, timeout=300)
    assert "lint_fixture.undeclared: no recovery strategy" in text.stdout


def test_lint_reports_a_missing_folder():
    conveyor = str(Path(sys.executable).with_name("conveyor"))
    done = subprocess.run([conveyor, "lint", "/nonexistent/dags"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "no such file or folder" in done.stderr
