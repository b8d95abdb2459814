"""``conveyor queue`` and ``conveyor review`` against the real ledger."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conveyor.cli.main import main
from tests.review.conftest import route_to_review

WF = "supplier_exceptions"
CONVEYOR = str(Path(sys.executable).with_name("conveyor"))


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_queue_lists_waiting_items_as_text_and_json(ledger, capsys):
    route_to_review(
        ledger, WF, "run-1", pending=["A"], quarantined=["B"], validated=["C"], priorities={"A": 3}
    )
    route_to_review(ledger, "invoice_processing", "run-2", quarantined=["INV-1"])

    code, out, _ = run_cli(capsys, "--dsn", ledger.dsn, "queue")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["ITEM", "STATUS", "PRIORITY", "WAITING", "CONFIDENCE", "RUN", "REASON"]
    assert lines[1].startswith(f"{WF}:A ") and "pending_review" in lines[1] and "0.41" in lines[1]
    assert len(lines) == 4

    code, out, _ = run_cli(capsys, "--dsn", ledger.dsn, "queue", "--workflow", WF, "--json")
    assert code == 0
    data = json.loads(out)
    assert data["total"] == 2
    assert [i["item_id"] for i in data["items"]] == [f"{WF}:A", f"{WF}:B"]
    assert data["items"][0]["ai_result"] == {"category": "late delivery", "summary": "maybe"}
    assert data["items"][1]["reason"].startswith("expect_column_values_to_not_be_null")
    assert data["items"][0]["age_seconds"] >= 0

    # A workflow the ledger does not know is an error, not an empty queue (issue 26).
    code, out, err = run_cli(capsys, "--dsn", ledger.dsn, "queue", "--workflow", "nothing_here")
    assert (code, out) == (3, "") and "unknown workflow 'nothing_here'" in err


def test_review_decides_and_reports_exit_codes(ledger, capsys):
    route_to_review(ledger, WF, "run-1", pending=["A"], quarantined=["B"], validated=["C"])

    code, out, _ = run_cli(
        capsys,
        "--dsn",
        ledger.dsn,
        "review",
        f"{WF}:A",
        "--approve",
        "--by",
        "alice",
        "--comment",
        "looks right",
    )
    assert code == 0
    assert out.strip() == f"{WF}:A: pending_review -> ai_processed (approve by reviewer:alice)"
    assert ledger.history(f"{WF}:A")[-1].reason == "looks right"

    # Someone already decided: 5, and the message says who.
    code, _, err = run_cli(capsys, "--dsn", ledger.dsn, "review", f"{WF}:A", "--reject", "--by", "bob")
    assert code == 5
    assert "already decided by reviewer:alice" in err
    assert ledger.get(f"{WF}:A").status == "ai_processed"

    # Not awaiting review: 5, refused clearly.
    code, _, err = run_cli(capsys, "--dsn", ledger.dsn, "review", f"{WF}:C", "--approve", "--by", "bob")
    assert code == 5 and "is not awaiting review: it is 'validated'" in err

    # Unknown item: 3.
    code, _, err = run_cli(capsys, "--dsn", ledger.dsn, "review", f"{WF}:ZZZ", "--approve", "--by", "bob")
    assert code == 3 and "unknown item" in err

    # Correct and re-submit, as JSON.
    code, out, _ = run_cli(
        capsys,
        "--dsn",
        ledger.dsn,
        "review",
        f"{WF}:B",
        "--correct",
        '{"supplier_id": "S-1"}',
        "--by",
        "carol",
        "--json",
    )
    assert code == 0
    assert json.loads(out)["to_status"] == "corrected"
    # Merged field by field: the fields not given keep their value.
    assert ledger.get(f"{WF}:B").payload == {"key": "B", "amount": 100, "supplier_id": "S-1"}
    diff = ledger.history(f"{WF}:B")[-1].detail["changes"]
    assert diff == [{"field": "supplier_id", "before": None, "after": "S-1", "added": True}]


def test_review_needs_one_decision_and_a_name(ledger, capsys):
    route_to_review(ledger, WF, "run-1", pending=["A"])
    for argv in (
        ["review", f"{WF}:A", "--by", "x"],
        ["review", f"{WF}:A", "--approve", "--reject", "--by", "x"],
        ["review", f"{WF}:A", "--approve"],
    ):
        try:
            main(["--dsn", ledger.dsn, *argv])
        except SystemExit as exc:
            assert exc.code == 2
        else:
            raise AssertionError(f"{argv} was accepted")
    code, _, err = run_cli(capsys, "--dsn", ledger.dsn, "review", f"{WF}:A", "--approve", "--by", "  ")
    assert code == 1 and "reviewer name is required" in err
    assert ledger.get(f"{WF}:A").status == "pending_review"


def test_the_installed_command_never_imports_airflow(ledger):
    route_to_review(ledger, WF, "run-1", pending=["A"])
    probe = f"""
import runpy, sys
sys.argv = ["conveyor", "queue", "--json"]
try:
    runpy.run_path({CONVEYOR!r}, run_name="__main__")
except SystemExit as exc:
    assert not exc.code, exc.code
print("AIRFLOW" if any(m == "airflow" or m.startswith("airflow.") for m in sys.modules) else "CLEAN")
"""
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=dict(os.environ), timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("CLEAN"), result.stdout[-500:]
    assert json.loads(result.stdout[: result.stdout.rindex("CLEAN")])["total"] == 1


def test_review_decides_many_items_by_id_or_by_filter(ledger, capsys):
    route_to_review(ledger, WF, "run-1", pending=["A", "B"], quarantined=["Q"])
    route_to_review(ledger, WF, "run-2", pending=["D"])
    dsn = ["--dsn", ledger.dsn]
    run_cli(capsys, *dsn, "review", f"{WF}:B", "--reject", "--by", "sam")

    code, out, _ = run_cli(
        capsys, *dsn, "review", f"{WF}:A", f"{WF}:B", "--approve", "--by", "alice", "--comment", "batch ok"
    )
    assert code == 5  # one of them was decided by someone else first
    assert f"{WF}:A: pending_review -> ai_processed (approve by reviewer:alice)" in out
    assert f"{WF}:B: not applied, already decided by reviewer:sam (it is rejected)" in out
    assert "1 decided, 1 refused, 0 unknown" in out
    assert ledger.history(f"{WF}:A")[-1].reason == "batch ok"

    code, out, _ = run_cli(
        capsys, *dsn, "review", "--workflow", WF, "--run", "run-1", "--all", "--reject", "--by", "alice", "--json"
    )
    assert code == 0
    assert [d["item_id"] for d in json.loads(out)["decided"]] == [f"{WF}:Q"]
    assert ledger.get(f"{WF}:D").status == "pending_review"

    code, _, err = run_cli(capsys, *dsn, "review", "--all", "--approve", "--by", "alice")
    assert code == 2 and "--workflow" in err
    code, _, err = run_cli(capsys, *dsn, "review", f"{WF}:D", "--workflow", WF, "--approve", "--by", "alice")
    assert code == 2


def test_a_correction_jsonb_cannot_store_is_refused_naming_the_field(ledger, capsys):
    route_to_review(ledger, WF, "run-1", quarantined=["B"])

    # The decision's input check (review/coercion.py) refuses them first, naming the field and the
    # problem; the ledger's own guard (ledger/values.py) stays behind it for every other writer.
    for correction, field, problem in (
        ('{"notes": "late\\u0000truck"}', "'notes'", "NUL"),
        ('{"amount": NaN}', "'amount'", "finite"),
        ('{"lines": [{"amount": -Infinity}]}', "'lines'", "finite"),
    ):
        code, _, err = run_cli(capsys, "--dsn", ledger.dsn, "review", f"{WF}:B", "--correct", correction, "--by", "al")

        assert code != 0, correction
        assert field in err and problem in err and "nothing was changed" in err.lower(), err
        assert ledger.get(f"{WF}:B").status == "quarantined"
